package chat

import (
	"context"

	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/ids"
)

// StartedThreadIDs returns, for each of messageIDs that started a thread
// (the thread's parent message), the id of that thread, in one statement.
// Messages that started none are absent from the map. It decides nothing
// about visibility: callers read each thread through UseCases.Thread.
func (s *Service) StartedThreadIDs(ctx context.Context, messageIDs []string) (map[string]string, error) {
	valid := make([]string, 0, len(messageIDs))
	for _, id := range messageIDs {
		if ids.Valid(id) {
			valid = append(valid, id)
		}
	}
	out := make(map[string]string, len(valid))
	if len(valid) == 0 {
		return out, nil
	}
	rows, err := db.Q(ctx, s.pool).Query(ctx, `SELECT parent_message_id::text, id::text FROM threads WHERE parent_message_id = ANY($1::uuid[])`, valid)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var msg, thread string
		if err := rows.Scan(&msg, &thread); err != nil {
			return nil, err
		}
		out[msg] = thread
	}
	return out, rows.Err()
}
