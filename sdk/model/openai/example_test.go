package openai_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"

	"bothy.example.com/bothy/sdk/agent"
	"bothy.example.com/bothy/sdk/httptool"
	"bothy.example.com/bothy/sdk/model/openai"
	"bothy.example.com/bothy/sdk/model/openai/openaitest"
)

// New makes a model on any OpenAI-compatible server, here a local Ollama,
// and a handler answers each run of the agent with it. With Stream and
// agent.Config.Live the answer reaches the run's live box while the model
// writes.
func ExampleNew() {
	m, err := openai.New(openai.Config{
		BaseURL: "http://localhost:11434/v1",
		Model:   "llama3.2",
		APIKey:  os.Getenv("BOTHY_MODEL_API_KEY"), // empty: no Authorization header
		Stream:  true,
	})
	if err != nil {
		log.Fatal(err)
	}
	cfg := agent.Config{Server: "https://chat.example.com", Token: os.Getenv("BOTHY_AGENT_TOKEN"), Live: true}
	err = agent.Run(context.Background(), cfg, func(ctx context.Context, t *agent.Task) error {
		text, err := m.Answer(ctx, t.Prompt())
		if err != nil {
			return err
		}
		return t.Answer(ctx, text)
	})
	if err != nil {
		log.Fatal(err)
	}
}

// The model may call HTTP tools. A consequential tool (file_ticket here)
// runs at once only while everything the model read is trusted; otherwise
// the SDK first asks the person who made the request to approve the call.
func ExampleConfig_tools() {
	tools, err := httptool.Parse([]byte(`
tools:
  - name: file_ticket
    description: File a ticket in the team's tracker.
    parameters: {type: object, properties: {title: {type: string}}, required: [title]}
    consequential: true
    url: https://tracker.example.com/hooks/tickets
`), httptool.Options{})
	if err != nil {
		log.Fatal(err)
	}
	m, err := openai.New(openai.Config{BaseURL: "https://api.openai.com/v1", Model: "gpt-4o-mini", APIKey: os.Getenv("BOTHY_MODEL_API_KEY"), Tools: tools})
	if err != nil {
		log.Fatal(err)
	}
	// New answers with the Model itself: each run's rendered context goes
	// to m.Answer.
	a, err := agent.New(agent.Config{Server: "https://chat.example.com", Token: os.Getenv("BOTHY_AGENT_TOKEN"), Model: m})
	if err != nil {
		log.Fatal(err)
	}
	if err := a.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
}

// Answer also works outside a run, for instance in a test of an agent's
// prompt handling; openaitest writes the replies of a chat completions
// server so that no real model is needed.
func ExampleModel_Answer() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		openaitest.WriteCompletion(w, "llama3.2", "Restart the printer, Sam.", "", false)
	}))
	defer srv.Close()

	m, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", Model: "llama3.2"})
	if err != nil {
		log.Fatal(err)
	}
	text, err := m.Answer(context.Background(), agent.Prompt{System: "You are the team's helper.", User: "The printer is down."})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(text)
	// Output: Restart the printer, Sam.
}
