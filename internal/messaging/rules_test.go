package messaging_test

import (
	"testing"

	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/platform/problem"
)

func TestCreateRules_RunID(t *testing.T) {
	t.Parallel()
	ok := messaging.Input{ClientMsgID: "c1", ContentMD: "hello"}
	withRun := ok
	withRun.RunID = "0190b9a4-0000-7000-8000-000000000001"
	tests := []struct {
		name    string
		kind    identity.Kind
		in      messaging.Input
		first   bool
		ptr     string
		pointer string
		code    string
	}{
		{"absent passes", identity.KindUser, ok, false, "", "", ""},
		{"agent may carry it", identity.KindAgent, withRun, false, "", "", ""},
		{"person", identity.KindUser, withRun, false, "", "/run_id", "run_mismatch"},
		{"app", identity.KindApp, withRun, false, "", "/run_id", "run_mismatch"},
		{"first message of an agent's thread", identity.KindAgent, withRun, true, "/first_message", "/first_message/run_id", "run_mismatch"},
		{"first message of a person's thread", identity.KindUser, withRun, true, "/first_message", "/first_message/run_id", "run_mismatch"},
		{"first message of an app's thread", identity.KindApp, withRun, true, "/first_message", "/first_message/run_id", "run_mismatch"},
		{"card stays not enabled", identity.KindAgent, messaging.Input{ClientMsgID: "c", ContentMD: "x", Kind: "card"}, false, "", "/kind", "not_enabled"},
		{"voice stays not enabled", identity.KindUser, messaging.Input{ClientMsgID: "c", ContentMD: "x", Kind: "voice"}, false, "", "/kind", "not_enabled"},
		{"system is no kind a client sends", identity.KindAgent, messaging.Input{ClientMsgID: "c", ContentMD: "x", Kind: "system"}, false, "", "/kind", "invalid_enum"},
		{"blank content", identity.KindAgent, messaging.Input{ClientMsgID: "c", ContentMD: "  "}, false, "", "/content_md", "required"},
		{"content too long", identity.KindAgent, messaging.Input{ClientMsgID: "c", ContentMD: "123456789"}, false, "", "/content_md", "too_long"},
		{"no client_msg_id", identity.KindAgent, messaging.Input{ContentMD: "x"}, false, "", "/client_msg_id", "invalid_length"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := messaging.ValidateCreate(tc.kind, tc.in, tc.ptr, tc.first, 8)
			if tc.code == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			p := problem.From("messaging.testCreateRules_RunID", err)
			if p == nil || p.Code != problem.ValidationFailed || len(p.Fields) != 1 || p.Fields[0].Pointer != tc.pointer || p.Fields[0].Code != tc.code {
				t.Fatalf("got %+v, want %s at %s", p, tc.code, tc.pointer)
			}
		})
	}
}
