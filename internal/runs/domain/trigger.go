package domain

import "bothy.example.com/bothy/internal/messaging"

// Trigger reasons written on a human message with trigger state failed
// (docs/design/runs.md#trigger-decision); the trigger states are messaging.TriggerState.
const (
	ReasonAgentNotAllowed   = "agent_not_allowed_here"
	ReasonAgentUnavailable  = "agent_unavailable"
	ReasonTriggerNotAllowed = "trigger_not_allowed"
	ReasonRunActiveOther    = "run_active_other_agent"
)

// Agent is what the decision needs to know of a mentioned agent.
type Agent struct {
	ID     string
	Active bool
	// ReadOnThread is whether the agent has at least read on the thread.
	ReadOnThread bool
}

// TriggerFacts are the facts of one new message M in thread T of channel C.
type TriggerFacts struct {
	// Human is whether M has origin human; nothing else triggers
	// (docs/design/replies.md#nothing-an-agent-writes-triggers).
	Human bool
	// Mentioned are the agents M mentions, in order.
	Mentioned []Agent
	// MainThread is whether T is the main thread of a text channel.
	MainThread bool
	// ThreadOperator is T's fixed operator (threads and posts).
	ThreadOperator string
	// ChannelOperator is C's effective operator now.
	ChannelOperator      string
	FreeResponse         bool
	AllowMentionedAgents bool
	AutoThread           bool
	// OperatorAgent describes the operator of T when it is the addressee
	// without a mention (active state; read is implied by the operator rule).
	OperatorActive bool
	// WriterTrigger is whether the writer has trigger on T.
	WriterTrigger bool
	// ActiveRunAgent is the agent of T's active run, if any.
	ActiveRunAgent string
}

// TriggerDecision is the result of Decide.
type TriggerDecision struct {
	// Outcome is the trigger state the decision records on M:
	// messaging.TriggerNone leaves it NULL (no addressee, or not human),
	// TriggerFailed records it with a reason, TriggerFollowup makes M a
	// follow-up of the active run of the addressee, TriggerAccepted starts
	// a run of the addressee.
	Outcome messaging.TriggerState
	Agent   string
	Reason  string
	// Guest is whether the addressee is not the operator of T (no session).
	Guest bool
	// AutoThread is whether the accepted run gets a new thread whose parent
	// is M (main thread with auto_thread).
	AutoThread bool
}

// Operator is the agent that answers a message of the place without a
// mention: the channel's effective operator in a main thread, the fixed
// operator of a thread or post elsewhere.
func (f TriggerFacts) Operator() string {
	if f.MainThread {
		return f.ChannelOperator
	}
	return f.ThreadOperator
}

// addressee is the agent a human message addresses: the first agent it
// mentions, else the place's operator when it answers without a mention
// (always in a thread or post, in a main thread only with free response).
// ok is false when the message addresses nobody.
func (f TriggerFacts) addressee(operator string) (a Agent, ok bool) {
	switch {
	case len(f.Mentioned) > 0:
		return f.Mentioned[0], true
	case f.MainThread && f.FreeResponse && operator != "":
		return Agent{ID: operator, Active: f.OperatorActive, ReadOnThread: true}, true
	case !f.MainThread && operator != "":
		return Agent{ID: operator, Active: f.OperatorActive, ReadOnThread: true}, true
	default:
		return Agent{}, false
	}
}

// DecideTrigger applies the trigger decision of
// docs/design/runs.md#trigger-decision to the
// facts of one message. It is pure: every fact comes in f.
func DecideTrigger(f TriggerFacts) TriggerDecision {
	if !f.Human {
		return TriggerDecision{Outcome: messaging.TriggerNone}
	}
	operator := f.Operator()
	addressee, ok := f.addressee(operator)
	if !ok {
		return TriggerDecision{Outcome: messaging.TriggerNone}
	}
	d := TriggerDecision{Agent: addressee.ID}
	if addressee.ID != operator {
		d.Guest = true
		if !f.AllowMentionedAgents || !addressee.ReadOnThread {
			d.Outcome, d.Reason = messaging.TriggerFailed, ReasonAgentNotAllowed
			return d
		}
	}
	if !addressee.Active {
		d.Outcome, d.Reason = messaging.TriggerFailed, ReasonAgentUnavailable
		return d
	}
	if !f.WriterTrigger {
		d.Outcome, d.Reason = messaging.TriggerFailed, ReasonTriggerNotAllowed
		return d
	}
	if f.ActiveRunAgent != "" {
		if f.ActiveRunAgent != addressee.ID {
			d.Outcome, d.Reason = messaging.TriggerFailed, ReasonRunActiveOther
			return d
		}
		d.Outcome = messaging.TriggerFollowup
		return d
	}
	d.Outcome = messaging.TriggerAccepted
	d.AutoThread = f.MainThread && f.AutoThread
	return d
}
