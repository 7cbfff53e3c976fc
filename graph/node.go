package graph

import (
	"context"

	"bothy.example.com/bothy/graph/model"
	"bothy.example.com/bothy/internal/platform/problem"
)

// nodeReader reads one kind of Node by id with the caller's rights.
type nodeReader func(ctx context.Context, id string) (model.Node, error)

// nodeReaders are the readers Query.node tries, in order: the API's own
// single-item readers, so that node answers what they answer and decides
// nothing itself. Ids are UUIDs of different tables, so at most one of them
// finds the id. Every one of them decides an rl.read action, so the
// operation takes one token however many are tried (authz.Operation). The
// order puts the kinds clients hold most of first; a miss costs each
// reader's lookup and decision.
//
// Groups are not among them: group(id:) is administration (rl.admin,
// audited on every allow and deny), so trying it would take a second token
// and audit a denial for every id a person who owns nothing resolves.
func (r *queryResolver) nodeReaders() []nodeReader {
	return []nodeReader{asNode(r.Message), asNode(r.Thread), asNode(r.nodeRun), asNode(r.Channel), asNode(r.Space)}
}

// asNode adapts a reader of one kind to a nodeReader.
func asNode[T model.Node](read func(context.Context, string) (T, error)) nodeReader {
	return func(ctx context.Context, id string) (model.Node, error) {
		n, err := read(ctx, id)
		if err != nil {
			return nil, err
		}
		return n, nil
	}
}

// nodeRun reads a run as Query.run does for any selection but the context
// alone (run.read). Query.run itself is not reused: its shortcut for the
// stored getRunContext operation looks at the field's selection, which under
// node collects the fragments of every kind, and would read an id as
// run.context.read, another action of another rate-limit class.
func (r *queryResolver) nodeRun(ctx context.Context, id string) (*model.Run, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	rd, err := r.Runs.Read(ctx, p, id)
	if err != nil {
		return nil, err
	}
	return runReadModel(rd), nil
}

// node answers id through the first reader that finds it. A refusal of a
// reader (not_found, forbidden) only means "not this kind, or not for you",
// so the next one is tried; when none answers, node answers not_found like
// every reader does for an id it may not read or that names nothing. Any
// other failure (rate limit, outage) is the answer.
func (r *queryResolver) node(ctx context.Context, id string) (model.Node, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	// The caller's own id names the caller, whose reader is viewer; no
	// other principal is read by id.
	if id == p.ID {
		v, err := r.Viewer(ctx)
		if err != nil {
			return nil, err
		}
		return v, nil
	}
	for _, read := range r.nodeReaders() {
		n, err := read(ctx, id)
		if err == nil {
			return n, nil
		}
		if err := unreadable(err); err != nil {
			return nil, err
		}
	}
	return nil, problem.New(problem.NotFound, "")
}
