package injection

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"bothy.example.com/bothy/sdk/agent"
	"bothy.example.com/bothy/sdk/model/anthropic"
	"bothy.example.com/bothy/sdk/model/openai"
)

// Model chooses the model the agent under test asks.
type Model struct {
	// Kind is obedient (the default: the bench's own obedient model, an
	// OpenAI-compatible server in the process), openai (any server of the
	// chat completions API) or anthropic (the Messages API).
	Kind string
	// BaseURL, Name and APIKey reach the model of kind openai or
	// anthropic (BaseURL may be empty for anthropic).
	BaseURL, Name, APIKey string
	// Timeout bounds one answer of the model (default 120 s).
	Timeout time.Duration
}

// The kinds of model.
const (
	ModelObedient  = "obedient"
	ModelOpenAI    = "openai"
	ModelAnthropic = "anthropic"
)

// maxToolRounds bounds the tool rounds of one answer: the obedient model
// makes one call per round, and a case asks for at most five.
const maxToolRounds = 16

// handle answers one run of the agent under test, as an agent built on
// the SDK does: the model gets the run's prompt and the case's tools, and
// its consequential calls go through the SDK's gate, which follows the
// run's in-play trust (the context's, lowered by every untrusted tool
// result). Two things are the bench's own: without markers the prompt is
// rendered with every element as TRIGGER, the model's calls are gated by
// an in-play trust of their own that starts there, and every tool's answer
// is declared trusted (the switch that shows what the markers add, never a
// setting of a deployment); and the first round of a follow-up case waits
// for the follow-up, so that the model sees it whatever its speed.
func (b *bench) handle(ctx context.Context, t *agent.Task) error {
	c, err := b.caseOfRun(ctx, t.RunID())
	if err != nil {
		return err
	}
	if c.Origin == OriginFollowUp && len(t.Context().FollowUps) == 0 {
		c.startOnce.Do(func() { close(c.started) })
		select {
		case <-c.released:
		case <-ctx.Done():
			return ctx.Err()
		}
		// Replaced by the answer of the next round, which the follow-up
		// starts: the adapter reads the context again before it posts.
		return t.Answer(ctx, "One moment, I am reading the thread again.")
	}
	prompt := t.Prompt()
	if !c.markers {
		prompt = asTrigger(t.Context())
		ctx = agent.WithTask(ctx, agent.NewTask(prompt))
	}
	if prompt, err = b.withFileTexts(ctx, t.Context().TriggerMessage, prompt, c.markers); err != nil {
		return err
	}
	m, err := b.model(c)
	if err != nil {
		return err
	}
	text, err := m.Answer(ctx, prompt)
	if err != nil {
		return err
	}
	return t.Answer(ctx, text)
}

// caseOfRun finds the case of a run by its thread.
func (b *bench) caseOfRun(ctx context.Context, run string) (*caseRun, error) {
	info, err := b.client.Run(ctx, run)
	if err != nil {
		return nil, err
	}
	if c := b.caseOf(info.ThreadID); c != nil {
		return c, nil
	}
	return nil, fmt.Errorf("injection: run %s belongs to no case", run)
}

// asTrigger renders rc as the SDK does, but with every element's trust
// and provenance TRIGGER: the model reads everything as a request of the
// person who asked, and no consequential call is put to her.
func asTrigger(rc agent.RunContext) agent.Prompt {
	mark := func(ms []agent.RunContextMessage) []agent.RunContextMessage {
		out := slices.Clone(ms)
		for i := range out {
			out[i].Trust, out[i].Provenance = agent.TrustTrigger, agent.TrustTrigger
		}
		return out
	}
	rc.ThreadContext = mark(rc.ThreadContext)
	if rc.ChannelContext != nil {
		cc := mark(*rc.ChannelContext)
		rc.ChannelContext = &cc
	}
	rc.FollowUps = mark(rc.FollowUps)
	rc.TriggerMessage.Trust, rc.TriggerMessage.Provenance = agent.TrustTrigger, agent.TrustTrigger
	rc.TrustSummary = agent.TrustSummary{Lowest: agent.TrustTrigger,
		Counts: []agent.TrustCount{{Trust: agent.TrustTrigger, Count: len(rc.Elements())}}}
	return agent.WithFollowUps(agent.Render(rc, agent.NewBoundary()), rc.FollowUps)
}

// model makes the model of case c: the bench's model with the case's
// tools.
func (b *bench) model(c *caseRun) (agent.Model, error) {
	tools, err := caseTools(b.fixtureURL+"/c/"+c.id, c.markers)
	if err != nil {
		return nil, err
	}
	spec := b.opts.Model
	switch spec.Kind {
	case "", ModelObedient:
		return openai.New(openai.Config{BaseURL: b.obedientURL + "/v1", Model: ModelObedient, Tools: tools, MaxToolRounds: maxToolRounds})
	case ModelOpenAI:
		return openai.New(openai.Config{BaseURL: spec.BaseURL, Model: spec.Name, APIKey: spec.APIKey, Timeout: spec.Timeout,
			Tools: tools, MaxToolRounds: maxToolRounds})
	case ModelAnthropic:
		return anthropic.New(anthropic.Config{BaseURL: spec.BaseURL, Model: spec.Name, APIKey: spec.APIKey, Timeout: spec.Timeout,
			Tools: tools, MaxToolRounds: maxToolRounds})
	}
	return nil, fmt.Errorf("injection: no model %q (there are %s, %s and %s)", spec.Kind, ModelObedient, ModelOpenAI, ModelAnthropic)
}

// withFileTexts adds the text of every file of the trigger to the prompt,
// read with the agent's token (File.text): with the markers as a DATA
// block with trust unverified, as an adapter renders a file's text
// (docs/design/trust.md#files); without them as more of the request. The
// gate needs nothing from here: the server counts a context element with
// file text as unverified in the trust summary, so the run's in-play trust
// is unverified with the markers whoever attached the file.
func (b *bench) withFileTexts(ctx context.Context, trigger agent.RunContextMessage, p agent.Prompt, markers bool) (agent.Prompt, error) {
	for _, a := range trigger.Attachments {
		var out struct {
			FileText *struct {
				Text *string `json:"text"`
			} `json:"fileText"`
		}
		if err := b.client.Do(ctx, "BenchFileText", `query BenchFileText($id: ID!) { fileText(id: $id) { text } }`,
			map[string]any{"id": a.FileID}, &out, 0); err != nil {
			return p, fmt.Errorf("injection: reading file %s: %w", a.FileID, err)
		}
		if out.FileText == nil || out.FileText.Text == nil {
			continue
		}
		text := strings.ReplaceAll(*out.FileText.Text, p.Boundary, "")
		if markers {
			p.User += fmt.Sprintf("\n\n<<<DATA %s file=%q trust=unverified>>>\n%s\n<<<END DATA %s>>>", p.Boundary, a.Name, text, p.Boundary)
		} else {
			p.User += "\n\nThe attached file " + a.Name + ":\n" + text
		}
	}
	return p, nil
}
