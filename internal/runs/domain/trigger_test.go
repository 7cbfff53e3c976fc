package domain_test

import (
	"testing"

	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/runs/domain"
)

func TestDecideTrigger(t *testing.T) {
	t.Parallel()
	lotse := domain.Agent{ID: "lotse", Active: true, ReadOnThread: true}
	texter := domain.Agent{ID: "texter", Active: true, ReadOnThread: true}
	base := func(f func(*domain.TriggerFacts)) domain.TriggerFacts {
		x := domain.TriggerFacts{Human: true, MainThread: true, ChannelOperator: "lotse", OperatorActive: true,
			WriterTrigger: true, AutoThread: true}
		f(&x)
		return x
	}
	tests := []struct {
		name    string
		facts   domain.TriggerFacts
		outcome messaging.TriggerState
		agent   string
		reason  string
		guest   bool
		auto    bool
	}{
		{"mention of the operator", base(func(f *domain.TriggerFacts) { f.Mentioned = []domain.Agent{lotse} }), messaging.TriggerAccepted, "lotse", "", false, true},
		{"auto thread off", base(func(f *domain.TriggerFacts) { f.Mentioned = []domain.Agent{lotse}; f.AutoThread = false }), messaging.TriggerAccepted, "lotse", "", false, false},
		{"guest allowed", base(func(f *domain.TriggerFacts) { f.Mentioned = []domain.Agent{texter}; f.AllowMentionedAgents = true }), messaging.TriggerAccepted, "texter", "", true, true},
		{"guest not allowed by switch", base(func(f *domain.TriggerFacts) { f.Mentioned = []domain.Agent{texter} }), messaging.TriggerFailed, "texter", domain.ReasonAgentNotAllowed, true, false},
		{"guest without read", base(func(f *domain.TriggerFacts) {
			f.Mentioned = []domain.Agent{{ID: "texter", Active: true}}
			f.AllowMentionedAgents = true
		}), messaging.TriggerFailed, "texter", domain.ReasonAgentNotAllowed, true, false},
		{"first mentioned agent wins", base(func(f *domain.TriggerFacts) { f.Mentioned = []domain.Agent{lotse, texter} }), messaging.TriggerAccepted, "lotse", "", false, true},
		{"no mention, free response", base(func(f *domain.TriggerFacts) { f.FreeResponse = true }), messaging.TriggerAccepted, "lotse", "", false, true},
		{"no mention, no free response", base(func(f *domain.TriggerFacts) {}), messaging.TriggerNone, "", "", false, false},
		{"no operator, no mention", base(func(f *domain.TriggerFacts) { f.ChannelOperator = ""; f.FreeResponse = true }), messaging.TriggerNone, "", "", false, false},
		{"fixed-operator thread without mention", base(func(f *domain.TriggerFacts) {
			f.MainThread = false
			f.ThreadOperator = "lotse"
			f.ChannelOperator = "texter"
		}), messaging.TriggerAccepted, "lotse", "", false, false},
		{"forum post without operator", base(func(f *domain.TriggerFacts) { f.MainThread = false; f.ThreadOperator = ""; f.ChannelOperator = "" }), messaging.TriggerNone, "", "", false, false},
		{"forum post with operator", base(func(f *domain.TriggerFacts) { f.MainThread = false; f.ThreadOperator = "lotse" }), messaging.TriggerAccepted, "lotse", "", false, false},
		{"writer without trigger", base(func(f *domain.TriggerFacts) { f.Mentioned = []domain.Agent{lotse}; f.WriterTrigger = false }), messaging.TriggerFailed, "lotse", domain.ReasonTriggerNotAllowed, false, false},
		{"inactive agent", base(func(f *domain.TriggerFacts) { f.Mentioned = []domain.Agent{{ID: "lotse", ReadOnThread: true}} }), messaging.TriggerFailed, "lotse", domain.ReasonAgentUnavailable, false, false},
		{"inactive operator by free response", base(func(f *domain.TriggerFacts) { f.FreeResponse = true; f.OperatorActive = false }), messaging.TriggerFailed, "lotse", domain.ReasonAgentUnavailable, false, false},
		{"active run of the same agent", base(func(f *domain.TriggerFacts) { f.Mentioned = []domain.Agent{lotse}; f.ActiveRunAgent = "lotse" }), messaging.TriggerFollowup, "lotse", "", false, false},
		{"active run of another agent", base(func(f *domain.TriggerFacts) { f.Mentioned = []domain.Agent{lotse}; f.ActiveRunAgent = "texter" }), messaging.TriggerFailed, "lotse", domain.ReasonRunActiveOther, false, false},
		{"agent message never triggers", base(func(f *domain.TriggerFacts) {
			f.Human = false
			f.Mentioned = []domain.Agent{lotse}
			f.FreeResponse = true
		}), messaging.TriggerNone, "", "", false, false},
		{"guest check before availability", base(func(f *domain.TriggerFacts) { f.Mentioned = []domain.Agent{{ID: "texter"}} }), messaging.TriggerFailed, "texter", domain.ReasonAgentNotAllowed, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := domain.DecideTrigger(tc.facts)
			if d.Outcome != tc.outcome || d.Agent != tc.agent || d.Reason != tc.reason || d.Guest != tc.guest || d.AutoThread != tc.auto {
				t.Fatalf("DecideTrigger = %+v, want outcome=%v agent=%q reason=%q guest=%v auto=%v", d, tc.outcome, tc.agent, tc.reason, tc.guest, tc.auto)
			}
		})
	}
}
