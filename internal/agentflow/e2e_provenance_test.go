package agentflow_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"bothy.example.com/bothy/sdk/agent"
	"bothy.example.com/bothy/sdk/model/openai"
	"bothy.example.com/bothy/sdk/model/openai/openaitest"
)

// The provenance flows against the real server (apitest): the card the
// person reads, the answer's provenance as every reader sees it.

// cardOf waits for the approval card of Alex's run in thread and returns
// its approval as Alex reads it.
func (f *flowEnv) cardOf(thread string) (id, title, detail string) {
	f.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var out struct {
			Thread struct {
				History struct {
					Nodes []struct {
						Approval *struct {
							ID     string `json:"id"`
							State  string `json:"state"`
							Title  string `json:"title"`
							Detail string `json:"detail"`
						} `json:"approval"`
					} `json:"nodes"`
				} `json:"history"`
			} `json:"thread"`
		}
		f.env.GraphQL(f.env.World.Token("alex"), `query($t: ID!) { thread(id: $t) { history(first: 100) { nodes { approval { id state title detail } } } } }`,
			map[string]any{"t": thread}, &out)
		for _, n := range out.Thread.History.Nodes {
			if n.Approval != nil && n.Approval.State == "PENDING" {
				return n.Approval.ID, n.Approval.Title, n.Approval.Detail
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	f.t.Fatalf("no approval card in the thread\n%s", f.logs.String())
	return "", "", ""
}

// answerProvenance returns the provenance of the agent's text messages in
// thread, as Alex reads them over REST.
func (f *flowEnv) answerProvenance(thread string) []string {
	f.t.Helper()
	r := f.env.REST(http.MethodGet, "/api/v1/threads/"+thread+"/messages", f.env.World.Token("alex"), nil)
	var page struct {
		Messages []struct {
			Kind       string `json:"kind"`
			Origin     string `json:"origin"`
			ClientID   string `json:"client_msg_id"`
			Provenance string `json:"provenance"`
		} `json:"messages"`
	}
	r.JSON(f.t, &page)
	var out []string
	for _, m := range page.Messages {
		if m.Kind == "text" && m.Origin == "agent" {
			out = append(out, m.Provenance)
		}
	}
	return out
}

// denySendEmailCard waits for the approval card of Alex's run in thread,
// checks that it asks for send_email and names the page read as the
// reason (not untrusted messages, and without the page's text), and denies
// it as Alex.
func (f *flowEnv) denySendEmailCard(thread string) {
	f.t.Helper()
	id, title, detail := f.cardOf(thread)
	if title != "Run send_email?" || !strings.Contains(detail, "after reading the output of fetch_page") ||
		strings.Contains(detail, "untrusted messages") || strings.Contains(detail, pageText) {
		f.t.Fatalf("card %q: %q", title, detail)
	}
	if r := f.env.REST(http.MethodPost, "/api/v1/approvals/"+id+"/response", f.env.World.Token("alex"), map[string]any{"option_id": agent.OptionDeny}); r.Status != http.StatusOK {
		f.t.Fatalf("deny: %d %s", r.Status, r.Body)
	}
}

// TestE2EToolOutputNeedsApproval: Alex asks Lotse in Support/Eskalation
// (nothing untrusted in its context). The obedient model reads a page
// (fetch_page, read-only, its output UNVERIFIED) that asks for send_email
// and calls it: the server shows Alex a card whose detail names the page
// read; Alex denies; send_email never runs, the log says the call was
// denied, and the answer's provenance is unverified. The control: the
// page declared SYSTEM (and send_email's output too), send_email runs
// once with no card, and the answer's provenance is self.
func TestE2EToolOutputNeedsApproval(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name       string
		trust      agent.Trust
		sent       int
		provenance string
	}{
		{"untrusted page, denied", "", 0, "unverified"},
		{"system page, no card", agent.TrustSystem, 1, "self"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFlowEnv(t, oaToolCall("fetch_page", `{"url":"https://status.example.com"}`), oaToolCall("send_email", `{"to":"sam@example.com"}`),
				openaitest.Reply{Content: "Done."})
			thread := f.env.Main("Support/Eskalation")
			f.env.MustPost("alex", thread, fmt.Sprintf("prov-%d", time.Now().UnixNano()), "@lotse is the status page green?")
			var sent atomic.Int32
			tools := provenanceTools(c.trust, c.trust, &sent)
			done := make(chan agent.RunReport, 1)
			go func() { done <- f.runOnce(func(cfg *openai.Config) { cfg.Tools = tools }, nil) }()
			if c.sent == 0 {
				f.denySendEmailCard(thread)
			}
			var rep agent.RunReport
			select {
			case rep = <-done:
			case <-time.After(90 * time.Second):
				t.Fatalf("the run did not end\n%s", f.logs.String())
			}
			if rep.Outcome != agent.OutcomeCompleted || int(sent.Load()) != c.sent {
				t.Fatalf("report %+v, send_email ran %d times\n%s", rep, sent.Load(), f.logs.String())
			}
			denied := strings.Contains(f.logs.String(), `"msg":"tool denied","run_id":"`+rep.RunID+`","tool":"send_email"`)
			if denied != (c.sent == 0) || strings.Contains(f.logs.String(), `"msg":"tool ran","run_id":"`+rep.RunID+`","tool":"send_email"`) == (c.sent == 0) {
				t.Fatalf("the log does not say what happened to send_email:\n%s", f.logs.String())
			}
			if got := f.answerProvenance(thread); len(got) != 1 || got[0] != c.provenance {
				t.Fatalf("answers of provenance %q, want one %q", got, c.provenance)
			}
		})
	}
}

// TestE2EHandlerDeclaresInputTrust: a handler that reads an untrusted
// source itself (Task.Lower) posts an answer of provenance unverified; the
// same handler without it, one of provenance self.
func TestE2EHandlerDeclaresInputTrust(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		lower      bool
		provenance string
	}{{true, "unverified"}, {false, "self"}} {
		t.Run(fmt.Sprint("lower=", c.lower), func(t *testing.T) {
			t.Parallel()
			f := newFlowEnv(t)
			thread := f.env.Main("Support/Eskalation")
			f.env.MustPost("alex", thread, "prov-h", "@lotse what does the supplier's page say?")
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			err := agent.Run(ctx, agent.Config{Server: f.env.URL, Token: f.env.World.Token("lotse"), Once: true},
				func(ctx context.Context, task *agent.Task) error {
					if c.lower {
						task.Lower(agent.TrustUnverified)
					}
					return task.Answer(ctx, "The page says the toner ships Monday.")
				})
			if err != nil {
				t.Fatal(err)
			}
			if got := f.answerProvenance(thread); len(got) != 1 || got[0] != c.provenance {
				t.Fatalf("answers of provenance %q, want one %q", got, c.provenance)
			}
		})
	}
}
