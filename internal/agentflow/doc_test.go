package agentflow_test

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/apitest"
)

// docBlocks returns the fenced blocks of language lang in docs/adapter.md.
func docBlocks(t *testing.T, lang string) []string {
	t.Helper()
	page, err := os.ReadFile("../../docs/adapter.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile("(?ms)^```"+lang+"\n(.*?)^```\n").FindAllStringSubmatch(string(page), -1) {
		out = append(out, m[1])
	}
	return out
}

// TestAdapterDocExample: the forty-line agent on docs/adapter.md is
// sdk/examples/echo as it is, and the page's command runs it (with the
// test server's address and Lotse's token, and -once) to answer a run.
func TestAdapterDocExample(t *testing.T) {
	t.Parallel()
	example, err := os.ReadFile("../../sdk/examples/echo/main.go")
	if err != nil {
		t.Fatal(err)
	}
	goBlocks := docBlocks(t, "go")
	if len(goBlocks) == 0 || goBlocks[0] != string(example) {
		t.Fatal("the first go block of docs/adapter.md is not sdk/examples/echo/main.go")
	}
	shBlocks := docBlocks(t, "sh")
	if len(shBlocks) != 1 {
		t.Fatalf("%d sh blocks", len(shBlocks))
	}
	env := apitest.Start(t, apitest.Options{})
	thread := env.Main("Support/Eskalation")
	env.MustPost("alex", thread, "doc-1", "@lotse hello")
	cmdline := strings.TrimSpace(shBlocks[0])
	cmdline = strings.Replace(cmdline, "http://127.0.0.1:8080", env.URL, 1)
	cmdline = strings.Replace(cmdline, "bothy_a_...", env.World.Token("lotse"), 1) + " -once"
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", cmdline)
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", shBlocks[0], err, out)
	}
	if env.Count(`SELECT count(*) FROM messages WHERE thread_id = $1 AND author_principal_id = $2 AND kind = 'text' AND content_md LIKE 'You asked: "@lotse hello"%'`,
		thread, env.World.ID("lotse")) != 1 {
		t.Fatal("the example did not answer")
	}
}

// TestAdapterDocOperations runs every GraphQL operation of docs/adapter.md
// ("The calls") in the order of the flow, as Lotse, on a run Alex
// triggers: each answers without errors, decoded strictly, and the run
// ends completed with the answer in its thread.
func TestAdapterDocOperations(t *testing.T) {
	t.Parallel()
	ops := docOperations(t)
	env := apitest.Start(t, apitest.Options{})
	lotse := env.World.Token("lotse")
	thread := env.Main("Support/Eskalation")
	env.MustPost("alex", thread, "ops-1", "@lotse the printer is down")
	run := func(name string, vars map[string]any, out any) {
		t.Helper()
		if res := env.GraphQL(lotse, ops[name], vars, out); len(res.Errors) != 0 {
			t.Fatalf("%s: %+v", name, res.Errors)
		}
	}
	var viewer struct {
		Viewer struct{ ID, Kind string } `json:"viewer"`
	}
	run("Viewer", nil, &viewer)
	if viewer.Viewer.Kind != "AGENT" {
		t.Fatalf("viewer %+v", viewer)
	}
	inv, endCursor := pollDocInvocation(t, run)
	var ctx struct {
		Run struct {
			State   string `json:"state"`
			Context struct {
				TriggerMessage struct{ MessageID, ContentMd, Trust, Provenance string }   `json:"triggerMessage"`
				ThreadContext  []struct{ MessageID, ContentMd, Trust, Provenance string } `json:"threadContext"`
				FollowUps      []struct{ MessageID, ContentMd, Trust, Provenance string } `json:"followUps"`
				TrustSummary   struct{ Lowest string }                                    `json:"trustSummary"`
			} `json:"context"`
		} `json:"run"`
	}
	run("Context", map[string]any{"run": inv.RunID}, &ctx)
	if tm := ctx.Run.Context.TriggerMessage; tm.MessageID != inv.MessageID || tm.Trust != "TRIGGER" || tm.Provenance != "TRIGGER" {
		t.Fatalf("context %+v", ctx)
	}
	const holder = "doc-process"
	startDocRun(t, run, inv.RunID, holder)
	var ack struct {
		AckAgentEvents struct{ Position string } `json:"ackAgentEvents"`
	}
	run("Ack", map[string]any{"upTo": endCursor}, &ack)
	if ack.AckAgentEvents.Position != endCursor {
		t.Fatalf("ack %+v", ack)
	}
	var live struct {
		UpdateRunLive struct{ Version int } `json:"updateRunLive"`
	}
	run("Live", map[string]any{"run": inv.RunID, "holder": holder, "base": 0, "piece": "Restart "}, &live)
	if live.UpdateRunLive.Version != 1 {
		t.Fatalf("live %+v", live)
	}
	var answer struct {
		CreateMessage struct {
			Replayed bool                `json:"replayed"`
			Message  struct{ ID string } `json:"message"`
		} `json:"createMessage"`
	}
	input := map[string]any{"clientMsgId": "answer-" + inv.RunID + "-" + inv.MessageID, "contentMd": "Restart it.", "runId": inv.RunID,
		"inputTrust": ctx.Run.Context.TrustSummary.Lowest}
	run("Answer", map[string]any{"thread": inv.ThreadID, "input": input, "holder": holder}, &answer)
	var finish struct {
		FinishRun struct {
			State     string  `json:"state"`
			EndReason *string `json:"endReason"`
		} `json:"finishRun"`
	}
	run("Finish", map[string]any{"run": inv.RunID, "holder": holder}, &finish)
	if finish.FinishRun.State != "COMPLETED" || answer.CreateMessage.Message.ID == "" {
		t.Fatalf("finish %+v answer %+v", finish, answer)
	}
}

