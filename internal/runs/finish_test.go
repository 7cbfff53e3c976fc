package runs

import (
	"reflect"
	"testing"

	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/runs/domain"
)

func elem(id, origin, author string) ContextElement {
	return ContextElement{ContextItem: messaging.ContextItem{ID: id, Origin: origin, AuthorID: author}}
}

func TestRunContextKeys(t *testing.T) {
	parties := domain.RunParties{AgentID: "agent", TriggeredBy: "alex"}
	base := RunContext{Parties: parties, Trigger: elem("m0", "human", "alex"),
		Thread:  []ContextElement{elem("m1", "human", "sam"), elem("m2", "agent", "agent"), elem("m3", "human", "sam"), elem("m4", "import", "robin")},
		Channel: []ContextElement{elem("m5", "human", "robin"), elem("m6", "system", "sam")}}
	for _, tc := range []struct {
		name      string
		mode      string
		session   string
		want      ContextKeys
		wantNoDel bool
	}{
		{"new session: no delivery keys", domain.ModeNew, "s1", ContextKeys{
			Authors: []string{"alex", "sam", "agent", "robin"}, Holders: []string{"sam", "robin"}}, true},
		{"guest run: no delivery keys", domain.ModeGuest, "", ContextKeys{
			Authors: []string{"alex", "sam", "agent", "robin"}, Holders: []string{"sam", "robin"}}, true},
		{"resume without session: no delivery keys", domain.ModeResume, "", ContextKeys{
			Authors: []string{"alex", "sam", "agent", "robin"}, Holders: []string{"sam", "robin"}}, true},
		{"resume: every message", domain.ModeResume, "s1", ContextKeys{
			Authors: []string{"alex", "sam", "agent", "robin"}, Holders: []string{"sam", "robin"},
			Delivered: []string{"m0", "m1", "m2", "m3", "m4", "m5", "m6"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := base
			rc.Mode, rc.SessionID = tc.mode, tc.session
			if got := rc.Keys(); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("keys %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestRunContextFinish(t *testing.T) {
	parties := domain.RunParties{AgentID: "agent", TriggeredBy: "alex"}
	yes := ContextAnswers{Holders: map[string]bool{"sam": true, "alex": true}, Delivered: map[string]bool{"m1": true}}
	none := ContextAnswers{}
	for _, tc := range []struct {
		name      string
		e         ContextElement
		mode      string
		a         ContextAnswers
		role      domain.Role
		trust     domain.Trust
		delivered bool
	}{
		{"trigger person", elem("m1", "human", "alex"), domain.ModeNew, none, domain.RoleUser, domain.TrustTrigger, false},
		{"holder", elem("m2", "human", "sam"), domain.ModeNew, yes, domain.RoleUser, domain.TrustAuthorized, false},
		{"holder answer missing fails closed", elem("m2", "human", "sam"), domain.ModeNew, none, domain.RoleUser, domain.TrustUnverified, false},
		{"person without trigger", elem("m2", "human", "robin"), domain.ModeNew, yes, domain.RoleUser, domain.TrustUnverified, false},
		{"own agent", elem("m3", "agent", "agent"), domain.ModeNew, yes, domain.RoleAssistant, domain.TrustSelf, false},
		{"other agent even if listed as holder", elem("m3", "agent", "sam"), domain.ModeNew, yes, domain.RoleOther, domain.TrustUnverified, false},
		{"import by the trigger person", elem("m3", "import", "alex"), domain.ModeNew, yes, domain.RoleOther, domain.TrustUnverified, false},
		{"app", elem("m3", "app", "sam"), domain.ModeNew, yes, domain.RoleOther, domain.TrustUnverified, false},
		{"system", elem("m3", "system", "sam"), domain.ModeNew, yes, domain.RoleOther, domain.TrustSystem, false},
		{"unknown origin", elem("m3", "robot", "sam"), domain.ModeNew, yes, domain.RoleOther, domain.TrustUnverified, false},
		{"resume delivered", elem("m1", "human", "alex"), domain.ModeResume, yes, domain.RoleUser, domain.TrustTrigger, true},
		{"resume not delivered", elem("m9", "human", "alex"), domain.ModeResume, yes, domain.RoleUser, domain.TrustTrigger, false},
		{"new session ignores delivery answers", elem("m1", "human", "alex"), domain.ModeNew, yes, domain.RoleUser, domain.TrustTrigger, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := RunContext{Parties: parties, Mode: tc.mode, SessionID: "s1"}
			got := rc.Finish(tc.e, tc.a)
			if got.Role != tc.role || got.Trust != tc.trust || got.AlreadyDelivered != tc.delivered || got.ID != tc.e.ID {
				t.Fatalf("got %s/%s/%v, want %s/%s/%v", got.Role, got.Trust, got.AlreadyDelivered, tc.role, tc.trust, tc.delivered)
			}
		})
	}
}
