package anthropic_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"

	"bothy.example.com/bothy/sdk/agent"
	"bothy.example.com/bothy/sdk/model/anthropic"
	"bothy.example.com/bothy/sdk/model/anthropic/anthropictest"
)

// New makes a model on Anthropic's Messages API, and a handler answers
// each run of the agent with it. With Stream and agent.Config.Live the
// answer reaches the run's live box while the model writes.
func ExampleNew() {
	m, err := anthropic.New(anthropic.Config{APIKey: os.Getenv("BOTHY_MODEL_API_KEY"), Model: "claude-sonnet-4-5", Stream: true})
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

// Answer also works outside a run, for instance in a test of an agent's
// prompt handling; anthropictest writes the replies of the Messages API
// (here streamed, in pieces) so that no real model is needed.
func ExampleModel_Answer() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		anthropictest.WriteMessage(w, "claude-sonnet-4-5", []string{"Restart ", "the printer, ", "Robin."}, "", true)
	}))
	defer srv.Close()

	m, err := anthropic.New(anthropic.Config{BaseURL: srv.URL, APIKey: "sk-ant-example", Model: "claude-sonnet-4-5", Stream: true})
	if err != nil {
		log.Fatal(err)
	}
	text, err := m.Answer(context.Background(), agent.Prompt{System: "You are the team's helper.", User: "The printer is down."})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(text)
	// Output: Restart the printer, Robin.
}
