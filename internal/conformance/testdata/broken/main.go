// Command broken is an adapter on the SDK that breaks one rule of the run
// contract on purpose (-break), for the conformance kit's proof that it can
// fail exactly the scenario about that rule:
//
//   - untrusted: the whole rendered context goes in the system message;
//   - ignore-cancel: the model call goes on after the run's context ended;
//   - answer-twice: the request of answers_once gets a second answer
//     (keyed to its question, which no other scenario asks);
//   - post-after-loss: the answer of trigger_loss_posts_nothing is posted
//     without its run once the run refused it;
//   - no-renew: the claim on a run is never renewed;
//   - no-live: nothing the model streams reaches the run's live box;
//   - no-gate: consequential tools run without asking, whatever the trust;
//   - trust-tool-output: what a tool returns is trusted like the server's
//     own lines, so the gate and the answer's inputTrust see only the
//     context's trust summary;
//   - trust-self: the gate starts from the context's trust markers alone,
//     so the agent's own earlier answer counts as SELF whatever it quoted
//     (its provenance and the trust summary ignored);
//   - no-input-trust: answers are posted without inputTrust;
//   - ack-before-handling: every page of the stream is acknowledged as it
//     is read, before its events are handled (the stream is polled);
//   - post-plain-after-revoke: an answer refused trigger_revoked is posted
//     again without its run, as a plain message;
//   - random-client-msg-id: every post carries a clientMsgId of its own,
//     so a repeat after a crash is a second message;
//   - no-holder: no call names a holder (the anonymous holder of adapters
//     that predate claims), so two processes cannot be told apart;
//   - trust-file-text: the text of attached files reaches the model as
//     data, but the gate counts only the trust markers and provenance of
//     the context's elements: neither the text read nor the server's
//     summary, which counts an element's file;
//   - drop-attachments: answers are posted without the files the model
//     attached.
//
// -after and -once are the SDK's Config.After and Config.Once, for the
// kit's tests of itself: an adapter that reads its stream from its end
// ("now") misses a mention made before its first read, and one that stops
// after one run exits in the middle of the kit's run.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"bothy.example.com/bothy/sdk/agent"
	"bothy.example.com/bothy/sdk/httptool"
	"bothy.example.com/bothy/sdk/model/openai"
)

// noRenew fails every renewRun call as a network error would.
type noRenew struct{}

func (noRenew) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		if bytes.Contains(b, []byte("renewRun")) {
			return nil, errors.New("renewals are switched off")
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

// noInputTrust drops the inputTrust of every message the adapter posts.
type noInputTrust struct{}

func (noInputTrust) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		b, _ := io.ReadAll(r.Body)
		var req map[string]any
		if bytes.Contains(b, []byte("inputTrust")) && json.Unmarshal(b, &req) == nil {
			if vars, ok := req["variables"].(map[string]any); ok {
				if in, ok := vars["input"].(map[string]any); ok {
					delete(in, "inputTrust")
				}
			}
			b, _ = json.Marshal(req)
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		r.ContentLength = int64(len(b))
	}
	return http.DefaultTransport.RoundTrip(r)
}

// rewrite edits the GraphQL variables of every request whose document
// holds op before it is sent.
type rewrite struct {
	op   string
	edit func(vars map[string]any)
}

func (t rewrite) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		b, _ := io.ReadAll(r.Body)
		var req map[string]any
		if bytes.Contains(b, []byte(t.op)) && json.Unmarshal(b, &req) == nil {
			if vars, ok := req["variables"].(map[string]any); ok {
				t.edit(vars)
			}
			b, _ = json.Marshal(req)
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		r.ContentLength = int64(len(b))
	}
	return http.DefaultTransport.RoundTrip(r)
}

// randomKey gives every post a clientMsgId of its own.
func randomKey(vars map[string]any) {
	if in, ok := vars["input"].(map[string]any); ok {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		in["clientMsgId"] = "random-" + hex.EncodeToString(b)
	}
}

