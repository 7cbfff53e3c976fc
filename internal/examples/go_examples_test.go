// Package examples_test builds the examples of Bothy's SDKs (Go, Python,
// TypeScript) as their users do and runs each against a real server and
// through the conformance kit. The tests live in the server's module, not
// beside the examples, because they start a server: an SDK imports nothing
// of the server.
package examples_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/devtools/gobuild"
	"bothy.example.com/bothy/sdk/model/openai/openaitest"
)

// build compiles the Go SDK's example in folder dir of sdk/examples and
// returns its binary.
func build(t *testing.T, dir string) string {
	t.Helper()
	return gobuild.Binary(t, "bothy.example.com/bothy/sdk/examples/"+dir)
}

// answerIn returns the text of Lotse's answers in thread, oldest first.
func answersIn(env *apitest.Env, thread string) []string {
	var out []string
	rows, err := env.Pool.Query(context.Background(), `SELECT m.content_md FROM messages m JOIN principals p ON p.id = m.author_principal_id
		WHERE m.thread_id = $1 AND p.handle = 'lotse' AND m.kind = 'text' ORDER BY m.thread_seq`, thread)
	if err != nil {
		return nil
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		if rows.Scan(&s) == nil {
			out = append(out, s)
		}
	}
	return out
}

// TestEchoExample: the forty-line echo agent, built and run with -once
// against a server, answers a person's question in the run's thread and
// exits once the run has ended.
func TestEchoExample(t *testing.T) {
	t.Parallel()
	bin := build(t, "echo")
	env := apitest.Start(t, apitest.Options{})
	m := env.MustPost("alex", env.Main("Support/Eskalation"), "echo-1", "@lotse is the printer fixed?")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-once")
	cmd.Env = append(os.Environ(), "BOTHY_SERVER="+env.URL, "BOTHY_AGENT_TOKEN="+env.World.Token("lotse"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("echo -once: %v\n%s", err, out)
	}
	thread := env.Main("Support/Eskalation")
	if started, ok := m["started_thread"].(map[string]any); ok {
		thread = started["id"].(string)
	}
	got := answersIn(env, thread)
	if len(got) != 1 || !strings.HasPrefix(got[0], `You asked: "@lotse is the printer fixed?"`) || !strings.Contains(got[0], "least trusted element: ") {
		t.Fatalf("answers %q", got)
	}
	if n := env.Count(`SELECT count(*) FROM runs WHERE state = 'completed'`); n != 1 {
		t.Fatalf("%d completed runs", n)
	}
}

// TestModelExample: the model agent, built and run with -once
// against a server and the recorded-protocol fake of a chat completions
// server, sends the run's rendered prompt (the request in its REQUEST
// block) with the key, and posts the model's reply as the answer.
func TestModelExample(t *testing.T) {
	t.Parallel()
	bin := build(t, "model")
	env := apitest.Start(t, apitest.Options{})
	fake := openaitest.New(t, openaitest.Reply{Content: "Printer 2 needs a new fuser."})
	env.MustPost("alex", env.Main("Support/Eskalation"), "model-1", "@lotse the printer on floor 2 is broken")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-once")
	cmd.Env = append(os.Environ(), "BOTHY_SERVER="+env.URL, "BOTHY_AGENT_TOKEN="+env.World.Token("lotse"),
		"BOTHY_MODEL_BASE_URL="+fake.BaseURL(), "BOTHY_MODEL_NAME=test-model", "BOTHY_MODEL_API_KEY=sk-example")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("model -once: %v\n%s", err, out)
	}
	reqs := fake.Requests()
	if len(reqs) != 1 || reqs[0].Authorization != "Bearer sk-example" || len(reqs[0].Body.Messages) != 2 ||
		!strings.Contains(reqs[0].Body.Messages[1].Content, "<<<REQUEST") || !strings.Contains(reqs[0].Body.Messages[1].Content, "the printer on floor 2 is broken") {
		t.Fatalf("model requests %+v", reqs)
	}
	if got := answersIn(env, env.Main("Support/Eskalation")); len(got) != 1 || got[0] != "Printer 2 needs a new fuser." {
		t.Fatalf("answers %q", got)
	}
}
