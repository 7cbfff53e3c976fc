// Package agent is Bothy's agent SDK and reference agent adapter: a small, real client
// that connects an agent to a Bothy server using only the public GraphQL
// API (POST /graphql with the agent's bearer token), as an adapter outside
// the server would.
//
// It has four parts:
//
//   - Client: GraphQL over HTTP with typed, strictly decoded answers;
//     refusals are *Error values carrying extensions code, reason and
//     status; every call is bounded by a timeout and by its context.
//   - Adapter: the event loop. It long-polls agentEvents; for each
//     agent.invocation it reads the run's context, then claims and starts
//     the run (the context is read before run.start: docs/design/trust.md),
//     renders the context, asks its Model, reads the context again and
//     asks again for follow-ups that came meanwhile, posts the answer into
//     the run's thread with the run id and a clientMsgId naming the request
//     answered (AnswerKey), and finishes the run. It acknowledges the
//     stream as it goes, but never past a follow-up the model has not seen.
//     run.cancel_requested is confirmed with finishRun(CANCELLED); a reply
//     to a request its author lost is never posted.
//   - Run and Handler: the SDK's entry point, agent.Run(ctx, Config{Server,
//     Token}, handler), which calls the handler with a Task (Context,
//     Prompt, FollowUps, Answer, Fail) per run and does all of the above.
//   - Model: the pluggable answerer of the reference adapter; EchoModel
//     needs no model service; sdk/model/openai (any OpenAI-compatible chat
//     completions server) and sdk/model/anthropic are backends on the
//     providers' libraries, which offer tools only when ToolsAllowed holds
//     for the context's lowest trust (RunContext.TrustSummary).
//   - Render and NewBoundary: the formatting helper that turns a run
//     context into a Prompt, fencing every unverified element into a data
//     block delimited by a per-run random boundary, so that instructions
//     hidden in messages of people without trigger, other agents, apps or
//     imports cannot pass as the request
//     (docs/design/trust.md#rendering-for-a-model).
//
// The command `bothy agent run --token T --server URL [--once] [--model
// echo|openai --base-url URL --model-name NAME]` runs an Adapter;
// docs/adapter.md describes the API flow and the prompt layout for adapters
// in other languages. Minimal use in Go:
//
//	c, err := adapter.NewClient("http://127.0.0.1:8080", token, adapter.ClientOptions{})
//	if err != nil { ... }
//	a, err := adapter.New(adapter.Config{Client: c, Model: adapter.EchoModel{}})
//	if err != nil { ... }
//	err = a.Run(ctx) // until ctx ends
//
// Logs carry ids, event types, outcomes, error codes and trust counts, never
// message content, handles, display names, tokens or model keys
// (docs/design/model.md#privacy).
package agent
