package stream

import (
	"testing"
	"time"

	"bothy.example.com/bothy/internal/platform/problem"
)

// TestPollArgs pins the arguments a poll takes
// (docs/design/runs.md#invocations): wait is not negative and first lies
// between 1 and PollLimit; anything else is validation_failed naming the
// argument.
func TestPollArgs(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		wait    time.Duration
		first   int
		pointer string
	}{
		"no wait, one":        {0, 1, ""},
		"a wait, the limit":   {30 * time.Second, PollLimit, ""},
		"negative wait":       {-time.Millisecond, 1, "wait"},
		"none asked for":      {0, 0, "first"},
		"more than the limit": {0, PollLimit + 1, "first"},
		"negative first":      {0, -1, "first"},
	} {
		err := checkPollArgs(c.wait, c.first)
		if c.pointer == "" {
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			continue
		}
		p := problem.From("stream.TestPollArgs", err)
		if p == nil || p.Code != problem.ValidationFailed || len(p.Fields) != 1 || p.Fields[0].Pointer != c.pointer || p.Fields[0].Code != "out_of_range" {
			t.Errorf("%s: %v, want out_of_range at %s", name, err, c.pointer)
		}
	}
}
