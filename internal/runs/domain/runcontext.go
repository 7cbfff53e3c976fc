// Package domain holds the pure rules of the run context (docs/design/trust.md
// and docs/design/runs.md#sessions): classification of every element
// into role and trust, the session plan (mode, floor, own messages, channel
// context), the per-element cut and the budget from old to new. Nothing here
// does I/O; every fact comes in as an argument.
package domain

import (
	"slices"

	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/platform/textcut"
	"bothy.example.com/bothy/internal/trust"
)

// Trust says how far an element of a run context may instruct the agent:
// the one type of internal/trust, named here for the run context's rules
// and the GraphQL enum Trust that binds to it.
type Trust = trust.Level

// The trust markers (trust.Levels).
const (
	// TrustTrigger marks the request of the person who triggered the run.
	TrustTrigger = trust.Trigger
	// TrustAuthorized marks another active person with trigger on the channel.
	TrustAuthorized = trust.Authorized
	// TrustSelf marks the agent's own earlier messages.
	TrustSelf = trust.Self
	// TrustUnverified marks everything that may not instruct the agent:
	// people without trigger, other agents, apps and imports.
	TrustUnverified = trust.Unverified
	// TrustSystem marks system lines.
	TrustSystem = trust.System
)

// Role is the conversational role of an element for a model runtime.
type Role string

// The roles.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleOther     Role = "other"
)

// AuthorFacts are the facts of one message that classification reads.
type AuthorFacts struct {
	Origin   messaging.Origin
	AuthorID string
}

// RunParties are the run's agent and the person who triggered it.
type RunParties struct {
	AgentID     string
	TriggeredBy string
}

// Classify returns the role and trust of a message in the context of a run
// (docs/design/trust.md#classification, first matching row wins). Origin
// decides before the author: an import authored by the triggering person stays unverified and a
// system line written by a person stays system. holders are the people with
// trigger on the run's channel now.
func Classify(m AuthorFacts, p RunParties, holders map[string]bool) (Role, Trust) {
	switch m.Origin {
	case messaging.OriginSystem:
		return RoleOther, TrustSystem
	case messaging.OriginImport, messaging.OriginApp:
		return RoleOther, TrustUnverified
	case messaging.OriginAgent:
		if m.AuthorID == p.AgentID {
			return RoleAssistant, TrustSelf
		}
		return RoleOther, TrustUnverified
	case messaging.OriginHuman:
		switch {
		case m.AuthorID == p.TriggeredBy:
			return RoleUser, TrustTrigger
		case holders[m.AuthorID]:
			return RoleUser, TrustAuthorized
		default:
			return RoleUser, TrustUnverified
		}
	}
	// An origin this code does not know can never instruct the agent.
	return RoleOther, TrustUnverified
}

// ElementProvenance returns the provenance of a context element of trust
// t (docs/design/trust.md#provenance): for a message of the run's own
// agent the provenance stored with it (stored; empty, from a binary that
// did not record it, or unknown counts as unverified), never above self;
// for every other element its trust.
func ElementProvenance(m AuthorFacts, p RunParties, t Trust, stored Trust) Trust {
	if m.Origin == messaging.OriginAgent && m.AuthorID == p.AgentID {
		if stored == "" {
			return TrustUnverified
		}
		return trust.Lowest(stored, TrustSelf)
	}
	return t
}

// InPlay is what an element puts in play for the trust summary: the lower
// of its trust and its provenance, so that a laundered self message (the
// agent quoting untrusted data) lowers the run as the data itself would.
func InPlay(t, provenance Trust) Trust { return trust.Lowest(t, provenance) }

// InPlayWithFiles is InPlay for an element that carries files: when one
// of them has text an agent may read (text status ready), the element
// puts unverified in play, since a file's text is data with trust
// unverified whoever uploaded it (docs/design/trust.md#files) and the
// server cannot see whether the adapter read it.
func InPlayWithFiles(t, provenance Trust, fileText bool) Trust {
	if fileText {
		return TrustUnverified
	}
	return InPlay(t, provenance)
}

// NeedsHolders reports whether classifying m needs to know whether its
// author has trigger now: only a person's message other than one of the
// person who triggered the run (Classify's authorized row).
func NeedsHolders(m AuthorFacts, p RunParties) bool {
	return m.Origin == messaging.OriginHuman && m.AuthorID != p.TriggeredBy
}

// SessionFacts describe an agent session when a run joins it.
type SessionFacts struct {
	// Started is whether a run of the session was started, or the session
	// was bound to an external conversation.
	Started bool
	// Bound is whether the session was made by bindAgentSession.
	Bound bool
	// Runs counts the runs the session had before this one.
	Runs int
}

// Mode is how a run relates to the agent's conversation in its thread (the
// GraphQL enum SessionMode binds to it).
type Mode string

// The session modes.
const (
	ModeGuest  Mode = "guest"
	ModeNew    Mode = "new"
	ModeBind   Mode = "bind"
	ModeResume Mode = "resume"
)

// SessionMode returns the mode of a run joining session s (nil for a guest
// run): guest, new (nothing to resume), bind (the first run of a bound
// session), resume (the runtime continues an earlier conversation). The
// invocation payload and the run context share it: the runs module stores
// the mode on the run when it accepts it.
func SessionMode(s *SessionFacts) Mode {
	switch {
	case s == nil:
		return ModeGuest
	case s.Bound && s.Runs == 0:
		return ModeBind
	case s.Started:
		return ModeResume
	default:
		return ModeNew
	}
}

