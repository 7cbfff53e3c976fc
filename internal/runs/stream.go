package runs

import (
	"context"
	"time"

	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/runs/stream"
)

// The agent's event stream (the long poll, the acknowledgement, the
// subscription's steps and the wake-up hub) lives in
// internal/runs/stream; these names keep runs' API as it was.

// PollLimit bounds the events one poll hands out (stream.PollLimit).
const PollLimit = stream.PollLimit

// CursorNow is the cursor that names the current end of the stream
// (stream.CursorNow).
const CursorNow = stream.CursorNow

// Page is a page of an agent's stream (stream.Page).
type Page = stream.Page

// Hub wakes long polls of this process when any replica commits agent
// events (stream.Hub).
type Hub = stream.Hub

// Waiters is what a test observes of the long polls of one process
// (stream.Waiters).
type Waiters = stream.Waiters

// Connect opens the dedicated LISTEN connection (database.listen_url;
// stream.Connect).
type Connect = stream.Connect

// NewHub returns a hub with no listener yet (stream.NewHub).
func NewHub() *Hub { return stream.NewHub() }

// Poll returns the events of actor's own stream after the cursor after
// (agent.events.poll: agents only), waiting up to wait for the first one
// (stream.Service.Poll).
func (s *Service) Poll(ctx context.Context, actor identity.Principal, after string, wait time.Duration) (Page, error) {
	return s.stream.Poll(ctx, actor, after, wait)
}

// PollFirst is Poll handing out at most first events (1 to PollLimit;
// stream.Service.PollFirst).
func (s *Service) PollFirst(ctx context.Context, actor identity.Principal, after string, wait time.Duration, first int) (Page, error) {
	return s.stream.PollFirst(ctx, actor, after, wait, first)
}

// Ack stores that actor processed its stream up to upTo
// (agent.events.ack), delivering the follow-ups it acknowledges, and
// returns the stored position (stream.Service.Ack).
func (s *Service) Ack(ctx context.Context, actor identity.Principal, upTo string) (string, error) {
	return s.stream.Ack(ctx, actor, upTo)
}

// Hub returns the wake-up hub of this process: subscriptions wait on it
// like long polls do.
func (s *Service) Hub() *Hub { return s.stream.Hub() }

// StreamStart checks that actor may read its own stream and resolves the
// cursor of a subscription (stream.Service.StreamStart).
func (s *Service) StreamStart(ctx context.Context, actor identity.Principal, after string) (int64, error) {
	return s.stream.StreamStart(ctx, actor, after)
}

// StreamNext returns up to limit events of actor's stream after cursor,
// without waiting (stream.Service.StreamNext).
func (s *Service) StreamNext(ctx context.Context, actor identity.Principal, cursor int64, limit int) ([]events.Event, error) {
	return s.stream.StreamNext(ctx, actor, cursor, limit)
}

// deliverAcked is the runs module's half of an acknowledgement
// (stream.Deliver): it delivers, at now, the pending follow-ups whose
// agent.followup events of agentID lie after from up to to.
func (s *Service) deliverAcked(ctx context.Context, agentID string, from, to int64, now time.Time) error {
	// Delivery and a run's end serialise on the run row: a follow-up
	// is either delivered in its run or promoted after it, never both
	// (docs/design/runs.md#fencing). The lock is its own statement, so
	// that the delivery below reads the follow-ups as the end left them.
	if err := s.st.lockAckedRuns(ctx, agentID, from, to); err != nil {
		return problem.Internal("runs.ack: lock acked runs", err)
	}
	if err := s.st.deliverAcked(ctx, agentID, from, to, now); err != nil {
		return problem.Internal("runs.ack: deliver follow-ups", err)
	}
	return nil
}
