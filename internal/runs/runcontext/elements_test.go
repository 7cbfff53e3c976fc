package runcontext

import (
	"reflect"
	"testing"

	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/runs/domain"
)

func elem(id string, origin messaging.Origin, author string) Element {
	return Element{ContextItem: messaging.ContextItem{ID: id, Origin: origin, AuthorID: author}}
}

func TestRunContextKeys(t *testing.T) {
	t.Parallel()
	parties := domain.RunParties{AgentID: "agent", TriggeredBy: "alex"}
	base := RunContext{Parties: parties, Trigger: elem("m0", "human", "alex"),
		Thread:  []Element{elem("m1", "human", "sam"), elem("m2", "agent", "agent"), elem("m3", "human", "sam"), elem("m4", "import", "robin")},
		Channel: []Element{elem("m5", "human", "robin"), elem("m6", "system", "sam")}}
	every := Keys{Authors: []string{"alex", "sam", "agent", "robin"}, Holders: []string{"sam", "robin"},
		Delivered: []string{"m1", "m2", "m3", "m4", "m5", "m6"}}
	// already_delivered is asked in every mode (the session's follow-ups,
	// or the guest run's own), never for the trigger.
	for _, tc := range []struct {
		name    string
		mode    domain.Mode
		session string
	}{
		{"new session", domain.ModeNew, "s1"},
		{"guest run", domain.ModeGuest, ""},
		{"resume", domain.ModeResume, "s1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := base
			rc.Mode, rc.SessionID, rc.RunID = tc.mode, tc.session, "r1"
			if got := rc.Keys(); !reflect.DeepEqual(got, every) {
				t.Fatalf("keys %+v, want %+v", got, every)
			}
		})
	}
	t.Run("follow-ups", func(t *testing.T) {
		rc := base
		got := rc.KeysOf([]Element{elem("f1", "human", "robin"), elem("f2", "human", "alex"), elem("f3", "human", "robin")})
		want := Keys{Authors: []string{"robin", "alex"}, Holders: []string{"robin"}, Delivered: []string{"f1", "f2", "f3"}}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("keys %+v, want %+v", got, want)
		}
	})
	t.Run("trigger only", func(t *testing.T) {
		rc := RunContext{Parties: parties, Trigger: elem("m0", "human", "alex")}
		want := Keys{Authors: []string{"alex"}}
		if got := rc.Keys(); !reflect.DeepEqual(got, want) {
			t.Fatalf("keys %+v, want %+v", got, want)
		}
	})
}

func TestRunContextFinish(t *testing.T) {
	t.Parallel()
	parties := domain.RunParties{AgentID: "agent", TriggeredBy: "alex"}
	yes := Answers{Holders: map[string]bool{"sam": true, "alex": true}, Delivered: map[string]bool{"m1": true, "m0": true}}
	none := Answers{}
	for _, tc := range []struct {
		name      string
		e         Element
		a         Answers
		role      domain.Role
		trust     domain.Trust
		delivered bool
	}{
		{"trigger person", elem("m1", "human", "alex"), none, domain.RoleUser, domain.TrustTrigger, false},
		{"holder", elem("m2", "human", "sam"), yes, domain.RoleUser, domain.TrustAuthorized, false},
		{"holder answer missing fails closed", elem("m2", "human", "sam"), none, domain.RoleUser, domain.TrustUnverified, false},
		{"person without trigger", elem("m2", "human", "robin"), yes, domain.RoleUser, domain.TrustUnverified, false},
		{"own agent", elem("m3", "agent", "agent"), yes, domain.RoleAssistant, domain.TrustSelf, false},
		{"other agent even if listed as holder", elem("m3", "agent", "sam"), yes, domain.RoleOther, domain.TrustUnverified, false},
		{"import by the trigger person", elem("m3", "import", "alex"), yes, domain.RoleOther, domain.TrustUnverified, false},
		{"app", elem("m3", "app", "sam"), yes, domain.RoleOther, domain.TrustUnverified, false},
		{"system", elem("m3", "system", "sam"), yes, domain.RoleOther, domain.TrustSystem, false},
		{"unknown origin", elem("m3", "robot", "sam"), yes, domain.RoleOther, domain.TrustUnverified, false},
		{"delivered", elem("m1", "human", "alex"), yes, domain.RoleUser, domain.TrustTrigger, true},
		{"not delivered", elem("m9", "human", "alex"), yes, domain.RoleUser, domain.TrustTrigger, false},
		{"the trigger is never delivered", elem("m0", "human", "alex"), yes, domain.RoleUser, domain.TrustTrigger, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := RunContext{Parties: parties, Mode: domain.ModeNew, SessionID: "s1", Trigger: elem("m0", "human", "alex")}
			got := rc.Finish(tc.e, tc.a)
			if got.Role != tc.role || got.Trust != tc.trust || got.AlreadyDelivered != tc.delivered || got.ID != tc.e.ID {
				t.Fatalf("got %s/%s/%v, want %s/%s/%v", got.Role, got.Trust, got.AlreadyDelivered, tc.role, tc.trust, tc.delivered)
			}
		})
	}
}
