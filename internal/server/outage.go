package server

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/httpx"
	"bothy.example.com/bothy/internal/platform/problem"
)

// outage turns database-unreachable errors into 503 unavailable answers
// with Retry-After, and logs one line when an outage starts and one when
// it ends instead of an error line per request. The end is found by
// pinging the pool once a second while the outage lasts; nothing needs a
// restart, the pool reconnects by itself.
type outage struct {
	pool       *db.Pool
	log        *slog.Logger
	retryAfter time.Duration

	mu    sync.Mutex
	since time.Time // zero while the database answers
	// ended is when the last outage ended: a request that came in before
	// it and fails for the database belongs to that outage (it may hold a
	// connection the restart ended), not to a new one.
	ended time.Time
}

func newOutage(pool *db.Pool, log *slog.Logger, retryAfter time.Duration) *outage {
	return &outage{pool: pool, log: log, retryAfter: retryAfter}
}

// classify returns err unchanged unless it is an internal error caused by
// an unreachable database; that becomes unavailable (reason
// database_unreachable) and notes the outage. The request's hints carry the
// wait so that both faces send Retry-After.
func (o *outage) classify(ctx context.Context, err error) error {
	p := problem.From("server.classify", err)
	if p == nil || p.Code != problem.InternalError || !db.Unreachable(p.Cause()) {
		return err
	}
	h := httpx.HintsFrom(ctx)
	o.begin(p.Cause(), h.Started)
	u := problem.Newf(problem.Unavailable, "database_unreachable", "the database does not answer; retry later")
	u.RetryAfter = o.retryAfter
	h.RetryAfter, h.Unavailable = o.retryAfter, true
	return u
}

// begin notes an outage seen by a request that came in at started (zero:
// unknown) unless one is noted already or the request came in before the
// last outage ended: its failure is a late echo of that outage.
func (o *outage) begin(cause error, started time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.since.IsZero() || (!started.IsZero() && started.Before(o.ended)) {
		return
	}
	o.since = time.Now()
	o.log.Error("database outage started: requests answer 503 unavailable until it answers again", "error", cause.Error())
	go o.watch()
}

// watch pings until the database answers, then logs the end.
func (o *outage) watch() {
	for {
		time.Sleep(time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := o.pool.Ping(ctx)
		cancel()
		if err != nil && strings.Contains(err.Error(), "closed pool") {
			return // the server is gone
		}
		if err == nil {
			// Connections opened before the outage may be dead (a restart
			// ends them) while the pool still holds them idle: drop them all,
			// so that the next request does not take one, fail and start a
			// second outage. Connections in use close when they come back.
			o.pool.Reset()
			o.mu.Lock()
			took := time.Since(o.since)
			o.since, o.ended = time.Time{}, time.Now()
			o.mu.Unlock()
			o.log.Info("database outage ended", "duration_ms", took.Milliseconds())
			return
		}
	}
}
