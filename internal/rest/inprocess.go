package rest

import (
	"context"
	"net/http"

	"github.com/99designs/gqlgen/graphql"
)

// call is one stored operation the shim runs in process: its parameters,
// and the executor's answer once Transport has run it.
type call struct {
	params graphql.RawParams
	resp   *graphql.Response
}

// callKey carries a *call in a request's context from the shim to
// Transport.
type callKey struct{}

// callOf returns the shim's call that ctx carries, or nil.
func callOf(ctx context.Context) *call {
	c, _ := ctx.Value(callKey{}).(*call)
	return c
}

// Transport is the GraphQL handler's transport for the shim's own calls:
// it takes a request that carries a shim call in its context (nothing
// else does: a client's request cannot put one there), runs the stored
// operation with its variables as they are, and hands the executor's
// answer back to the shim without writing it. The handler's extensions,
// error presenter and recovery apply as to any GraphQL request. Install it
// first, before the transports that read a client's request.
type Transport struct{}

var _ graphql.Transport = Transport{}

// Supports reports whether r carries a shim call.
func (Transport) Supports(r *http.Request) bool { return callOf(r.Context()) != nil }

// Do runs the call of r on exec, as gqlgen's POST transport runs a
// decoded request: the operation's context (parse, validation, the
// extensions' checks), then the operation, or the answer of its errors.
func (Transport) Do(_ http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	c := callOf(r.Context())
	ctx := r.Context()
	start := graphql.Now()
	c.params.ReadTime = graphql.TraceTiming{Start: start, End: start}
	rc, errs := exec.CreateOperationContext(ctx, &c.params)
	if errs != nil {
		c.resp = exec.DispatchError(graphql.WithOperationContext(ctx, rc), errs)
		return
	}
	responses, ctx := exec.DispatchOperation(ctx, rc)
	c.resp = responses(ctx)
}
