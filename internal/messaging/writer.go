package messaging

import "context"

// Writer is messaging's raw writes: messages the server writes on its own
// behalf (a run's anchor, an approval card, an imported message) and a
// message's trigger state, without any right decided. A signature that
// takes a Writer says by its type that its caller decided the right
// already (the runs module for its runs, the conformance kit's setup).
// Only internal/modules makes one, at wiring (README.md#architecture).
type Writer struct{ s *Service }

// NewWriter returns the raw writer of s. Outside tests, only the wiring
// (internal/modules) calls it.
func NewWriter(s *Service) *Writer { return &Writer{s: s} }

// SetTrigger records the trigger decision on message id in the transaction of ctx.
func (w *Writer) SetTrigger(ctx context.Context, id string, state TriggerState, reason string) error {
	return w.s.st.SetTrigger(ctx, id, state, reason)
}
