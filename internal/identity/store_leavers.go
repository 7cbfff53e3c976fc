package identity

import (
	"context"
	"fmt"

	"bothy.example.com/bothy/internal/platform/db"
)

// revokeSessions revokes every live session of source oidc of principalID
// and returns how many it revoked; tokens an owner made are left alone.
func (s *store) revokeSessions(ctx context.Context, principalID string) (int, error) {
	tag, err := db.Q(ctx, s.pool).Exec(ctx, `UPDATE tokens SET revoked_at = $2
		WHERE principal_id = $1 AND source = 'oidc' AND kind = 'session' AND revoked_at IS NULL`, principalID, s.clock.Now())
	if err != nil {
		return 0, fmt.Errorf("revoke sign-in sessions: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// liveSessions returns which of ids are sessions of source oidc that are
// neither revoked nor expired, and whose principal is active.
func (s *store) liveSessions(ctx context.Context, ids []string) (map[string]bool, error) {
	rows, err := db.Q(ctx, s.pool).Query(ctx, `SELECT t.id::text FROM tokens t JOIN principals p ON p.id = t.principal_id
		WHERE t.id = ANY($1::uuid[]) AND t.source = 'oidc' AND t.revoked_at IS NULL AND t.expires_at > $2 AND p.status = 'active'`, ids, s.clock.Now())
	if err != nil {
		return nil, fmt.Errorf("live sessions: %w", err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("live sessions: %w", err)
		}
		out[id] = true
	}
	return out, rows.Err()
}

// revokeSignInSession revokes the live session of source oidc whose clear
// text is tok; ErrNotFound when there is none (other tokens included).
func (s *store) revokeSignInSession(ctx context.Context, tok string) error {
	tag, err := db.Q(ctx, s.pool).Exec(ctx, `UPDATE tokens SET revoked_at = $2
		WHERE hash = $1 AND source = 'oidc' AND kind = 'session' AND revoked_at IS NULL`, hashToken(tok), s.clock.Now())
	if err != nil {
		return fmt.Errorf("revoke sign-in session: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}