// ackOnRead acknowledges every page of the stream up to its last event as
// soon as the server answered the poll, before the adapter sees the page.
type ackOnRead struct{}

func (ackOnRead) RoundTrip(r *http.Request) (*http.Response, error) {
	var b []byte
	if r.Body != nil {
		b, _ = io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || !bytes.Contains(b, []byte("agentEvents(")) {
		return resp, err
	}
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(page))
	if err != nil {
		return resp, nil
	}
	var out struct {
		Data struct {
			AgentEvents struct {
				Events []struct {
					Seq string `json:"seq"`
				} `json:"events"`
			} `json:"agentEvents"`
		} `json:"data"`
	}
	if json.Unmarshal(page, &out) != nil || len(out.Data.AgentEvents.Events) == 0 {
		return resp, nil
	}
	evs := out.Data.AgentEvents.Events
	ack, _ := json.Marshal(map[string]any{"query": `mutation($u: String!) { ackAgentEvents(upTo: $u) { position } }`,
		"variables": map[string]any{"u": evs[len(evs)-1].Seq}})
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, r.URL.String(), bytes.NewReader(ack))
	if err != nil {
		return resp, nil
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", r.Header.Get("Authorization"))
	if ar, err := http.DefaultTransport.RoundTrip(req); err == nil {
		_, _ = io.Copy(io.Discard, ar.Body)
		ar.Body.Close()
	}
	return resp, nil
}

// plainAfterRevoke posts an answer that the server refused for the loss
// of trigger (trigger_revoked) again, without its run: a plain message.
type plainAfterRevoke struct{}

func (plainAfterRevoke) RoundTrip(r *http.Request) (*http.Response, error) {
	var b []byte
	if r.Body != nil {
		b, _ = io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || !bytes.Contains(b, []byte("createMessage(")) {
		return resp, err
	}
	answer, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(answer))
	var req map[string]any
	if err != nil || !bytes.Contains(answer, []byte("trigger_revoked")) || json.Unmarshal(b, &req) != nil {
		return resp, nil
	}
	vars, _ := req["variables"].(map[string]any)
	in, _ := vars["input"].(map[string]any)
	if in == nil {
		return resp, nil
	}
	delete(in, "runId")
	delete(vars, "holder")
	plain, _ := json.Marshal(req)
	again, err := http.NewRequestWithContext(r.Context(), http.MethodPost, r.URL.String(), bytes.NewReader(plain))
	if err != nil {
		return resp, nil
	}
	again.Header = r.Header.Clone()
	again.ContentLength = int64(len(plain))
	if ar, err := http.DefaultTransport.RoundTrip(again); err == nil {
		_, _ = io.Copy(io.Discard, ar.Body)
		ar.Body.Close()
	}
	return resp, nil
}

// trustOrder ranks the trust levels from the least trusted up.
var trustOrder = []agent.Trust{agent.TrustUnverified, agent.TrustSelf, agent.TrustSystem, agent.TrustAuthorized, agent.TrustTrigger}

// markersOnly returns p with Lowest the least trust marker of its
// context's elements, as an adapter that knows nothing of the trust
// summary would compute it; with provenance an element counts at the
// lower of its marker and its provenance (an own answer that quoted
// someone else is data), without, as its marker alone (every own answer
// is SELF).
func markersOnly(p agent.Prompt, provenance bool) agent.Prompt {
	c := p.Context
	all := append(append([]agent.RunContextMessage{c.TriggerMessage}, c.ThreadContext...), c.FollowUps...)
	if c.ChannelContext != nil {
		all = append(all, *c.ChannelContext...)
	}
	p.Lowest = agent.TrustTrigger
	lower := func(t agent.Trust) {
		if slices.Index(trustOrder, t) < slices.Index(trustOrder, p.Lowest) {
			p.Lowest = t
		}
	}
	for _, m := range all {
		lower(m.Trust)
		if provenance && m.Provenance != "" {
			lower(m.Provenance)
		}
	}
	return p
}

