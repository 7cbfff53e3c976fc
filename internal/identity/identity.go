// Package identity owns principals (people, agents, apps), groups and
// tokens, and authenticates requests. Other modules see principals only
// through this package's service.
package identity

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"bothy.example.com/bothy/internal/platform/clock"
	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/platform/problem"
)

// Kind is the kind of a principal.
type Kind string

// The principal kinds.
const (
	KindUser  Kind = "user"
	KindAgent Kind = "agent"
	KindApp   Kind = "app"
)

// Status is the lifecycle state of a principal; only active ones act.
type Status string

// The principal states.
const (
	StatusActive   Status = "active"
	StatusPending  Status = "pending"
	StatusDisabled Status = "disabled"
	StatusDeleted  Status = "deleted"
)

// Principal is a person, agent or app as stored.
type Principal struct {
	ID          string
	Kind        Kind
	Handle      string
	DisplayName string
	Email       string // people only; never shown to agents or apps
	Status      Status
	IsOwner     bool
	CreatedAt   time.Time
	// RunID, RunThreadID and RunHolder are set when the principal was
	// authenticated by a run token (CreateRunToken): it acts only on that
	// run, as that holder, and reads only that run's thread (the door
	// narrows it: authz.Actor.Run). Empty for every other token.
	RunID, RunThreadID, RunHolder string
}

// Active reports whether p may act.
func (p Principal) Active() bool { return p.Status == StatusActive }

// Owner reports whether p administers the instance: an active person with
// is_owner.
func (p Principal) Owner() bool { return p.Active() && p.Kind == KindUser && p.IsOwner }

// Ref is the only view of a principal that others get.
type Ref struct {
	ID          string
	Kind        Kind
	Handle      string
	DisplayName string
}

// Ref returns the public view of p.
func (p Principal) Ref() Ref {
	return Ref{ID: p.ID, Kind: p.Kind, Handle: p.Handle, DisplayName: p.DisplayName}
}

// The handles of actors that are no stored principal, which the audit log
// still answers: the local operator (the command line) and a principal
// removed from the database. Nobody can take them (handle_taken), so such
// an actor is never mistaken for a person, agent or app of that name.
const (
	OperatorHandle = "operator"
	DeletedHandle  = "deleted"
)

// Reserved reports whether handle h belongs to one of those actors.
func Reserved(h string) bool { return h == OperatorHandle || h == DeletedHandle }

// DeletedRef is the public view of principal id once its row is gone
// (removed at the database; audit entries keep their actor's id). Its
// kind is no longer known: PrincipalKind has no value for that, and a new
// one would be an input value of createPrincipal, so it answers user.
func DeletedRef(id string) Ref {
	return Ref{ID: id, Kind: KindUser, Handle: DeletedHandle, DisplayName: "Deleted principal"}
}

// ErrNotFound is returned when a principal or token does not exist.
var ErrNotFound = fmt.Errorf("identity: %w", problem.ErrMissing)

var handleRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{1,31}$`)

// ValidHandle reports whether h is a valid handle.
func ValidHandle(h string) bool { return handleRE.MatchString(h) }

// Service is the identity module's service.
type Service struct {
	st store
}

// NewService returns the identity service over q (a pool) with clock c.
func NewService(q db.Querier, c clock.Clock) *Service {
	return &Service{st: store{pool: q, clock: c}}
}

// NewPrincipal describes a principal to create.
type NewPrincipal struct {
	Kind        Kind
	Handle      string
	DisplayName string
	Email       string
	IsOwner     bool
	Status      Status // empty means active
}

// CreatePrincipal stores a new principal and returns it. It fails with
// validation_failed for a bad handle, kind or owner flag, and with conflict
// when the handle is taken.
func (w *Writer) CreatePrincipal(ctx context.Context, np NewPrincipal) (Principal, error) {
	s := w.s
	if err := CheckNew(np); err != nil {
		return Principal{}, err
	}
	status := np.Status
	if status == "" {
		status = StatusActive
	}
	p := Principal{ID: ids.New(), Kind: np.Kind, Handle: np.Handle, DisplayName: np.DisplayName,
		Email: np.Email, Status: status, IsOwner: np.IsOwner, CreatedAt: s.st.clock.Now().Truncate(time.Microsecond)}
	if err := s.st.insertPrincipal(ctx, p); err != nil {
		return Principal{}, err
	}
	return p, nil
}

// Token prefixes make a token's kind readable (and greppable by secret
// scanners) without revealing anything else.
const (
	PrefixSession = "bothy_s_"
	PrefixAgent   = "bothy_a_"
	PrefixApp     = "bothy_p_"
	// PrefixRun starts a run token (CreateRunToken).
	PrefixRun = "bothy_r_"
)

// TokenKind is the kind of a token, fixed by its principal's kind (the
// GraphQL enum TokenKind binds to it).
type TokenKind string

// The token kinds.
const (
	// TokenSession is a person's token.
	TokenSession TokenKind = "session"
	// TokenAgent is an agent's token.
	TokenAgent TokenKind = "agent"
	// TokenApp is an app's token.
	TokenApp TokenKind = "app"
	// TokenRun is an agent's token for one run (CreateRunToken): never
	// listed, it lives while its run is active.
	TokenRun TokenKind = "run"
)

// tokenKind maps a principal kind to the kind and prefix of its tokens.
func tokenKind(k Kind) (TokenKind, string) {
	switch k {
	case KindAgent:
		return TokenAgent, PrefixAgent
	case KindApp:
		return TokenApp, PrefixApp
	default:
		return TokenSession, PrefixSession
	}
}

func hashToken(tok string) []byte {
	h := sha256.Sum256([]byte(tok))
	return h[:]
}

// IssuedToken is a token as created: the clear text is available only here.
type IssuedToken struct {
	ID        string
	Token     string
	Kind      TokenKind
	Label     string
	CreatedAt time.Time
	ExpiresAt *time.Time
}

// Authenticate returns the active principal that holds token tok. A
// malformed, unknown, revoked or expired token, or a principal that is not
// active, gives unauthorized; the error never says which of these it was.
func (s *Service) Authenticate(ctx context.Context, tok string) (Principal, error) {
	p, _, err := s.AuthenticateUntil(ctx, tok)
	return p, err
}

// AuthenticateUntil is Authenticate that also answers when the token
// expires (nil for a token without expiry), so that a connection that
// lives on after its request can end at that moment (clock.At) instead of
// learning it from a later check.
//
// Errors: those of Authenticate.
func (s *Service) AuthenticateUntil(ctx context.Context, tok string) (Principal, *time.Time, error) {
	if !strings.HasPrefix(tok, PrefixSession) && !strings.HasPrefix(tok, PrefixAgent) && !strings.HasPrefix(tok, PrefixApp) && !IsRunToken(tok) {
		return Principal{}, nil, problem.New(problem.Unauthorized, "")
	}
	p, tokenID, lastUsed, expires, err := s.st.tokenHolder(ctx, hashToken(tok))
	if errors.Is(err, ErrNotFound) {
		return Principal{}, nil, problem.New(problem.Unauthorized, "")
	}
	if err != nil {
		return Principal{}, nil, problem.Internal("identity.authenticate", fmt.Errorf("authenticate: %w", err))
	}
	p.CreatedAt = p.CreatedAt.UTC()
	if !p.Active() {
		return Principal{}, nil, problem.New(problem.Unauthorized, "")
	}
	s.st.touch(ctx, tokenID, lastUsed)
	return p, expires, nil
}

// AuthenticateMany authenticates every token of toks in one statement, as
// Authenticate decides each (live, held by an active principal), and
// returns the principals of those that authenticate, keyed by the token;
// a token missing from the answer does not. It records no use (last_used_at
// is the business of requests): it serves the fan-out of subscriptions,
// which re-authenticates every listening connection at each commit.
//
// Errors: a database error (internal_error).
func (s *Service) AuthenticateMany(ctx context.Context, toks []string) (map[string]Principal, error) {
	hashes := make([][]byte, 0, len(toks))
	for _, tok := range toks {
		hashes = append(hashes, hashToken(tok))
	}
	held, err := s.st.tokenHolders(ctx, hashes)
	if err != nil {
		return nil, problem.Internal("identity.authenticateMany", fmt.Errorf("authenticate: %w", err))
	}
	out := make(map[string]Principal, len(held))
	for _, tok := range toks {
		if p, ok := held[string(hashToken(tok))]; ok && p.Active() {
			p.CreatedAt = p.CreatedAt.UTC()
			out[tok] = p
		}
	}
	return out, nil
}

// Clock returns the clock the service decides expiries by.
func (s *Service) Clock() clock.Clock { return s.st.clock }

type ctxKey struct{}

// WithPrincipal returns ctx carrying the authenticated principal p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// FromContext returns the authenticated principal of ctx, if any.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(ctxKey{}).(Principal)
	return p, ok
}

type tokenKey struct{}

// WithToken returns ctx carrying the clear-text token the request
// authenticated with, so that a long-running request (a long poll) can check
// on wake-up that its token still holds.
func WithToken(ctx context.Context, tok string) context.Context {
	return context.WithValue(ctx, tokenKey{}, tok)
}

// TokenFromContext returns the token of ctx, if any.
func TokenFromContext(ctx context.Context) (string, bool) {
	tok, ok := ctx.Value(tokenKey{}).(string)
	return tok, ok
}
