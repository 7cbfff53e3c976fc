package graph

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/graph-gophers/dataloader/v7"

	"bothy.example.com/bothy/graph/model"
	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/runs"
	"bothy.example.com/bothy/internal/runs/domain"
)

// Loaders are the per-request dataloaders: field resolvers read through
// them so that a list of N items costs one statement per kind, not N.
type Loaders struct {
	// Principals loads principals by id (authors, agents, triggering people),
	// cached for the request.
	Principals *dataloader.Loader[string, identity.Principal]
	// TriggerHolders answers whether a person has trigger on a channel now:
	// one TriggerHolders call per channel for all authors of a context.
	TriggerHolders *dataloader.Loader[holderKey, bool]
	// Delivered answers whether a message was delivered to a session (or a
	// guest run) as a follow-up: one statement per session.
	Delivered *dataloader.Loader[deliveredKey, bool]
	// FollowUps loads the follow-up messages of runs: one batch for all
	// runs of the request.
	FollowUps *dataloader.Loader[string, []messaging.ContextItem]
	// OwnRuns loads runs of the calling agent named in its stream: one
	// statement for a page of events.
	OwnRuns *dataloader.Loader[string, runs.Run]
	// StartedThreads loads, by message id, the id of the thread the message
	// started ("" for none): one statement for a page of messages.
	StartedThreads *dataloader.Loader[string, string]
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
}

type loadersKey struct{}

