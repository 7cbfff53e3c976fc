package graph

import (
	"context"
	"errors"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/graph-gophers/dataloader/v7"
	"github.com/vektah/gqlparser/v2/ast"

	"bothy.example.com/bothy/graph/model"
	"bothy.example.com/bothy/internal/admin"
	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/files"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/platform/httpx"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/runs"
)

// Loaders are the per-request dataloaders: field resolvers read through
// them so that a list of N items costs one statement per kind, not N.
type Loaders struct {
	// Principals loads principals by id (authors, agents, triggering people),
	// cached for the request.
	Principals *Batch[string, identity.Principal]
	// OwnRuns loads runs of the calling agent named in its stream: one
	// statement for a page of events.
	OwnRuns *Batch[string, runs.Run]
	// StartedThreads loads, by message id, the id of the thread the message
	// started ("" for none): one statement for a page of messages.
	StartedThreads *Batch[string, string]
	// ReadableThreads loads, by thread id, whether the request's caller
	// may read the thread now: one batched decision (paths and grants in a
	// few statements) however many messages ask, without a rate-limit
	// token or an audit row of its own.
	ReadableThreads *Batch[string, bool]
	// Threads loads threads by id, deciding nothing: a field asks
	// ReadableThreads first. One statement for all threads asked.
	Threads *Batch[string, chat.Thread]
	// Answers loads the answers of runs (Run.answers): one statement for
	// all runs asked at once.
	Answers *Batch[string, []runs.Answer]
	// Lives loads the live boxes of runs (Run.live, Message.live): the
	// replica's latest version, or one statement for the stored copies.
	Lives *Batch[string, runs.Live]
	// Approvals loads the approvals of cards by message (Message.approval):
	// one statement for the cards of a response.
	Approvals *Batch[string, runs.Approval]
	// Attachments loads the attachments of messages (Message.attachments):
	// one statement for the messages of a response. The reader's right to
	// each file is its right to the message, decided when it was read.
	Attachments *Batch[string, []messaging.Attachment]
	// Capabilities loads principals' capabilities (Principal.capabilities).
	Capabilities *Batch[string, identity.Capabilities]
}

// Sources are what the loaders read from.
type Sources struct {
	Identity *identity.Service
	Runs     *runs.Service
	Chat     *chat.Service
	// Authz decides the batched reads (ReadableThreads).
	Authz *authz.Service
	// Files reads the attachments of messages.
	Files *files.Service
}

type loadersKey struct{}

// NewLoaders returns fresh loaders for one request.
func NewLoaders(src Sources) *Loaders {
	return &Loaders{
		Principals:      newBatch(principalsBatch(src)),
		StartedThreads:  newBatch(byKey(src.startedThreads, internalError, nil)),
		ReadableThreads: newBatch(readableThreadsBatch(src)),
		Threads:         newBatch(byKey(src.threads, internalError, nil)),
		OwnRuns:         newBatch(ownRunsBatch(src)),
		Answers:         newBatch(byKey(src.answers, nil, nil)),
		Lives: newBatch(byKey(src.lives, nil, func(k string) runs.Live {
			// A run without a stored box (none exists) shows an empty one.
			return runs.Live{RunID: k}
		})),
		Approvals:    newBatch(byKey(src.approvals, nil, nil)),
		Attachments:  newBatch(byKey(src.attachments, internalError, func(string) []messaging.Attachment { return []messaging.Attachment{} })),
		Capabilities: newBatch(byKey(src.capabilities, internalError, nil)),
	}
}

func (src Sources) attachments(ctx context.Context, ids []string) (map[string][]messaging.Attachment, error) {
	return src.Files.AttachmentsOf(ctx, ids)
}

func (src Sources) capabilities(ctx context.Context, ids []string) (map[string]identity.Capabilities, error) {
	return src.Identity.CapabilitiesOfMany(ctx, ids)
}