// docOperations returns the GraphQL operations of docs/adapter.md by
// name, and fails the test when one is unnamed or one of the flow is
// missing.
func docOperations(t *testing.T) map[string]string {
	t.Helper()
	ops := map[string]string{}
	for _, b := range docBlocks(t, "graphql") {
		m := regexp.MustCompile(`^(query|mutation) (\w+)`).FindStringSubmatch(b)
		if m == nil {
			t.Fatalf("unnamed operation:\n%s", b)
		}
		ops[m[2]] = b
	}
	for _, name := range []string{"Viewer", "Events", "Context", "Start", "Renew", "Ack", "Live", "Answer", "Finish"} {
		if ops[name] == "" {
			t.Fatalf("docs/adapter.md lacks the operation %s", name)
		}
	}
	return ops
}

// docRunner runs the operation name of docs/adapter.md with vars as the
// agent and decodes its data into out, failing the test on any error.
type docRunner func(name string, vars map[string]any, out any)

// docInvocation is the node of an agent invocation event, as the Events
// operation selects it.
type docInvocation struct {
	Kind, RunID, ThreadID, MessageID string
	Attempt                          int
}

// pollDocInvocation runs Events from the start: it must hand out the one
// invocation, which it returns with the page's end cursor.
func pollDocInvocation(t *testing.T, run docRunner) (docInvocation, string) {
	t.Helper()
	var events struct {
		AgentEvents struct {
			Edges []struct {
				Cursor string        `json:"cursor"`
				Node   docInvocation `json:"node"`
			} `json:"edges"`
			PageInfo struct {
				EndCursor   string `json:"endCursor"`
				HasNextPage bool   `json:"hasNextPage"`
			} `json:"pageInfo"`
		} `json:"agentEvents"`
	}
	run("Events", map[string]any{"after": "0"}, &events)
	if len(events.AgentEvents.Edges) != 1 || events.AgentEvents.Edges[0].Node.Kind != "AGENT_INVOCATION" {
		t.Fatalf("events %+v", events)
	}
	return events.AgentEvents.Edges[0].Node, events.AgentEvents.PageInfo.EndCursor
}

// startDocRun runs Start, which claims the run for holder and answers it
// running with a lease and no answers yet, and Renew.
func startDocRun(t *testing.T, run docRunner, runID, holder string) {
	t.Helper()
	var start struct {
		StartRun struct {
			State          string                                    `json:"state"`
			LeaseExpiresAt string                                    `json:"leaseExpiresAt"`
			Answers        []struct{ MessageID, ClientMsgID string } `json:"answers"`
		} `json:"startRun"`
	}
	run("Start", map[string]any{"run": runID, "holder": holder}, &start)
	if start.StartRun.State != "RUNNING" || start.StartRun.LeaseExpiresAt == "" || len(start.StartRun.Answers) != 0 {
		t.Fatalf("start %+v", start)
	}
	var renew struct {
		RenewRun struct {
			LeaseExpiresAt string `json:"leaseExpiresAt"`
		} `json:"renewRun"`
	}
	run("Renew", map[string]any{"run": runID, "holder": holder}, &renew)
}
