package identity

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	sq "github.com/Masterminds/squirrel"
	"github.com/jackc/pgx/v5"

	"bothy.example.com/bothy/internal/platform/clock"
	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/platform/problem"
)

// store holds the package's SQL, kept in an unexported field (st) of
// the service that decides what to write (the store convention: README.md#architecture).
type store struct {
	pool  db.Querier
	clock clock.Clock
}

// insertGroup stores a new, empty group named name.
func (s *store) insertGroup(ctx context.Context, name string) (Group, error) {
	q := db.Q(ctx, s.pool)
	g := Group{ID: ids.New(), Name: name, CreatedAt: s.clock.Now().Truncate(time.Microsecond).UTC(), Members: []string{}}
	if _, err := q.Exec(ctx, `INSERT INTO groups (id, name, created_at) VALUES ($1, $2, $3)`, g.ID, g.Name, g.CreatedAt); err != nil {
		return Group{}, nameTaken(fmt.Errorf("create group: %w", err))
	}
	return g, nil
}

// GetGroup returns the live group with id and its members, or
// ErrGroupNotFound.
func (s *store) GetGroup(ctx context.Context, id string) (Group, error) {
	q := db.Q(ctx, s.pool)
	if !ids.Valid(id) {
		return Group{}, ErrGroupNotFound
	}
	var g Group
	err := q.QueryRow(ctx, `SELECT id::text, name, created_at,
		coalesce((SELECT array_agg(principal_id::text ORDER BY principal_id) FROM group_members WHERE group_id = g.id), '{}')
		FROM groups g WHERE id = $1 AND deleted_at IS NULL`, id).Scan(&g.ID, &g.Name, &g.CreatedAt, &g.Members)
	if errors.Is(err, pgx.ErrNoRows) {
		return Group{}, ErrGroupNotFound
	}
	g.CreatedAt = g.CreatedAt.UTC()
	return g, err
}

// renameGroup stores name as the name of the live group id.
func (s *store) renameGroup(ctx context.Context, id, name string) error {
	q := db.Q(ctx, s.pool)
	if !ids.Valid(id) {
		return ErrGroupNotFound
	}
	tag, err := q.Exec(ctx, `UPDATE groups SET name = $2 WHERE id = $1 AND deleted_at IS NULL`, id, name)
	if err != nil {
		return nameTaken(fmt.Errorf("rename group: %w", err))
	}
	if tag.RowsAffected() == 0 {
		return ErrGroupNotFound
	}
	return nil
}