// The sources' reads as batch sources of byKey, bound when a batch runs
// (a loader of a test without sources is built but never asked).
func (src Sources) answers(ctx context.Context, ids []string) (map[string][]runs.Answer, error) {
	return src.Runs.Answers(ctx, ids)
}

func (src Sources) lives(ctx context.Context, ids []string) (map[string]runs.Live, error) {
	return src.Runs.Lives(ctx, ids)
}

func (src Sources) approvals(ctx context.Context, ids []string) (map[string]runs.Approval, error) {
	return src.Runs.ApprovalsOfCards(ctx, ids)
}

// byKey is the batch function of a source that answers a map for all keys
// in one call: each key gets its value (or, when absent and missing is
// set, missing(key), else the zero value), and a failing call fails every
// key, with wrap(err) when wrap is set.
func byKey[V any](get func(context.Context, []string) (map[string]V, error), wrap func(error) error, missing func(string) V) dataloader.BatchFunc[string, V] {
	return func(ctx context.Context, keys []string) []*dataloader.Result[V] {
		got, err := get(ctx, keys)
		if err != nil && wrap != nil {
			err = wrap(err)
		}
		out := make([]*dataloader.Result[V], len(keys))
		for i, k := range keys {
			if err != nil {
				out[i] = &dataloader.Result[V]{Error: err}
				continue
			}
			v, ok := got[k]
			if !ok && missing != nil {
				v = missing(k)
			}
			out[i] = &dataloader.Result[V]{Data: v}
		}
		return out
	}
}

// internalError wraps a source's error as the loaders' internal error.
func internalError(err error) error { return problem.Internal("graph.NewLoaders", err) }

// principalsBatch loads principals by id; an unknown id is
// identity.ErrNotFound.
func principalsBatch(src Sources) dataloader.BatchFunc[string, identity.Principal] {
	return func(ctx context.Context, keys []string) []*dataloader.Result[identity.Principal] {
		found, err := src.Identity.GetMany(ctx, keys)
		out := make([]*dataloader.Result[identity.Principal], len(keys))
		for i, k := range keys {
			switch p, ok := found[k]; {
			case err != nil:
				out[i] = &dataloader.Result[identity.Principal]{Error: internalError(err)}
			case !ok:
				out[i] = &dataloader.Result[identity.Principal]{Error: identity.ErrNotFound}
			default:
				out[i] = &dataloader.Result[identity.Principal]{Data: p}
			}
		}
		return out
	}
}

// ownRunsBatch loads runs of the calling agent named in its stream: an
// unknown run or one of another agent is not found, and without a caller
// every key is unauthorized, without a statement.
func ownRunsBatch(src Sources) dataloader.BatchFunc[string, runs.Run] {
	return func(ctx context.Context, keys []string) []*dataloader.Result[runs.Run] {
		out := make([]*dataloader.Result[runs.Run], len(keys))
		p, ok := identity.FromContext(ctx)
		var got map[string]runs.Run
		err := error(problem.New(problem.Unauthorized, ""))
		if ok {
			got, err = src.Runs.OwnRuns(ctx, p.ID, keys)
			if err != nil {
				err = internalError(err)
			}
		}
		for i, k := range keys {
			r, found := got[k]
			switch {
			case err != nil:
				out[i] = &dataloader.Result[runs.Run]{Error: err}
			case !found:
				out[i] = &dataloader.Result[runs.Run]{Error: problem.New(problem.NotFound, "")}
			default:
				out[i] = &dataloader.Result[runs.Run]{Data: r}
			}
		}
		return out
	}
}

// ownRun loads run id of the calling agent's stream through the loader.
func (r *Resolver) ownRun(ctx context.Context, id string) (*model.Run, error) {
	l, err := LoadersFor(ctx)
	if err != nil {
		return nil, err
	}
	run, err := l.OwnRuns.Load(ctx, id)()
	if err != nil {
		return nil, problem.From("graph.ownRun", err)
	}
	return runModel(run), nil
}

