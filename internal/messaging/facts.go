package messaging

import "context"

// The facts below are the run context's reads for the runs module, which
// decides the agent's right to each message itself (runs.Service.Context).
// They decide no right.

// ContextMessages returns the messages with the given ids (the triggering
// message and the thread's parent message) in one statement, keyed by id,
// tombstones as stored. The caller checks each with message.read.
func (s *Service) ContextMessages(ctx context.Context, idList []string) (map[string]ContextItem, error) {
	return s.st.ContextMessages(ctx, idList)
}

// ContextWindow returns the newest Limit selectable messages of q: never
// tombstones, never run anchors (UI, not conversation), never the excluded
// author; the limit counts only selectable messages. One statement over the
// unique index (thread_id, thread_seq), with HasOlder from one row more than
// the limit.
func (s *Service) ContextWindow(ctx context.Context, q ContextQuery) (ContextPage, error) {
	return s.st.ContextWindow(ctx, q)
}

// ContextMessagesAndWindow answers ContextMessages(idList) and
// ContextWindow(q) together in one statement (one round trip instead of
// two): a run context reads its triggering message and the thread window
// before it, and the run row already names where the trigger lies, so the
// window does not have to wait for the message. Where the window needs no
// rows (an empty range, or Limit 0) the two are read as before.
func (s *Service) ContextMessagesAndWindow(ctx context.Context, idList []string, q ContextQuery) (map[string]ContextItem, ContextPage, error) {
	return s.st.ContextMessagesAndWindow(ctx, idList, q)
}
