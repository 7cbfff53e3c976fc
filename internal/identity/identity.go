// Package identity owns principals (people, agents, apps), groups and
// tokens, and authenticates requests. Other modules see principals only
// through this package's service.
package identity

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	sq "github.com/Masterminds/squirrel"
	"github.com/jackc/pgx/v5"

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

// ErrNotFound is returned when a principal or token does not exist.
var ErrNotFound = errors.New("identity: not found")

var handleRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{1,31}$`)

// ValidHandle reports whether h is a valid handle.
func ValidHandle(h string) bool { return handleRE.MatchString(h) }

// Service is the identity module's service.
type Service struct {
	pool  db.Querier
	clock clock.Clock
}

// NewService returns the identity service over q (a pool) with clock c.
func NewService(q db.Querier, c clock.Clock) *Service { return &Service{pool: q, clock: c} }

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
func (s *Service) CreatePrincipal(ctx context.Context, np NewPrincipal) (Principal, error) {
	q := db.Q(ctx, s.pool)
	if err := CheckNew(np); err != nil {
		return Principal{}, err
	}
	status := np.Status
	if status == "" {
		status = StatusActive
	}
	p := Principal{ID: ids.New(), Kind: np.Kind, Handle: np.Handle, DisplayName: np.DisplayName,
		Email: np.Email, Status: status, IsOwner: np.IsOwner, CreatedAt: s.clock.Now().Truncate(time.Microsecond)}
	var email any
	if p.Email != "" {
		email = p.Email
	}
	sqlText, args := db.SQL.Insert("principals").
		Columns("id", "kind", "handle", "display_name", "email", "status", "is_owner", "created_at").
		Values(p.ID, p.Kind, p.Handle, p.DisplayName, email, p.Status, p.IsOwner, p.CreatedAt).MustSql()
	if _, err := q.Exec(ctx, sqlText, args...); err != nil {
		if db.IsUniqueViolation(err, "") {
			return Principal{}, problem.Newf(problem.Conflict, "handle_taken", "the handle is taken")
		}
		return Principal{}, fmt.Errorf("create principal: %w", err)
	}
	return p, nil
}

// columnsOf lists the principal columns, qualified by alias a when given.
func columnsOf(a string) []string {
	if a != "" {
		a += "."
	}
	return []string{a + "id", a + "kind", a + "handle", a + "display_name", "coalesce(" + a + "email, '')", a + "status", a + "is_owner", a + "created_at"}
}

var principalColumns = columnsOf("")

func scanPrincipal(row pgx.Row) (Principal, error) {
	var p Principal
	err := row.Scan(&p.ID, &p.Kind, &p.Handle, &p.DisplayName, &p.Email, &p.Status, &p.IsOwner, &p.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Principal{}, ErrNotFound
	}
	p.CreatedAt = p.CreatedAt.UTC()
	return p, err
}

// Get returns the principal with id, or ErrNotFound.
func (s *Service) Get(ctx context.Context, id string) (Principal, error) {
	if !ids.Valid(id) {
		return Principal{}, ErrNotFound
	}
	sqlText, args := db.SQL.Select(principalColumns...).From("principals").Where(sq.Eq{"id": id}).MustSql()
	return scanPrincipal(db.Q(ctx, s.pool).QueryRow(ctx, sqlText, args...))
}

// ByHandle returns the principal with handle h, or ErrNotFound.
func (s *Service) ByHandle(ctx context.Context, h string) (Principal, error) {
	sqlText, args := db.SQL.Select(principalColumns...).From("principals").Where(sq.Eq{"handle": strings.ToLower(h)}).MustSql()
	return scanPrincipal(db.Q(ctx, s.pool).QueryRow(ctx, sqlText, args...))
}

// GetMany returns the principals with the given ids in one statement, keyed
// by id; unknown ids are absent from the map. Dataloaders call it.
func (s *Service) GetMany(ctx context.Context, idList []string) (map[string]Principal, error) {
	q := db.Q(ctx, s.pool)
	valid := make([]string, 0, len(idList))
	for _, id := range idList {
		if ids.Valid(id) {
			valid = append(valid, id)
		}
	}
	out := make(map[string]Principal, len(valid))
	if len(valid) == 0 {
		return out, nil
	}
	sqlText, args := db.SQL.Select(principalColumns...).From("principals").Where("id = ANY(?::uuid[])", valid).MustSql()
	rows, err := q.Query(ctx, sqlText, args...)
	if err != nil {
		return nil, fmt.Errorf("load principals: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		p, err := scanPrincipal(rows)
		if err != nil {
			return nil, fmt.Errorf("load principals: %w", err)
		}
		out[p.ID] = p
	}
	return out, rows.Err()
}

// SetStatus changes the lifecycle state of principal id.
func (s *Service) SetStatus(ctx context.Context, id string, st Status) error {
	sqlText, args := db.SQL.Update("principals").Set("status", st).Where(sq.Eq{"id": id}).MustSql()
	tag, err := db.Q(ctx, s.pool).Exec(ctx, sqlText, args...)
	if err != nil {
		return fmt.Errorf("set principal status: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// Token prefixes make a token's kind readable (and greppable by secret
// scanners) without revealing anything else.
const (
	PrefixSession = "bothy_s_"
	PrefixAgent   = "bothy_a_"
	PrefixApp     = "bothy_p_"
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

// CreateToken issues a new token for principal p.
// The token has 32 random bytes after its kind prefix and is stored only as
// a SHA-256 hash. ttl of zero means no expiry; a negative ttl is a
// validation error.
func (s *Service) CreateToken(ctx context.Context, p Principal, label string, ttl time.Duration) (IssuedToken, error) {
	q := db.Q(ctx, s.pool)
	if err := ValidTTL(ttl, "/ttl"); err != nil {
		return IssuedToken{}, err
	}
	kind, prefix := tokenKind(p.Kind)
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return IssuedToken{}, fmt.Errorf("token randomness: %w", err)
	}
	tok := prefix + base64.RawURLEncoding.EncodeToString(raw[:])
	now := s.clock.Now().Truncate(time.Microsecond)
	it := IssuedToken{ID: ids.New(), Token: tok, Kind: kind, Label: label, CreatedAt: now.UTC()}
	var expires any
	if ttl > 0 {
		e := now.Add(ttl)
		it.ExpiresAt = &e
		expires = e
	}
	sqlText, args := db.SQL.Insert("tokens").
		Columns("id", "principal_id", "kind", "hash", "label", "expires_at", "created_at").
		Values(it.ID, p.ID, kind, hashToken(tok), label, expires, now).MustSql()
	if _, err := q.Exec(ctx, sqlText, args...); err != nil {
		return IssuedToken{}, fmt.Errorf("create token: %w", err)
	}
	return it, nil
}

// RevokeToken revokes the token with the given clear text. It returns
// ErrNotFound when no such token exists.
func (s *Service) RevokeToken(ctx context.Context, tok string) error {
	sqlText, args := db.SQL.Update("tokens").Set("revoked_at", s.clock.Now()).
		Where(sq.Eq{"hash": hashToken(tok)}).Where("revoked_at IS NULL").MustSql()
	tag, err := db.Q(ctx, s.pool).Exec(ctx, sqlText, args...)
	if err != nil {
		return fmt.Errorf("revoke token: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// Authenticate returns the active principal that holds token tok. A
// malformed, unknown, revoked or expired token, or a principal that is not
// active, gives unauthorized; the error never says which of these it was.
func (s *Service) Authenticate(ctx context.Context, tok string) (Principal, error) {
	if !strings.HasPrefix(tok, PrefixSession) && !strings.HasPrefix(tok, PrefixAgent) && !strings.HasPrefix(tok, PrefixApp) {
		return Principal{}, problem.New(problem.Unauthorized, "")
	}
	cols := append(columnsOf("p"), "t.id", "t.last_used_at")
	sqlText, args := db.SQL.Select(cols...).From("tokens t").Join("principals p ON p.id = t.principal_id").
		Where(sq.Eq{"t.hash": hashToken(tok)}).Where("t.revoked_at IS NULL").
		Where(sq.Or{sq.Expr("t.expires_at IS NULL"), sq.Gt{"t.expires_at": s.clock.Now()}}).MustSql()
	var p Principal
	var tokenID string
	var lastUsed *time.Time
	err := db.Q(ctx, s.pool).QueryRow(ctx, sqlText, args...).Scan(&p.ID, &p.Kind, &p.Handle, &p.DisplayName, &p.Email, &p.Status, &p.IsOwner, &p.CreatedAt,
		&tokenID, &lastUsed)
	if errors.Is(err, pgx.ErrNoRows) {
		return Principal{}, problem.New(problem.Unauthorized, "")
	}
	if err != nil {
		return Principal{}, problem.Internal("identity.authenticate", fmt.Errorf("authenticate: %w", err))
	}
	p.CreatedAt = p.CreatedAt.UTC()
	if !p.Active() {
		return Principal{}, problem.New(problem.Unauthorized, "")
	}
	s.touch(ctx, tokenID, lastUsed)
	return p, nil
}

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

// ByHandles returns the principals with the given handles in one
// statement, keyed by handle; unknown handles are absent.
func (s *Service) ByHandles(ctx context.Context, handles []string) (map[string]Principal, error) {
	q := db.Q(ctx, s.pool)
	out := map[string]Principal{}
	if len(handles) == 0 {
		return out, nil
	}
	sqlText, args := db.SQL.Select(principalColumns...).From("principals").Where("handle = ANY(?::text[])", handles).MustSql()
	rows, err := q.Query(ctx, sqlText, args...)
	if err != nil {
		return nil, fmt.Errorf("principals by handle: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		p, err := scanPrincipal(rows)
		if err != nil {
			return nil, err
		}
		out[p.Handle] = p
	}
	return out, rows.Err()
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
