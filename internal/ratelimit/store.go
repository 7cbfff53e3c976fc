package ratelimit

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"bothy.example.com/bothy/internal/platform/db"
)

// store holds the SQL of the shared buckets. It runs on the pool, never on
// the transaction of a context (so not through db.Q): a spend must hold when
// the caller's unit rolls back, and a bucket row locked until a long unit
// commits would serialise every request of the principal.
type store struct{ pool db.Querier }

// takeSQL takes one token from a bucket in one atomic statement: it inserts
// a full bucket less one token, or refills the stored one by the elapsed
// time (never above burst, never by negative time when replica clocks
// differ) and takes one if a whole token is there. No row comes back when
// the bucket is empty.
const takeSQL = `INSERT INTO ratelimit_buckets AS b (key, tokens, updated_at)
VALUES ($1, $2::double precision - 1, $3)
ON CONFLICT (key) DO UPDATE SET
    tokens = LEAST($2::double precision, b.tokens + GREATEST(EXTRACT(EPOCH FROM ($3 - b.updated_at)), 0) * $4::double precision) - 1,
    updated_at = GREATEST(b.updated_at, $3)
WHERE LEAST($2::double precision, b.tokens + GREATEST(EXTRACT(EPOCH FROM ($3 - b.updated_at)), 0) * $4::double precision) >= 1
RETURNING tokens`

// errBucketEmpty is take's answer for a bucket without a whole token.
var errBucketEmpty = errors.New("ratelimit: bucket empty")

// levelSQL reads the tokens a bucket holds now, for the wait of a refusal.
const levelSQL = `SELECT LEAST($2::double precision, tokens + GREATEST(EXTRACT(EPOCH FROM ($3 - updated_at)), 0) * $4::double precision)
FROM ratelimit_buckets WHERE key = $1`

// take takes one token from the bucket key (burst tokens, refilled at
// perSecond) at now and returns what is left, or errBucketEmpty when the
// bucket is empty.
func (s *store) take(ctx context.Context, key string, burst float64, now time.Time, perSecond float64) (float64, error) {
	var left float64
	err := s.pool.QueryRow(ctx, takeSQL, key, burst, now, perSecond).Scan(&left)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, errBucketEmpty
	}
	return left, err
}

// level returns the tokens bucket key holds at now.
func (s *store) level(ctx context.Context, key string, burst float64, now time.Time, perSecond float64) (float64, error) {
	var level float64
	err := s.pool.QueryRow(ctx, levelSQL, key, burst, now, perSecond).Scan(&level)
	return level, err
}
