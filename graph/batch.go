package graph

import (
	"context"
	"errors"
	"time"

	"github.com/graph-gophers/dataloader/v7"

	"bothy.example.com/bothy/internal/platform/problem"
)

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
