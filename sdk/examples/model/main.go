// Command model is a Bothy agent that answers with a language model, in
// about sixty lines: any OpenAI-compatible server (OpenAI, Azure OpenAI, Ollama,
// vLLM, ...) through sdk/model/openai. The SDK renders each run's context
// so that only the request of the person who asked reads as instructions.
// The answer streams into the run's live box while the model writes, and
// the model may call the HTTP tools of the tools file named by BOTHY_TOOLS
// (docs/adapter.md#http-tools), the consequential ones behind the SDK's
// approval gate. The model reads the text of the files attached to the
// run's context as data (Task.PromptWithFiles) and may attach a file to
// its answer (agent.AttachFileTool; the agent needs the capability
// files_out).
//
//	BOTHY_SERVER=https://chat.example.com BOTHY_AGENT_TOKEN=bothy_a_... BOTHY_TOOLS=tools.yaml \
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
	"bothy.example.com/bothy/sdk/httptool"
	"bothy.example.com/bothy/sdk/model/openai"
)

func main() {
	once := flag.Bool("once", false, "stop after the first run")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var tools []agent.Tool
	if file := os.Getenv("BOTHY_TOOLS"); file != "" {
		var err error
		if tools, err = httptool.Load(file, httptool.Options{}); err != nil {
			log.Fatal(err)
		}
	}
	tools = append(tools, agent.AttachFileTool())
	// Stream: the answer reaches the live box (Config.Live) piece by piece.
	m, err := openai.New(openai.Config{BaseURL: os.Getenv("BOTHY_MODEL_BASE_URL"), Model: os.Getenv("BOTHY_MODEL_NAME"),
		APIKey: os.Getenv("BOTHY_MODEL_API_KEY"), Stream: true, Tools: tools})
	if err != nil {
		log.Fatal(err)
	}
	cfg := agent.Config{Server: os.Getenv("BOTHY_SERVER"), Token: os.Getenv("BOTHY_AGENT_TOKEN"), Once: *once, Live: true}
	err = agent.Run(ctx, cfg, func(ctx context.Context, t *agent.Task) error {
		// The files' texts come as data, and reading them lowers the run's
		// in-play trust: a consequential tool then needs an approval.
		text, err := m.Answer(ctx, t.PromptWithFiles(ctx))
		if err != nil {
			return err
		}
		return t.Answer(ctx, text)
	})
	if err != nil {
		log.Fatal(err)
	}
}
