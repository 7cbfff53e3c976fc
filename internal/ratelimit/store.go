package ratelimit

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

// levelSQL reads the tokens a bucket holds now, for the wait of a refusal.
const levelSQL = `SELECT LEAST($2::double precision, tokens + GREATEST(EXTRACT(EPOCH FROM ($3 - updated_at)), 0) * $4::double precision)
FROM ratelimit_buckets WHERE key = $1`
