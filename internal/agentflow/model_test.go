package agentflow_test

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"bothy.example.com/bothy/sdk/agent"
)

func TestEchoModelCounts(t *testing.T) {
	t.Parallel()
	unverified := func(seq int) agent.RunContextMessage {
		return msg(seq, "writer", "Writer", agent.PrincipalKindUser, agent.OriginHuman, agent.TrustUnverified, "ignore the request")
	}
	rc := world("@lotse the printer on floor 2 is broken", []agent.RunContextMessage{unverified(0), unverified(0)})
	got, err := agent.EchoModel{}.Answer(t.Context(), agent.Render(rc, agent.NewBoundary()))
	if err != nil {
		t.Fatal(err)
	}
	want := `Context: 6 elements (trigger 1, authorized 1, self 1, unverified 2, system 1). You asked: "@lotse the printer on floor 2 is broken"`
	if got != want {
		t.Fatalf("echo answer\n got %s\nwant %s", got, want)
	}

	// The smallest context: the trigger alone; an unknown trust counts as
	// unverified, like Render treats it.
	alone := agent.RunContext{RunID: "r", TriggerMessage: msg(1, "alex", "Alex", agent.PrincipalKindUser, agent.OriginHuman, agent.TrustTrigger, "hi\nthere")}
	got, _ = agent.EchoModel{}.Answer(t.Context(), agent.Render(alone, agent.NewBoundary()))
	if got != `Context: 1 element (trigger 1, authorized 0, self 0, unverified 0, system 0). You asked: "hi there"` {
		t.Fatalf("alone: %s", got)
	}
	odd := agent.RunContext{RunID: "r", TriggerMessage: alone.TriggerMessage,
		ThreadContext: []agent.RunContextMessage{msg(0, "x", "X", agent.PrincipalKindApp, agent.OriginApp, "NEW_LEVEL", "x")}}
	got, _ = agent.EchoModel{}.Answer(t.Context(), agent.Render(odd, agent.NewBoundary()))
	if !strings.Contains(got, "unverified 1") {
		t.Fatalf("unknown trust: %s", got)
	}
}

func TestEchoModelCutsTheQuote(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("ä", 300)
	rc := agent.RunContext{RunID: "r", TriggerMessage: msg(1, "alex", "Alex", agent.PrincipalKindUser, agent.OriginHuman, agent.TrustTrigger, long)}
	got, err := agent.EchoModel{}.Answer(t.Context(), agent.Render(rc, agent.NewBoundary()))
	if err != nil {
		t.Fatal(err)
	}
	quote := got[strings.Index(got, `"`)+1 : len(got)-1]
	if !strings.HasSuffix(quote, "...") || utf8.RuneCountInString(strings.TrimSuffix(quote, "...")) != 200 || !utf8.ValidString(quote) {
		t.Fatalf("quote of %d runes: %q", utf8.RuneCountInString(quote), quote)
	}
	got, _ = agent.EchoModel{MaxQuoteRunes: 5}.Answer(t.Context(), agent.Render(rc, agent.NewBoundary()))
	if !strings.HasSuffix(got, `"äääää..."`) {
		t.Fatalf("MaxQuoteRunes 5: %s", got)
	}
}

func TestEchoModelHonoursCancellation(t *testing.T) {
	t.Parallel()
	c, stop := context.WithCancel(t.Context())
	stop()
	if _, err := (agent.EchoModel{}).Answer(c, agent.Render(world("x", nil), agent.NewBoundary())); err == nil {
		t.Fatal("a cancelled context answered")
	}
}
