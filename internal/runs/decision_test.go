package runs_test

import (
	"testing"

	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/runs"
)

func TestDecideTrigger(t *testing.T) {
	t.Parallel()
	lotse := runs.Agent{ID: "lotse", Active: true, ReadOnThread: true}
	texter := runs.Agent{ID: "texter", Active: true, ReadOnThread: true}
	base := func(f func(*runs.TriggerFacts)) runs.TriggerFacts {
		x := runs.TriggerFacts{Human: true, MainThread: true, ChannelOperator: "lotse", OperatorActive: true,
			WriterTrigger: true, AutoThread: true}
		f(&x)
		return x
	}
	tests := []struct {
		name    string
		facts   runs.TriggerFacts
		outcome messaging.TriggerState
		agent   string
		reason  string
		guest   bool
		auto    bool
	}{
		{"mention of the operator", base(func(f *runs.TriggerFacts) { f.Mentioned = []runs.Agent{lotse} }), messaging.TriggerAccepted, "lotse", "", false, true},
		{"auto thread off", base(func(f *runs.TriggerFacts) { f.Mentioned = []runs.Agent{lotse}; f.AutoThread = false }), messaging.TriggerAccepted, "lotse", "", false, false},
		{"guest allowed", base(func(f *runs.TriggerFacts) { f.Mentioned = []runs.Agent{texter}; f.AllowMentionedAgents = true }), messaging.TriggerAccepted, "texter", "", true, true},
		{"guest not allowed by switch", base(func(f *runs.TriggerFacts) { f.Mentioned = []runs.Agent{texter} }), messaging.TriggerFailed, "texter", runs.ReasonAgentNotAllowed, true, false},
		{"guest without read", base(func(f *runs.TriggerFacts) {
			f.Mentioned = []runs.Agent{{ID: "texter", Active: true}}
			f.AllowMentionedAgents = true
		}), messaging.TriggerFailed, "texter", runs.ReasonAgentNotAllowed, true, false},
		{"first mentioned agent wins", base(func(f *runs.TriggerFacts) { f.Mentioned = []runs.Agent{lotse, texter} }), messaging.TriggerAccepted, "lotse", "", false, true},
		{"no mention, free response", base(func(f *runs.TriggerFacts) { f.FreeResponse = true }), messaging.TriggerAccepted, "lotse", "", false, true},
		{"no mention, no free response", base(func(f *runs.TriggerFacts) {}), messaging.TriggerNone, "", "", false, false},
		{"no operator, no mention", base(func(f *runs.TriggerFacts) { f.ChannelOperator = ""; f.FreeResponse = true }), messaging.TriggerNone, "", "", false, false},
		{"fixed-operator thread without mention", base(func(f *runs.TriggerFacts) {
			f.MainThread = false
			f.ThreadOperator = "lotse"
			f.ChannelOperator = "texter"
		}), messaging.TriggerAccepted, "lotse", "", false, false},
		{"forum post without operator", base(func(f *runs.TriggerFacts) { f.MainThread = false; f.ThreadOperator = ""; f.ChannelOperator = "" }), messaging.TriggerNone, "", "", false, false},
		{"forum post with operator", base(func(f *runs.TriggerFacts) { f.MainThread = false; f.ThreadOperator = "lotse" }), messaging.TriggerAccepted, "lotse", "", false, false},
		{"writer without trigger", base(func(f *runs.TriggerFacts) { f.Mentioned = []runs.Agent{lotse}; f.WriterTrigger = false }), messaging.TriggerFailed, "lotse", runs.ReasonTriggerNotAllowed, false, false},
		{"inactive agent", base(func(f *runs.TriggerFacts) { f.Mentioned = []runs.Agent{{ID: "lotse", ReadOnThread: true}} }), messaging.TriggerFailed, "lotse", runs.ReasonAgentUnavailable, false, false},
		{"inactive operator by free response", base(func(f *runs.TriggerFacts) { f.FreeResponse = true; f.OperatorActive = false }), messaging.TriggerFailed, "lotse", runs.ReasonAgentUnavailable, false, false},
		{"active run of the same agent", base(func(f *runs.TriggerFacts) { f.Mentioned = []runs.Agent{lotse}; f.ActiveRunAgent = "lotse" }), messaging.TriggerFollowup, "lotse", "", false, false},
		{"active run of another agent", base(func(f *runs.TriggerFacts) { f.Mentioned = []runs.Agent{lotse}; f.ActiveRunAgent = "texter" }), messaging.TriggerFailed, "lotse", runs.ReasonRunActiveOther, false, false},
		{"agent message never triggers", base(func(f *runs.TriggerFacts) { f.Human = false; f.Mentioned = []runs.Agent{lotse}; f.FreeResponse = true }), messaging.TriggerNone, "", "", false, false},
		{"guest check before availability", base(func(f *runs.TriggerFacts) { f.Mentioned = []runs.Agent{{ID: "texter"}} }), messaging.TriggerFailed, "texter", runs.ReasonAgentNotAllowed, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := runs.DecideTrigger(tc.facts)
			if d.Outcome != tc.outcome || d.Agent != tc.agent || d.Reason != tc.reason || d.Guest != tc.guest || d.AutoThread != tc.auto {
				t.Fatalf("DecideTrigger = %+v, want outcome=%v agent=%q reason=%q guest=%v auto=%v", d, tc.outcome, tc.agent, tc.reason, tc.guest, tc.auto)
			}
		})
	}
}
