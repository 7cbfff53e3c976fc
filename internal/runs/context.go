package runs

import (
	"context"
	"errors"
	"fmt"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/runs/domain"
	"bothy.example.com/bothy/internal/runs/record"
	"bothy.example.com/bothy/internal/runs/runcontext"
)

// The run context (its pipeline of plan, fetch, shape and finish, the
// rule that finishes its elements, and the trust summary an answer's
// provenance is decided on) lives in internal/runs/runcontext; the door
// that reads the run, and the facts of the run and its follow-ups the
// context asks, stay here with the tables they read. These names keep
// runs' API as it was.

// ContextLimits are agent.context_max_bytes and
// agent.context_message_max_bytes (runcontext.Limits).
type ContextLimits = runcontext.Limits

// ContextElement is one element of a run context before the GraphQL face
// adds author, role, trust and already_delivered (runcontext.Element).
type ContextElement = runcontext.Element

// RunContext is run_context.v1 (docs/design/trust.md#run-context) with the
// facts the field resolvers need (runcontext.RunContext).
type RunContext = runcontext.RunContext

// FinishedContext is a run context with the answers its elements need to
// be finished (runcontext.Finished).
type FinishedContext = runcontext.Finished

// FinishedElement is one context element with every value the faces show
// (runcontext.FinishedElement).
type FinishedElement = runcontext.FinishedElement

// ContextKeys are the questions a run context leaves to its finish step
// (runcontext.Keys).
type ContextKeys = runcontext.Keys

// ContextAnswers are the finish step's answers to ContextKeys
// (runcontext.Answers).
type ContextAnswers = runcontext.Answers

// Read is a run as one request read it (the type lives in
// internal/runs/record, which the run context's package reads too).
type Read = record.Read

// Read returns run id for actor (run.read: read on the run's thread) in
// one statement: the run with its thread, channel and the actor's grants
// there, read while the door takes the token. Unknown and invisible runs
// give the same 404.
func (s *Service) Read(ctx context.Context, actor identity.Principal, id string) (Read, error) {
	return s.read(ctx, actor, id, authz.RunRead)
}

// ReadForContext reads run id only to build its context (getRunContext):
// it takes the rl.agent_runtime token of run.context.read instead of
// rl.read and decides and audits run.context.read, also for unknown and
// invisible runs.
func (s *Service) ReadForContext(ctx context.Context, actor identity.Principal, id string) (Read, error) {
	rd, err := s.read(ctx, actor, id, authz.RunContextRead)
	rd.ForContext = err == nil
	return rd, err
}

func (s *Service) read(ctx context.Context, actor identity.Principal, id string, action authz.Action) (Read, error) {
	// Every way out goes through the door once: it takes the token of
	// action's class and decides (and audits) also an unknown or invisible
	// run, both with the same 404. The run is read at the door (a Lookup),
	// while the token is taken.
	var rd Read
	d, _, err := s.authz.Authorize(ctx, actor, action, authz.Lookup(func(ctx context.Context) (authz.Facts, error) {
		missing := authz.Path{Kind: authz.KindRun, ID: id}
		if !validID(id) {
			// No statement can find it: the door reads the grants of a
			// missing resource, as for any other.
			return authz.Facts{Path: missing}, nil
		}
		// The run comes with its thread, channel and the actor's grants
		// there in one statement, the same one for a missing run as for a
		// hidden one.
		x, err := s.st.getRunInThread(ctx, id, actor.ID)
		if errors.Is(err, ErrNotFound) {
			return authz.Known(missing, authz.None), nil
		}
		if err != nil {
			return authz.Facts{}, fmt.Errorf("runs.read: %w", err)
		}
		path := chat.PathInThread(x.channel, x.thread, authz.KindRun, x.run.ID)
		path.OwnerID = x.run.AgentID
		rd = Read{Run: x.run, Thread: x.thread, Channel: x.channel, Path: path, FollowUpsOnRecord: x.followUps}
		return authz.Known(path, authz.GrantLevelOf(actor, x.levels)), nil
	}))
	if err != nil {
		return Read{}, err
	}
	rd.Grant = d.Grant
	return rd, nil
}

