package authz

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	sq "github.com/Masterminds/squirrel"
	"github.com/jackc/pgx/v5"

	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/clock"
	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/ids"
)

// store holds the package's SQL, kept in an unexported field (st) of
// the service that decides what to write (the store convention: README.md#architecture).
type store struct {
	pool  db.Querier
	clock clock.Clock
}

// insertGrant stores g.
func (s *store) insertGrant(ctx context.Context, g NewGrant) (Grant, error) {
	q := db.Q(ctx, s.pool)
	now := s.clock.Now()
	out := Grant{ID: ids.New(), SubjectID: g.SubjectID, SubjectKind: g.SubjectKind, TargetKind: g.TargetKind, TargetID: g.TargetID,
		Level: g.Level, ExpiresAt: g.ExpiresAt, CreatedBy: g.CreatedBy, CreatedAt: now}
	cols := map[string]any{"id": out.ID, "level": g.Level.String(), "expires_at": g.ExpiresAt, "created_by": g.CreatedBy, "created_at": now}
	if g.SubjectKind == SubjectGroup {
		cols["subject_group_id"] = g.SubjectID
	} else {
		cols["subject_principal_id"] = g.SubjectID
	}
	if g.TargetKind == KindSpace {
		cols["target_space_id"] = g.TargetID
	} else {
		cols["target_channel_id"] = g.TargetID
	}
	sqlText, args := db.SQL.Insert("grants").SetMap(cols).MustSql()
	if _, err := q.Exec(ctx, sqlText, args...); err != nil {
		return Grant{}, fmt.Errorf("create grant: %w", err)
	}
	return out, nil
}

// GetGrant returns the grant with id, or ErrGrantNotFound.
func (s *store) GetGrant(ctx context.Context, id string) (Grant, error) {
	q := db.Q(ctx, s.pool)
	if !ids.Valid(id) {
		return Grant{}, ErrGrantNotFound
	}
	sqlText, args := db.SQL.Select(grantColumns...).From("grants").Where(sq.Eq{"id": id}).MustSql()
	return scanGrant(q.QueryRow(ctx, sqlText, args...))
}

// RevokeGrant sets revoked_at of grant id (once; a second revoke
// returns the grant unchanged).
func (s *store) RevokeGrant(ctx context.Context, id string) (Grant, error) {
	q := db.Q(ctx, s.pool)
	sqlText, args := db.SQL.Update("grants").Set("revoked_at", s.clock.Now()).Where(sq.Eq{"id": id}).Where("revoked_at IS NULL").MustSql()
	if _, err := q.Exec(ctx, sqlText, args...); err != nil {
		return Grant{}, fmt.Errorf("revoke grant: %w", err)
	}
	return s.GetGrant(ctx, id)
}

