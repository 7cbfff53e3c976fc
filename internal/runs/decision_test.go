package runs_test

import (
	"testing"

	"bothy.example.com/bothy/internal/runs"
)

func TestDecideTrigger(t *testing.T) {
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
		outcome runs.Outcome
		agent   string
		reason  string
		guest   bool
		auto    bool
	}{
		{"mention of the operator", base(func(f *runs.TriggerFacts) { f.Mentioned = []runs.Agent{lotse} }), runs.Accept, "lotse", "", false, true},
		{"auto thread off", base(func(f *runs.TriggerFacts) { f.Mentioned = []runs.Agent{lotse}; f.AutoThread = false }), runs.Accept, "lotse", "", false, false},
		{"guest allowed", base(func(f *runs.TriggerFacts) { f.Mentioned = []runs.Agent{texter}; f.AllowMentionedAgents = true }), runs.Accept, "texter", "", true, true},
		{"guest not allowed by switch", base(func(f *runs.TriggerFacts) { f.Mentioned = []runs.Agent{texter} }), runs.Failed, "texter", runs.ReasonAgentNotAllowed, true, false},
		{"guest without read", base(func(f *runs.TriggerFacts) {
			f.Mentioned = []runs.Agent{{ID: "texter", Active: true}}
			f.AllowMentionedAgents = true
		}), runs.Failed, "texter", runs.ReasonAgentNotAllowed, true, false},
		{"first mentioned agent wins", base(func(f *runs.TriggerFacts) { f.Mentioned = []runs.Agent{lotse, texter} }), runs.Accept, "lotse", "", false, true},
		{"no mention, free response", base(func(f *runs.TriggerFacts) { f.FreeResponse = true }), runs.Accept, "lotse", "", false, true},
		{"no mention, no free response", base(func(f *runs.TriggerFacts) {}), runs.NoTrigger, "", "", false, false},
		{"no operator, no mention", base(func(f *runs.TriggerFacts) { f.ChannelOperator = ""; f.FreeResponse = true }), runs.NoTrigger, "", "", false, false},
		{"fixed-operator thread without mention", base(func(f *runs.TriggerFacts) {
			f.MainThread = false
			f.ThreadOperator = "lotse"
			f.ChannelOperator = "texter"
		}), runs.Accept, "lotse", "", false, false},
		{"forum post without operator", base(func(f *runs.TriggerFacts) { f.MainThread = false; f.ThreadOperator = ""; f.ChannelOperator = "" }), runs.NoTrigger, "", "", false, false},
		{"forum post with operator", base(func(f *runs.TriggerFacts) { f.MainThread = false; f.ThreadOperator = "lotse" }), runs.Accept, "lotse", "", false, false},
		{"writer without trigger", base(func(f *runs.TriggerFacts) { f.Mentioned = []runs.Agent{lotse}; f.WriterTrigger = false }), runs.Failed, "lotse", runs.ReasonTriggerNotAllowed, false, false},
		{"inactive agent", base(func(f *runs.TriggerFacts) { f.Mentioned = []runs.Agent{{ID: "lotse", ReadOnThread: true}} }), runs.Failed, "lotse", runs.ReasonAgentUnavailable, false, false},
		{"inactive operator by free response", base(func(f *runs.TriggerFacts) { f.FreeResponse = true; f.OperatorActive = false }), runs.Failed, "lotse", runs.ReasonAgentUnavailable, false, false},
		{"active run of the same agent", base(func(f *runs.TriggerFacts) { f.Mentioned = []runs.Agent{lotse}; f.ActiveRunAgent = "lotse" }), runs.Followup, "lotse", "", false, false},
		{"active run of another agent", base(func(f *runs.TriggerFacts) { f.Mentioned = []runs.Agent{lotse}; f.ActiveRunAgent = "texter" }), runs.Failed, "lotse", runs.ReasonRunActiveOther, false, false},
		{"agent message never triggers", base(func(f *runs.TriggerFacts) { f.Human = false; f.Mentioned = []runs.Agent{lotse}; f.FreeResponse = true }), runs.NoTrigger, "", "", false, false},
		{"guest check before availability", base(func(f *runs.TriggerFacts) { f.Mentioned = []runs.Agent{{ID: "texter"}} }), runs.Failed, "texter", runs.ReasonAgentNotAllowed, true, false},
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
