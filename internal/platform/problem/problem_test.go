package problem

import (
	"errors"
	"testing"
)

// TestInternalNamesItsOperation: an internal error names the operation that
// failed in what is logged (Cause), never in what is shown (Error), and
// errors.Is still sees the driver's error through it.
func TestInternalNamesItsOperation(t *testing.T) {
	driver := errors.New("connection reset by peer")
	cases := []struct {
		name      string
		err       *Error
		wantCause string
	}{
		{"named operation", Internal("runs.finish", driver), "runs.finish: connection reset by peer"},
		{"wrapped by From", From(driver), "connection reset by peer"},
		{"no cause", Internal("runs.finish", nil), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err.Code != InternalError {
				t.Fatalf("code %q, want internal_error", tc.err.Code)
			}
			if got := tc.err.Error(); got != string(InternalError) {
				t.Fatalf("shown text %q names more than the code", got)
			}
			got := ""
			if c := tc.err.Cause(); c != nil {
				got = c.Error()
				if !errors.Is(tc.err, driver) || !errors.Is(c, driver) {
					t.Fatalf("errors.Is does not see the driver error through %v", c)
				}
			}
			if got != tc.wantCause {
				t.Fatalf("logged cause %q, want %q", got, tc.wantCause)
			}
		})
	}
}

// TestCodeStatus pins every code of the closed list to its HTTP status: the
// module tests assert codes (conflict, validation_failed, ...), and this
// table is the one place that turns a code into what a REST client sees.
func TestCodeStatus(t *testing.T) {
	want := map[Code]int{
		ValidationFailed:     400,
		Unauthorized:         401,
		Forbidden:            403,
		ChannelReadOnly:      403,
		NotFound:             404,
		Conflict:             409,
		PayloadTooLarge:      413,
		RateLimited:          429,
		InternalError:        500,
		Unavailable:          503,
		CursorExpired:        410,
		MethodNotAllowed:     405,
		UnsupportedMediaType: 415,
	}
	if len(Codes()) != len(want) {
		t.Fatalf("%d codes in the closed list, %d in this table: add the new code here", len(Codes()), len(want))
	}
	for _, c := range Codes() {
		status, ok := want[c]
		if !ok {
			t.Fatalf("code %q has no expected status here", c)
		}
		if got := c.Status(); got != status {
			t.Errorf("%s: status %d, want %d", c, got, status)
		}
		if c.Title() == "" || !c.Known() {
			t.Errorf("%s: no title or not known", c)
		}
	}
	if Code("made_up").Known() {
		t.Error("a code outside the list is known")
	}
}