// DeleteGroup marks group id deleted and removes its members. The
// row stays so that grants that named it remain in the history; the caller
// revokes those grants in the same unit of work.
func (s *store) DeleteGroup(ctx context.Context, id string) error {
	q := db.Q(ctx, s.pool)
	if !ids.Valid(id) {
		return ErrGroupNotFound
	}
	tag, err := q.Exec(ctx, `UPDATE groups SET deleted_at = $2 WHERE id = $1 AND deleted_at IS NULL`, id, s.clock.Now())
	if err != nil {
		return fmt.Errorf("delete group: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrGroupNotFound
	}
	if _, err := q.Exec(ctx, `DELETE FROM group_members WHERE group_id = $1`, id); err != nil {
		return fmt.Errorf("delete group members: %w", err)
	}
	return nil
}

// RemoveMember takes principalID out of the live group id (removing a
// non-member changes nothing); a group that is not live, or a malformed
// id, is ErrGroupNotFound.
func (s *store) RemoveMember(ctx context.Context, id, principalID string) error {
	if !ids.Valid(id) {
		return ErrGroupNotFound
	}
	if !ids.Valid(principalID) {
		// Nobody holds a malformed id: no member to remove, but the
		// group must still be live.
		_, err := s.GetGroup(ctx, id)
		return err
	}
	var live bool
	err := db.Q(ctx, s.pool).QueryRow(ctx, `WITH g AS (SELECT id FROM groups WHERE id = $1 AND deleted_at IS NULL FOR SHARE),
		d AS (DELETE FROM group_members m USING g WHERE m.group_id = g.id AND m.principal_id = $2)
		SELECT EXISTS (SELECT 1 FROM g)`, id, principalID).Scan(&live)
	if err != nil {
		return fmt.Errorf("remove group member: %w", err)
	}
	if !live {
		return ErrGroupNotFound
	}
	return nil
}

// Get returns the principal with id, or ErrNotFound.
func (s *store) Get(ctx context.Context, id string) (Principal, error) {
	if !ids.Valid(id) {
		return Principal{}, ErrNotFound
	}
	sqlText, args := db.SQL.Select(principalColumns...).From("principals").Where(sq.Eq{"id": id}).MustSql()
	return scanPrincipal(db.Q(ctx, s.pool).QueryRow(ctx, sqlText, args...))
}

// ByHandle returns the principal with handle h, or ErrNotFound.
func (s *store) ByHandle(ctx context.Context, h string) (Principal, error) {
	sqlText, args := db.SQL.Select(principalColumns...).From("principals").Where(sq.Eq{"handle": strings.ToLower(h)}).MustSql()
	return scanPrincipal(db.Q(ctx, s.pool).QueryRow(ctx, sqlText, args...))
}

// GetMany returns the principals with the given ids in one statement, keyed
// by id; unknown ids are absent from the map. Dataloaders call it.
func (s *store) GetMany(ctx context.Context, idList []string) (map[string]Principal, error) {
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
	list, err := ids.ArrayText(valid)
	if err != nil {
		return nil, fmt.Errorf("load principals: %w", err)
	}
	rows, err := q.Query(ctx, principalsByIDSQL, list)
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
func (s *store) SetStatus(ctx context.Context, id string, st Status) error {
	if !ids.Valid(id) {
		return ErrNotFound
	}
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

// insertToken stores token it of principal principalID, as the hash of
// its clear text, created at now and expiring at expires (nil: never).
func (s *store) insertToken(ctx context.Context, it IssuedToken, principalID string, now time.Time, expires any) error {
	return s.insertBoundToken(ctx, it, principalID, now, expires, nil, nil)
}

// insertSession stores the session token it of principalID that a sign-in
// at the identity provider made (source oidc).
func (s *store) insertSession(ctx context.Context, it IssuedToken, principalID string, now time.Time, expires any) error {
	sqlText, args := db.SQL.Insert("tokens").
		Columns("id", "principal_id", "kind", "hash", "label", "expires_at", "created_at", "source").
		Values(it.ID, principalID, it.Kind, hashToken(it.Token), it.Label, expires, now, string(SourceOIDC)).MustSql()
	if _, err := db.Q(ctx, s.pool).Exec(ctx, sqlText, args...); err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	return nil
}

// principalByIdentity returns the principal linked to the account subject
// at issuer, or ErrNotFound.
func (s *store) principalByIdentity(ctx context.Context, issuer, subject string) (Principal, error) {
	sqlText, args := db.SQL.Select(columnsOf("p")...).From("principal_identities i").Join("principals p ON p.id = i.principal_id").
		Where(sq.Eq{"i.issuer": issuer, "i.subject": subject}).MustSql()
	return scanPrincipal(db.Q(ctx, s.pool).QueryRow(ctx, sqlText, args...))
}

// peopleByEmail returns the people (not deleted) whose address is email,
// compared without case.
func (s *store) peopleByEmail(ctx context.Context, email string) ([]Principal, error) {
	sqlText, args := db.SQL.Select(principalColumns...).From("principals").
		Where("kind = 'user' AND status <> 'deleted' AND lower(email) = lower(?)", email).OrderBy("id").MustSql()
	rows, err := db.Q(ctx, s.pool).Query(ctx, sqlText, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Principal
	for rows.Next() {
		var r PrincipalRow
		if err := rows.Scan(r.Dest()...); err != nil {
			return nil, err
		}
		out = append(out, r.Principal())
	}
	return out, rows.Err()
}

// insertIdentity links the account subject at issuer to principalID; a
// link that exists already is kept (two sign-ins raced).
func (s *store) insertIdentity(ctx context.Context, issuer, subject, principalID string, now time.Time) error {
	_, err := db.Q(ctx, s.pool).Exec(ctx, `INSERT INTO principal_identities (issuer, subject, principal_id, created_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (issuer, subject) DO NOTHING`, issuer, subject, principalID, now)
	if err != nil {
		return fmt.Errorf("link identity: %w", err)
	}
	return nil
}

// insertBoundToken stores it, bound to runID and holder when they are not
// nil (a run token).
func (s *store) insertBoundToken(ctx context.Context, it IssuedToken, principalID string, now time.Time, expires, runID, holder any) error {
	sqlText, args := db.SQL.Insert("tokens").
		Columns("id", "principal_id", "kind", "hash", "label", "expires_at", "created_at", "run_id", "run_holder").
		Values(it.ID, principalID, it.Kind, hashToken(it.Token), it.Label, expires, now, runID, holder).MustSql()
	if _, err := db.Q(ctx, s.pool).Exec(ctx, sqlText, args...); err != nil {
		return fmt.Errorf("create token: %w", err)
	}
	return nil
}

// RevokeToken revokes the token with the given clear text. It returns
// ErrNotFound when no such token exists.
func (s *store) RevokeToken(ctx context.Context, tok string) error {
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

// ByHandles returns the principals with the given handles in one
// statement, keyed by handle; unknown handles are absent.
func (s *store) ByHandles(ctx context.Context, handles []string) (map[string]Principal, error) {
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

// ListPrincipals returns up to limit principals with ids after the cursor
// after (empty: from the start), in id order (ids are time-ordered, so this
// is creation order). next is the cursor of the following page, empty when
// this page is the last.
func (s *store) ListPrincipals(ctx context.Context, after string, limit int) (list []Principal, next string, err error) {
	q := db.SQL.Select(principalColumns...).From("principals").OrderBy("id").Limit(uint64(limit + 1))
	if after != "" {
		q = q.Where(sq.Gt{"id": after})
	}
	sqlText, args := q.MustSql()
	rows, err := db.Q(ctx, s.pool).Query(ctx, sqlText, args...)
	if err != nil {
		return nil, "", fmt.Errorf("list principals: %w", err)
	}
	list, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Principal, error) { return scanPrincipal(r) })
	if err != nil {
		return nil, "", fmt.Errorf("list principals: %w", err)
	}
	if len(list) > limit {
		list = list[:limit]
		next = list[limit-1].ID
	}
	return list, next, nil
}

// HasOwner reports whether an active owner exists.
func (s *store) HasOwner(ctx context.Context) (bool, error) {
	var ok bool
	err := db.Q(ctx, s.pool).QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM principals WHERE kind = 'user' AND is_owner AND status = 'active')`).Scan(&ok)
	return ok, err
}

// CountPrincipals returns how many principals exist.
func (s *store) CountPrincipals(ctx context.Context) (int, error) {
	var n int
	err := db.Q(ctx, s.pool).QueryRow(ctx, `SELECT count(*) FROM principals`).Scan(&n)
	return n, err
}

func (s *store) getToken(ctx context.Context, id string) (TokenInfo, error) {
	q := db.Q(ctx, s.pool)
	if !ids.Valid(id) {
		return TokenInfo{}, ErrNotFound
	}
	sqlText, args := db.SQL.Select(tokenInfoColumns).From("tokens").Where(sq.Eq{"id": id}).Where(sq.NotEq{"kind": TokenRun}).MustSql()
	return scanTokenInfo(q.QueryRow(ctx, sqlText, args...))
}

// ListTokens returns the tokens of principal id, newest first, revoked and
// expired ones included (so that an owner sees what was issued). A
// malformed id holds no tokens, like an unknown one.
func (s *store) ListTokens(ctx context.Context, principalID string) ([]TokenInfo, error) {
	if !ids.Valid(principalID) {
		return []TokenInfo{}, nil
	}
	sqlText, args := db.SQL.Select(tokenInfoColumns).From("tokens").Where(sq.Eq{"principal_id": principalID}).Where(sq.NotEq{"kind": TokenRun}).
		OrderBy("created_at DESC", "id DESC").MustSql()
	rows, err := db.Q(ctx, s.pool).Query(ctx, sqlText, args...)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (TokenInfo, error) { return scanTokenInfo(r) })
}

// RevokeTokenByID revokes the token with id and returns it. Revoking a
// revoked token answers it unchanged.
func (s *store) RevokeTokenByID(ctx context.Context, id string) (TokenInfo, error) {
	if !ids.Valid(id) {
		return TokenInfo{}, ErrNotFound
	}
	q := db.Q(ctx, s.pool)
	// A run token is nobody's to revoke by id (it is never listed and ends
	// with its run): like getToken, the statement does not see it.
	sqlText, args := db.SQL.Update("tokens").Set("revoked_at", s.clock.Now()).
		Where(sq.Eq{"id": id}).Where(sq.NotEq{"kind": TokenRun}).Where("revoked_at IS NULL").MustSql()
	if _, err := q.Exec(ctx, sqlText, args...); err != nil {
		return TokenInfo{}, fmt.Errorf("revoke token: %w", err)
	}
	return s.getToken(ctx, id)
}

// touch records that token id was used now, at most once per
// LastUsedGranularity: the statement runs only when the stored time is
// older, and the condition in SQL keeps concurrent requests from writing
// twice.
func (s *store) touch(ctx context.Context, id string, last *time.Time) {
	now := s.clock.Now()
	if last != nil && now.Sub(*last) < LastUsedGranularity {
		return
	}
	// A failure to record the use must not fail the request it belongs to.
	_, _ = db.Q(ctx, s.pool).Exec(ctx, `UPDATE tokens SET last_used_at = $2 WHERE id = $1 AND (last_used_at IS NULL OR last_used_at <= $3)`,
		id, now, now.Add(-LastUsedGranularity))
}

// DeleteOldTokens removes up to limit tokens revoked or expired before
// cutoff, and run tokens minted before cutoff whose run is no longer
// active (they authenticate no more), and returns how many it removed
// (the retention module calls it).
func (s *store) DeleteOldTokens(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	tag, err := db.Q(ctx, s.pool).Exec(ctx, `DELETE FROM tokens WHERE id IN (
		SELECT id FROM tokens t WHERE t.revoked_at < $1 OR t.expires_at < $1
		OR (t.run_id IS NOT NULL AND t.created_at < $1 AND NOT EXISTS (SELECT 1 FROM active_runs ar WHERE ar.id = t.run_id)) LIMIT $2)`, cutoff, limit)
	if err != nil {
		return 0, fmt.Errorf("delete old tokens: %w", err)
	}
	return tag.RowsAffected(), nil
}

// columnsOf lists the principal columns, qualified by alias a when given.
func columnsOf(a string) []string {
	if a != "" {
		a += "."
	}
	return []string{a + "id", a + "kind", a + "handle", a + "display_name", "coalesce(" + a + "email, '')", a + "status", a + "is_owner", a + "created_at"}
}

var principalColumns = columnsOf("")

// PrincipalRow scans the columns of identity's shared view
// principal_facts (migrations/00015_module_views.sql), which a module
// reads beside its own rows in one statement (authz reading the authors of
// a run context beside their grants), and of identity's own principal
// reads. Identity owns principals; the view is the only shape others may
// use.
type PrincipalRow struct{ p Principal }

// Dest returns the scan destinations of the columns of principal_facts
// (SELECT *), in their order.
func (r *PrincipalRow) Dest() []any {
	return []any{&r.p.ID, &r.p.Kind, &r.p.Handle, &r.p.DisplayName, &r.p.Email, &r.p.Status, &r.p.IsOwner, &r.p.CreatedAt}
}

// Principal returns the principal just scanned, as GetMany returns it.
func (r *PrincipalRow) Principal() Principal {
	p := r.p
	p.CreatedAt = p.CreatedAt.UTC()
	return p
}

// principalsByIDSQL reads the principals with the ids of the array $1: a
// fixed shape, written once (a context read asks it for every author).
var principalsByIDSQL = `SELECT ` + strings.Join(principalColumns, ", ") + ` FROM principals WHERE id = ANY($1::uuid[])`

func scanPrincipal(row pgx.Row) (Principal, error) {
	var r PrincipalRow
	err := row.Scan(r.Dest()...)
	if errors.Is(err, pgx.ErrNoRows) {
		return Principal{}, ErrNotFound
	}
	return r.Principal(), err
}

func scanTokenInfo(row pgx.Row) (TokenInfo, error) {
	var t TokenInfo
	err := row.Scan(&t.ID, &t.PrincipalID, &t.Kind, &t.Label, &t.CreatedAt, &t.ExpiresAt, &t.LastUsedAt, &t.RevokedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return TokenInfo{}, ErrNotFound
	}
	t.CreatedAt = t.CreatedAt.UTC()
	for _, p := range []*time.Time{t.ExpiresAt, t.LastUsedAt, t.RevokedAt} {
		if p != nil {
			*p = p.UTC()
		}
	}
	return t, err
}

// insertMember puts principalID into the live group id (adding twice
// changes nothing); a group that is not live, or a malformed id, is
// ErrGroupNotFound. The group's row is share-locked by the same statement,
// so a concurrent DeleteGroup either waits for the member (and removes it)
// or has already made the group not live.
func (s *store) insertMember(ctx context.Context, id, principalID string) error {
	if !ids.Valid(id) {
		return ErrGroupNotFound
	}
	var live bool
	err := db.Q(ctx, s.pool).QueryRow(ctx, `WITH g AS (SELECT id FROM groups WHERE id = $1 AND deleted_at IS NULL FOR SHARE),
		ins AS (INSERT INTO group_members (group_id, principal_id) SELECT g.id, $2 FROM g ON CONFLICT DO NOTHING)
		SELECT EXISTS (SELECT 1 FROM g)`, id, principalID).Scan(&live)
	if err != nil {
		return fmt.Errorf("add group member: %w", err)
	}
	if !live {
		return ErrGroupNotFound
	}
	return nil
}

// insertPrincipal stores p; a taken or reserved handle answers 409
// handle_taken.
func (s *store) insertPrincipal(ctx context.Context, p Principal) error {
	if Reserved(p.Handle) {
		return problem.Newf(problem.Conflict, "handle_taken", "the handle is taken")
	}
	var email any
	if p.Email != "" {
		email = p.Email
	}
	sqlText, args := db.SQL.Insert("principals").
		Columns("id", "kind", "handle", "display_name", "email", "status", "is_owner", "created_at").
		Values(p.ID, p.Kind, p.Handle, p.DisplayName, email, p.Status, p.IsOwner, p.CreatedAt).MustSql()
	if _, err := db.Q(ctx, s.pool).Exec(ctx, sqlText, args...); err != nil {
		if db.IsUniqueViolation(err, "") {
			return problem.Newf(problem.Conflict, "handle_taken", "the handle is taken")
		}
		return fmt.Errorf("create principal: %w", err)
	}
	return nil
}

// tokenHolder returns the principal holding the live token (not revoked,
// not expired, and for a run token: its run active) whose hash is hash,
// with the token's id and last use, or ErrNotFound. A run token's
// principal carries its run, thread and holder.
func (s *store) tokenHolder(ctx context.Context, hash []byte) (p Principal, tokenID string, lastUsed, expires *time.Time, err error) {
	cols := append(append(columnsOf("p"), runTokenColumns...), "t.id", "t.last_used_at", "t.expires_at")
	sqlText, args := liveTokens(cols).Where(sq.Eq{"t.hash": hash}).Where(s.unexpired()).MustSql()
	err = db.Q(ctx, s.pool).QueryRow(ctx, sqlText, args...).Scan(&p.ID, &p.Kind, &p.Handle, &p.DisplayName, &p.Email, &p.Status, &p.IsOwner, &p.CreatedAt,
		&p.RunID, &p.RunThreadID, &p.RunHolder, &tokenID, &lastUsed, &expires)
	if errors.Is(err, pgx.ErrNoRows) {
		err = ErrNotFound
	}
	return p, tokenID, lastUsed, expires, err
}

// runTokenColumns are a run token's run, thread and holder (empty for
// every other token).
var runTokenColumns = []string{"coalesce(ar.id::text, '')", "coalesce(ar.thread_id::text, '')", "coalesce(t.run_holder, '')"}

// liveTokens selects cols from the tokens that are not revoked, with their
// principals; a run token only while its run is active. active_runs is the
// runs module's view of the active runs (migrations/00012_run_tokens.sql):
// the one place identity learns of runs.
func liveTokens(cols []string) sq.SelectBuilder {
	return db.SQL.Select(cols...).From("tokens t").Join("principals p ON p.id = t.principal_id").
		LeftJoin("active_runs ar ON ar.id = t.run_id").
		Where("t.revoked_at IS NULL").Where("(t.run_id IS NULL OR ar.id IS NOT NULL)")
}

// unexpired is the predicate of a token that has not expired by the
// service's clock.
func (s *store) unexpired() sq.Sqlizer {
	return sq.Or{sq.Expr("t.expires_at IS NULL"), sq.Gt{"t.expires_at": s.clock.Now()}}
}

// tokenHolders returns the principals holding the live tokens among hashes
// (as tokenHolder decides each), keyed by the hash as a string, in one
// statement.
func (s *store) tokenHolders(ctx context.Context, hashes [][]byte) (map[string]Principal, error) {
	cols := append(append(columnsOf("p"), runTokenColumns...), "t.hash")
	sqlText, args := liveTokens(cols).Where("t.hash = ANY(?)", hashes).Where(s.unexpired()).MustSql()
	rows, err := db.Q(ctx, s.pool).Query(ctx, sqlText, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]Principal{}
	for rows.Next() {
		var p Principal
		var hash []byte
		if err := rows.Scan(&p.ID, &p.Kind, &p.Handle, &p.DisplayName, &p.Email, &p.Status, &p.IsOwner, &p.CreatedAt,
			&p.RunID, &p.RunThreadID, &p.RunHolder, &hash); err != nil {
			return nil, err
		}
		out[string(hash)] = p
	}
	return out, rows.Err()
}

// lockOwners locks the rows of the active owners (in id order) for the
// transaction of ctx and returns their ids.
func (s *store) lockOwners(ctx context.Context) ([]string, error) {
	rows, err := db.Q(ctx, s.pool).Query(ctx, `SELECT id::text FROM principals WHERE kind = 'user' AND is_owner AND status = 'active' ORDER BY id FOR UPDATE`)
	if err != nil {
		return nil, fmt.Errorf("lock owners: %w", err)
	}
	owners, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("lock owners: %w", err)
	}
	return owners, nil
}

// lockPrincipal reads principal id and locks its row for the transaction
// of ctx.
func (s *store) lockPrincipal(ctx context.Context, id string) (Principal, error) {
	sqlText, args := db.SQL.Select(principalColumns...).From("principals").Where(sq.Eq{"id": id}).Suffix("FOR UPDATE").MustSql()
	return scanPrincipal(db.Q(ctx, s.pool).QueryRow(ctx, sqlText, args...))
}

// writePrincipal stores the name, email, status and owner flag of p.
func (s *store) writePrincipal(ctx context.Context, p Principal) error {
	var email any
	if p.Email != "" {
		email = p.Email
	}
	sqlText, args := db.SQL.Update("principals").Set("display_name", p.DisplayName).Set("email", email).
		Set("status", p.Status).Set("is_owner", p.IsOwner).Where(sq.Eq{"id": p.ID}).MustSql()
	if _, err := db.Q(ctx, s.pool).Exec(ctx, sqlText, args...); err != nil {
		return fmt.Errorf("update principal: %w", err)
	}
	return nil
}
