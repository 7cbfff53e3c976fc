package runner_test

import (
	"context"
	"log"
	"os"

	"bothy.example.com/bothy/sdk/agent"
	"bothy.example.com/bothy/sdk/runner"
)

// Handler hands each run to a command, here an MCP-capable agent runtime
// started once per run. The runner and the adapter share the client and
// the holder: the run token the runner mints acts under the adapter's
// claim on the run.
func ExampleHandler() {
	server, token := "https://chat.example.com", os.Getenv("BOTHY_AGENT_TOKEN")
	client, err := agent.NewClient(server, token, agent.ClientOptions{})
	if err != nil {
		log.Fatal(err)
	}
	holder := agent.NewHolder()
	h, err := runner.Handler(runner.Config{
		// The command reads the prompt on its standard input and answers
		// through the server's MCP tools with the run token.
		Command: `exec mcp-agent --mcp-url "$BOTHY_MCP_URL" --mcp-token "$BOTHY_MCP_TOKEN"`,
		Client:  client,
		Server:  server,
		Holder:  holder,
	})
	if err != nil {
		log.Fatal(err)
	}
	cfg := agent.Config{Server: server, Token: token, Client: client, Holder: holder}
	if err := agent.Run(context.Background(), cfg, h); err != nil {
		log.Fatal(err)
	}
}
