package agentflow_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"bothy.example.com/bothy/sdk/agent"
)

// roundModel hands every prompt to the test and answers what the test
// replies: the test decides when each round of the model ends.
type roundModel struct {
	prompts chan agent.Prompt
	replies chan string
}

func newRoundModel() roundModel {
	return roundModel{prompts: make(chan agent.Prompt, 8), replies: make(chan string)}
}

func (m roundModel) Answer(ctx context.Context, p agent.Prompt) (string, error) {
	m.prompts <- p
	select {
	case r := <-m.replies:
		return r, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// next waits for the model's next prompt.
func (m roundModel) next(t *testing.T) agent.Prompt {
	t.Helper()
	select {
	case p := <-m.prompts:
		return p
	case <-time.After(15 * time.Second):
		t.Fatal("the model got no prompt")
		return agent.Prompt{}
	}
}

// followUpJSON is a follow-up element of a run context.
func followUpJSON(id, content string, delivered bool) map[string]any {
	m := ctxMsgJSON(4, "TRIGGER", content)
	m["messageId"], m["alreadyDelivered"] = id, delivered
	return m
}

// scriptFollowUps makes the fake's run context list the follow-ups that
// the returned function sets.
func (f *fake) scriptFollowUps(trigger string) (set func(...map[string]any)) {
	var mu sync.Mutex
	var list []any
	f.handle("RunContext", func(vars map[string]any) (any, error) {
		mu.Lock()
		fu := append([]any{}, list...)
		mu.Unlock()
		return map[string]any{"run": map[string]any{"context": map[string]any{"runId": vars["id"], "contextFloorSeq": 0,
			"triggerMessage": ctxMsgJSON(3, "TRIGGER", trigger), "threadContext": []any{}, "channelContext": nil,
			"truncatedBeforeSeq": nil, "followUps": fu}}}, nil
	})
	return func(fus ...map[string]any) {
		mu.Lock()
		defer mu.Unlock()
		list = list[:0]
		for _, x := range fus {
			list = append(list, x)
		}
	}
}

// maxAck returns the highest position the adapter acknowledged (0 for
// none).
func (f *fake) maxAck() int {
	n := 0
	for _, c := range f.allCalls() {
		if c.Op == "AckAgentEvents" {
			if v, err := strconv.Atoi(fmt.Sprint(c.Vars["upTo"])); err == nil && v > n {
				n = v
			}
		}
	}
	return n
}

// firstCall returns the index among all calls of the first call that
// matches, or -1.
func (f *fake) firstCall(match func(call) bool) int {
	for i, c := range f.allCalls() {
		if match(c) {
			return i
		}
	}
	return -1
}

// ackAtLeast matches an acknowledgement up to seq or further.
func ackAtLeast(seq int) func(call) bool {
	return func(c call) bool {
		v, err := strconv.Atoi(fmt.Sprint(c.Vars["upTo"]))
		return c.Op == "AckAgentEvents" && err == nil && v >= seq
	}
}

func isOp(op string) func(call) bool { return func(c call) bool { return c.Op == op } }

// createInputs returns the inputs of every createMessage call.
func (f *fake) createInputs() []map[string]any {
	var out []map[string]any
	for _, c := range f.allCalls() {
		if c.Op == "CreateMessage" {
			out = append(out, c.Vars["input"].(map[string]any))
		}
	}
	return out
}

// TestLoopAsksAgainForAFollowUp: a follow-up that arrives while the model
// works is shown to the model in a second round; the stream is not
// acknowledged past its event (nor past the event behind it) until the
// model has seen it, and is acknowledged past it before the answer is
// posted under the follow-up's key.
func TestLoopAsksAgainForAFollowUp(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.scriptRun("@lotse the printer is broken")
	setFollowUps := f.scriptFollowUps("@lotse the printer is broken")
	f.push(invocation("r1", "t-1")) // seq 1
	m := newRoundModel()
	r := f.start(t, m, true)
	if p := m.next(t); len(p.Context.FollowUps) != 0 {
		t.Fatalf("first round with follow-ups %+v", p.Context.FollowUps)
	}

	setFollowUps(followUpJSON("m-follow", "follow-up text: it is on floor 2", false))
	f.push(event("agent.followup", "r1"), map[string]any{"type": "agent.something_new", "payload": map[string]any{}}) // seqs 2, 3
	waitFor(t, "the acknowledgement to wait at the follow-up", 10*time.Second, func() bool {
		return strings.Contains(r.logs.String(), `"acknowledgement held at a follow-up its run's model has not seen","seq":"2","run_id":"r1","message_id":"m-follow"`)
	})
	if n := f.maxAck(); n != 1 {
		t.Fatalf("acknowledged up to %d while the model had not seen the follow-up (want 1)", n)
	}

	m.replies <- "the first answer"
	p := m.next(t)
	if len(p.Context.FollowUps) != 1 || !strings.Contains(p.User, "follow-up text: it is on floor 2") || !strings.Contains(p.User, "part=followup") {
		t.Fatalf("the second round does not show the follow-up:\n%s", p.User)
	}
	if n := f.maxAck(); n != 1 {
		t.Fatalf("acknowledged up to %d before the model answered the follow-up", n)
	}
	m.replies <- "the second answer"
	r.wait(t)
	wantFollowUpAnsweredInRoundTwo(t, f, r)
}

// wantFollowUpAnsweredInRoundTwo checks the end of
// TestLoopAsksAgainForAFollowUp: the one answer is the second round's,
// under the follow-up's key; the stream is acknowledged past the
// follow-up before the answer is posted, and the answer before the run
// finishes; the run's report counts two rounds, and the log says why the
// model was asked again.
func wantFollowUpAnsweredInRoundTwo(t *testing.T, f *fake, r *runner) {
	t.Helper()
	ins := f.createInputs()
	if len(ins) != 1 || ins[0]["clientMsgId"] != "answer-r1-m-follow" || ins[0]["contentMd"] != "the second answer" || ins[0]["runId"] != "r1" {
		t.Fatalf("answers %v", ins)
	}
	ack, post, fin := f.firstCall(ackAtLeast(3)), f.firstCall(isOp("CreateMessage")), f.firstCall(isOp("FinishRun"))
	if ack < 0 || ack > post || post > fin {
		t.Fatalf("want the acknowledgement past the follow-up (%d) before the answer (%d) before the finish (%d)", ack, post, fin)
	}
	if rep := r.rep.all(); len(rep) != 1 || rep[0].Rounds != 2 || rep[0].AnswerKey != "answer-r1-m-follow" || rep[0].Outcome != agent.OutcomeCompleted {
		t.Fatalf("reports %+v", rep)
	}
	if !strings.Contains(r.logs.String(), "follow-ups arrived while the model worked; asking it again") {
		t.Fatalf("the log does not say why the model was asked again:\n%s", r.logs.String())
	}
}

// TestLoopLeavesFollowUpsToTheNextRunAfterTheRounds: with the rounds used
// up (none allowed here), the adapter answers what the model has under the
// trigger's key, says so in its log, and acknowledges the follow-up only
// after the run ended (the server then promotes it).
func TestLoopLeavesFollowUpsToTheNextRunAfterTheRounds(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.scriptRun("@lotse hello")
	setFollowUps := f.scriptFollowUps("@lotse hello")
	f.push(invocation("r1", "t-1"))
	m := newRoundModel()
	r := f.startWith(t, m, true, func(c *agent.Config) { c.FollowUpRounds = -1 })
	m.next(t)
	setFollowUps(followUpJSON("m-follow", "follow-up text", false))
	f.push(event("agent.followup", "r1")) // seq 2
	waitFor(t, "the acknowledgement to wait at the follow-up", 10*time.Second, func() bool {
		return strings.Contains(r.logs.String(), `"acknowledgement held at a follow-up its run's model has not seen","seq":"2"`)
	})
	m.replies <- "the answer"
	r.wait(t)
	select {
	case p := <-m.prompts:
		t.Fatalf("the model was asked again:\n%s", p.User)
	default:
	}
	if ins := f.createInputs(); len(ins) != 1 || ins[0]["clientMsgId"] != "answer-r1-m-r1" {
		t.Fatalf("answers %v", ins)
	}
	ack, fin := f.firstCall(ackAtLeast(2)), f.firstCall(isOp("FinishRun"))
	if fin < 0 || ack < fin {
		t.Fatalf("want the follow-up acknowledged (%d) only after the run ended (%d)", ack, fin)
	}
	if !strings.Contains(r.logs.String(), `"msg":"follow-ups left to the next run: the rounds for follow-ups are used up"`) {
		t.Fatalf("the log does not say that follow-ups were left:\n%s", r.logs.String())
	}
}

// answerJSON is one entry of Run.answers.
func answerJSON(key string) map[string]any {
	return map[string]any{"messageId": "msg-" + key, "clientMsgId": key}
}

// TestLoopTakeoverAnswersOnlyOpenRequests: a takeover reads the answers of
// the run it starts and answers only the requests no answer covers; with
// every request answered it asks no model and only finishes the run.
func TestLoopTakeoverAnswersOnlyOpenRequests(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		answers   []any
		delivered bool
		wantKey   string // "" for no answer and no model call
	}{
		{"trigger answered, follow-up open", []any{answerJSON("answer-r1-m-r1")}, false, "answer-r1-m-follow"},
		{"trigger and follow-up answered", []any{answerJSON("answer-r1-m-r1"), answerJSON("answer-r1-m-follow")}, true, ""},
		{"one answer covers both", []any{answerJSON("answer-r1-m-follow")}, false, ""},
		{"nothing answered", []any{}, false, "answer-r1-m-follow"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t)
			f.scriptRun("@lotse hello")
			setFollowUps := f.scriptFollowUps("@lotse hello")
			setFollowUps(followUpJSON("m-follow", "follow-up text", tc.delivered))
			f.handle("StartRun", func(vars map[string]any) (any, error) {
				run := runJSON(vars["id"].(string), "RUNNING", false)
				run["attempt"], run["answers"] = 2, tc.answers
				return map[string]any{"startRun": run}, nil
			})
			f.push(invocation("r1", "t-1"), event("agent.followup", "r1"))
			var model agent.Model = agent.EchoModel{}
			if tc.wantKey == "" {
				model = failingModel{} // it must not be asked
			}
			r := f.start(t, model, true)
			r.wait(t)
			ins := f.createInputs()
			rep := r.rep.all()
			if len(rep) != 1 || rep[0].Outcome != agent.OutcomeCompleted {
				t.Fatalf("reports %+v", rep)
			}
			if tc.wantKey == "" {
				if len(ins) != 0 || rep[0].Rounds != 0 {
					t.Fatalf("answered again: %v, %d rounds", ins, rep[0].Rounds)
				}
			} else if len(ins) != 1 || ins[0]["clientMsgId"] != tc.wantKey {
				t.Fatalf("answers %v, want one under %s", ins, tc.wantKey)
			}
			// The follow-up the answers cover is delivered before the end.
			if !tc.delivered {
				ack, fin := f.firstCall(ackAtLeast(2)), f.firstCall(isOp("FinishRun"))
				if ack < 0 || ack > fin {
					t.Fatalf("the follow-up was acknowledged at %d, the run finished at %d", ack, fin)
				}
			}
		})
	}
}

