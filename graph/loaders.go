package graph

import (
	"context"
	"net/http"
	"time"

	"github.com/graph-gophers/dataloader/v7"

	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/problem"
)

// Loaders are the per-request dataloaders: field resolvers read through
// them so that a list of N items costs one statement per kind, not N.
type Loaders struct {
	// Principals loads principals by id (authors, agents, triggering people).
	Principals *dataloader.Loader[string, identity.Principal]
}

type loadersKey struct{}

// NewLoaders returns fresh loaders over the identity service.
func NewLoaders(ident *identity.Service) *Loaders {
	return &Loaders{
		Principals: dataloader.NewBatchedLoader(func(ctx context.Context, keys []string) []*dataloader.Result[identity.Principal] {
			found, err := ident.GetMany(ctx, keys)
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
		}, dataloader.WithWait[string, identity.Principal](time.Millisecond), dataloader.WithCache[string, identity.Principal](&dataloader.NoCache[string, identity.Principal]{})),
	}
}

// WithLoaders is the HTTP middleware that gives each request its own
// loaders, so nothing is cached across requests or principals.
func WithLoaders(ident *identity.Service, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), loadersKey{}, NewLoaders(ident))))
	})
}

// loaders returns the request's loaders (fresh ones outside a request).
func (r *Resolver) loaders(ctx context.Context) *Loaders {
	if l, ok := ctx.Value(loadersKey{}).(*Loaders); ok {
		return l
	}
	return NewLoaders(r.Identity)
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
