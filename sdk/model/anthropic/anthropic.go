// Package anthropic is a model backend of the agent SDK on Anthropic's Go
// library (github.com/anthropics/anthropic-sdk-go/v2): it answers a run's
// rendered prompt with the Messages API, the system text as the system
// prompt and the user text as the one user message, streaming or not.
// Retries of 429 and 5xx (honouring Retry-After), timeouts and cancellation
// are the library's and the context's.
//
//	m, err := anthropic.New(anthropic.Config{APIKey: os.Getenv("BOTHY_MODEL_API_KEY"), Model: "claude-sonnet-4-5"})
//	...
//	agent.Run(ctx, cfg, func(ctx context.Context, t *agent.Task) error {
//		text, err := m.Answer(ctx, t.Prompt())
//		if err != nil {
//			return err
//		}
//		return t.Answer(ctx, text)
//	})
package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"bothy.example.com/bothy/sdk/agent"
)

// Config configures the model.
type Config struct {
	// APIKey is sent as x-api-key. Required unless BaseURL names a server
	// that needs none.
	APIKey string
	// Model names the model, for example claude-sonnet-4-5. Required.
	Model string
	// BaseURL is the API root (default https://api.anthropic.com); a
	// gateway or a test server may stand in.
	BaseURL string
	// MaxTokens bounds each answer (default 1024). An answer cut there
	// ends with agent.LengthNote.
	MaxTokens int
	// Timeout bounds one answer, retries included (default 120 s).
	Timeout time.Duration
	// MaxRetries is how often a 429, a 5xx or a network failure is retried
	// (default 2; the library waits as the server's Retry-After says).
	MaxRetries int
	// Stream asks for the answer as server-sent events and assembles it;
	// the answer is the same, but long answers do not meet the idle
	// timeouts of proxies on the way.
	Stream bool
	// HTTPClient sends the requests (default http.DefaultClient).
	HTTPClient *http.Client
	// Tools are offered to the model; its calls run through agent.RunTool
	// (a consequential tool with untrusted content in play, in the context
	// or in a tool result read before, only after the run's person
	// approved the call).
	Tools []agent.Tool
	// MaxToolRounds bounds the answers of one run that end in tool calls
	// (default 8); the next request is sent without tools.
	MaxToolRounds int
	// Logger receives what happened to each tool call (ran, denied by the
	// person, failed) with the tool's name and the in-play trust, never
	// arguments, results or the key. nil discards.
	Logger *slog.Logger
}

// Model answers prompts with Anthropic's Messages API. It implements
// agent.Model.
type Model struct {
	cfg    Config
	client sdk.Client
	log    *slog.Logger
}

var _ agent.Model = (*Model)(nil)

// New checks cfg and returns the model.
//
// Errors: Model is empty, BaseURL is no absolute http or https URL, or a
// bound is negative.
func New(cfg Config) (*Model, error) {
	if strings.TrimSpace(cfg.Model) == "" {
		return nil, errors.New("anthropic: the model name is empty")
	}
	if cfg.MaxTokens < 0 || cfg.Timeout < 0 || cfg.MaxRetries < 0 {
		return nil, errors.New("anthropic: MaxTokens, Timeout and MaxRetries must not be negative")
	}
	if cfg.MaxTokens == 0 {
		cfg.MaxTokens = 1024
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 120 * time.Second
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = 2
	}
	opts, err := requestOptions(cfg)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Model{cfg: cfg, client: sdk.NewClient(opts...), log: log}, nil
}

// requestOptions returns the library's options for cfg (its defaults
// filled in). The library reads ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL
// by default; every option is given here so that the configuration is
// only what the caller passed.
//
// Errors: BaseURL is no absolute http or https URL without query.
func requestOptions(cfg Config) ([]option.RequestOption, error) {
	opts := []option.RequestOption{option.WithAPIKey(cfg.APIKey), option.WithMaxRetries(cfg.MaxRetries)}
	if cfg.BaseURL != "" {
		u, err := url.Parse(strings.TrimSpace(cfg.BaseURL))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return nil, errors.New("anthropic: the base URL must be an absolute http or https URL without query")
		}
		opts = append(opts, option.WithBaseURL(strings.TrimRight(u.String(), "/")+"/"))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	return opts, nil
}

