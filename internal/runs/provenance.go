package runs

import (
	"context"
	"errors"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/trust"
)

// AnswerProvenance decides the provenance of what agent writes in its run
// runID now (an answer, or an approval's card; docs/design/trust.md#provenance):
// the lowest of the run context's trust summary, read live as the agent
// would read it (follow-ups included), self, and what the agent declares
// (declared; "" for nothing). A declaration can only lower it. A run the
// agent cannot answer in (unknown, another agent's, ended, its trigger
// gone) gives unverified: the write is refused afterwards anyway, and
// nothing is ever vouched for by a context that could not be read. Any
// other failing source fails the decision (fail closed), and with it the
// write.
func (s *Service) AnswerProvenance(ctx context.Context, agent identity.Principal, runID string, declared trust.Level) (trust.Level, error) {
	lowest, err := s.liveLowest(ctx, agent, runID)
	if err != nil {
		return "", err
	}
	levels := []trust.Level{lowest, trust.Self}
	if declared != "" {
		levels = append(levels, declared)
	}
	return trust.Lowest(levels...), nil
}

// liveLowest is the lowest of the trust summary of run runID's context
// for agent, built by the same pipeline as a context read (Context,
// FinishContext, ContextFollowUps) but without the door: the write that
// asks decides its own right, and a second decision would spend a second
// token.
func (s *Service) liveLowest(ctx context.Context, agent identity.Principal, runID string) (trust.Level, error) {
	if agent.Kind != identity.KindAgent || !validID(runID) {
		return trust.Unverified, nil
	}
	x, err := s.st.getRunInThread(ctx, runID, agent.ID)
	if errors.Is(err, ErrNotFound) || (err == nil && x.run.AgentID != agent.ID) {
		return trust.Unverified, nil
	}
	if err != nil {
		return "", problem.Internal("runs.liveLowest: read run in thread", err)
	}
	path := chat.PathInThread(x.channel, x.thread, authz.KindRun, x.run.ID)
	path.OwnerID = x.run.AgentID
	rd := Read{Run: x.run, Thread: x.thread, Channel: x.channel, Path: path, Grant: authz.GrantLevelOf(agent, x.levels),
		ForContext: true, FollowUpsOnRecord: x.followUps}
	rc, err := s.Context(ctx, agent, rd, s.contextLimits)
	if problem.Is(err, problem.NotFound) {
		return trust.Unverified, nil
	}
	if err != nil {
		return "", err
	}
	fc, err := s.FinishContext(ctx, agent, &rc)
	if err != nil {
		return "", err
	}
	followUps, err := s.ContextFollowUps(ctx, fc)
	if err != nil {
		return "", err
	}
	elems := append(fc.Context.Elements(), followUps...)
	withText := map[string]bool{}
	if s.fileTexts != nil {
		list := make([]string, len(elems))
		for i, e := range elems {
			list[i] = e.ID
		}
		if withText, err = s.fileTexts.MessagesWithText(ctx, list); err != nil {
			return "", problem.Internal("runs.liveLowest: read messages with file text", err)
		}
	}
	return fc.Lowest(elems, withText), nil
}
