package graph

import (
	"context"
	"errors"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/graph-gophers/dataloader/v7"
	"github.com/vektah/gqlparser/v2/ast"

	"bothy.example.com/bothy/graph/model"
	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/chat"
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
	// TriggerHolders answers whether a person has trigger on a channel now:
	// one TriggerHolders call per channel for all authors of a context.
	TriggerHolders *Batch[holderKey, bool]
	// Delivered answers whether a message was delivered to a session (or a
	// guest run) as a follow-up: one statement per session.
	Delivered *Batch[deliveredKey, bool]
	// FollowUps loads the follow-up messages of runs: one batch for all
	// runs asked at once.
	FollowUps *Batch[string, []messaging.ContextItem]
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
	// Answers loads the answers of runs (Run.answers): one statement for
	// all runs asked at once.
	Answers *Batch[string, []runs.Answer]
	// Lives loads the live boxes of runs (Run.live, Message.live): the
	// replica's latest version, or one statement for the stored copies.
	Lives *Batch[string, runs.Live]
	// Approvals loads the approvals of cards by message (Message.approval):
	// one statement for the cards of a response.
	Approvals *Batch[string, runs.Approval]
}

// Batch is one kind of per-request loader: a graph-gophers dataloader for
// resolvers that ask one key at a time (Load, batched over a short wait),
// plus LoadAll for a resolver that knows every key at once.
type Batch[K comparable, V any] struct {
	*dataloader.Loader[K, V]
	fetch dataloader.BatchFunc[K, V]
	cache *dataloader.InMemoryCache[K, V]
}

// newBatch returns a loader over fetch with a request-scoped cache shared
// by Load and LoadAll.
func newBatch[K comparable, V any](fetch dataloader.BatchFunc[K, V]) *Batch[K, V] {
	cache := dataloader.NewCache[K, V]()
	return &Batch[K, V]{Loader: dataloader.NewBatchedLoader(fetch, dataloader.WithWait[K, V](time.Millisecond),
		dataloader.WithCache[K, V](cache)), fetch: fetch, cache: cache}
}