func main() {
	rule := flag.String("break", "", "untrusted, ignore-cancel, answer-twice, post-after-loss, no-renew, no-live, no-gate, trust-tool-output, trust-self, no-input-trust,\n"+
		"ack-before-handling, post-plain-after-revoke, random-client-msg-id, no-holder, trust-file-text or drop-attachments")
	after := flag.String("after", "", "the cursor to read the event stream from (Config.After): empty, 0 or now")
	once := flag.Bool("once", false, "stop after the first run (Config.Once)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	tools, err := httptool.Load(os.Getenv("BOTHY_CONFORMANCE_TOOLS"), httptool.Options{})
	if err != nil {
		log.Fatal(err)
	}
	breakTools(*rule, tools)
	tools = append(tools, onRunTask(agent.AttachFileTool()))
	m, err := openai.New(openai.Config{BaseURL: os.Getenv("BOTHY_MODEL_BASE_URL"), Model: os.Getenv("BOTHY_MODEL_NAME"), APIKey: os.Getenv("BOTHY_MODEL_API_KEY"),
		Stream: true, Tools: tools})
	if err != nil {
		log.Fatal(err)
	}
	cfg := agent.Config{Live: *rule != "no-live"}
	if *rule == "ack-before-handling" {
		// Pages come from polls, which the transport sees.
		cfg.Transport = agent.TransportPoll
	}
	client, err := agent.NewClient(os.Getenv("BOTHY_SERVER"), os.Getenv("BOTHY_AGENT_TOKEN"), agent.ClientOptions{HTTPClient: brokenHTTP(*rule)})
	if err != nil {
		log.Fatal(err)
	}
	cfg.Client, cfg.After, cfg.Once = client, *after, *once
	if err := agent.Run(ctx, cfg, handler(*rule, client, m)); err != nil {
		log.Fatal(err)
	}
}

// breakTools breaks the tools' declarations for the rules about tools: no
// tool consequential (no-gate), or every tool's output trusted as the
// system's (trust-tool-output).
func breakTools(rule string, tools []agent.Tool) {
	for i := range tools {
		switch rule {
		case "no-gate":
			tools[i].Consequential = false
		case "trust-tool-output":
			tools[i].OutputTrust = agent.TrustSystem
		}
	}
}

// brokenHTTP is the HTTP client of the rules that the transport breaks
// (a request dropped or rewritten on its way), nil (the SDK's default) for
// the others.
func brokenHTTP(rule string) *http.Client {
	switch rule {
	case "no-renew":
		return &http.Client{Transport: noRenew{}}
	case "no-input-trust":
		return &http.Client{Transport: noInputTrust{}}
	case "ack-before-handling":
		return &http.Client{Transport: ackOnRead{}}
	case "post-plain-after-revoke":
		return &http.Client{Transport: plainAfterRevoke{}}
	case "random-client-msg-id":
		return &http.Client{Transport: rewrite{op: "createMessage(", edit: randomKey}}
	case "no-holder":
		return &http.Client{Transport: rewrite{op: "holder", edit: func(vars map[string]any) { delete(vars, "holder") }}}
	case "drop-attachments":
		return &http.Client{Transport: rewrite{op: "createMessage(", edit: func(vars map[string]any) {
			if in, ok := vars["input"].(map[string]any); ok {
				delete(in, "attachmentFileIds")
			}
		}}}
	}
	return nil
}

// runTaskKey carries the run's Task past the gate Task of trust-self and
// trust-file-text (handler), for onRunTask.
type runTaskKey struct{}

// onRunTask returns tool calling on the run's Task: a file it attaches
// goes with the run's answer, also where a gate Task of the adapter's own
// judges the model's calls. Without it those two adapters would answer
// without their files and fail attaches_file, which is not their rule.
func onRunTask(tool agent.Tool) agent.Tool {
	call := tool.Call
	tool.Call = func(ctx context.Context, args json.RawMessage) (string, error) {
		if t, ok := ctx.Value(runTaskKey{}).(*agent.Task); ok {
			ctx = agent.WithTask(ctx, t)
		}
		return call(ctx, args)
	}
	return tool
}

// handler answers each run with the model as the SDK's model agent does,
// broken where rule says.
func handler(rule string, client *agent.Client, m *openai.Model) agent.Handler {
	return func(ctx context.Context, t *agent.Task) error {
		ctx = context.WithValue(ctx, runTaskKey{}, t)
		p := t.PromptWithFiles(ctx)
		if rule == "trust-file-text" {
			p = trustedFiles(ctx, client, t)
		}
		p, mctx := brokenPrompt(ctx, rule, t, p)
		var gate *agent.Task
		if rule == "trust-self" || rule == "trust-file-text" {
			// The model's calls are gated by a Task of its own that starts
			// from the markers (and, where the rule is the files', the
			// provenance: trust-file-text keeps every rule but its own);
			// what its tools returned still reaches the run's Task, and
			// with it the answer's inputTrust.
			gate = agent.NewTask(markersOnly(p, rule == "trust-file-text"))
			mctx = agent.WithTask(mctx, gate)
		}
		text, err := m.Answer(mctx, p)
		if gate != nil {
			t.Lower(gate.InPlay())
		}
		if err != nil {
			return err
		}
		c := t.Context()
		asked := c.TriggerMessage.ContentMD
		switch {
		case rule == "answer-twice" && strings.Contains(asked, "printer on floor 2 is broken"):
			_, _ = client.CreateMessage(ctx, threadOf(ctx, client, c.RunID), "", agent.MessageCreate{ClientMsgID: "twice-" + c.RunID, ContentMD: "Once more: " + text})
		case rule == "post-after-loss" && strings.Contains(asked, "summarise the incident"):
			_, _ = client.CreateMessage(context.WithoutCancel(ctx), threadOf(ctx, client, c.RunID), "", agent.MessageCreate{ClientMsgID: "lost-" + c.RunID, ContentMD: text})
		}
		return t.Answer(ctx, text)
	}
}

// brokenPrompt is the prompt and the model call's context for rule: the
// request moved into the system message (untrusted), or a model call
// deaf to the run's end (ignore-cancel; post-after-loss on its scenario).
func brokenPrompt(ctx context.Context, rule string, t *agent.Task, p agent.Prompt) (agent.Prompt, context.Context) {
	switch rule {
	case "untrusted":
		// Moved, not copied: the obedient model reads every line once,
		// as it would from the user message.
		p.System += "\n" + p.User
		p.User = "Answer the request above."
	case "ignore-cancel":
		return p, context.WithoutCancel(ctx)
	case "post-after-loss":
		// Deaf to the end of trigger_loss_posts_nothing's run, so that
		// the answer comes whatever happened first.
		if strings.Contains(t.Context().TriggerMessage.ContentMD, "summarise the incident") {
			return p, context.WithoutCancel(ctx)
		}
	}
	return p, ctx
}

// trustedFiles is the run's prompt with the texts of its files as the SDK
// renders them, read without the Task, so that its in-play trust stays.
func trustedFiles(ctx context.Context, client *agent.Client, t *agent.Task) agent.Prompt {
	var texts []agent.FileText
	for _, m := range t.Context().Elements() {
		for _, a := range m.Attachments {
			if ft, err := client.FileText(ctx, a.FileID, 0); err == nil && a.TextStatus == agent.TextReady {
				texts = append(texts, ft)
			}
		}
	}
	return agent.WithFileTexts(t.Prompt(), texts)
}

// threadOf is the thread of run, where it answers.
func threadOf(ctx context.Context, client *agent.Client, run string) string {
	r, err := client.Run(context.WithoutCancel(ctx), run)
	if err != nil {
		return ""
	}
	return r.ThreadID
}
