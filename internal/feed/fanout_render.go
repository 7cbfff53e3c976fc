package feed

import (
	"context"
)

// RenderedBytes bounds the bytes of the renderings a fan-out keeps
// (Delivery.Rendered). Past it, a listener renders its event alone: the
// bound costs CPU, never a delivery.
const RenderedBytes = 8 << 20

// renderKey is what a listener's rendering of an event depends on: the
// event, the principal its fields resolve as (with the same rights, every
// field reads the same) and the document with its variables (a digest the
// caller computes once per subscription, never the text).
type renderKey struct {
	seq int64
	who principalKey
	doc string
}

// rendering is one rendering of an event, made by the first listener that
// needed it while the others of its key wait.
type rendering struct {
	done chan struct{}
	data []byte
	ok   bool
}

// Rendered answers the bytes of the delivery's event as the document doc
// renders it for the listener's principal, when another listener of that
// principal rendered it with the same document while nothing touched the
// shared reads (the same rule and lifetime as Shared): every connection of
// one principal with one document gets the same bytes for an event, so
// they are made once instead of once per connection. When no rendering is
// kept, data is nil and keep, when not nil, must be called once with the
// caller's own rendering (ok false when it is not to be shared, such as a
// rendering with errors); the listeners of the same key wait for it. A nil
// keep means the caller renders alone: the fan-out cannot answer (commits
// do not reach this replica), the bound on kept bytes is reached, or the
// rendering it waited for was not shared. It waits at most until ctx ends.
func (d *Delivery) Rendered(ctx context.Context, doc string) (data []byte, keep func(data []byte, ok bool)) {
	f := d.Listener.f
	if !f.hub.Connected() {
		return nil, nil
	}
	key := renderKey{seq: d.Event.Seq, who: keyOf(d.Listener.start), doc: doc}
	f.lockShared()
	r := f.rendered[key]
	if r == nil {
		r = &rendering{done: make(chan struct{})}
		f.rendered[key] = r
		f.smu.Unlock()
		f.kept.Add(1)
		return nil, func(data []byte, ok bool) { f.keepRendering(key, r, data, ok) }
	}
	f.smu.Unlock()
	if f.renderWait != nil {
		f.renderWait()
	}
	select {
	case <-r.done:
	case <-ctx.Done():
		return nil, nil
	}
	if !r.ok {
		return nil, nil
	}
	f.reused.Add(1)
	return r.data, nil
}

// Renderings counts, since the fan-out started, the renderings a listener
// made for the others of its principal and document (kept, whether they
// could be shared in the end or not) and the deliveries that reused one
// instead of rendering (reused).
func (f *Fanout) Renderings() (kept, reused uint64) {
	return f.kept.Load(), f.reused.Load()
}

// keepRendering stores r's rendering when it may be shared and fits the
// bound, and releases the listeners that wait for it. A rendering whose
// map was dropped meanwhile (holdShared: something touched the shared
// reads while it was made) is not shared: its waiters render alone.
func (f *Fanout) keepRendering(key renderKey, r *rendering, data []byte, ok bool) {
	f.smu.Lock()
	kept := f.rendered[key] == r
	switch {
	case kept && ok && f.renderedBytes+len(data) <= RenderedBytes:
		r.data, r.ok = data, true
		f.renderedBytes += len(data)
	case kept:
		delete(f.rendered, key)
	}
	f.smu.Unlock()
	close(r.done)
}