// GroupTargets returns, the spaces and channels named by the
// live grants (not revoked, not expired) of group groupID, each once.
func (s *store) GroupTargets(ctx context.Context, groupID string) (spaces, channels []string, err error) {
	q := db.Q(ctx, s.pool)
	rows, err := q.Query(ctx, `SELECT DISTINCT coalesce(target_space_id::text, ''), coalesce(target_channel_id::text, '') FROM grants
		WHERE subject_group_id = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $2) ORDER BY 1, 2`, groupID, s.clock.Now())
	if err != nil {
		return nil, nil, fmt.Errorf("group grant targets: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var sp, ch string
		if err := rows.Scan(&sp, &ch); err != nil {
			return nil, nil, fmt.Errorf("group grant targets: %w", err)
		}
		if sp != "" {
			spaces = append(spaces, sp)
		} else {
			channels = append(channels, ch)
		}
	}
	return spaces, channels, rows.Err()
}

// RevokeGroupGrants revokes every live grant of group groupID
// (when the group is deleted).
func (s *store) RevokeGroupGrants(ctx context.Context, groupID string) error {
	q := db.Q(ctx, s.pool)
	sqlText, args := db.SQL.Update("grants").Set("revoked_at", s.clock.Now()).
		Where(sq.Eq{"subject_group_id": groupID}).Where("revoked_at IS NULL").MustSql()
	if _, err := q.Exec(ctx, sqlText, args...); err != nil {
		return fmt.Errorf("revoke group grants: %w", err)
	}
	return nil
}

// DeleteOldAudit removes up to limit audit rows last seen before cutoff and
// returns how many it removed (the retention module calls it).
func (s *store) DeleteOldAudit(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	tag, err := db.Q(ctx, s.pool).Exec(ctx, `DELETE FROM audit_log WHERE id IN (
		SELECT id FROM audit_log WHERE last_at < $1 LIMIT $2)`, cutoff, limit)
	if err != nil {
		return 0, fmt.Errorf("delete old audit rows: %w", err)
	}
	return tag.RowsAffected(), nil
}

// grantsSQL reads the live grants (not revoked, not expired at $1) of the
// principals $2, held directly or through a group; grantsInSQL keeps those
// on the spaces $3 or the channels $4. Both shapes are fixed, so they are
// written once instead of built on every decision. Direct and group grants
// are read in two branches (a grant has exactly one subject), each through
// its index (grants_principal; group_members_principal, then grants_group),
// so that a decision reads the grants of its principals, not every live
// grant of the installation.
var grantsSQL, grantsInSQL = grantsStatement(""), grantsStatement(onTargets)

// grantCols are the columns of a grant in every grant statement.
const grantCols = `coalesce(g.target_space_id::text, ''), coalesce(g.target_channel_id::text, ''), g.level`

// onTargets keeps the grants on the spaces $3 or the channels $4, where
// most statements of this file take their targets.
var onTargets = targetsAt("$3", "$4")

// targetsAt keeps the grants on the spaces or the channels of two uuid[]
// placeholders.
func targetsAt(spaces, channels string) string {
	return ` AND (g.target_space_id = ANY(` + spaces + `::uuid[]) OR g.target_channel_id = ANY(` + channels + `::uuid[]))`
}

// grantRows is the relation (who, space, channel, level) of the grants
// live at now (a parameter, "$1" in this file's statements) of the
// principals whose id matches match (for example "= ANY($2::uuid[])"),
// direct and through a group, filtered by targets.
func grantRows(now, match, targets string) string {
	live := `g.revoked_at IS NULL AND (g.expires_at IS NULL OR g.expires_at > ` + now + `)`
	return `SELECT g.subject_principal_id AS who, ` + grantCols + ` FROM grants g
		WHERE g.subject_principal_id ` + match + ` AND ` + live + targets + `
		UNION ALL
		SELECT gm.principal_id, ` + grantCols + ` FROM group_memberships gm JOIN grants g ON g.subject_group_id = gm.group_id
		WHERE gm.principal_id ` + match + ` AND ` + live + targets
}

func grantsStatement(targets string) string {
	return `SELECT gr.who::text, gr.space, gr.channel, gr.level FROM (` + grantRows("$1", "= ANY($2::uuid[])", targets) + `) gr (who, space, channel, level)`
}

// GrantLevelOf is the grant level of actor on a resource from the levels
// read there with authz's shared SQL function grant_levels
// (migrations/00015_module_views.sql: the levels of the grants live at a
// time that a principal holds, directly or through a group, on a space or
// a channel; the rule of liveGrants, which TestGrantLevels compares with
// the door's own read): the highest of them, None for an inactive
// actor (who has no rights whatever the grants say; the door would not
// read them).
func GrantLevelOf(actor identity.Principal, levels []string) Level {
	l := None
	if !ActorOf(actor).Active {
		return l
	}
	for _, s := range levels {
		l = max(l, ParseLevel(s))
	}
	return l
}

// peopleSQL reads the principals $2 (identity's shared view
// principal_facts, scanned with identity.PrincipalRow) each beside its
// live grants on the spaces $3 or the channels $4, direct or through a
// group: one row per grant, or one row with no grant.
var peopleSQL = `SELECT p.*, g.space, g.channel, g.level FROM principal_facts p
	LEFT JOIN (` + grantRows("$1", "= ANY($2::uuid[])", onTargets) + `) g (who, space, channel, level) ON g.who = p.id
	WHERE p.id = ANY($2::uuid[])`

// peopleInSQL is peopleSQL for the principals a shared function of one
// uuid column names (fn, called with nargs parameters from $4) instead of
// a list: grants at $1 on the spaces $2 or the channels $3. The relation is
// read once (a CTE named three times is materialized).
func peopleInSQL(fn string, nargs int) string {
	params := make([]string, nargs)
	for i := range params {
		params[i] = "$" + strconv.Itoa(4+i)
	}
	return `WITH named (id) AS (SELECT * FROM ` + fn + `(` + strings.Join(params, ", ") + `))
	SELECT p.*, g.space, g.channel, g.level FROM principal_facts p
	LEFT JOIN (` + grantRows("$1", "IN (SELECT id FROM named)", targetsAt("$2", "$3")) + `) g (who, space, channel, level) ON g.who = p.id
	WHERE p.id IN (SELECT id FROM named)`
}

// peopleWithGrants reads the principals idList in one statement, each with
// its live grants on spaces or channels (one levelMap per principal).
// Unknown ids are left out.
func (s *store) peopleWithGrants(ctx context.Context, idList []string, spaces, channels []string) (map[string]identity.Principal, map[string]levelMap, error) {
	return s.scanPeople(ctx, db.Q(ctx, s.pool), peopleSQL, s.clock.Now(), ids.ArrayParam(idList), ids.ArrayParam(spaces), ids.ArrayParam(channels))
}

// peopleNamedWithGrants is peopleWithGrants for the principals the
// shared function fn names (called with args from $4), on the
// pool: it runs beside another statement of the same request, so it never
// joins a transaction of ctx.
func (s *store) peopleNamedWithGrants(ctx context.Context, fn string, args []any, spaces, channels []string) (map[string]identity.Principal, map[string]levelMap, error) {
	return s.scanPeople(ctx, s.pool, peopleInSQL(fn, len(args)), append([]any{s.clock.Now(), ids.ArrayParam(spaces), ids.ArrayParam(channels)}, args...)...)
}

// scanPeople runs a people statement (peopleSQL's columns) on q.
func (s *store) scanPeople(ctx context.Context, q db.Querier, sql string, args ...any) (map[string]identity.Principal, map[string]levelMap, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("people with grants: %w", err)
	}
	defer rows.Close()
	people := map[string]identity.Principal{}
	grants := map[string]levelMap{}
	var r identity.PrincipalRow
	var space, channel, level *string
	dest := append(r.Dest(), &space, &channel, &level)
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, nil, fmt.Errorf("people with grants: %w", err)
		}
		p := r.Principal()
		people[p.ID] = p
		if level == nil {
			continue
		}
		m, ok := grants[p.ID]
		if !ok {
			m = newLevelMap()
			grants[p.ID] = m
		}
		m.raise(*space, *channel, ParseLevel(*level))
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("people with grants: %w", err)
	}
	return people, grants, nil
}

