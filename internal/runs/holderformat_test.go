package runs_test

import (
	"testing"

	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/devtools/runtest"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/platform/problem"
)

// TestAnswerHolderFormat: an answer whose holder is no holder name (1 to
// 128 letters, digits, '.', '_', ':' or '-') is invalid input on the
// holder, at the module as on the wire, and nothing is stored; the run's
// own holder still answers afterwards.
func TestAnswerHolderFormat(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	lotse := env.Principal("lotse")
	run := runtest.RunOf(t, env, env.Post("alex", env.Main("Support/Eskalation"), "h1", "@lotse check the printer"))
	r, err := env.Runs.Start(ctx, lotse, run, "proc-a")
	if err != nil {
		t.Fatal(err)
	}
	long := make([]byte, 129)
	for i := range long {
		long[i] = 'a'
	}
	for i, h := range []string{"bad holder!", "proc/a", string(long), "pröc"} {
		id := "bad-" + string(rune('a'+i))
		_, _, err := env.Messaging.Create(ctx, lotse, r.ThreadID, messaging.Input{ClientMsgID: id, ContentMD: "an answer", RunID: run, Holder: h})
		p := problem.From("runs.TestAnswerHolderFormat", err)
		if p == nil || p.Code != problem.ValidationFailed || len(p.Fields) != 1 || p.Fields[0].Pointer != "holder" || p.Fields[0].Code != "invalid_format" {
			t.Fatalf("holder %q: %v, want validation_failed on holder", h, err)
		}
		if n := env.Count(`SELECT count(*) FROM messages WHERE client_msg_id = $1`, id); n != 0 {
			t.Fatalf("holder %q: the refused answer is stored", h)
		}
	}
	if _, _, err := env.Messaging.Create(ctx, lotse, r.ThreadID, messaging.Input{ClientMsgID: "good", ContentMD: "an answer", RunID: run, Holder: "proc-a"}); err != nil {
		t.Fatalf("the holder's answer: %v", err)
	}
}
