// Command openapi drives Bothy's core flow through a client that
// oapi-codegen generated from docs/api/openapi.yaml (the test generates
// client.go beside this file): a person mentions an agent; the agent reads
// the run context, starts the run, answers with the run id and finishes it.
// It exits 1 with the step that failed.
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/google/uuid"
)

func as(token string) RequestEditorFn {
	return func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+token)
		return nil
	}
}

func fail(step string, err any) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", step, err)
	os.Exit(1)
}

func main() {
	ctx := context.Background()
	c, err := NewClientWithResponses(os.Getenv("BOTHY_URL"))
	if err != nil {
		fail("client", err)
	}
	alex, lotse := as(os.Getenv("BOTHY_ALEX")), as(os.Getenv("BOTHY_LOTSE"))
	thread := uuid.MustParse(os.Getenv("BOTHY_THREAD"))
	const ask = "@lotse the printer is down (oapi-codegen)"

	posted, err := c.CreateMessageWithResponse(ctx, thread, nil, CreateMessageJSONRequestBody{ClientMsgId: "openapi-ask", ContentMd: ask}, alex)
	if err != nil || posted.JSON201 == nil {
		fail("alex posts", fmt.Sprint(err, " ", string(posted.Body)))
	}
	m := posted.JSON201
	if m.TriggerState == nil || *m.TriggerState != TriggerStateAccepted {
		fail("alex posts", fmt.Sprintf("%+v", m))
	}

	var inv *AgentInvocationPayload
	var after *string
	for i := 0; i < 10 && inv == nil; i++ {
		wait := AgentEventsWait(5)
		page, err := c.PollAgentEventsWithResponse(ctx, &PollAgentEventsParams{After: after, Wait: &wait}, lotse)
		if err != nil || page.JSON200 == nil {
			fail("lotse polls", fmt.Sprint(err, " ", string(page.Body)))
		}
		for _, ev := range page.JSON200.Events {
			if kind, err := ev.Discriminator(); err != nil || kind != "agent.invocation" {
				continue
			}
			e, err := ev.AsAgentInvocationEvent()
			if err == nil && e.Payload.MessageId == m.Id {
				p := e.Payload
				inv = &p
			}
		}
		next := page.JSON200.NextAfter
		after = &next
	}
	if inv == nil {
		fail("lotse polls", "no invocation")
	}
	runID := inv.RunId

	rc, err := c.GetRunContextWithResponse(ctx, runID, lotse)
	if err != nil || rc.JSON200 == nil {
		fail("lotse reads the context", fmt.Sprint(err, " ", string(rc.Body)))
	}
	if rc.JSON200.RunId != runID || rc.JSON200.TriggerMessage.ContentMd != ask || rc.JSON200.TriggerMessage.Trust != TrustTrigger {
		fail("lotse reads the context", fmt.Sprintf("%+v", rc.JSON200))
	}

	holder := "clientflow-openapi"
	started, err := c.StartRunWithResponse(ctx, runID, StartRunJSONRequestBody{Holder: &holder}, lotse)
	if err != nil || started.JSON200 == nil || started.JSON200.State != RunStateRunning {
		fail("lotse starts", fmt.Sprint(err, " ", string(started.Body)))
	}

	answer := "Lotse here: " + strings.TrimPrefix(ask, "@lotse ")
	rid := runID
	// Every call on the claimed run names its holder (fencing).
	held := &CreateMessageParams{BothyRunHolder: &holder}
	a, err := c.CreateMessageWithResponse(ctx, inv.ThreadId, held, CreateMessageJSONRequestBody{ClientMsgId: "answer-" + runID.String(), ContentMd: answer, RunId: &rid}, lotse)
	if err != nil || a.JSON201 == nil {
		fail("lotse answers", fmt.Sprint(err, " ", string(a.Body)))
	}

	done, err := c.FinishRunWithResponse(ctx, runID, &FinishRunParams{BothyRunHolder: &holder}, FinishRunJSONRequestBody{Outcome: RunOutcomeCompleted}, lotse)
	if err != nil || done.JSON200 == nil || done.JSON200.State != RunStateCompleted {
		fail("lotse finishes", fmt.Sprint(err, " ", string(done.Body)))
	}

	page, err := c.ListThreadMessagesWithResponse(ctx, inv.ThreadId, nil, alex)
	if err != nil || page.JSON200 == nil {
		fail("alex reads the answer", fmt.Sprint(err, " ", string(page.Body)))
	}
	for _, msg := range page.JSON200.Messages {
		if msg.Author.Handle == "lotse" && msg.ContentMd == answer {
			fmt.Println("ok", runID)
			return
		}
	}
	fail("alex reads the answer", fmt.Sprintf("%+v", page.JSON200.Messages))
}
