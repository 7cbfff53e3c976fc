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

// flow is the core flow's client with the two callers it acts as.
type flow struct {
	ctx         context.Context
	c           *ClientWithResponses
	alex, lotse RequestEditorFn
}

// ask is what Alex asks Lotse.
const ask = "@lotse the printer is down (oapi-codegen)"

// holder is the adapter process that claims the run.
const holder = "clientflow-openapi"

func main() {
	c, err := NewClientWithResponses(os.Getenv("BOTHY_URL"))
	if err != nil {
		fail("client", err)
	}
	f := flow{ctx: context.Background(), c: c, alex: as(os.Getenv("BOTHY_ALEX")), lotse: as(os.Getenv("BOTHY_LOTSE"))}
	m := f.post(uuid.MustParse(os.Getenv("BOTHY_THREAD")))
	inv := f.invocation(m.Id)
	f.readContext(inv.RunId)
	answer := f.answer(inv)
	f.seeAnswer(inv.ThreadId, answer, inv.RunId)
}

// post has Alex ask Lotse in thread; the mention must be accepted.
func (f flow) post(thread uuid.UUID) *Message {
	posted, err := f.c.CreateMessageWithResponse(f.ctx, thread, nil, CreateMessageJSONRequestBody{ClientMsgId: "openapi-ask", ContentMd: ask}, f.alex)
	if err != nil || posted.JSON201 == nil {
		fail("alex posts", fmt.Sprint(err, " ", string(posted.Body)))
	}
	m := posted.JSON201
	if m.TriggerState == nil || *m.TriggerState != TriggerStateAccepted {
		fail("alex posts", fmt.Sprintf("%+v", m))
	}
	return m
}

// invocation polls Lotse's stream until the invocation of message comes.
func (f flow) invocation(message uuid.UUID) *AgentInvocationPayload {
	var inv *AgentInvocationPayload
	var after *string
	for i := 0; i < 10 && inv == nil; i++ {
		wait := AgentEventsWait(5)
		page, err := f.c.PollAgentEventsWithResponse(f.ctx, &PollAgentEventsParams{After: after, Wait: &wait}, f.lotse)
		if err != nil || page.JSON200 == nil {
			fail("lotse polls", fmt.Sprint(err, " ", string(page.Body)))
		}
		for _, ev := range page.JSON200.Events {
			if kind, err := ev.Discriminator(); err != nil || kind != "agent.invocation" {
				continue
			}
			e, err := ev.AsAgentInvocationEvent()
			if err == nil && e.Payload.MessageId == message {
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
	return inv
}

// readContext has Lotse read the run's context: Alex's question as the
// trigger.
func (f flow) readContext(runID uuid.UUID) {
	rc, err := f.c.GetRunContextWithResponse(f.ctx, runID, f.lotse)
	if err != nil || rc.JSON200 == nil {
		fail("lotse reads the context", fmt.Sprint(err, " ", string(rc.Body)))
	}
	if rc.JSON200.RunId != runID || rc.JSON200.TriggerMessage.ContentMd != ask || rc.JSON200.TriggerMessage.Trust != TrustTrigger {
		fail("lotse reads the context", fmt.Sprintf("%+v", rc.JSON200))
	}
}

// answer has Lotse start the run, answer in its thread and finish it, and
// returns the answer's text.
func (f flow) answer(inv *AgentInvocationPayload) string {
	runID := inv.RunId
	h := holder
	started, err := f.c.StartRunWithResponse(f.ctx, runID, StartRunJSONRequestBody{Holder: &h}, f.lotse)
	if err != nil || started.JSON200 == nil || started.JSON200.State != RunStateRunning {
		fail("lotse starts", fmt.Sprint(err, " ", string(started.Body)))
	}
	answer := "Lotse here: " + strings.TrimPrefix(ask, "@lotse ")
	rid := runID
	// Every call on the claimed run names its holder (fencing).
	held := &CreateMessageParams{BothyRunHolder: &h}
	a, err := f.c.CreateMessageWithResponse(f.ctx, inv.ThreadId, held, CreateMessageJSONRequestBody{ClientMsgId: "answer-" + runID.String(), ContentMd: answer, RunId: &rid}, f.lotse)
	if err != nil || a.JSON201 == nil {
		fail("lotse answers", fmt.Sprint(err, " ", string(a.Body)))
	}
	done, err := f.c.FinishRunWithResponse(f.ctx, runID, &FinishRunParams{BothyRunHolder: &h}, FinishRunJSONRequestBody{Outcome: RunOutcomeCompleted}, f.lotse)
	if err != nil || done.JSON200 == nil || done.JSON200.State != RunStateCompleted {
		fail("lotse finishes", fmt.Sprint(err, " ", string(done.Body)))
	}
	return answer
}

// seeAnswer has Alex read thread and find Lotse's answer there.
func (f flow) seeAnswer(thread uuid.UUID, answer string, runID uuid.UUID) {
	page, err := f.c.ListThreadMessagesWithResponse(f.ctx, thread, nil, f.alex)
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
