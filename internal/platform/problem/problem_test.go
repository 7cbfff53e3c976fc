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
		{"wrapped by From", From("admin.createSpace", driver), "admin.createSpace: connection reset by peer"},
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

// TestFromNamesItsOperation: From keeps a problem's kind and adds the
// operation it crossed when it names none, without changing the shared
// error it was given; anything else is an internal error of the operation.
func TestFromNamesItsOperation(t *testing.T) {
	shared := New(NotFound, "")
	named := Internal("runs.finish", errors.New("reset"))
	cases := []struct {
		name     string
		err      error
		op       string
		wantCode Code
		wantOp   string
	}{
		{"problem without op gets it", shared, "admin.createSpace", NotFound, "admin.createSpace"},
		{"problem wrapped by fmt", errors.Join(errors.New("ctx"), shared), "admin.createSpace", NotFound, "admin.createSpace"},
		{"problem with op keeps it", named, "admin.createSpace", InternalError, "runs.finish"},
		{"plain error becomes internal", errors.New("boom"), "graph.ownRun", InternalError, "graph.ownRun"},
		{"missing wraps stay missing below the API", ErrMissing, "chat.getThread", InternalError, "chat.getThread"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := From(tc.op, tc.err)
			if got.Code != tc.wantCode || got.Op != tc.wantOp {
				t.Fatalf("From(%q, %v) = code %q op %q, want %q %q", tc.op, tc.err, got.Code, got.Op, tc.wantCode, tc.wantOp)
			}
			if CodeOf(tc.err) != tc.wantCode {
				t.Fatalf("CodeOf(%v) = %q, want %q", tc.err, CodeOf(tc.err), tc.wantCode)
			}
		})
	}
	if shared.Op != "" {
		t.Fatalf("From changed the shared error: op %q", shared.Op)
	}
	if From("x.y", nil) != nil || CodeOf(nil) != "" {
		t.Fatal("nil is not an error")
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