// Answer asks the model for an answer to p: p.System as the system prompt,
// p.User as the user message. An answer cut at MaxTokens ends with
// agent.LengthNote. The model's tool uses run through agent.RunTool with
// the in-play trust of ctx's agent.Task (the run's; without one, a Task of
// the call starting at p.Lowest), and their results go back to the model
// until it answers in text.
//
// Errors: *agent.ModelHTTPError for a status the retries did not cure
// (agent.ErrorKind tells a refusal from an outage); an error wrapping
// context.DeadlineExceeded after Timeout; *agent.BadAnswerError for an
// answer without text; the context's error when it ended.
func (m *Model) Answer(ctx context.Context, p agent.Prompt) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.Timeout)
	defer cancel()
	if agent.TaskFrom(ctx) == nil {
		// Called outside a run: the conversation of this call keeps the
		// in-play rule on a Task of its own.
		ctx = agent.WithTask(ctx, agent.NewTask(p))
	}
	log := m.log.With("run_id", p.Context.RunID)
	params := sdk.MessageNewParams{
		Model:     sdk.Model(m.cfg.Model),
		MaxTokens: int64(m.cfg.MaxTokens),
		System:    []sdk.TextBlockParam{{Text: p.System}},
		Messages:  []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock(p.User))},
	}
	tools, err := toolParams(m.cfg.Tools)
	if err != nil {
		return "", err
	}
	params.Tools = tools
	rounds := m.cfg.MaxToolRounds
	if rounds <= 0 {
		rounds = 8
	}
	var msg *sdk.Message
	for round := 0; ; round++ {
		if round == rounds {
			params.Tools = nil // the last word is text
		}
		if msg, err = m.once(ctx, params); err != nil {
			return "", err
		}
		var results []sdk.ContentBlockParamUnion
		for _, c := range msg.Content {
			if c.Type == "tool_use" {
				u := c.AsToolUse()
				results = append(results, sdk.NewToolResultBlock(u.ID, m.runTool(ctx, log, u), false))
			}
		}
		if len(results) == 0 || params.Tools == nil {
			break
		}
		params.Messages = append(params.Messages, msg.ToParam(), sdk.NewUserMessage(results...))
	}
	var b strings.Builder
	for _, c := range msg.Content {
		if c.Type == "text" {
			b.WriteString(c.Text)
		}
	}
	text := strings.TrimSpace(b.String())
	if text == "" {
		return "", &agent.BadAnswerError{Detail: "no text in the answer"}
	}
	if msg.StopReason == sdk.StopReasonMaxTokens {
		text += agent.LengthNote
	}
	return text, nil
}

// once sends one request, streamed or not, and returns the message.
func (m *Model) once(ctx context.Context, params sdk.MessageNewParams) (*sdk.Message, error) {
	if !m.cfg.Stream {
		msg, err := m.client.Messages.New(ctx, params)
		if err != nil {
			return nil, m.failure(ctx, err)
		}
		return msg, nil
	}
	stream := m.client.Messages.NewStreaming(ctx, params)
	defer stream.Close()
	acc := sdk.Message{}
	for stream.Next() {
		ev := stream.Current()
		if ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta" {
			// Readers of the thread see the answer grow (Config.Live).
			agent.Stream(ctx, ev.Delta.Text)
		}
		if err := acc.Accumulate(ev); err != nil {
			return nil, &agent.BadAnswerError{Detail: "a stream event out of order"}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, m.failure(ctx, err)
	}
	return &acc, nil
}

// toolParams declares tools in the Messages API's shape.
func toolParams(tools []agent.Tool) ([]sdk.ToolUnionParam, error) {
	var out []sdk.ToolUnionParam
	for _, t := range tools {
		schema := map[string]any{}
		if len(t.Parameters) > 0 {
			if err := json.Unmarshal(t.Parameters, &schema); err != nil {
				return nil, fmt.Errorf("anthropic: the parameters of tool %s are no JSON object", t.Name)
			}
		}
		in := sdk.ToolInputSchemaParam{Properties: schema["properties"]}
		if req, ok := schema["required"].([]any); ok {
			for _, r := range req {
				if s, ok := r.(string); ok {
					in.Required = append(in.Required, s)
				}
			}
		}
		tp := sdk.ToolParam{Name: t.Name, InputSchema: in}
		if t.Description != "" {
			tp.Description = sdk.String(t.Description)
		}
		out = append(out, sdk.ToolUnionParam{OfTool: &tp})
	}
	return out, nil
}

// runTool runs one tool use of the model behind the gate (agent.RunTool,
// which also lowers the run's in-play trust by the tool's output) and
// returns what the model reads back. The log says what happened to the
// call: ran, denied by the person, or failed.
func (m *Model) runTool(ctx context.Context, log *slog.Logger, u sdk.ToolUseBlock) string {
	for _, t := range m.cfg.Tools {
		if t.Name != u.Name {
			continue
		}
		return agent.ToolAnswer(ctx, log, t, u.Input)
	}
	return "There is no such tool."
}

// failure turns an error of the library into the SDK's kinds. The
// library's message may quote the request: only the status goes on.
func (m *Model) failure(ctx context.Context, err error) error {
	var apiErr *sdk.Error
	switch {
	case errors.As(err, &apiErr):
		attempts := 1
		if apiErr.StatusCode == http.StatusTooManyRequests || apiErr.StatusCode >= 500 {
			attempts = m.cfg.MaxRetries + 1
		}
		return &agent.ModelHTTPError{Status: apiErr.StatusCode, Attempts: attempts}
	case ctx.Err() != nil:
		return fmt.Errorf("anthropic: %w", ctx.Err())
	default:
		return fmt.Errorf("anthropic: the request failed: %w", err)
	}
}
