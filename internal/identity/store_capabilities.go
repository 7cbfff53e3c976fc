package identity

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/ids"
)

// capabilitiesOf reads the capabilities of principal id (none for an
// unknown one).
func (s *store) capabilitiesOf(ctx context.Context, id string) (Capabilities, error) {
	var c Capabilities
	err := db.Q(ctx, s.pool).QueryRow(ctx, `SELECT files_out FROM principals WHERE id = $1`, id).Scan(&c.FilesOut)
	if errors.Is(err, pgx.ErrNoRows) {
		return Capabilities{}, nil
	}
	return c, err
}

// capabilitiesOfMany reads the capabilities of the principals of list.
func (s *store) capabilitiesOfMany(ctx context.Context, list []string) (map[string]Capabilities, error) {
	rows, err := db.Q(ctx, s.pool).Query(ctx, `SELECT id::text, files_out FROM principals WHERE id = ANY($1::uuid[])`, ids.ArrayParam(list))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[string]Capabilities, len(list))
	for rows.Next() {
		var id string
		var c Capabilities
		if err := rows.Scan(&id, &c.FilesOut); err != nil {
			return nil, err
		}
		out[id] = c
	}
	return out, rows.Err()
}

// setCapabilities stores the capabilities of principal id.
func (s *store) setCapabilities(ctx context.Context, id string, c Capabilities) error {
	_, err := db.Q(ctx, s.pool).Exec(ctx, `UPDATE principals SET files_out = $2 WHERE id = $1`, id, c.FilesOut)
	return err
}