// Context builds the run context of rd for actor (run.context.read: the
// run's own agent, active runs only; docs/design/trust.md#who-may-read-it)
// in one pipeline: plan, fetch, and filter, cut and budget; FinishContext
// is its last step (runcontext.Service.Build, which says its steps and
// errors).
func (s *Service) Context(ctx context.Context, actor identity.Principal, rd Read, limits ContextLimits) (RunContext, error) {
	return s.runContext.Build(ctx, actor, rd, limits)
}

// FinishContext is the finish step of a context read: it answers every
// question of rc's elements (RunContext.Keys) at once, for actor, the
// reader of rc (runcontext.Service.Finish).
func (s *Service) FinishContext(ctx context.Context, actor identity.Principal, rc *RunContext) (*FinishedContext, error) {
	return s.runContext.Finish(ctx, actor, rc)
}

// ContextFollowUps reads the follow-ups of fc's run still in play, oldest
// first, as context elements, and answers their questions into fc
// (runcontext.Service.FollowUpsOf).
func (s *Service) ContextFollowUps(ctx context.Context, fc *FinishedContext) ([]ContextElement, error) {
	return s.runContext.FollowUpsOf(ctx, fc)
}

// FollowUpElements turns the follow-up messages of rc's run into context
// elements for actor: each passes the same read filter as the thread
// elements and is cut like them (runcontext.Service.FollowUpElements).
func (s *Service) FollowUpElements(ctx context.Context, actor identity.Principal, rc *RunContext, items []messaging.ContextItem) []ContextElement {
	return s.runContext.FollowUpElements(ctx, actor, rc, items)
}

// FollowUps returns the follow-ups of each run in runIDs that are still
// in play (pending or delivered), oldest first, in two statements for all
// runs.
func (s *Service) FollowUps(ctx context.Context, runIDs []string) (map[string][]messaging.ContextItem, error) {
	pairs, err := s.st.followUpPairs(ctx, runIDs)
	if err != nil {
		return nil, err
	}
	out := map[string][]messaging.ContextItem{}
	if len(pairs) == 0 {
		return out, nil
	}
	want := make([]string, len(pairs))
	for i, p := range pairs {
		want[i] = p.message
	}
	msgs, err := s.messaging.ContextMessages(ctx, want)
	if err != nil {
		return nil, err
	}
	for _, p := range pairs {
		if m, ok := msgs[p.message]; ok {
			out[p.run] = append(out[p.run], m)
		}
	}
	return out, nil
}

// contextRuns are the facts of runs and their follow-ups a context read
// asks (runcontext.Runs): the statements on runs' own tables stay in
// runs' store.
type contextRuns struct{ s *Service }

// EarlierRuns returns the earlier runs of r's session (earlierRuns).
func (c contextRuns) EarlierRuns(ctx context.Context, r Run) ([]domain.EarlierRun, error) {
	return c.s.st.earlierRuns(ctx, r.SessionID, r.ID, r.QueuedAt)
}

// FollowUpFacts is Service.FollowUpFacts.
func (c contextRuns) FollowUpFacts(ctx context.Context, sessionID, runID string, messageIDs []string) (map[string]bool, []string, error) {
	return c.s.FollowUpFacts(ctx, sessionID, runID, messageIDs)
}

// Delivered is Service.Delivered.
func (c contextRuns) Delivered(ctx context.Context, sessionID, runID string, messageIDs []string) (map[string]bool, error) {
	return c.s.Delivered(ctx, sessionID, runID, messageIDs)
}

// FollowUps is Service.FollowUps.
func (c contextRuns) FollowUps(ctx context.Context, runIDs []string) (map[string][]messaging.ContextItem, error) {
	return c.s.FollowUps(ctx, runIDs)
}

// PersonHoldsTrigger is personHoldsTrigger.
func (c contextRuns) PersonHoldsTrigger(ctx context.Context, id string, p authz.Path) (bool, error) {
	return c.s.personHoldsTrigger(ctx, id, p)
}
