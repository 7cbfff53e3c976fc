package authz

import (
	"context"
	"errors"
	"fmt"
	"time"

	sq "github.com/Masterminds/squirrel"
	"github.com/jackc/pgx/v5"

	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/platform/problem"
)

// SubjectKind says whether a grant's subject is a principal or a group (the
// GraphQL enum SubjectKind binds to it).
type SubjectKind string

// The subject kinds.
const (
	SubjectPrincipal SubjectKind = "principal"
	SubjectGroup     SubjectKind = "group"
)

// Grant is a stored grant.
type Grant struct {
	ID          string
	SubjectID   string
	SubjectKind SubjectKind
	TargetKind  ResourceKind
	TargetID    string
	Level       Level
	ExpiresAt   *time.Time
	CreatedBy   string
	CreatedAt   time.Time
	RevokedAt   *time.Time
}

// NewGrant describes a grant to store.
type NewGrant struct {
	SubjectID   string
	SubjectKind SubjectKind
	// SubjectIsPersonOrGroup is false for agents and apps, which can hold at
	// most write.
	SubjectIsPersonOrGroup bool
	TargetKind             ResourceKind
	TargetID               string
	Level                  Level
	ExpiresAt              *time.Time
	CreatedBy              string
}

// ErrGrantNotFound is returned for an unknown grant.
var ErrGrantNotFound = errors.New("authz: grant not found")

// CreateGrant stores g. Agents and apps can hold at most write;
// a higher level is a validation error on /level.
func (s *Service) CreateGrant(ctx context.Context, g NewGrant) (Grant, error) {
	q := db.Q(ctx, s.pool)
	if !g.SubjectIsPersonOrGroup && g.Level > Write {
		return Grant{}, problem.Invalid(problem.FieldError{Pointer: "/level", Code: "invalid_value", Detail: "agents and apps can hold at most write"})
	}
	if g.Level < Read {
		return Grant{}, problem.Invalid(problem.FieldError{Pointer: "/level", Code: "invalid_enum"})
	}
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

// GetGrant returns the grant with id, or ErrGrantNotFound.
func (s *Service) GetGrant(ctx context.Context, id string) (Grant, error) {
	q := db.Q(ctx, s.pool)
	if !ids.Valid(id) {
		return Grant{}, ErrGrantNotFound
	}
	sqlText, args := db.SQL.Select(grantColumns...).From("grants").Where(sq.Eq{"id": id}).MustSql()
	return scanGrant(q.QueryRow(ctx, sqlText, args...))
}

// RevokeGrant sets revoked_at of grant id (once; a second revoke
// returns the grant unchanged).
func (s *Service) RevokeGrant(ctx context.Context, id string) (Grant, error) {
	q := db.Q(ctx, s.pool)
	sqlText, args := db.SQL.Update("grants").Set("revoked_at", s.clock.Now()).Where(sq.Eq{"id": id}).Where("revoked_at IS NULL").MustSql()
	if _, err := q.Exec(ctx, sqlText, args...); err != nil {
		return Grant{}, fmt.Errorf("revoke grant: %w", err)
	}
	return s.GetGrant(ctx, id)
}

// GrantPath is the path of a grant: the path of its target, so that only
// readers of the target learn that the grant exists.
func (s *Service) GrantPath(ctx context.Context, id string) (Path, error) {
	g, err := s.GetGrant(ctx, id)
	if errors.Is(err, ErrGrantNotFound) {
		return Path{Kind: KindGrant, ID: id}, nil
	}
	if err != nil {
		return Path{}, err
	}
	p, err := s.PathOf(ctx, Resource{Kind: g.TargetKind, ID: g.TargetID})
	if err != nil {
		return Path{}, err
	}
	p.Kind, p.ID = KindGrant, id
	return p, nil
}

// Path implements Source for grants.
func (s *Service) Path(ctx context.Context, kind ResourceKind, id string) (Path, error) {
	return s.GrantPath(ctx, id)
}

// GroupTargets returns, the spaces and channels named by the
// live grants (not revoked, not expired) of group groupID, each once.
func (s *Service) GroupTargets(ctx context.Context, groupID string) (spaces, channels []string, err error) {
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
func (s *Service) RevokeGroupGrants(ctx context.Context, groupID string) error {
	q := db.Q(ctx, s.pool)
	sqlText, args := db.SQL.Update("grants").Set("revoked_at", s.clock.Now()).
		Where(sq.Eq{"subject_group_id": groupID}).Where("revoked_at IS NULL").MustSql()
	if _, err := q.Exec(ctx, sqlText, args...); err != nil {
		return fmt.Errorf("revoke group grants: %w", err)
	}
	return nil
}