// EarlierRun is an earlier run of the same session, newest first in
// PlanFacts.
type EarlierRun struct {
	// HasTrigger is false for a run without a triggering message.
	HasTrigger bool
	// TriggerThreadID and TriggerSeq locate its triggering message.
	TriggerThreadID string
	TriggerSeq      int64
}

// PlanFacts are the facts the context plan reads.
type PlanFacts struct {
	// Mode is the run's session mode (as its invocation carried it).
	Mode Mode
	// ThreadID is the run's thread T.
	ThreadID string
	// Earlier are the earlier runs of the run's session, newest first.
	Earlier []EarlierRun
}

// ContextPlan says how to build a run context.
type ContextPlan struct {
	Mode Mode
	// Floor is context_floor_seq: thread_context holds only messages of T
	// above it.
	Floor int64
	// ExcludeOwn leaves the agent's own messages out (mode resume: the
	// runtime already has them).
	ExcludeOwn bool
	// WantChannel asks for channel_context (first run of a session).
	WantChannel bool
}

// PlanContext returns the plan of docs/design/trust.md#context-plan: guest,
// new and bind runs see everything from the start (floor zero, own messages, channel
// context); a resumed session sees only what came after the trigger of its
// latest earlier run that has one, and only when that trigger lies in T.
func PlanContext(f PlanFacts) ContextPlan {
	if f.Mode != ModeResume {
		return ContextPlan{Mode: f.Mode, WantChannel: true}
	}
	p := ContextPlan{Mode: ModeResume, ExcludeOwn: true}
	for _, e := range f.Earlier {
		if !e.HasTrigger {
			continue // the run before it decides
		}
		if e.TriggerThreadID == f.ThreadID {
			p.Floor = e.TriggerSeq
		}
		break
	}
	return p
}

// CutContent cuts s to at most maxBytes bytes on a UTF-8 boundary
// (agent.context_message_max_bytes) and reports whether it cut.
func CutContent(s string, maxBytes int) (string, bool) { return textcut.Cut(s, maxBytes) }

// Item is one candidate element for the budget: its thread_seq and the
// bytes of its content after the per-element cut.
type Item struct {
	Seq   int64
	Bytes int
}

// FitBudget keeps the newest contiguous suffix of channel then thread whose
// content bytes sum to at most maxTotal (agent.context_max_bytes): walking
// from the newest element backwards, the first element that does not fit
// and every older one are dropped. Channel elements are older than thread
// elements. The triggering message is not an input.
func FitBudget(channel, thread []Item, maxTotal int) (keptChannel, keptThread []Item) {
	sum := 0
	keepThreadFrom := len(thread)
	for i := len(thread) - 1; i >= 0; i-- {
		if sum+thread[i].Bytes > maxTotal {
			return nil, thread[keepThreadFrom:]
		}
		sum += thread[i].Bytes
		keepThreadFrom = i
	}
	keepChannelFrom := len(channel)
	for i := len(channel) - 1; i >= 0; i-- {
		if sum+channel[i].Bytes > maxTotal {
			break
		}
		sum += channel[i].Bytes
		keepChannelFrom = i
	}
	return channel[keepChannelFrom:], thread
}

// TruncatedBeforeSeq returns truncated_before_seq (refers to T only): when
// older selectable messages exist (hasOlder) or the budget dropped thread
// elements, the thread_seq of the oldest kept thread element, or triggerSeq
// when none is kept; ok is false when nothing is missing.
func TruncatedBeforeSeq(hasOlder, budgetDropped bool, keptThread []Item, triggerSeq int64) (int64, bool) {
	if !hasOlder && !budgetDropped {
		return 0, false
	}
	if len(keptThread) > 0 {
		return keptThread[0].Seq, true
	}
	return triggerSeq, true
}

// trustLevels lists every trust level from least to most trusted, the
// order of TrustSummary.Counts.
var trustLevels = trust.Levels()

// TrustLevels returns every trust level from least to most trusted, the
// order of TrustSummary.Counts (a copy).
func TrustLevels() []Trust { return slices.Clone(trustLevels) }

// TrustCount is how many elements of a run context carry one trust level.
type TrustCount struct {
	Trust Trust
	Count int
}

// TrustSummary is the least-trust summary of a run context: the lowest
// trust of any element and the count per level, so that an adapter can
// gate side effects on untrusted content without recomputing trust.
type TrustSummary struct {
	Lowest Trust
	// Counts holds every level of TrustLevels() in that order, zero counts
	// included, so the shape never depends on the content.
	Counts []TrustCount
}

// SummarizeTrust returns the summary over the trusts of every element of a
// run context (trigger, thread and channel context, follow-ups). A level
// this code does not know counts as unverified, and an empty list has the
// lowest trust unverified: the summary fails closed, never open.
func SummarizeTrust(trusts []Trust) TrustSummary {
	counts := make(map[Trust]int, len(trustLevels))
	lowest := TrustUnverified
	for i, t := range trusts {
		if !trust.Known(t) {
			t = TrustUnverified
		}
		counts[t]++
		if i == 0 || trust.Rank(t) < trust.Rank(lowest) {
			lowest = t
		}
	}
	out := TrustSummary{Lowest: lowest, Counts: make([]TrustCount, len(trustLevels))}
	for i, t := range trustLevels {
		out.Counts[i] = TrustCount{Trust: t, Count: counts[t]}
	}
	return out
}
