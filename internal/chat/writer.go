package chat

import "context"

// Writer is chat's raw writes: spaces, channels and threads created,
// renamed, archived, moved, locked and numbered without any right decided.
// A signature that takes a Writer says by its type that its caller has
// decided the right already (admin's owner check, messaging's door call,
// the example world's setup). Only internal/modules makes one, at wiring,
// for the modules that need it (README.md#architecture).
type Writer struct{ s *Service }

// NewWriter returns the raw writer of s. Outside tests, only the wiring
// (internal/modules) calls it.
func NewWriter(s *Service) *Writer { return &Writer{s: s} }

// SetDefaultOperator sets (or, with an empty agentID, clears) the default
// operator agent of space id in the transaction of ctx.
func (w *Writer) SetDefaultOperator(ctx context.Context, id, agentID string) error {
	return w.s.st.SetDefaultOperator(ctx, id, agentID)
}

// UnarchiveSpace clears archived_at of space id in the transaction of ctx.
func (w *Writer) UnarchiveSpace(ctx context.Context, id string) error {
	return w.s.st.UnarchiveSpace(ctx, id)
}

// UnarchiveChannel clears archived_at of channel id in the transaction of ctx.
func (w *Writer) UnarchiveChannel(ctx context.Context, id string) error {
	return w.s.st.UnarchiveChannel(ctx, id)
}

// LockThread returns the thread with id locked FOR UPDATE in the transaction of ctx. Writers of
// one thread serialise on this row lock, which keeps thread_seq gap-free.
func (w *Writer) LockThread(ctx context.Context, id string) (Thread, error) {
	return w.s.st.LockThread(ctx, id)
}

// NextSeq raises the thread's last_seq by one in the transaction of ctx and returns it. The
// caller holds the thread's row lock (LockThread); a rollback returns the
// number, so committed messages have no gaps.
func (w *Writer) NextSeq(ctx context.Context, threadID string) (int64, error) {
	return w.s.st.NextSeq(ctx, threadID)
}

// SetState sets the thread's state (open or done) in the transaction of ctx.
func (w *Writer) SetState(ctx context.Context, threadID string, state ThreadState) error {
	return w.s.st.SetState(ctx, threadID, state)
}

// TryLockThread locks thread id for the rest of the transaction of ctx
// unless another transaction holds it; it reports whether it got the lock
// (false for an unknown thread too).
func (w *Writer) TryLockThread(ctx context.Context, id string) (bool, error) {
	return w.s.st.TryLockThread(ctx, id)
}

// DropAutoTitle removes the auto title that came from message messageID,
// which was deleted: the title of the thread whose parent it is, or, when
// first is set (the message is the first of thread threadID), of that
// thread when it has no parent.
func (w *Writer) DropAutoTitle(ctx context.Context, messageID, threadID string, first bool) error {
	return w.s.st.DropAutoTitle(ctx, messageID, threadID, first)
}

// MoveThread sets the thread's channel in the transaction of ctx. parent_message_id keeps
// pointing into the source channel.
func (w *Writer) MoveThread(ctx context.Context, threadID, channelID string) error {
	return w.s.st.MoveThread(ctx, threadID, channelID)
}

// SetOperator sets the operator mode (and agent for mode agent) of a channel.
func (w *Writer) SetOperator(ctx context.Context, channelID string, mode OperatorMode, agentID string) error {
	return w.s.st.SetOperator(ctx, channelID, mode, agentID)
}

// ArchiveChannel sets archived_at of the channel (once).
func (w *Writer) ArchiveChannel(ctx context.Context, id string) error {
	return w.s.st.ArchiveChannel(ctx, id)
}

// ArchiveSpace sets archived_at of the space (once).
func (w *Writer) ArchiveSpace(ctx context.Context, id string) error {
	return w.s.st.ArchiveSpace(ctx, id)
}