// TestLoopRepliesAfterTheRunEnded: an answer refused with run_not_active
// makes the adapter read how the run ended. After an ending that took the
// request away (cancelled, trigger_revoked, an adapter's failure) the
// reply is dropped; after one that left it standing (timeout,
// lease_expired, completed) it goes out again under the same key without
// runId, unless the run's answers cover it already.
func TestLoopRepliesAfterTheRunEnded(t *testing.T) {
	t.Parallel()
	cases := []struct {
		state   string
		reason  any
		answers []any
		resend  bool
		dropped string
	}{
		{"CANCELLED", "cancelled", nil, false, "cancelled"},
		{"CANCELLED", "trigger_revoked", nil, false, "trigger_revoked"},
		{"FAILED", "model_error", nil, false, "model_error"},
		{"FAILED", "timeout", nil, true, ""},
		{"FAILED", "lease_expired", nil, true, ""},
		{"COMPLETED", nil, nil, true, ""},
		{"COMPLETED", nil, []any{answerJSON("answer-r1-m-r1")}, false, "answered"},
		{"FAILED", "timeout", []any{answerJSON("answer-r1-m-later")}, false, "answered"},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s %v %d answers", tc.state, tc.reason, len(tc.answers)), func(t *testing.T) {
			t.Parallel()
			f := newFake(t)
			f.scriptRun("hello")
			f.handle("CreateMessage", func(vars map[string]any) (any, error) {
				if _, has := vars["input"].(map[string]any)["runId"]; has {
					return nil, gqlErr{"conflict", "run_not_active", 409}
				}
				return map[string]any{"createMessage": map[string]any{"replayed": false, "message": map[string]any{"id": "late", "threadId": vars["threadId"], "threadSeq": 4}}}, nil
			})
			f.handle("Run", func(vars map[string]any) (any, error) {
				run := runJSON(vars["id"].(string), tc.state, false)
				run["endReason"], run["endedAt"] = tc.reason, "2026-11-30T09:01:00.000Z"
				if tc.answers != nil {
					run["answers"] = tc.answers
				} else {
					run["answers"] = []any{}
				}
				return map[string]any{"run": run}, nil
			})
			f.push(invocation("r1", "t-1"))
			r := f.start(t, agent.EchoModel{}, true)
			r.wait(t)
			ins := f.createInputs()
			want := "RunContext(r1) StartRun(r1) RunContext(r1) CreateMessage(<nil>) Run(r1)"
			if tc.resend {
				want += " CreateMessage(<nil>)"
				if len(ins) != 2 || ins[1]["clientMsgId"] != "answer-r1-m-r1" || ins[1]["runId"] != nil || ins[0]["contentMd"] != ins[1]["contentMd"] {
					t.Fatalf("sent %v", ins)
				}
			}
			// The run has ended without the adapter: no finishRun.
			if got := f.opNames(); got != want {
				t.Fatalf("operations: %s, want %s", got, want)
			}
			wantEndedRunReported(t, r, tc.resend, tc.dropped)
		})
	}
}

