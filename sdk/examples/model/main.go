// Command model is a Bothy agent that answers with a language model, in
// forty lines: any OpenAI-compatible server (OpenAI, Azure OpenAI, Ollama,
// vLLM, ...) through sdk/model/openai. The SDK renders each run's context
// so that only the request of the person who asked reads as instructions.
//
//	BOTHY_SERVER=https://chat.example.com BOTHY_AGENT_TOKEN=bothy_a_... \
//	BOTHY_MODEL_BASE_URL=http://localhost:11434/v1 BOTHY_MODEL_NAME=llama3.2 go run ./sdk/examples/model
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
	once := flag.Bool("once", false, "stop after the first run")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	m, err := openai.New(openai.Config{BaseURL: os.Getenv("BOTHY_MODEL_BASE_URL"), Model: os.Getenv("BOTHY_MODEL_NAME"), APIKey: os.Getenv("BOTHY_MODEL_API_KEY")})
	if err != nil {
		log.Fatal(err)
	}
	cfg := agent.Config{Server: os.Getenv("BOTHY_SERVER"), Token: os.Getenv("BOTHY_AGENT_TOKEN"), Once: *once}
	err = agent.Run(ctx, cfg, func(ctx context.Context, t *agent.Task) error {
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