// LoadAll answers keys in order with exactly one call of the batch
// function for the keys not yet cached (none when all are), and caches the
// answers for later Loads. Unlike dataloader's LoadMany, which starts one
// goroutine per key and lets its timer decide where a batch ends, the
// batch does not depend on timing. The first error of any key is returned
// and fails the caller.
func (b *Batch[K, V]) LoadAll(ctx context.Context, keys []K) ([]V, error) {
	out := make([]V, len(keys))
	cached := make(map[int]dataloader.Thunk[V])
	var missing []K
	var missingAt []int
	seen := make(map[K]int)
	for i, k := range keys {
		if t, ok := b.cache.Get(ctx, k); ok {
			cached[i] = t
			continue
		}
		if _, dup := seen[k]; !dup {
			seen[k] = len(missing)
			missing = append(missing, k)
		}
		missingAt = append(missingAt, i)
	}
	if len(missing) > 0 {
		results := b.fetch(ctx, missing)
		if len(results) != len(missing) {
			return nil, problem.Internal("graph.LoadAll", errors.New("loader answered a different number of keys"))
		}
		for j, res := range results {
			if res.Error != nil {
				return nil, res.Error
			}
			b.Prime(ctx, missing[j], res.Data)
		}
		for _, i := range missingAt {
			out[i] = results[seen[keys[i]]].Data
		}
	}
	for i, t := range cached {
		v, err := t()
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// holderKey asks whether Person has trigger on the channel path Channel.
type holderKey struct {
	Channel authz.Path
	Person  string
}

// deliveredKey asks whether Message was delivered to Session (or, for a
// guest run without session, to Run).
type deliveredKey struct {
	Session, Run, Message string
}

// Sources are what the loaders read from.
type Sources struct {
	Identity *identity.Service
	Holders  authz.TriggerHolders
	Runs     *runs.Service
	Chat     *chat.Service
	// Authz decides the batched reads (ReadableThreads).
	Authz *authz.Service
}

type loadersKey struct{}

// NewLoaders returns fresh loaders for one request.
func NewLoaders(src Sources) *Loaders {
	l := &Loaders{}
	l.Principals = newBatch(func(ctx context.Context, keys []string) []*dataloader.Result[identity.Principal] {
		found, err := src.Identity.GetMany(ctx, keys)
		out := make([]*dataloader.Result[identity.Principal], len(keys))
		for i, k := range keys {
			switch p, ok := found[k]; {
			case err != nil:
				out[i] = &dataloader.Result[identity.Principal]{Error: problem.Internal("graph.NewLoaders", err)}
			case !ok:
				out[i] = &dataloader.Result[identity.Principal]{Error: identity.ErrNotFound}
			default:
				out[i] = &dataloader.Result[identity.Principal]{Data: p}
			}
		}
		return out
	})
	l.TriggerHolders = newBatch(func(ctx context.Context, keys []holderKey) []*dataloader.Result[bool] {
		out := make([]*dataloader.Result[bool], len(keys))
		byChannel := map[authz.Path][]int{}
		var order []authz.Path
		for i, k := range keys {
			if _, ok := byChannel[k.Channel]; !ok {
				order = append(order, k.Channel)
			}
			byChannel[k.Channel] = append(byChannel[k.Channel], i)
		}
		for _, path := range order {
			idx := byChannel[path]
			ids := make([]string, len(idx))
			for j, i := range idx {
				ids[j] = keys[i].Person
			}
			people, err := l.Principals.LoadAll(ctx, ids)
			var holders map[string]bool
			if err == nil {
				holders, err = src.Holders.WithTrigger(ctx, path, people)
			}
			for _, i := range idx {
				if err != nil {
					// Fail closed: no answer is ever read as "has trigger".
					out[i] = &dataloader.Result[bool]{Error: problem.From(err)}
				} else {
					out[i] = &dataloader.Result[bool]{Data: holders[keys[i].Person]}
				}
			}
		}
		return out
	})
	l.StartedThreads = newBatch(func(ctx context.Context, keys []string) []*dataloader.Result[string] {
		found, err := src.Chat.StartedThreadIDs(ctx, keys)
		out := make([]*dataloader.Result[string], len(keys))
		for i, k := range keys {
			if err != nil {
				out[i] = &dataloader.Result[string]{Error: problem.Internal("graph.NewLoaders", err)}
				continue
			}
			out[i] = &dataloader.Result[string]{Data: found[k]}
		}
		return out
	})
	l.ReadableThreads = newBatch(func(ctx context.Context, keys []string) []*dataloader.Result[bool] {
		out := make([]*dataloader.Result[bool], len(keys))
		fail := func(err error) []*dataloader.Result[bool] {
			for i := range out {
				out[i] = &dataloader.Result[bool]{Error: problem.Internal("graph.NewLoaders", err)}
			}
			return out
		}
		p, ok := identity.FromContext(ctx)
		if !ok {
			return fail(errors.New("no caller"))
		}
		paths, err := src.Chat.ThreadPaths(ctx, keys)
		if err != nil {
			return fail(err)
		}
		facts := make([]authz.Facts, len(keys))
		for i, k := range keys {
			facts[i] = authz.Facts{Path: paths[k]}
		}
		// FilterMany: a thread the caller may not read is an answer here,
		// not a bug of a list's query (Filter would count it as one).
		ok2, err := src.Authz.FilterMany(ctx, []identity.Principal{p}, authz.ThreadRead, facts)
		if err != nil {
			return fail(err)
		}
		for i := range keys {
			out[i] = &dataloader.Result[bool]{Data: ok2[0][i]}
		}
		return out
	})
	l.Delivered = newBatch(func(ctx context.Context, keys []deliveredKey) []*dataloader.Result[bool] {
		out := make([]*dataloader.Result[bool], len(keys))
		type scope struct{ session, run string }
		bySession := map[scope][]int{}
		var order []scope
		for i, k := range keys {
			sc := scope{k.Session, k.Run}
			if _, ok := bySession[sc]; !ok {
				order = append(order, sc)
			}
			bySession[sc] = append(bySession[sc], i)
		}
		for _, sc := range order {
			idx := bySession[sc]
			msgs := make([]string, len(idx))
			for j, i := range idx {
				msgs[j] = keys[i].Message
			}
			got, err := src.Runs.Delivered(ctx, sc.session, sc.run, msgs)
			for _, i := range idx {
				if err != nil {
					out[i] = &dataloader.Result[bool]{Error: problem.From(err)}
				} else {
					out[i] = &dataloader.Result[bool]{Data: got[keys[i].Message]}
				}
			}
		}
		return out
	})
	l.FollowUps = newBatch(func(ctx context.Context, keys []string) []*dataloader.Result[[]messaging.ContextItem] {
		got, err := src.Runs.FollowUps(ctx, keys)
		out := make([]*dataloader.Result[[]messaging.ContextItem], len(keys))
		for i, k := range keys {
			if err != nil {
				out[i] = &dataloader.Result[[]messaging.ContextItem]{Error: problem.Internal("graph.NewLoaders", err)}
			} else {
				out[i] = &dataloader.Result[[]messaging.ContextItem]{Data: got[k]}
			}
		}
		return out
	})
	l.Answers = newBatch(func(ctx context.Context, keys []string) []*dataloader.Result[[]runs.Answer] {
		got, err := src.Runs.Answers(ctx, keys)
		out := make([]*dataloader.Result[[]runs.Answer], len(keys))
		for i, k := range keys {
			if err != nil {
				out[i] = &dataloader.Result[[]runs.Answer]{Error: err}
			} else {
				out[i] = &dataloader.Result[[]runs.Answer]{Data: got[k]}
			}
		}
		return out
	})
	l.Lives = newBatch(func(ctx context.Context, keys []string) []*dataloader.Result[runs.Live] {
		got, err := src.Runs.Lives(ctx, keys)
		out := make([]*dataloader.Result[runs.Live], len(keys))
		for i, k := range keys {
			switch {
			case err != nil:
				out[i] = &dataloader.Result[runs.Live]{Error: err}
			default:
				// A run without a stored box (none exists) shows an empty one.
				lv, ok := got[k]
				if !ok {
					lv = runs.Live{RunID: k}
				}
				out[i] = &dataloader.Result[runs.Live]{Data: lv}
			}
		}
		return out
	})
	l.Approvals = newBatch(func(ctx context.Context, keys []string) []*dataloader.Result[runs.Approval] {
		got, err := src.Runs.ApprovalsOfCards(ctx, keys)
		out := make([]*dataloader.Result[runs.Approval], len(keys))
		for i, k := range keys {
			if err != nil {
				out[i] = &dataloader.Result[runs.Approval]{Error: err}
			} else {
				out[i] = &dataloader.Result[runs.Approval]{Data: got[k]}
			}
		}
		return out
	})
	l.OwnRuns = newBatch(func(ctx context.Context, keys []string) []*dataloader.Result[runs.Run] {
		out := make([]*dataloader.Result[runs.Run], len(keys))
		p, ok := identity.FromContext(ctx)
		var got map[string]runs.Run
		err := error(problem.New(problem.Unauthorized, ""))
		if ok {
			got, err = src.Runs.OwnRuns(ctx, p.ID, keys)
			if err != nil {
				err = problem.Internal("graph.NewLoaders", err)
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
	})
	return l
}

// ownRun loads run id of the calling agent's stream through the loader.
func (r *Resolver) ownRun(ctx context.Context, id string) (*model.Run, error) {
	l, err := LoadersFor(ctx)
	if err != nil {
		return nil, err
	}
	run, err := l.OwnRuns.Load(ctx, id)()
	if err != nil {
		return nil, problem.From(err)
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
	return next(context.WithValue(ctx, loadersKey{}, NewLoaders(e.Sources)))
}

// errNoLoaders is the wiring error of an executor without PerResponse.
var errNoLoaders = errors.New("graph: no loaders in the context: the executor lacks the graph.PerResponse extension")

// LoadersFor returns the loaders of the response being resolved. Without
// them (an executor assembled without PerResponse) it fails with an
// internal error, which the error presenter logs, instead of quietly
// building loaders per call: that would cost one statement per item (N+1)
// and nobody would notice.
func LoadersFor(ctx context.Context) (*Loaders, error) {
	if l, ok := ctx.Value(loadersKey{}).(*Loaders); ok {
		return l, nil
	}
	return nil, problem.Internal("graph.LoadersFor", errNoLoaders)
}

// principalRef loads the public view of principal id through the loader.
func (r *Resolver) principalRef(ctx context.Context, id string) (*identity.Ref, error) {
	l, err := LoadersFor(ctx)
	if err != nil {
		return nil, err
	}
	p, err := l.Principals.Load(ctx, id)()
	if err != nil {
		return nil, problem.From(err)
	}
	ref := p.Ref()
	return &ref, nil
}

// finishContext asks the request's loaders every question of rc at once
// (runs.RunContext.Keys: one batch per kind, whatever the number of
// elements and authors), turns the answers into finished elements with the
// runs module's rule (runs.RunContext.Finish) and returns the GraphQL
// model. Its follow-ups are read through their loader only when asked
// for, and finished the same way. Any failing source fails the whole
// context (fail closed): an error is never read as "no trigger" or "not
// delivered".
func (r *Resolver) finishContext(ctx context.Context, p identity.Principal, rc *runs.RunContext) (*model.RunContext, error) {
	l, err := LoadersFor(ctx)
	if err != nil {
		return nil, err
	}
	keys := rc.Keys()
	// One statement answers already_delivered for every element and names
	// the run's follow-ups (whose own delivery it answers too), so that
	// the read costs the same statements with or without followUps. It
	// does not depend on the authors and their trigger, so it runs on its
	// own pool connection while those two are read: three round trips
	// one after another become two. Both are awaited before anything is
	// answered, and either error fails the context (fail closed). When no
	// follow-up of the run or its session was on record as the run was
	// read (rc.FollowUpsOnRecord), the answer is known without it: nothing
	// delivered, no follow-ups.
	type facts struct {
		delivered map[string]bool
		followUps []string
		err       error
	}
	factsDone := make(chan facts, 1)
	if rc.FollowUpsOnRecord {
		go func() {
			var f facts
			f.delivered, f.followUps, f.err = r.Runs.FollowUpFacts(ctx, rc.SessionID, rc.RunID, keys.Delivered)
			factsDone <- f
		}()
	} else {
		factsDone <- facts{}
	}
	warmErr := r.loadPeople(ctx, l, rc, keys)
	f := <-factsDone
	if f.err != nil {
		return nil, problem.From(f.err)
	}
	if warmErr != nil {
		return nil, warmErr
	}
	delivered, followUps := f.delivered, f.followUps
	if delivered == nil {
		delivered = map[string]bool{}
	}
	// The elements' own answers are finished from the statement's answer
	// directly; only the follow-ups, finished later through their loader
	// when asked for, need theirs in the Delivered loader.
	for _, id := range followUps {
		l.Delivered.Prime(ctx, deliveredKey{Session: rc.SessionID, Run: rc.RunID, Message: id}, delivered[id])
	}
	if len(followUps) == 0 {
		l.FollowUps.Prime(ctx, rc.RunID, nil)
	}
	finish, err := r.finisher(ctx, l, rc, keys, delivered)
	if err != nil {
		return nil, err
	}
	out := &model.RunContext{RunID: rc.RunID, ContextFloorSeq: int(rc.ContextFloorSeq),
		TriggerMessage: finishAll(finish, []runs.ContextElement{rc.Trigger})[0], ThreadContext: finishAll(finish, rc.Thread)}
	if rc.Channel != nil {
		out.ChannelContext = finishAll(finish, rc.Channel)
	}
	if rc.TruncatedBeforeSeq != nil {
		n := int(*rc.TruncatedBeforeSeq)
		out.TruncatedBeforeSeq = &n
	}
	out.LoadFollowUps = func(ctx context.Context) (model.RunContextMessages, error) {
		got, err := l.FollowUps.LoadAll(ctx, []string{rc.RunID})
		if err != nil {
			return nil, err
		}
		elems := r.Runs.FollowUpElements(ctx, p, rc, got[0])
		finish, err := r.finisher(ctx, l, rc, rc.KeysOf(elems), nil)
		if err != nil {
			return nil, err
		}
		return finishAll(finish, elems), nil
	}
	return out, nil
}

// finishAll finishes elems into models that share one allocation.
func finishAll(finish func(*runs.ContextElement, *model.RunContextMessage), elems []runs.ContextElement) model.RunContextMessages {
	ms := make([]model.RunContextMessage, len(elems))
	out := make(model.RunContextMessages, len(elems))
	for i := range elems {
		finish(&elems[i], &ms[i])
		out[i] = &ms[i]
	}
	return out
}

// loadPeople answers the author and trigger-holder questions of keys,
// leaving the answers in the request's loaders for finisher. Where some
// authors' trust needs the trigger-holder answer, one statement reads the
// authors and that answer together (authz.TriggerHolders.PeopleWithTrigger)
// and primes both loaders; authors it does not find are left to the
// Principals loader, which fails the context for them as before. When the
// runs module read the people beside the window (rc.People), their
// answers are primed and only what that read did not answer is asked.
func (r *Resolver) loadPeople(ctx context.Context, l *Loaders, rc *runs.RunContext, keys runs.ContextKeys) error {
	authors, ask := keys.Authors, keys.Holders
	if rc.People != nil {
		// Read beside the window: primed, and only what that read could
		// not answer is asked.
		authors, ask = nil, nil
		for id, p := range rc.People {
			l.Principals.Prime(ctx, id, p)
		}
		for _, id := range keys.Authors {
			if _, ok := rc.People[id]; !ok {
				authors = append(authors, id)
			}
		}
		for _, id := range keys.Holders {
			if _, ok := rc.People[id]; ok {
				l.TriggerHolders.Prime(ctx, holderKey{Channel: rc.ChannelPath, Person: id}, rc.Holders[id])
			} else {
				ask = append(ask, id)
			}
		}
	}
	if len(ask) > 0 {
		people, holders, err := r.Holders.PeopleWithTrigger(ctx, rc.ChannelPath, authors, ask)
		if err != nil {
			// Fail closed: no answer is ever read as "has trigger".
			return problem.From(err)
		}
		for id, p := range people {
			l.Principals.Prime(ctx, id, p)
		}
		for _, id := range ask {
			l.TriggerHolders.Prime(ctx, holderKey{Channel: rc.ChannelPath, Person: id}, holders[id])
		}
	}
	if _, err := l.Principals.LoadAll(ctx, keys.Authors); err != nil {
		return problem.From(err)
	}
	return nil
}

// finisher answers keys, questions of elements of rc, with one batch per
// loader kind (answers already cached cost nothing) and returns the
// function that finishes each of those elements into its model. delivered,
// when not nil, is the statement's answer to keys.Delivered (a missing id
// was not delivered), read without the Delivered loader.
func (r *Resolver) finisher(ctx context.Context, l *Loaders, rc *runs.RunContext, keys runs.ContextKeys, delivered map[string]bool) (func(*runs.ContextElement, *model.RunContextMessage), error) {
	people, err := l.Principals.LoadAll(ctx, keys.Authors)
	if err != nil {
		return nil, problem.From(err)
	}
	refs := make(map[string]*model.PrincipalRef, len(people))
	for i, id := range keys.Authors {
		refs[id] = refModel(people[i].Ref())
	}
	answers := runs.ContextAnswers{Holders: map[string]bool{}, Delivered: map[string]bool{}}
	if len(keys.Holders) > 0 {
		hk := make([]holderKey, len(keys.Holders))
		for i, id := range keys.Holders {
			hk[i] = holderKey{Channel: rc.ChannelPath, Person: id}
		}
		holds, err := l.TriggerHolders.LoadAll(ctx, hk)
		if err != nil {
			return nil, err
		}
		for i, id := range keys.Holders {
			answers.Holders[id] = holds[i]
		}
	}
	if delivered != nil {
		answers.Delivered = delivered
	} else if len(keys.Delivered) > 0 {
		dk := make([]deliveredKey, len(keys.Delivered))
		for i, id := range keys.Delivered {
			dk[i] = deliveredKey{Session: rc.SessionID, Run: rc.RunID, Message: id}
		}
		got, err := l.Delivered.LoadAll(ctx, dk)
		if err != nil {
			return nil, err
		}
		for i, id := range keys.Delivered {
			answers.Delivered[id] = got[i]
		}
	}
	return func(e *runs.ContextElement, m *model.RunContextMessage) {
		contextMessageModel(rc.Finish(*e, answers), refs[e.AuthorID], &e.ReplyToMessageID, m)
	}, nil
}
