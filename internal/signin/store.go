package signin

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/problem"
)

// attempt is a sign-in between its two requests.
type attempt struct {
	verifier, nonce string
}

// saveAttempt stores the attempt named state, and drops the attempts older
// than attemptTTL (abandoned sign-ins), so that the table stays small
// without a sweeper of its own.
func (s *Service) saveAttempt(ctx context.Context, state, verifier, nonce string) error {
	q := db.Q(ctx, s.pool)
	now := s.clock.Now()
	if _, err := q.Exec(ctx, `DELETE FROM signin_attempts WHERE created_at < $1`, now.Add(-attemptTTL)); err != nil {
		return fmt.Errorf("drop old sign-in attempts: %w", err)
	}
	if _, err := q.Exec(ctx, `INSERT INTO signin_attempts (state, verifier, nonce, created_at) VALUES ($1, $2, $3, $4)`,
		state, verifier, nonce, now); err != nil {
		return fmt.Errorf("store sign-in attempt: %w", err)
	}
	return nil
}

// takeAttempt removes and returns the attempt named state: once, and
// within attemptTTL of its start. Anything else (no state, an unknown,
// used or old one) is invalid input on state.
func (s *Service) takeAttempt(ctx context.Context, state string) (attempt, error) {
	invalid := problem.Invalid(problem.FieldError{Pointer: "state", Code: "invalid_state",
		Detail: "this sign-in is unknown, used or older than ten minutes: start again"})
	if state == "" || len(state) > 200 {
		return attempt{}, invalid
	}
	var a attempt
	err := db.Q(ctx, s.pool).QueryRow(ctx, `DELETE FROM signin_attempts WHERE state = $1 AND created_at >= $2 RETURNING verifier, nonce`,
		state, s.clock.Now().Add(-attemptTTL)).Scan(&a.verifier, &a.nonce)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return attempt{}, invalid
	case err != nil:
		return attempt{}, problem.Internal("signin.takeAttempt", err)
	}
	return a, nil
}
