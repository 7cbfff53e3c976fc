// Command graphql drives Bothy's core flow through a client that genqlient
// generated from schema/*.graphqls and operations.graphql (the test
// generates generated.go beside this file): a person mentions an agent; the
// agent reads the run context, starts the run, answers with the run id and
// finishes it. It exits 1 with the step that failed.
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/Khan/genqlient/graphql"
)

// bearer adds the token of one principal to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func client(token string) graphql.Client {
	return graphql.NewClient(os.Getenv("BOTHY_URL")+"/graphql", &http.Client{Transport: bearer{token}, Timeout: 30 * time.Second})
}

func fail(step string, err any) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", step, err)
	os.Exit(1)
}

func main() {
	ctx := context.Background()
	alex, lotse := client(os.Getenv("BOTHY_ALEX")), client(os.Getenv("BOTHY_LOTSE"))
	const ask = "@lotse the printer is down (genqlient)"

	posted, err := Post(ctx, alex, os.Getenv("BOTHY_THREAD"), MessageCreate{ClientMsgId: "genqlient-ask", ContentMd: ask})
	if err != nil {
		fail("alex posts", err)
	}
	m := posted.CreateMessage.Message
	if m.TriggerState == nil || *m.TriggerState != TriggerStateAccepted || m.StartedThread == nil {
		fail("alex posts", fmt.Sprintf("%+v", m))
	}

	var runID string
	var after *string
	for i := 0; i < 10 && runID == ""; i++ {
		wait := 5
		page, err := AgentEvents(ctx, lotse, after, &wait)
		if err != nil {
			fail("lotse polls", err)
		}
		for _, ev := range page.AgentEvents.Events {
			if inv, ok := ev.(*AgentEventsAgentEventsAgentEventPageEventsAgentInvocationEvent); ok && inv.MessageId == m.Id {
				runID = inv.RunId
			}
		}
		next := page.AgentEvents.NextAfter
		after = &next
	}
	if runID == "" {
		fail("lotse polls", "no invocation")
	}

	rc, err := RunContext(ctx, lotse, runID)
	if err != nil {
		fail("lotse reads the context", err)
	}
	if rc.Run == nil || rc.Run.Context == nil || rc.Run.Context.RunId != runID ||
		rc.Run.Context.TriggerMessage.ContentMd != ask || rc.Run.Context.TriggerMessage.Trust != TrustTrigger {
		fail("lotse reads the context", fmt.Sprintf("%+v", rc.Run))
	}

	started, err := StartRun(ctx, lotse, runID)
	if err != nil || started.StartRun.State != RunStateRunning {
		fail("lotse starts", fmt.Sprint(err, started))
	}

	answer := "Lotse here: " + strings.TrimPrefix(ask, "@lotse ")
	a, err := Post(ctx, lotse, rc.Run.ThreadId, MessageCreate{ClientMsgId: "answer-" + runID, ContentMd: answer, RunId: &runID})
	if err != nil || a.CreateMessage.Replayed {
		fail("lotse answers", fmt.Sprint(err, a))
	}

	done, err := FinishRun(ctx, lotse, runID, RunFinish{Outcome: RunOutcomeCompleted})
	if err != nil || done.FinishRun.State != RunStateCompleted {
		fail("lotse finishes", fmt.Sprint(err, done))
	}

	th, err := ThreadMessages(ctx, alex, m.StartedThread.Id)
	if err != nil || th.Thread == nil {
		fail("alex reads the answer", err)
	}
	for _, msg := range th.Thread.Messages.Messages {
		if msg.Author.Handle == "lotse" && msg.ContentMd == answer {
			fmt.Println("ok", runID)
			return
		}
	}
	fail("alex reads the answer", fmt.Sprintf("%+v", th.Thread.Messages.Messages))
}
