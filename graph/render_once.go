package graph

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"bothy.example.com/bothy/graph/model"
)

// RenderOnce wraps the executable schema so that the events subscriptions
// of one principal with the same document render each message event once
// for all of them, not once per connection: their fields resolve with the
// same rights to the same values, so the bytes are the same
// (feed.Delivery.Rendered keeps them, under the rules and for the lifetime
// of the fan-out's shared reads). A thousand listeners of a few people
// then cost a few executions of the selection per message and one write
// per connection; everything else of a response (its extensions, errors,
// the per-response interceptors and the write) stays per connection.
// Events delivered without the fan-out, other event types and renderings
// with errors are rendered by each connection, as before.
func RenderOnce(es graphql.ExecutableSchema) graphql.ExecutableSchema {
	return renderOnce{es}
}

// renderOnce is RenderOnce's executable schema. Only the interface's
// methods are promoted: the executor sees no optional interface of the
// generated schema that this wrapper would bypass.
type renderOnce struct {
	graphql.ExecutableSchema
}

// tapKey is the context key of an operation's eventTap.
type tapKey struct{}

// eventTap stands between an events subscription's pump and the executor:
// in is the pump's channel, out the channel the executor reads, filled
// only when an event is to be rendered here.
type eventTap struct {
	in     <-chan model.Event
	out    chan model.Event
	closed sync.Once
}

// Exec implements graphql.ExecutableSchema: a subscription gets a tap in
// its context, which the events resolver takes (tapEvents); the
// operation's responses then read the events through it.
func (r renderOnce) Exec(ctx context.Context) graphql.ResponseHandler {
	if !graphql.HasOperationContext(ctx) {
		return r.ExecutableSchema.Exec(ctx)
	}
	oc := graphql.GetOperationContext(ctx)
	if oc.Operation == nil || oc.Operation.Operation != ast.Subscription {
		return r.ExecutableSchema.Exec(ctx)
	}
	tap := &eventTap{}
	next := r.ExecutableSchema.Exec(context.WithValue(ctx, tapKey{}, tap))
	if tap.in == nil {
		return next // not the events field, or it failed to start
	}
	doc := documentKey(oc)
	return func(ctx context.Context) *graphql.Response { return tap.respond(ctx, doc, next) }
}

// tapEvents hands the events subscription's channel to its operation's
// tap, when the executor is RenderOnce's, and returns the channel the
// executor is to read.
func tapEvents(ctx context.Context, ch <-chan model.Event) <-chan model.Event {
	tap, _ := ctx.Value(tapKey{}).(*eventTap)
	if tap == nil || tap.in != nil {
		return ch
	}
	tap.in, tap.out = ch, make(chan model.Event, 1)
	return tap.out
}

// respond answers the subscription's next event: the bytes another
// connection of the same principal and document rendered for it, or its
// own rendering, kept for the others when it has no errors. The pump
// hands an event over only when the transport asks for the next response,
// so an event is still written right after its last visibility check.
func (t *eventTap) respond(ctx context.Context, doc string, next graphql.ResponseHandler) *graphql.Response {
	var ev model.Event
	var ok bool
	select {
	case ev, ok = <-t.in:
	case <-ctx.Done():
		return nil
	}
	if !ok {
		t.closed.Do(func() { close(t.out) })
		return next(ctx) // the executor's end of the stream
	}
	if me, _ := ev.(*model.MessageEvent); me != nil && me.Delivery != nil {
		data, keep := me.Delivery.Rendered(ctx, doc)
		if data != nil {
			// A response of its own: the executor adds this connection's
			// errors and extensions to it.
			return &graphql.Response{Data: data}
		}
		if keep != nil {
			return t.render(ctx, ev, next, keep)
		}
	}
	t.out <- ev
	return next(ctx)
}

// render has the executor render ev and hands the rendering to keep, for
// the connections of the same principal and document that wait for it.
// They are released however the rendering ends, a panic that escapes the
// executor's recovery included.
func (t *eventTap) render(ctx context.Context, ev model.Event, next graphql.ResponseHandler, keep func([]byte, bool)) *graphql.Response {
	kept := false
	defer func() {
		if !kept {
			keep(nil, false)
		}
	}()
	t.out <- ev
	resp := next(ctx)
	if resp != nil {
		// The executor reuses its buffer for the next event: the kept
		// bytes are a copy.
		keep(bytes.Clone(resp.Data), len(resp.Errors) == 0 && len(graphql.GetErrors(ctx)) == 0)
		kept = true
	}
	return resp
}

// documentKey is the digest of what an operation renders besides its
// caller and its event: the document, the operation chosen in it and the
// variables (in JSON, whose object keys encoding/json sorts). A digest
// keeps the renderings' keys small whatever the document's size.
func documentKey(oc *graphql.OperationContext) string {
	h := sha256.New()
	vars, _ := json.Marshal(oc.Variables)
	for _, part := range [][]byte{[]byte(oc.RawQuery), []byte(oc.OperationName), vars} {
		// Each part after its length, so that no two splits of the same
		// bytes give one digest.
		h.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(part))))
		h.Write(part)
	}
	return string(h.Sum(nil))
}
