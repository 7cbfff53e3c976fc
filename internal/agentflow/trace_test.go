package agentflow_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/platform/tracing/tracingtest"
	"bothy.example.com/bothy/sdk/agent"
)

// TestRunInOneTrace: with tracing on, Alex's mention stores its trace
// context on the run it starts, and the SDK's adapter sends it on every
// call of the run, so the server's spans of the mention, the context read,
// the claim, the live box, the answer and the finish are one trace. Each
// request span names its principal, the calls of the run name the run, and
// no span carries the message's text, the answer's or a token.
func TestRunInOneTrace(t *testing.T) {
	t.Parallel()
	recv := tracingtest.NewReceiver(t)
	env := apitest.Start(t, apitest.Options{Config: map[string]string{config.TracingOTLPEndpoint: recv.URL}})
	thread := env.Main("Support/Eskalation")
	const question, answer = "@lotse is the printer on the second floor fixed?", "Robin replaced the fuser; it prints again."
	alex, lotse := env.World.Token("alex"), env.World.Token("lotse")
	r := env.RESTWith(http.MethodPost, "/api/v1/threads/"+thread+"/messages", alex,
		map[string]any{"client_msg_id": "trace-run-1", "content_md": question}, http.Header{"Correlation-Id": {"trace-mention-0001"}})
	if r.Status != http.StatusCreated {
		t.Fatalf("mention: %d %s", r.Status, r.Body)
	}

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var runID string
	err := agent.Run(ctx, agent.Config{Server: env.URL, Token: lotse, Once: true, Live: true},
		func(ctx context.Context, task *agent.Task) error {
			runID = task.RunID()
			task.Status(ctx, "looking at the printer log")
			return task.Answer(ctx, answer)
		})
	if err != nil {
		t.Fatal(err)
	}
	var stored string
	if err := env.Pool.QueryRow(t.Context(), `SELECT coalesce(traceparent, '') FROM runs WHERE id = $1 AND state = 'completed'`, runID).Scan(&stored); err != nil {
		t.Fatalf("run %s: %v", runID, err)
	}
	// The read faces give the same value.
	got := env.MustREST(t, http.MethodGet, "/api/v1/runs/"+runID, alex, nil, http.StatusOK)
	if got["traceparent"] != stored {
		t.Errorf("REST run traceparent %v, stored %q", got["traceparent"], stored)
	}
	env.Stop()

	if rej := recv.Rejected(); len(rej) > 0 {
		t.Fatalf("the collector rejected %v", rej)
	}
	spans := recv.Spans()
	var mention *tracingtest.Span
	for i, s := range spans {
		if s.Attributes["bothy.correlation_id"] == "trace-mention-0001" {
			mention = &spans[i]
		}
	}
	if mention == nil {
		t.Fatalf("no request span of the mention among %d spans", len(spans))
	}
	if want := "00-" + mention.TraceID + "-"; !strings.HasPrefix(stored, want) {
		t.Fatalf("the run stored traceparent %q, want one in the mention's trace %s", stored, mention.TraceID)
	}
	if mention.Attributes["bothy.principal_id"] != env.World.ID("alex") || mention.Attributes["bothy.thread_id"] != thread {
		t.Errorf("mention's request span attributes %v, want Alex's principal id and the thread", mention.Attributes)
	}

	wantRunOperationsInTrace(t, spans, mention.TraceID, env.World.ID("lotse"), runID)
	wantNoSecretInSpans(t, spans, map[string]string{"the question": question, "the answer": answer, "Alex's token": alex, "the agent's token": lotse,
		"the status line": "printer log"})
}

// wantNoSecretInSpans checks that no attribute of any span carries one of
// secrets (each by what it is): a trace leaves the content of messages and
// the tokens out.
func wantNoSecretInSpans(t *testing.T, spans []tracingtest.Span, secrets map[string]string) {
	t.Helper()
	for _, s := range spans {
		for k, v := range s.Attributes {
			for what, secret := range secrets {
				if strings.Contains(v, secret) {
					t.Errorf("span %q carries %s in %s", s.Name, what, k)
				}
			}
		}
	}
}

// wantRunOperationsInTrace checks that every GraphQL operation of run
// runID lies below its request span in the mention's trace traceID, and
// that the request span names the agent agentID and the run, as the
// operation span does the run.
func wantRunOperationsInTrace(t *testing.T, spans []tracingtest.Span, traceID, agentID, runID string) {
	t.Helper()
	byID := map[string]tracingtest.Span{}
	for _, s := range spans {
		byID[s.SpanID] = s
	}
	seen := map[string]bool{}
	for _, op := range spans {
		name := op.Attributes["graphql.operation.name"]
		switch name {
		case "RunContext", "StartRun", "UpdateRunLive", "CreateMessage", "FinishRun":
		default:
			continue
		}
		req, ok := byID[op.ParentSpanID]
		if !ok || req.Kind != tracepb.Span_SPAN_KIND_SERVER {
			t.Errorf("operation %s has no request span as its parent", name)
			continue
		}
		if req.TraceID != traceID {
			t.Errorf("%s ran in trace %s, not in the mention's %s", name, req.TraceID, traceID)
		}
		if req.Attributes["bothy.principal_id"] != agentID || req.Attributes["bothy.run_id"] != runID {
			t.Errorf("%s: request span attributes %v, want the agent's principal id and run %s", name, req.Attributes, runID)
		}
		if op.Attributes["bothy.run_id"] != runID {
			t.Errorf("%s: operation span attributes %v, want run %s", name, op.Attributes, runID)
		}
		seen[name] = true
	}
	for _, name := range []string{"RunContext", "StartRun", "UpdateRunLive", "CreateMessage", "FinishRun"} {
		if !seen[name] {
			t.Errorf("no span of the run's %s", name)
		}
	}
}
