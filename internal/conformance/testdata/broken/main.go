// Command broken is an adapter on the SDK that breaks one rule of the run
// contract on purpose (-break), for the conformance kit's proof that it can
// fail: untrusted puts the whole rendered context in the system message;
// ignore-cancel keeps the model call going after the run's context ended.
package main

import (
	"context"
	"flag"
	"log"
	"os"
	"os/signal"
	"syscall"

	"bothy.example.com/bothy/sdk/agent"
	"bothy.example.com/bothy/sdk/model/openai"
)

func main() {
	rule := flag.String("break", "", "untrusted or ignore-cancel")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	m, err := openai.New(openai.Config{BaseURL: os.Getenv("BOTHY_MODEL_BASE_URL"), Model: os.Getenv("BOTHY_MODEL_NAME"), APIKey: os.Getenv("BOTHY_MODEL_API_KEY")})
	if err != nil {
		log.Fatal(err)
	}
	cfg := agent.Config{Server: os.Getenv("BOTHY_SERVER"), Token: os.Getenv("BOTHY_AGENT_TOKEN")}
	err = agent.Run(ctx, cfg, func(ctx context.Context, t *agent.Task) error {
		p := t.Prompt()
		mctx := ctx
		switch *rule {
		case "untrusted":
			p.System += "\n" + p.User
		case "ignore-cancel":
			mctx = context.WithoutCancel(ctx)
		}
		text, err := m.Answer(mctx, p)
		if err != nil {
			return err
		}
		return t.Answer(ctx, text)
	})
	if err != nil {
		log.Fatal(err)
	}
}