// liveGrants reads, in one statement, the grants in force now (not revoked,
// not expired) of the given principals, directly or through their groups,
// and returns one levelMap per principal. With targets set only grants on
// those spaces or channels are read. It is the only place that says which
// grants count. Group membership is joined here, in the statement, through
// identity's shared view group_memberships, because every decision needs it and a second
// round trip per decision would cost more than it saves. It reads through
// the transaction of ctx when there is one (db.Q), so a decision inside a
// unit of work sees the unit's own grant changes.
func (s *store) liveGrants(ctx context.Context, principals []string, targets *struct{ spaces, channels []string }) (map[string]levelMap, error) {
	sqlText, args := grantsSQL, []any{s.clock.Now(), ids.ArrayParam(principals)}
	if targets != nil {
		sqlText, args = grantsInSQL, append(args, ids.ArrayParam(targets.spaces), ids.ArrayParam(targets.channels))
	}
	rows, err := db.Q(ctx, s.pool).Query(ctx, sqlText, args...)
	if err != nil {
		return nil, fmt.Errorf("grants: %w", err)
	}
	defer rows.Close()
	out := map[string]levelMap{}
	for rows.Next() {
		var who, space, channel, level string
		if err := rows.Scan(&who, &space, &channel, &level); err != nil {
			return nil, fmt.Errorf("grants: %w", err)
		}
		m, ok := out[who]
		if !ok {
			m = newLevelMap()
			out[who] = m
		}
		m.raise(space, channel, ParseLevel(level))
	}
	return out, rows.Err()
}

// auditAllow writes the audit row of one allow, with reason (empty but
// for what the server does by itself, WithAuditReason), at now. Like
// auditDeny it runs on the pool (db.OnPool, bounded like any statement of
// a request), never in the transaction of ctx: an audit row must hold
// when the caller's unit rolls back.
func (s *store) auditAllow(ctx context.Context, actorID string, action Action, reason string, kind ResourceKind, resID any, now time.Time) error {
	_, err := db.OnPool(ctx, s.pool).Exec(ctx, `INSERT INTO audit_log (id, actor_id, action, decision, reason, resource_kind, resource_id, window_start, count, first_at, last_at)
			VALUES ($1, $2, $3, 'allow', $4, $5, $6, $7, 1, $7, $7)`, ids.New(), actorID, string(action), reason, string(kind), resID, now)
	return err
}