// wantEndedRunReported checks how TestLoopRepliesAfterTheRunEnded's
// adapter reports a run that ended without it: one report with no outcome
// of the adapter's, the reply dropped for the reason dropped ("" for
// none) or resent (the resent answer is the fake's "late"), and a log line
// that says why a reply was dropped.
func wantEndedRunReported(t *testing.T, r *runner, resend bool, dropped string) {
	t.Helper()
	rep := r.rep.all()
	if len(rep) != 1 || rep[0].Outcome != "" || rep[0].Dropped != dropped || (rep[0].AnswerMessageID == "late") != resend {
		t.Fatalf("reports %+v", rep)
	}
	if dropped != "" && !strings.Contains(r.logs.String(), `"msg":"reply dropped: the run ended`) {
		t.Fatalf("the log does not say why the reply was dropped:\n%s", r.logs.String())
	}
}

// TestLoopDropsTheReplyWhenItsPersonLostTrigger: an answer refused with
// trigger_revoked is dropped and the run's cancel is confirmed; a context
// that is gone after the model's answer while the run is still active
// (the person lost trigger) drops the reply without trying to post it.
func TestLoopDropsTheReplyWhenItsPersonLostTrigger(t *testing.T) {
	t.Parallel()
	for _, refusedAnswer := range []bool{true, false} {
		t.Run(fmt.Sprintf("answer refused %v", refusedAnswer), func(t *testing.T) {
			t.Parallel()
			f := newFake(t)
			f.scriptRun("hello")
			f.handle("CreateMessage", func(map[string]any) (any, error) {
				return nil, gqlErr{"conflict", "trigger_revoked", 409}
			})
			f.handle("FinishRun", func(vars map[string]any) (any, error) {
				run := runJSON(vars["id"].(string), "CANCELLED", false)
				run["endReason"] = "trigger_revoked"
				return map[string]any{"finishRun": run}, nil
			})
			f.handle("Run", func(vars map[string]any) (any, error) {
				return map[string]any{"run": runJSON(vars["id"].(string), "RUNNING", true)}, nil
			})
			want := "RunContext(r1) StartRun(r1) RunContext(r1) CreateMessage(<nil>) FinishRun(r1)"
			if !refusedAnswer {
				reads := 0
				var mu sync.Mutex
				f.mu.Lock()
				ctxH := f.handlers["RunContext"]
				f.mu.Unlock()
				f.handle("RunContext", func(vars map[string]any) (any, error) {
					mu.Lock()
					reads++
					n := reads
					mu.Unlock()
					if n > 1 {
						return nil, gqlErr{"not_found", "", 404}
					}
					return ctxH(vars)
				})
				want = "RunContext(r1) StartRun(r1) RunContext(r1) Run(r1) FinishRun(r1)"
			}
			f.push(invocation("r1", "t-1"))
			r := f.start(t, agent.EchoModel{}, true)
			r.wait(t)
			if got := f.opNames(); got != want {
				t.Fatalf("operations: %s, want %s", got, want)
			}
			if fin := f.ops()[4].Vars["input"].(map[string]any); fin["outcome"] != "CANCELLED" {
				t.Fatalf("finish %v", fin)
			}
			if rep := r.rep.all(); len(rep) != 1 || rep[0].Dropped != "trigger_revoked" || rep[0].Outcome != agent.OutcomeCancelled || rep[0].AnswerMessageID != "" {
				t.Fatalf("reports %+v", rep)
			}
		})
	}
}

// TestLoopStopsTheModelWhenItsPersonLostTrigger: a renewal answered
// trigger_revoked stops the model and confirms the cancel.
func TestLoopStopsTheModelWhenItsPersonLostTrigger(t *testing.T) {
	t.Parallel()
	f, _ := renewalRefused(t, "trigger_revoked")
	if got := f.opNames(); got != "RunContext(r1) StartRun(r1) FinishRun(r1)" {
		t.Fatalf("operations: %s", got)
	}
	if fin := f.ops()[2].Vars["input"].(map[string]any); fin["outcome"] != "CANCELLED" {
		t.Fatalf("finish %v", fin)
	}
}

// TestAnswerKey: the key names the run and the request.
func TestAnswerKey(t *testing.T) {
	t.Parallel()
	if got := agent.AnswerKey("r1", "m1"); got != "answer-r1-m1" {
		t.Fatalf("AnswerKey = %q", got)
	}
}
