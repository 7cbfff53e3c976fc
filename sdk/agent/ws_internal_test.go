package agent

import (
	"fmt"
	"testing"

	"github.com/coder/websocket"
)

// TestCloseErrorRetries: the adapter reconnects after every close of its
// subscription but 4401, 4403 (the token does not authenticate), 4406 and
// 4429 (refused); a restart (1012) and an outage (1013) are temporary.
func TestCloseErrorRetries(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code  websocket.StatusCode
		retry bool
	}{
		{1000, true}, {1001, true}, {1006, true}, {1011, true}, {1012, true}, {1013, true},
		{4400, true}, {4413, true},
		{4401, false}, {4403, false}, {4406, false}, {4429, false},
	} {
		err := closeError(fmt.Errorf("read: %w", websocket.CloseError{Code: tc.code, Reason: "x"}))
		if got := IsTemporary(err); got != tc.retry {
			t.Errorf("close %d: temporary %v, want %v (%v)", tc.code, got, tc.retry, err)
		}
	}
}
