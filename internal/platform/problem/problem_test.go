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
