package runcontext

import (
	"context"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/runs/domain"
)

// shapeContext is the filter, cut and budget step of a context read: of
// the windows fetched, the elements the agent may read (message.read with
// the grant the request holds), each cut to limits.MessageMaxBytes, then
// the oldest dropped until the channel and thread context fit
// limits.MaxBytes (domain.FitBudget); truncated_before_seq marks a thread
// context that lost older messages to the window or the budget.
func (s *Service) shapeContext(ctx context.Context, p *contextPlan, f *contextSources) RunContext {
	r, c := p.rd.Run, p.rd.Channel
	out := RunContext{RunID: r.ID, Parties: domain.RunParties{AgentID: r.AgentID, TriggeredBy: r.TriggeredBy},
		ChannelPath: chat.ChannelPath(c), SessionID: r.SessionID, Mode: p.plan.Mode,
		Trigger:    Element{ContextItem: f.trigger, ChannelID: f.triggerChannel},
		ThreadPath: p.threadPath, Grant: p.rd.Grant, MessageMaxBytes: p.limits.MessageMaxBytes,
		FollowUpsOnRecord: p.rd.FollowUpsOnRecord, People: f.people, Holders: f.holders}
	threadElems := s.readableElements(ctx, p.actor, f.threadPage.Items, p.threadPath, p.rd.Grant, c.ID, p.limits.MessageMaxBytes)
	var channelElems []Element
	if f.channelPage != nil {
		channelElems = s.readableElements(ctx, p.actor, f.channelPage.Items, p.mainPath, p.rd.Grant, c.ID, p.limits.MessageMaxBytes)
	}
	keptC, keptT := domain.FitBudget(budgetItems(channelElems), budgetItems(threadElems), p.limits.MaxBytes)
	out.Thread = threadElems[len(threadElems)-len(keptT):]
	if f.channelPage != nil {
		out.Channel = channelElems[len(channelElems)-len(keptC):]
	}
	if !f.inThread {
		return out
	}
	out.ContextFloorSeq = p.plan.Floor
	if seq, ok := domain.TruncatedBeforeSeq(f.threadPage.HasOlder, len(keptT) < len(threadElems), keptT, f.trigger.ThreadSeq); ok {
		out.TruncatedBeforeSeq = &seq
	}
	return out
}

// readableElements turns items, all on path p of channel channelID, into
// the context elements actor may read (message.read with grant), each
// cut to maxBytes (domain.CutContent).
func (s *Service) readableElements(ctx context.Context, actor identity.Principal, items []messaging.ContextItem, p authz.Path, grant authz.Level, channelID string, maxBytes int) []Element {
	keep := s.readableOn(ctx, actor, p, len(items), grant)
	out := make([]Element, 0, len(items))
	for i, it := range items {
		if !keep[i] {
			continue
		}
		e := Element{ContextItem: it, ChannelID: channelID}
		e.ContentMD, e.Truncated = domain.CutContent(it.ContentMD, maxBytes)
		out = append(out, e)
	}
	return out
}

// budgetItems are the sizes domain.FitBudget weighs of es.
func budgetItems(es []Element) []domain.Item {
	out := make([]domain.Item, len(es))
	for i, e := range es {
		out[i] = domain.Item{Seq: e.ThreadSeq, Bytes: len(e.ContentMD)}
	}
	return out
}

// mayRead decides message.read on path p for actor with the grant level
// the request already read on the run's channel, without a statement and
// without the mismatch log of filter mode: it is asked before a read, not
// after. It never fails with a known grant; were it to, it answers no.
func (s *Service) mayRead(ctx context.Context, actor identity.Principal, p authz.Path, grant authz.Level) bool {
	may, err := s.authz.Allowed(ctx, authz.MessageRead, authz.Known(p, grant), actor)
	return err == nil && may[actor.ID]
}

// readable is filter mode (message.read) over items on paths of the run's
// channel, with the grant level the request already read there: no
// statement runs, so it cannot fail; were it to, nothing is kept (fail
// closed).
func (s *Service) readable(ctx context.Context, actor identity.Principal, paths []authz.Path, grant authz.Level) []bool {
	targets := make([]authz.Facts, len(paths))
	for i, p := range paths {
		targets[i] = authz.Known(p, grant)
	}
	keep, err := s.authz.Filter(ctx, actor, authz.MessageRead, targets)
	if err != nil {
		return make([]bool, len(paths))
	}
	return keep
}

// readableOn is readable for n items that all lie on path p: the answer
// is the same for each, so one decision answers all of them. Should it
// deny, the items go through the filter one by one, so that each is
// logged and counted as a mismatch as before.
func (s *Service) readableOn(ctx context.Context, actor identity.Principal, p authz.Path, n int, grant authz.Level) []bool {
	keep := make([]bool, n)
	if n == 0 {
		return keep
	}
	if !s.readable(ctx, actor, []authz.Path{p}, grant)[0] {
		paths := make([]authz.Path, n)
		for i := range paths {
			paths[i] = p
		}
		return s.readable(ctx, actor, paths, grant)
	}
	for i := range keep {
		keep[i] = true
	}
	return keep
}
