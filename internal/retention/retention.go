// Package retention removes rows that have outlived their retention keys:
// client events (event_log), agent events of ended runs (agent_events),
// audit rows (audit_log) and revoked or expired tokens. Every replica runs
// it; the statements are idempotent, so replicas that purge at the same time
// only repeat each other's work. The statements belong to the tables'
// owners (events, authz, identity); retention decides when and how much.
package retention

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/clock"
	"bothy.example.com/bothy/internal/platform/db"
)

// Keep says how long each kind of row lives; zero keeps it forever.
type Keep struct {
	EventLog    time.Duration // retention.event_log
	AgentEvents time.Duration // retention.agent_events
	AuditLog    time.Duration // retention.audit_log
	Tokens      time.Duration // retention.tokens
}

// Removed counts the rows one purge removed.
type Removed struct {
	EventLog, AgentEvents, AuditLog, Tokens int64
	// Files counts the files (and orphan blobs) the files sweep deleted.
	Files int64
}

// FileSweeper deletes the files whose time is up (the files module:
// unattached past files.orphan_ttl, a deleted message's past
// files.deleted_ttl, blobs without a row).
type FileSweeper interface {
	Sweep(ctx context.Context) (int, error)
}

// Owners are the modules whose tables retention purges: the events log
// and the raw writers of authz and identity (retention decides by age
// alone; no right is involved).
type Owners struct {
	Events   *events.Log
	Authz    *authz.Writer
	Identity *identity.Writer
	// Files is swept on every purge; nil sweeps no files.
	Files FileSweeper
}

// Service purges.
type Service struct {
	db     *db.DB
	owners Owners
	clock  clock.Clock
	keep   Keep
	log    *slog.Logger
	// purged counts the rows removed, by kind (bothy_retention_purged_total).
	purged *prometheus.CounterVec
}

// New returns the purge over d, removing rows through their owners; reg
// receives bothy_retention_purged_total{kind}, every kind at zero from the
// start.
func New(d *db.DB, owners Owners, c clock.Clock, keep Keep, log *slog.Logger, reg prometheus.Registerer) *Service {
	purged := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bothy_retention_purged_total",
		Help: "Rows the retention purge removed, by kind (event_log, agent_events, audit_log, tokens, files)."}, []string{"kind"})
	for _, k := range []string{"event_log", "agent_events", "audit_log", "tokens", "files"} {
		purged.WithLabelValues(k).Add(0)
	}
	reg.MustRegister(purged)
	return &Service{db: d, owners: owners, clock: c, keep: keep, log: log, purged: purged}
}

// batch bounds the rows one statement removes, so that no purge holds long
// locks or a long transaction on a busy table.
const batch = 5000

// PurgeOnce removes every row past its retention at the clock's now and
// counts what it removed, also when a later kind fails.
func (s *Service) PurgeOnce(ctx context.Context) (r Removed, err error) {
	defer func() {
		for k, n := range map[string]int64{"event_log": r.EventLog, "agent_events": r.AgentEvents, "audit_log": r.AuditLog, "tokens": r.Tokens, "files": r.Files} {
			s.purged.WithLabelValues(k).Add(float64(n))
		}
	}()
	now := s.clock.Now()
	if s.keep.EventLog > 0 {
		if r.EventLog, err = s.purgeEventLog(ctx, now.Add(-s.keep.EventLog)); err != nil {
			return r, err
		}
	}
	if s.keep.AgentEvents > 0 {
		// Only events of runs that have ended: an agent never loses an event
		// it may still act on, however long it was away. (Events without a
		// run are kept.)
		cutoff := now.Add(-s.keep.AgentEvents)
		if r.AgentEvents, err = s.batched(ctx, func(ctx context.Context) (int64, error) {
			return s.owners.Events.DeleteAgentEvents(ctx, cutoff, batch)
		}); err != nil {
			return r, err
		}
	}
	if s.keep.AuditLog > 0 {
		cutoff := now.Add(-s.keep.AuditLog)
		if r.AuditLog, err = s.batched(ctx, func(ctx context.Context) (int64, error) {
			return s.owners.Authz.DeleteOldAudit(ctx, cutoff, batch)
		}); err != nil {
			return r, err
		}
	}
	if s.keep.Tokens > 0 {
		cutoff := now.Add(-s.keep.Tokens)
		if r.Tokens, err = s.batched(ctx, func(ctx context.Context) (int64, error) {
			return s.owners.Identity.DeleteOldTokens(ctx, cutoff, batch)
		}); err != nil {
			return r, err
		}
	}
	if s.owners.Files != nil {
		n, err := s.owners.Files.Sweep(ctx)
		r.Files = int64(n)
		if err != nil {
			return r, err
		}
	}
	return r, nil
}

// purgeEventLog removes the client events created before cutoff. The
// horizon moves first, in the same transaction as the first batch, so that
// no reader sees a gap without the cursor_expired answer.
func (s *Service) purgeEventLog(ctx context.Context, cutoff time.Time) (int64, error) {
	upto, err := s.owners.Events.ClientEventsBefore(ctx, cutoff)
	if err != nil || upto == 0 {
		return 0, err
	}
	var total int64
	for {
		var n int64
		err := s.db.InTx(ctx, func(ctx context.Context) error {
			if err := s.owners.Events.MoveHorizon(ctx, events.StreamClient, upto); err != nil {
				return err
			}
			var err error
			n, err = s.owners.Events.DeleteClientEvents(ctx, upto, batch)
			return err
		})
		if err != nil {
			return total, err
		}
		total += n
		if n < batch {
			return total, nil
		}
	}
}

// batched runs one batch of an owner's delete (each batch its own
// statement) until it removes fewer rows than a batch.
func (s *Service) batched(ctx context.Context, deleteBatch func(ctx context.Context) (int64, error)) (int64, error) {
	var total int64
	for {
		n, err := deleteBatch(ctx)
		if err != nil {
			return total, err
		}
		total += n
		if n < batch {
			return total, nil
		}
	}
}

// Run purges every interval until ctx ends, logging what it removed (counts
// only) and failures.
func (s *Service) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r, err := s.PurgeOnce(ctx)
			if err != nil && ctx.Err() == nil {
				s.log.ErrorContext(ctx, "retention purge failed", "error", err.Error())
			}
			if r != (Removed{}) {
				s.log.InfoContext(ctx, "retention purge", "event_log", r.EventLog, "agent_events", r.AgentEvents,
					"audit_log", r.AuditLog, "tokens", r.Tokens)
			}
		}
	}
}
