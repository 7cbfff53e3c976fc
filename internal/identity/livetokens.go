package identity

import (
	"context"
	"sync"

	"bothy.example.com/bothy/internal/platform/verdicts"
)

// LiveTokens re-authenticates the tokens of a replica's open connections
// (WebSocket connections and their subscriptions) together: the first
// question after a commit authenticates every registered token in one
// statement (AuthenticateMany), and every other question about the same
// generation of the database is answered from that batch. What a commit
// costs in token checks no longer grows with the number of connections.
// It is safe for concurrent use.
type LiveTokens struct {
	s *Service

	mu   sync.Mutex
	refs map[string]int // registered tokens, with their number of holders

	batchMu sync.Mutex
	win     verdicts.Window[<-chan struct{}] // the generation of held, and when its batch began
	held    map[string]Principal
	checked map[string]bool // the tokens the batch of gen asked about
}

// VerdictTTL is the longest a verdict of a batch (LiveTokens, the
// subscriptions' fan-out) is used within one generation: verdicts.TTL.
const VerdictTTL = verdicts.TTL

// NewLiveTokens returns an empty set of live tokens of s.
func (s *Service) NewLiveTokens() *LiveTokens {
	return &LiveTokens{s: s, refs: map[string]int{}}
}

// Add registers tok until as many Remove calls.
func (t *LiveTokens) Add(tok string) {
	t.mu.Lock()
	t.refs[tok]++
	t.mu.Unlock()
}

// Remove drops one registration of tok.
func (t *LiveTokens) Remove(tok string) {
	t.mu.Lock()
	if t.refs[tok]--; t.refs[tok] <= 0 {
		delete(t.refs, tok)
	}
	t.mu.Unlock()
}

// Check authenticates tok as the database stood at generation gen (the
// channel runs.Hub.Changed returned, closed at the next commit): the
// principal and true when it authenticates, false when it does not. A
// token not registered is asked about with the registered ones.
//
// Errors: a database error (internal_error): no verdict on the token.
func (t *LiveTokens) Check(ctx context.Context, gen <-chan struct{}, tok string) (Principal, bool, error) {
	t.batchMu.Lock()
	defer t.batchMu.Unlock()
	// A batch answers for its generation, and for at most VerdictTTL of
	// the clock: an expiry passes without a commit.
	if !t.win.Hold(gen, t.s.st.clock) {
		t.held, t.checked = nil, nil
	}
	if !t.checked[tok] {
		t.mu.Lock()
		toks := make([]string, 0, len(t.refs)+1)
		for k := range t.refs {
			toks = append(toks, k)
		}
		if _, registered := t.refs[tok]; !registered {
			toks = append(toks, tok)
		}
		t.mu.Unlock()
		held, err := t.s.AuthenticateMany(ctx, toks)
		if err != nil {
			return Principal{}, false, err
		}
		if t.held == nil {
			t.held, t.checked = map[string]Principal{}, map[string]bool{}
		}
		for _, k := range toks {
			t.checked[k] = true
			if p, ok := held[k]; ok {
				t.held[k] = p
			} else {
				delete(t.held, k)
			}
		}
	}
	p, ok := t.held[tok]
	return p, ok, nil
}
