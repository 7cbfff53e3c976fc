package events

import (
	"context"
	"time"
)

// The reads and writes below are the log's own: the events module decides
// no right (it records what a module's use case did and hands it back by
// sequence), so the Log itself is the capability, held by the modules that
// append to it or read it for a reader their door allowed.

// AgentAfter returns up to limit events of agent's stream after seq after.
func (l *Log) AgentAfter(ctx context.Context, agentID string, after int64, limit int) ([]Event, error) {
	return l.st.AgentAfter(ctx, agentID, after, limit)
}

// Tombstone replaces the payload of every earlier event of message id with
// payload (the tombstone representation), so that deleted content leaves
// the event log too.
func (l *Log) Tombstone(ctx context.Context, messageID string, payload map[string]any) error {
	return l.st.Tombstone(ctx, messageID, payload)
}

// AfterIn returns up to limit client events with seq above after, oldest
// first, of the given channels or threads, or about the given spaces as a
// whole (every event when all is set): the visibility predicate of
// listEvents.
func (l *Log) AfterIn(ctx context.Context, after int64, limit int, all bool, channels, threads, spaces []string) ([]Event, error) {
	return l.st.AfterIn(ctx, after, limit, all, channels, threads, spaces)
}

// End returns the highest committed client event seq (0 for an empty log):
// where a subscription without a cursor starts.
func (l *Log) End(ctx context.Context) (int64, error) {
	return l.st.End(ctx)
}

// AgentEnd returns the highest committed agent event seq (0 for an empty
// stream): the end of every agent's stream, since seqs are shared by all
// agents and commit in order.
func (l *Log) AgentEnd(ctx context.Context) (int64, error) {
	return l.st.AgentEnd(ctx)
}

// WakeStreams schedules in the transaction of ctx a notification (sent at
// commit) that wakes every waiting long poll and subscription on every
// replica, with no new event: they re-check their token and principal
// (after a revocation or a disabled principal) and answer or close.
func (l *Log) WakeStreams(ctx context.Context) error {
	return l.st.WakeStreams(ctx)
}

// Horizon returns the highest seq that retention removed from stream (0
// when nothing was removed): a cursor below it has lost events.
func (l *Log) Horizon(ctx context.Context, stream string) (int64, error) {
	return l.st.Horizon(ctx, stream)
}

// ClientEventsBefore returns the highest client event seq created before
// cutoff (0 when there is none).
func (l *Log) ClientEventsBefore(ctx context.Context, cutoff time.Time) (int64, error) {
	return l.st.ClientEventsBefore(ctx, cutoff)
}

// MoveHorizon raises the retention horizon of stream to seq (never lowers
// it): readers behind it get cursor_expired instead of a silent gap.
func (l *Log) MoveHorizon(ctx context.Context, stream string, seq int64) error {
	return l.st.MoveHorizon(ctx, stream, seq)
}

// DeleteClientEvents removes up to limit client events with seq <= upto,
// oldest first, and returns how many it removed.
func (l *Log) DeleteClientEvents(ctx context.Context, upto int64, limit int) (int64, error) {
	return l.st.DeleteClientEvents(ctx, upto, limit)
}

// DeleteAgentEvents removes up to limit agent events created before cutoff
// whose run has ended (the runs module's shared view ended_runs,
// migrations/00015_module_views.sql): an agent never loses an event it may
// still act on. Events without a run, or of a run that does not exist, are
// kept.
func (l *Log) DeleteAgentEvents(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	return l.st.DeleteAgentEvents(ctx, cutoff, limit)
}
