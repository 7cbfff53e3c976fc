// Package querycache is the cache of parsed and validated GraphQL documents
// of the executor, bounded by the bytes its documents keep
// (graphql.query_cache_bytes), not by their count.
package querycache

import (
	"context"
	"math"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/vektah/gqlparser/v2/ast"
)

// New returns the cache of parsed and validated documents of the
// GraphQL executor, keyed by their source text, within budget bytes of
// estimated memory (graphql.query_cache_bytes). A count of documents bounded
// nothing: a thousand documents near http.max_body_bytes would have kept a
// gigabyte.
func New(budget int) *LRU[*ast.QueryDocument] {
	return NewLRU(budget, DocumentCost)
}

// nodeBytes is what one node of a parsed and validated document keeps on
// the heap: its struct, its Position, its share of the slices that hold it
// and the allocator's rounding. Measured across the stored REST operations
// and wide, padded, commented and fragment documents at 210 to 290 bytes
// (TestDocumentCostEstimatesMemory keeps the estimate honest).
const nodeBytes = 256

// DocumentCost estimates the heap a cached document keeps: its source text
// (the cache's key, which the parsed names and strings share) plus
// nodeBytes per node: operations, fragments, selections, arguments,
// directives, values, variable definitions and their types, and one for the
// document and its cache entry. The text alone would undercount a compact
// document twenty to forty times.
func DocumentCost(src string, doc *ast.QueryDocument) int {
	n := 1
	var value func(v *ast.Value)
	value = func(v *ast.Value) {
		if v == nil {
			return
		}
		n++
		for _, c := range v.Children {
			n++
			value(c.Value)
		}
	}
	arguments := func(args ast.ArgumentList) {
		for _, a := range args {
			n++
			value(a.Value)
		}
	}
	directives := func(ds ast.DirectiveList) {
		for _, d := range ds {
			n++
			arguments(d.Arguments)
		}
	}
	var selections func(set ast.SelectionSet)
	selections = func(set ast.SelectionSet) {
		for _, sel := range set {
			n++
			switch s := sel.(type) {
			case *ast.Field:
				arguments(s.Arguments)
				directives(s.Directives)
				selections(s.SelectionSet)
			case *ast.InlineFragment:
				directives(s.Directives)
				selections(s.SelectionSet)
			case *ast.FragmentSpread:
				directives(s.Directives)
			}
		}
	}
	for _, op := range doc.Operations {
		n++
		for _, v := range op.VariableDefinitions {
			n++
			for t := v.Type; t != nil; t = t.Elem {
				n++
			}
			value(v.DefaultValue)
			directives(v.Directives)
		}
		directives(op.Directives)
		selections(op.SelectionSet)
	}
	for _, f := range doc.Fragments {
		n++
		directives(f.Directives)
		selections(f.SelectionSet)
	}
	return len(src) + n*nodeBytes
}

// oversizeShare is the share of the budget above which an entry is not
// cached at all: one huge document (a sixteenth is 1 MiB by default) would
// otherwise push out dozens of the small ones that clients send again and
// again, and a document that large is rarely sent twice.
const oversizeShare = 16

// LRU is a least-recently-used cache bounded by the bytes its entries
// cost (cost of key and value), not by their number. It is safe for
// concurrent use: a Get moves its entry to the front, so every call takes
// the one lock. The recency list and map are golang-lru's simplelru; this
// type adds the accounting in bytes.
type LRU[T any] struct {
	cost   func(key string, v T) int
	budget int
	max    int // the most one entry may cost: budget / oversizeShare

	mu   sync.Mutex
	lru  *simplelru.LRU[string, costed[T]]
	used int // the sum of the costs of the entries held
}

// costed is an entry with the cost it was charged when added, so that its
// eviction gives back exactly that.
type costed[T any] struct {
	v    T
	cost int
}

var _ graphql.Cache[*ast.QueryDocument] = (*LRU[*ast.QueryDocument])(nil)

// NewLRU returns an empty cache of at most budget bytes as cost counts
// them; a budget below oversizeShare caches nothing.
func NewLRU[T any](budget int, cost func(key string, v T) int) *LRU[T] {
	c := &LRU[T]{cost: cost, budget: budget, max: budget / oversizeShare}
	// simplelru's own count bound is never reached: every entry costs at
	// least a byte, so the budget evicts first.
	l, err := simplelru.NewLRU(math.MaxInt, func(_ string, e costed[T]) { c.used -= e.cost })
	if err != nil {
		panic(err) // simplelru refuses only a size below 1
	}
	c.lru = l
	return c
}

// Get returns the value cached under key and marks it as just used.
func (c *LRU[T]) Get(_ context.Context, key string) (T, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.lru.Get(key)
	return e.v, ok
}

// Add caches v under key unless it costs nothing or more than a sixteenth
// of the budget, and evicts the least recently used entries until the
// cache is within its budget again. A key already cached keeps its value
// (two requests that missed at once parsed the same text) and counts as
// used.
func (c *LRU[T]) Add(_ context.Context, key string, v T) {
	// The cost is counted outside the lock: it walks the whole document.
	cost := c.cost(key, v)
	if cost <= 0 || cost > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.lru.Get(key); ok {
		return
	}
	c.lru.Add(key, costed[T]{v: v, cost: cost})
	c.used += cost
	for c.used > c.budget {
		c.lru.RemoveOldest()
	}
}

// Len returns the number of entries cached.
func (c *LRU[T]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

// Used returns the bytes the cached entries cost together.
func (c *LRU[T]) Used() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}
