package graph

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/graph-gophers/dataloader/v7"

	"bothy.example.com/bothy/graph/model"
	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/runs"
	"bothy.example.com/bothy/internal/runs/domain"
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
	// Delivered answers whether a message was handed to a session as a
	// follow-up: one statement per session.
	Delivered *Batch[deliveredKey, bool]
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
			return nil, problem.Internal(errors.New("loader answered a different number of keys"))
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

// deliveredKey asks whether Message was delivered to Session.
type deliveredKey struct {
	Session, Message string
}

// Sources are what the loaders read from.
type Sources struct {
	Identity *identity.Service
	Holders  authz.TriggerHolders
	Runs     *runs.Service
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
				out[i] = &dataloader.Result[identity.Principal]{Error: problem.Internal(err)}
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
	l.Delivered = newBatch(func(ctx context.Context, keys []deliveredKey) []*dataloader.Result[bool] {
		out := make([]*dataloader.Result[bool], len(keys))
		bySession := map[string][]int{}
		var order []string
		for i, k := range keys {
			if _, ok := bySession[k.Session]; !ok {
				order = append(order, k.Session)
			}
			bySession[k.Session] = append(bySession[k.Session], i)
		}
		for _, session := range order {
			idx := bySession[session]
			msgs := make([]string, len(idx))
			for j, i := range idx {
				msgs[j] = keys[i].Message
			}
			got, err := src.Runs.Delivered(ctx, session, msgs)
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
	return l
}

// WithLoaders is the HTTP middleware that gives each request its own
// loaders, so nothing is cached across requests or principals.
func WithLoaders(src Sources, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), loadersKey{}, NewLoaders(src))))
	})
}

// loaders returns the request's loaders (fresh ones outside a request).
func (r *Resolver) loaders(ctx context.Context) *Loaders {
	if l, ok := ctx.Value(loadersKey{}).(*Loaders); ok {
		return l
	}
	return NewLoaders(Sources{Identity: r.Identity, Holders: r.Holders, Runs: r.Runs})
}

// principalRef loads the public view of principal id through the loader.
func (r *Resolver) principalRef(ctx context.Context, id string) (*identity.Ref, error) {
	p, err := r.loaders(ctx).Principals.Load(ctx, id)()
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
// model. Any failing source fails the whole context (fail closed): an
// error is never read as "no trigger" or "not delivered".
func (r *Resolver) finishContext(ctx context.Context, rc *runs.RunContext) (*model.RunContext, error) {
	l := r.loaders(ctx)
	keys := rc.Keys()
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
	if len(keys.Delivered) > 0 {
		dk := make([]deliveredKey, len(keys.Delivered))
		for i, id := range keys.Delivered {
			dk[i] = deliveredKey{Session: rc.SessionID, Message: id}
		}
		got, err := l.Delivered.LoadAll(ctx, dk)
		if err != nil {
			return nil, err
		}
		for i, id := range keys.Delivered {
			answers.Delivered[id] = got[i]
		}
	}
	finish := func(e runs.ContextElement) *model.RunContextMessage {
		return contextMessageModel(rc.Finish(e, answers), refs[e.AuthorID])
	}
	out := &model.RunContext{RunID: rc.RunID, ContextFloorSeq: int(rc.ContextFloorSeq),
		TriggerMessage: finish(rc.Trigger), ThreadContext: make(model.RunContextMessages, len(rc.Thread))}
	for i, e := range rc.Thread {
		out.ThreadContext[i] = finish(e)
	}
	if rc.Channel != nil {
		out.ChannelContext = make(model.RunContextMessages, len(rc.Channel))
		for i, e := range rc.Channel {
			out.ChannelContext[i] = finish(e)
		}
	}
	if rc.TruncatedBeforeSeq != nil {
		n := int(*rc.TruncatedBeforeSeq)
		out.TruncatedBeforeSeq = &n
	}
	return out, nil
}

// trustModel is the GraphQL enum value of a trust level.
func trustModel(t domain.Trust) model.Trust { return model.Trust(strings.ToUpper(string(t))) }

// trustDomain is the trust level of a GraphQL enum value.
func trustDomain(t model.Trust) domain.Trust { return domain.Trust(strings.ToLower(string(t))) }
