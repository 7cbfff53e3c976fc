// Command echo is a Bothy agent in forty lines: it answers every run with
// what the person asked and the follow-ups they sent, and says how far the
// context may be trusted. Run it with the agent's token:
//
//	BOTHY_SERVER=https://chat.example.com BOTHY_AGENT_TOKEN=bothy_a_... go run ./sdk/examples/echo
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"bothy.example.com/bothy/sdk/agent"
)

func main() {
	once := flag.Bool("once", false, "stop after the first run")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	cfg := agent.Config{Server: os.Getenv("BOTHY_SERVER"), Token: os.Getenv("BOTHY_AGENT_TOKEN"), Once: *once}
	err := agent.Run(ctx, cfg, func(ctx context.Context, t *agent.Task) error {
		c := t.Context()
		reply := fmt.Sprintf("You asked: %q", c.TriggerMessage.ContentMD)
		for _, f := range t.FollowUps() {
			reply += fmt.Sprintf("\nThen: %q", f.ContentMD)
		}
		reply += fmt.Sprintf("\n(least trusted element: %s)", c.TrustSummary.Lowest)
		return t.Answer(ctx, reply)
	})
	if err != nil {
		log.Fatal(err)
	}
}