// auditDeny counts one denial at now in the row of its actor, action,
// reason and window (which starts at start), on the pool (see auditAllow).
func (s *store) auditDeny(ctx context.Context, actorID string, action Action, reason string, kind ResourceKind, resID any, start, now time.Time) error {
	_, err := db.OnPool(ctx, s.pool).Exec(ctx, `INSERT INTO audit_log (id, actor_id, action, decision, reason, resource_kind, resource_id, window_start, count, first_at, last_at)
		VALUES ($1, $2, $3, 'deny', $4, $5, $6, $7, 1, $8, $8)
		ON CONFLICT (actor_id, action, reason, window_start) WHERE decision = 'deny'
		DO UPDATE SET count = audit_log.count + 1, last_at = EXCLUDED.last_at`,
		ids.New(), actorID, string(action), reason, string(kind), resID, start, now)
	return err
}

// auditPage reads at most limit audit rows matching f after the row
// (at, id) in (first_at, id) order (from the start when id is empty).
func (s *store) auditPage(ctx context.Context, f AuditFilter, at time.Time, id string, limit int) ([]AuditEntry, error) {
	q := db.SQL.Select("id::text", "actor_id::text", "action", "decision", "reason", "resource_kind", "coalesce(resource_id::text, '')",
		"count", "first_at", "last_at").From("audit_log").OrderBy("first_at", "id").Limit(uint64(limit))
	if id != "" {
		q = q.Where("(first_at, id) > (?, ?)", at, id)
	}
	if f.ActorID != "" {
		q = q.Where(sq.Eq{"actor_id": f.ActorID})
	}
	if f.Action != "" {
		q = q.Where(sq.Eq{"action": f.Action})
	}
	if f.Decision != "" {
		q = q.Where(sq.Eq{"decision": f.Decision})
	}
	if f.Since != nil {
		q = q.Where(sq.GtOrEq{"last_at": *f.Since})
	}
	if f.Until != nil {
		q = q.Where(sq.Lt{"first_at": *f.Until})
	}
	sqlText, args := q.MustSql()
	rows, err := db.Q(ctx, s.pool).Query(ctx, sqlText, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (AuditEntry, error) {
		var e AuditEntry
		err := r.Scan(&e.ID, &e.ActorID, &e.Action, &e.Decision, &e.Reason, &e.ResourceKind, &e.ResourceID, &e.Count, &e.FirstAt, &e.LastAt)
		e.FirstAt, e.LastAt = e.FirstAt.UTC(), e.LastAt.UTC()
		return e, err
	})
}

// AuditRows returns the audit rows of actor (all actors when empty).
func (s *store) AuditRows(ctx context.Context, actorID string) ([]AuditRow, error) {
	q := db.SQL.Select("actor_id", "action", "decision", "reason", "resource_kind", "count").From("audit_log").OrderBy("first_at", "id")
	if actorID != "" {
		q = q.Where(sq.Eq{"actor_id": actorID})
	}
	sqlText, args := q.MustSql()
	rows, err := db.Q(ctx, s.pool).Query(ctx, sqlText, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (AuditRow, error) {
		var a AuditRow
		err := r.Scan(&a.ActorID, &a.Action, &a.Decision, &a.Reason, &a.ResourceKind, &a.Count)
		return a, err
	})
}

var grantColumns = []string{"id", "coalesce(subject_principal_id, subject_group_id)", "CASE WHEN subject_group_id IS NULL THEN 'principal' ELSE 'group' END",
	"CASE WHEN target_space_id IS NULL THEN 'channel' ELSE 'space' END", "coalesce(target_space_id, target_channel_id)", "level",
	"expires_at", "created_by", "created_at", "revoked_at"}

func scanGrant(row pgx.Row) (Grant, error) {
	var g Grant
	var tk, lvl string
	err := row.Scan(&g.ID, &g.SubjectID, &g.SubjectKind, &tk, &g.TargetID, &lvl, &g.ExpiresAt, &g.CreatedBy, &g.CreatedAt, &g.RevokedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Grant{}, ErrGrantNotFound
	}
	g.TargetKind, g.Level = ResourceKind(tk), ParseLevel(lvl)
	return g, err
}
