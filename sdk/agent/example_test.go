package agent_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"bothy.example.com/bothy/sdk/agent"
)

// Run answers every run of the agent with a handler: here it repeats the
// request and says how far the context may be trusted. The SDK reads the
// stream, claims and renews each run, posts the answer under a key that
// survives retries and takeovers, and finishes the run.
func ExampleRun() {
	cfg := agent.Config{Server: "https://chat.example.com", Token: os.Getenv("BOTHY_AGENT_TOKEN")}
	err := agent.Run(context.Background(), cfg, func(ctx context.Context, t *agent.Task) error {
		c := t.Context()
		return t.Answer(ctx, fmt.Sprintf("You asked: %q (least trusted element: %s)", c.TriggerMessage.ContentMD, c.TrustSummary.Lowest))
	})
	if err != nil {
		log.Fatal(err)
	}
}

// New makes an adapter that answers with a Model (a language model
// backend, or the EchoModel here) instead of a handler.
func ExampleNew() {
	a, err := agent.New(agent.Config{Server: "https://chat.example.com", Token: os.Getenv("BOTHY_AGENT_TOKEN"), Model: agent.EchoModel{}, Live: true})
	if err != nil {
		log.Fatal(err)
	}
	if err := a.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
}

// A refusal of the server is an *Error; errors.Is tells its reason apart.
// A process that lost its claim on a run (another process of the agent
// holds it now) stops working on the run and posts nothing.
func ExampleReasonError() {
	client, err := agent.NewClient("https://chat.example.com", os.Getenv("BOTHY_AGENT_TOKEN"), agent.ClientOptions{})
	if err != nil {
		log.Fatal(err)
	}
	_, err = client.RenewRun(context.Background(), "0b6e1f9c-4a6e-4f3b-9d51-2c1f2e3a4b5c", "adapter-alex-laptop")
	switch {
	case errors.Is(err, agent.ErrRunClaimed):
		log.Print("another process holds the run: stop, post nothing")
	case errors.Is(err, agent.ErrRunNotActive):
		log.Print("the run has ended")
	case err != nil:
		log.Fatal(err)
	}
}