// NewLoaders returns fresh loaders for one request.
func NewLoaders(src Sources) *Loaders {
	l := &Loaders{}
	l.Principals = dataloader.NewBatchedLoader(func(ctx context.Context, keys []string) []*dataloader.Result[identity.Principal] {
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
	}, dataloader.WithWait[string, identity.Principal](time.Millisecond))
	l.TriggerHolders = dataloader.NewBatchedLoader(func(ctx context.Context, keys []holderKey) []*dataloader.Result[bool] {
		out := make([]*dataloader.Result[bool], len(keys))
		byChannel := map[authz.Path][]int{}
		for i, k := range keys {
			byChannel[k.Channel] = append(byChannel[k.Channel], i)
		}
		for path, idx := range byChannel {
			ids := make([]string, len(idx))
			for j, i := range idx {
				ids[j] = keys[i].Person
			}
			people, errs := l.Principals.LoadMany(ctx, ids)()
			var err error
			for _, e := range errs {
				if e != nil {
					err = e
				}
			}
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
	}, dataloader.WithWait[holderKey, bool](time.Millisecond))
	l.StartedThreads = dataloader.NewBatchedLoader(func(ctx context.Context, keys []string) []*dataloader.Result[string] {
		found, err := src.Chat.StartedThreadIDs(ctx, keys)
		out := make([]*dataloader.Result[string], len(keys))
		for i, k := range keys {
			if err != nil {
				out[i] = &dataloader.Result[string]{Error: problem.Internal(err)}
				continue
			}
			out[i] = &dataloader.Result[string]{Data: found[k]}
		}
		return out
	}, dataloader.WithWait[string, string](time.Millisecond))
	l.Delivered = dataloader.NewBatchedLoader(func(ctx context.Context, keys []deliveredKey) []*dataloader.Result[bool] {
		out := make([]*dataloader.Result[bool], len(keys))
		type scope struct{ session, run string }
		bySession := map[scope][]int{}
		for i, k := range keys {
			sc := scope{k.Session, k.Run}
			bySession[sc] = append(bySession[sc], i)
		}
		for sc, idx := range bySession {
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
	}, dataloader.WithWait[deliveredKey, bool](time.Millisecond))
	l.FollowUps = dataloader.NewBatchedLoader(func(ctx context.Context, keys []string) []*dataloader.Result[[]messaging.ContextItem] {
		got, err := src.Runs.FollowUps(ctx, keys)
		out := make([]*dataloader.Result[[]messaging.ContextItem], len(keys))
		for i, k := range keys {
			if err != nil {
				out[i] = &dataloader.Result[[]messaging.ContextItem]{Error: problem.Internal(err)}
			} else {
				out[i] = &dataloader.Result[[]messaging.ContextItem]{Data: got[k]}
			}
		}
		return out
	}, dataloader.WithWait[string, []messaging.ContextItem](time.Millisecond))
	l.OwnRuns = dataloader.NewBatchedLoader(func(ctx context.Context, keys []string) []*dataloader.Result[runs.Run] {
		out := make([]*dataloader.Result[runs.Run], len(keys))
		p, ok := identity.FromContext(ctx)
		var got map[string]runs.Run
		err := error(problem.New(problem.Unauthorized, ""))
		if ok {
			got, err = src.Runs.OwnRuns(ctx, p.ID, keys)
			if err != nil {
				err = problem.Internal(err)
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
	}, dataloader.WithWait[string, runs.Run](time.Millisecond))
	return l
}

// ownRun loads run id of the calling agent's stream through the loader.
func (r *Resolver) ownRun(ctx context.Context, id string) (*model.Run, error) {
	run, err := r.loaders(ctx).OwnRuns.Load(ctx, id)()
	if err != nil {
		return nil, problem.From(err)
	}
	return runModel(run), nil
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

// prime answers, in one statement per kind, every key the element
// resolvers of rc will ask for and puts the answers into the request's
// loaders, so that a context read runs a fixed number of statements however
// many elements and authors it has; the field resolvers then read through
// the loaders. Any failure fails the whole context (fail closed).
func (r *Resolver) prime(ctx context.Context, rc *runs.RunContext) error {
	l := r.loaders(ctx)
	all := append([]runs.ContextElement{rc.Trigger}, rc.Thread...)
	all = append(all, rc.Channel...)
	seen := map[string]bool{}
	var idList, askTrust []string
	var messages []string
	for _, e := range all {
		if !seen[e.AuthorID] {
			seen[e.AuthorID] = true
			idList = append(idList, e.AuthorID)
			if domain.NeedsHolders(domain.AuthorFacts{Origin: e.Origin, AuthorID: e.AuthorID}, rc.Parties) {
				askTrust = append(askTrust, e.AuthorID)
			}
		}
		messages = append(messages, e.ID)
	}
	people, err := r.Identity.GetMany(ctx, idList)
	if err != nil {
		return problem.Internal(err)
	}
	for id, p := range people {
		l.Principals.Prime(ctx, id, p)
	}
	if len(askTrust) > 0 {
		asked := make([]identity.Principal, 0, len(askTrust))
		for _, id := range askTrust {
			if p, ok := people[id]; ok {
				asked = append(asked, p)
			}
		}
		holders, err := r.Holders.WithTrigger(ctx, rc.ChannelPath, asked)
		if err != nil {
			return problem.From(err)
		}
		for _, id := range askTrust {
			l.TriggerHolders.Prime(ctx, holderKey{Channel: rc.ChannelPath, Person: id}, holders[id])
		}
	}
	got, err := r.Runs.Delivered(ctx, rc.SessionID, rc.RunID, messages)
	if err != nil {
		return problem.From(err)
	}
	for _, m := range messages {
		l.Delivered.Prime(ctx, deliveredKey{Session: rc.SessionID, Run: rc.RunID, Message: m}, got[m])
	}
	return nil
}

// elementTrust classifies one context element (seed M2-13 note 4). Only a
// person's message other than the trigger needs the live trigger-holder
// answer, which prime has batched for the whole context.
func (r *Resolver) elementTrust(ctx context.Context, obj *model.RunContextMessage) (domain.Trust, error) {
	e := obj.Element
	facts := domain.AuthorFacts{Origin: e.Origin, AuthorID: e.AuthorID}
	holders := map[string]bool{}
	if domain.NeedsHolders(facts, obj.Context.Parties) {
		holds, err := r.loaders(ctx).TriggerHolders.Load(ctx, holderKey{Channel: obj.Context.ChannelPath, Person: e.AuthorID})()
		if err != nil {
			return "", err
		}
		holders[e.AuthorID] = holds
	}
	_, trust := domain.Classify(facts, obj.Context.Parties, holders)
	return trust, nil
}

// trustModel is the GraphQL enum value of a trust level.
func trustModel(t domain.Trust) model.Trust { return model.Trust(strings.ToUpper(string(t))) }
