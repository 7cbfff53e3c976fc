// Package agent is Bothy's Go SDK for agents. An agent answers the runs a
// Bothy server starts for it when a person with the right to addresses it:
//
//	err := agent.Run(ctx, agent.Config{Server: "https://chat.example.com", Token: token},
//		func(ctx context.Context, t *agent.Task) error {
//			// t.Context(): the run's elements, each with its trust;
//			// t.Prompt(): the same rendered for a model, the request apart from data;
//			// t.FollowUps(): messages the person sent since, not shown before.
//			return t.Answer(ctx, "...") // or t.Fail("reason")
//		})
//
// Run owns the protocol: the event stream (WebSocket, falling back to the
// long poll), reading the context before claiming the run, the claim and
// its renewals at a third of the lease, fencing with a holder per process,
// acknowledgements that deliver follow-ups only once they were shown,
// answer keys that survive takeovers, an optional answer outbox on disk
// (Config.Outbox), a bound on runs answered at once (Config.MaxConcurrent),
// retries with backoff and logs with a kind per failure (ErrorKind). The
// handler's ctx ends when a person cancels the run, when the person who
// asked loses the right to, or when another process took the run over.
// Model backends live in [bothy.example.com/bothy/sdk/model/openai] and
// [bothy.example.com/bothy/sdk/model/anthropic]. The module's examples
// (bothy.example.com/bothy/sdk/examples/echo and .../model) are an echo
// agent of forty lines and a model agent, with a live box and HTTP tools,
// of under sixty, each passing the conformance kit (bothy conformance);
// Bothy's adapter guide is the tutorial, and the protocol for other
// languages.
// It uses only the public GraphQL API, as any client outside the server.
//
// Underneath, for adapters that need more control, the package has four
// parts:
//
//   - Client: GraphQL over HTTP with typed, strictly decoded answers;
//     refusals are *Error values carrying extensions code, reason and
//     status; every call is bounded by a timeout and by its context.
//   - Adapter: the event loop. It long-polls agentEvents; for each
//     agent.invocation it reads the run's context, then claims and starts
//     the run (the context is read before run.start: the trust design),
//     renders the context, asks its Model, reads the context again and
//     asks again for follow-ups that came meanwhile, posts the answer into
//     the run's thread with the run id and a clientMsgId naming the request
//     answered (AnswerKey), and finishes the run. It acknowledges the
//     stream as it goes, but never past a follow-up the model has not seen.
//     run.cancel_requested is confirmed with finishRun(CANCELLED); a reply
//     to a request its author lost is never posted.
//   - Run and Handler: the SDK's entry point, agent.Run(ctx, Config{Server,
//     Token}, handler), which calls the handler with a Task (Context,
//     Prompt, FollowUps, InPlay, Lower, Answer, Fail) per run and does all
//     of the above.
//   - Model: the pluggable answerer of the reference adapter; EchoModel
//     needs no model service; [bothy.example.com/bothy/sdk/model/openai] (any OpenAI-compatible chat
//     completions server) and [bothy.example.com/bothy/sdk/model/anthropic] are backends on the
//     providers' libraries, which run the model's tool calls through
//     RunTool: a consequential call runs without asking only while the
//     run's in-play trust (Task.InPlay: the context's lowest, lowered by
//     every tool result the model read, per Tool.OutputTrust) passes
//     ToolsAllowed, and otherwise after the person approved it (Ask).
//     Every answer declares the in-play trust (MessageCreate.InputTrust),
//     so the label follows the data.
//   - Render and NewBoundary: the formatting helper that turns a run
//     context into a Prompt, fencing every unverified element into a data
//     block delimited by a per-run random boundary, so that instructions
//     hidden in messages of people without trigger, other agents, apps or
//     imports cannot pass as the request
//     (the trust design: rendering for a model). An element is placed
//     by the lower of its trust and its provenance, so the agent's own
//     answer derived from untrusted text is data too.
//   - Files: Task.PromptWithFiles and Task.FileText read the text of the
//     run's files as UNVERIFIED DATA blocks and lower the in-play trust
//     (Config.ReadFiles for a Model); Task.AttachFile and AttachFileTool
//     attach a file to the answer (the capability files_out).
//
// The command `bothy agent run --token T --server URL [--once] [--model
// echo|openai|anthropic --base-url URL --model-name NAME]` runs an Adapter
// with a Model:
//
//	c, err := agent.NewClient("http://127.0.0.1:8080", token, agent.ClientOptions{})
//	if err != nil { ... }
//	a, err := agent.New(agent.Config{Client: c, Model: agent.EchoModel{}})
//	if err != nil { ... }
//	err = a.Run(ctx) // until ctx ends
//
// Logs carry ids, event types, outcomes, error codes and trust counts, never
// message content, handles, display names, tokens or model keys
// (the privacy rules of the model design).
package agent