// PerResponse is the executor extension that gives every response its own
// loaders: the one answer of a query or mutation (over HTTP, the REST shim
// or a WebSocket), and each event of a subscription, so that the fields of
// one event batch together and nothing is cached from one request, event
// or principal to the next. The server installs it on its one executor.
type PerResponse struct {
	Sources Sources
}

var _ interface {
	graphql.HandlerExtension
	graphql.ResponseInterceptor
} = PerResponse{}

// ExtensionName implements graphql.HandlerExtension.
func (PerResponse) ExtensionName() string { return "BothyLoaders" }

// Validate implements graphql.HandlerExtension.
func (PerResponse) Validate(graphql.ExecutableSchema) error { return nil }

// InterceptResponse implements graphql.ResponseInterceptor: gqlgen calls it
// once per response, with the context the response's fields resolve in.
func (e PerResponse) InterceptResponse(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	if _, ws := ctx.Value(connKey{}).(SubscriptionConn); ws {
		// A response of a WebSocket operation runs beside the connection's
		// request, several at once: it notes its outcome in hints of its
		// own.
		ctx = httpx.WithOwnHints(ctx)
		// An event of a subscription is no request of its listener: the
		// subscription took its rate-limit token when it started, and the
		// reads of the event's fields (message, thread, run) take none, as
		// the pages it delivers take none. Others post the events; a
		// listener cannot make them come faster.
		if oc := graphql.GetOperationContext(ctx); oc.Operation != nil && oc.Operation.Operation == ast.Subscription {
			ctx = authz.Prepaid(ctx)
		}
	}
	return next(context.WithValue(ctx, loadersKey{}, &lazyLoaders{sources: e.Sources}))
}

// lazyLoaders are a response's loaders, made when a field first needs
// them: an event that a subscription's connection takes as another
// connection rendered it (RenderOnce) resolves no field at all.
type lazyLoaders struct {
	sources Sources
	once    sync.Once
	l       *Loaders
}

// get returns the response's loaders, made on the first call.
func (z *lazyLoaders) get() *Loaders {
	z.once.Do(func() { z.l = NewLoaders(z.sources) })
	return z.l
}

// errNoLoaders is the wiring error of an executor without PerResponse.
var errNoLoaders = errors.New("graph: no loaders in the context: the executor lacks the graph.PerResponse extension")

// LoadersFor returns the loaders of the response being resolved. Without
// them (an executor assembled without PerResponse) it fails with an
// internal error, which the error presenter logs, instead of quietly
// building loaders per call: that would cost one statement per item (N+1)
// and nobody would notice.
func LoadersFor(ctx context.Context) (*Loaders, error) {
	if z, ok := ctx.Value(loadersKey{}).(*lazyLoaders); ok {
		return z.get(), nil
	}
	return nil, problem.Internal("graph.LoadersFor", errNoLoaders)
}

// actorRef is principalRef for the actor of an audit entry, which, unlike
// an author or a run's agent, no foreign key keeps: an owner may remove a
// principal that wrote nothing at the database, and the audit log keeps
// what it did. Such an actor answers as deleted, under its id.
func (r *Resolver) actorRef(ctx context.Context, id string) (*identity.Ref, error) {
	ref, err := r.principalRef(ctx, id)
	if errors.Is(err, identity.ErrNotFound) {
		gone := identity.DeletedRef(id)
		return &gone, nil
	}
	return ref, err
}

// principalRef loads the public view of principal id through the loader.
func (r *Resolver) principalRef(ctx context.Context, id string) (*identity.Ref, error) {
	if id == admin.Operator.ID {
		// The local operator (bothy admin, the seed of bothy dev) acts
		// beside the database and is stored nowhere; what it did is
		// audited under its id, and answered under its name.
		ref := admin.Operator.Ref()
		return &ref, nil
	}
	l, err := LoadersFor(ctx)
	if err != nil {
		return nil, err
	}
	p, err := l.Principals.Load(ctx, id)()
	if err != nil {
		return nil, problem.From("graph.principalRef", err)
	}
	ref := p.Ref()
	return &ref, nil
}
