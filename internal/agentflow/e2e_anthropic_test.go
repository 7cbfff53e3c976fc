package agentflow_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/sdk/agent"
	"bothy.example.com/bothy/sdk/model/anthropic"
	"bothy.example.com/bothy/sdk/model/anthropic/anthropictest"
)

// TestAdapterEndToEndAnthropic runs `bothy serve` and `bothy agent run
// --model anthropic --model-stream` as processes, with the recorded-protocol fake of
// Anthropic's Messages API as the model: the run's prompt goes out as the
// system prompt and one user message with Alex's request in its REQUEST
// block, streamed; the pieces of the streamed reply become the answer, the
// run completes, and the API key is sent and never logged.
func TestAdapterEndToEndAnthropic(t *testing.T) {
	t.Parallel()
	bin, w, base := servedWorld(t)
	alex, lotse := w.Principals["alex"], w.Principals["lotse"]
	main := w.Channels["Support/Allgemein"].MainThreadID

	const key = "sk-ant-e2e-7c1d"
	fake := anthropictest.New(t, "Printer 2 needs ", "a new fuser.")
	const question = "@lotse the printer on floor 2 is broken"
	m := postREST(t, base, alex.Token, main, "an-1", question, "accepted", "Alex's question")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "agent", "run", "--server", base, "--once",
		"--model", "anthropic", "--base-url", fake.URL, "--model-name", "claude-test", "--model-stream")
	cmd.Env = append(os.Environ(), "BOTHY_MODEL_API_KEY="+key, "BOTHY_AGENT_TOKEN="+lotse.Token)
	var logs apitest.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Run(); err != nil {
		t.Fatalf("bothy agent run --model anthropic: %v\n%s", err, logs.String())
	}
	if fake.Count() != 1 {
		t.Fatalf("%d model requests\n%s", fake.Count(), logs.String())
	}
	wantAnthropicRequest(t, fake, key, question)
	autoThread, runID := runOfMessage(t, base, lotse.Token, m.ID)
	answers := agentTexts(t, base, alex.Token, autoThread)
	if len(answers) != 1 || answers[0].ContentMD != "Printer 2 needs a new fuser." || answers[0].Author.ID != lotse.ID {
		t.Fatalf("answers %+v", answers)
	}
	var run restRun
	rest(t, base, alex.Token, http.MethodGet, "/api/v1/runs/"+runID, nil, &run)
	if run.State != "completed" {
		t.Fatalf("run %+v", run)
	}
	if strings.Contains(logs.String(), key) || strings.Contains(logs.String(), lotse.Token) {
		t.Fatalf("the adapter logged a secret:\n%s", logs.String())
	}
}

// wantAnthropicRequest checks the one request the fake of Anthropic's
// Messages API received: the model claude-test, streamed, the API key
// sent, and one user message with Alex's question in its REQUEST block.
func wantAnthropicRequest(t *testing.T, fake *anthropictest.Server, key, question string) {
	t.Helper()
	req, h := fake.Requests[0], fake.Headers[0]
	msgs, _ := req["messages"].([]any)
	if req["model"] != "claude-test" || req["stream"] != true || len(msgs) != 1 ||
		(h.Get("X-Api-Key") != key && h.Get("Authorization") != "Bearer "+key) {
		t.Fatalf("model request %v %v", req, h)
	}
	if user, _ := msgs[0].(map[string]any)["content"].([]any)[0].(map[string]any)["text"].(string); !strings.Contains(user, "<<<REQUEST") || !strings.Contains(user, question) {
		t.Fatalf("user message %q", user)
	}
}

// TestAnthropicFlowNotStreamed: the adapter with sdk/model/anthropic
// asking for one JSON answer (no stream) posts the model's text as the run's
// answer and completes the run.
func TestAnthropicFlowNotStreamed(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	fake := anthropictest.New(t, "Restart the spooler.")
	thread := env.Main("Support/Eskalation")
	env.MustPost("alex", thread, "an-flow-1", "@lotse the printer queue is stuck")
	m, err := anthropic.New(anthropic.Config{BaseURL: fake.URL, Model: "claude-test", APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	client, err := agent.NewClient(env.URL, env.World.Token("lotse"), agent.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Config{Client: client, Model: m, Once: true, PollWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if fake.Count() != 1 || fake.Requests[0]["stream"] == true {
		t.Fatalf("model requests %v", fake.Requests)
	}
	if env.Count(`SELECT count(*) FROM messages WHERE thread_id = $1 AND content_md = 'Restart the spooler.'`, thread) != 1 ||
		env.Count(`SELECT count(*) FROM runs WHERE state = 'completed'`) != 1 {
		t.Fatal("the run was not answered and completed")
	}
}
