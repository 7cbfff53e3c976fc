package agent

import (
	"context"
	"regexp"
)

// TraceparentHeader is the W3C trace context header the Client sends.
const TraceparentHeader = "traceparent"

// traceparentRE is a version-00 W3C traceparent, the only form the server
// stores (Run.traceparent).
var traceparentRE = regexp.MustCompile(`^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$`)

type traceparentKey struct{}

// WithTraceparent returns ctx carrying traceparent, which every Client
// call made with the returned context (or one derived from it) sends as
// the traceparent header: the server's spans of those calls then continue
// that trace. The adapter calls it with the run's trace context
// (agent.invocation's traceparent, Run.traceparent), so the mention, the
// context read, the claim, the answer and the finish are one trace. A
// value that is not a version-00 traceparent is ignored (ctx is returned
// as it is): it came from the server, but a header carries it.
func WithTraceparent(ctx context.Context, traceparent string) context.Context {
	if !traceparentRE.MatchString(traceparent) {
		return ctx
	}
	return context.WithValue(ctx, traceparentKey{}, traceparent)
}

// Traceparent returns the trace context ctx carries (WithTraceparent), or
// "" when it carries none.
func Traceparent(ctx context.Context) string {
	tp, _ := ctx.Value(traceparentKey{}).(string)
	return tp
}
