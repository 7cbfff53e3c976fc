// Package openai is a model backend of the agent SDK for every server that
// speaks OpenAI's chat completions API (OpenAI, Azure OpenAI through its
// base URL, Ollama, vLLM, llama.cpp's server, LM Studio, OpenRouter), on
// OpenAI's Go library (github.com/openai/openai-go/v3). It sends a run's
// rendered prompt as one system and one user message, retries 429, 5xx and
// network failures with bounded backoff (the server's Retry-After first),
// marks a reply cut at the length limit, refuses an empty or malformed
// reply, and runs the model's tool calls behind the approval gate
// (agent.RunTool).
package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"bothy.example.com/bothy/sdk/agent"
)

// Config configures a Model. BaseURL and Model are required.
type Config struct {
	// BaseURL is the API root of an OpenAI-compatible server, the part
	// before /chat/completions: https://api.openai.com/v1 or, for a local
	// Ollama, http://localhost:11434/v1.
	BaseURL string
	// Model is the model name the server knows (gpt-4o-mini, llama3.2).
	Model string
	// APIKey is sent as a bearer token; empty sends no Authorization
	// header (local servers need none), whatever OPENAI_API_KEY says. It
	// is never logged.
	APIKey string
	// Timeout bounds one whole answer: every attempt and every pause
	// between attempts (default 120 s). A request still running then is
	// aborted and the answer fails.
	Timeout time.Duration
	// MaxAttempts bounds the requests of one answer on 429, 5xx and
	// network failures (default 4).
	MaxAttempts int
	// RetryBackoff is the first pause between attempts (default 1 s); it
	// doubles per attempt up to MaxBackoff, with random jitter, unless the
	// server names its own pause in Retry-After.
	RetryBackoff time.Duration
	// MaxBackoff caps every pause, Retry-After included (default 30 s).
	MaxBackoff time.Duration
	// MaxTokens is sent as max_tokens when positive; 0 leaves the limit to
	// the server.
	MaxTokens int
	// Tools are the function tools offered to the model. The model's calls
	// run through agent.RunTool: a consequential tool runs at once only
	// while the run's in-play trust is trusted (every element of the
	// context, and every tool result the model read, per its
	// OutputTrust), and otherwise only after the run's person approved the
	// call.
	Tools []agent.Tool
	// MaxToolRounds bounds the requests of one answer that end in tool
	// calls (default 8); the next one is sent without tools.
	MaxToolRounds int
	// Stream asks for the answer as server-sent events and assembles it:
	// the same answer, but a long one does not meet the idle timeouts of
	// proxies on the way.
	Stream bool
	// MaxResponseBytes bounds the body read from the server (default
	// 4 MiB); a larger answer is malformed.
	MaxResponseBytes int64
	// HTTPClient sends the requests (default: a client without its own
	// timeout; Timeout and the caller's context bound every request).
	HTTPClient *http.Client
	// Logger receives attempt numbers, statuses, finish reasons and
	// token counts, never content or the key. nil discards.
	Logger *slog.Logger
}

// Model answers prompts with a chat completions server. It implements
// agent.Model.
type Model struct {
	cfg      Config
	endpoint string
	client   sdk.Client
	log      *slog.Logger
}

var _ agent.Model = (*Model)(nil)

// New checks cfg and returns the model.
//
// Errors: BaseURL is no absolute http or https URL (or has a query), or
// Model is empty.
func New(cfg Config) (*Model, error) {
	root, err := apiRoot(cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(cfg.Model) == "" {
		return nil, errors.New("openai: the model name is empty")
	}
	cfg = withDefaults(cfg)
	m := &Model{cfg: cfg, endpoint: root + "/chat/completions", log: cfg.Logger}
	// Retries are this package's (bounded Retry-After, jitter, attempts
	// counted for the error); the key option comes last so that an empty
	// key also overrides OPENAI_API_KEY from the environment.
	m.client = sdk.NewClient(option.WithBaseURL(root+"/"), option.WithHTTPClient(boundedClient(cfg)), option.WithMaxRetries(0), option.WithAPIKey(cfg.APIKey))
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	return m, nil
}

// apiRoot checks baseURL as New says and returns it without a trailing
// slash.
func apiRoot(baseURL string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(baseURL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", errors.New("openai: the model base URL must be an absolute http or https URL")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", errors.New("openai: the model base URL must have no query or fragment")
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// withDefaults fills in the defaults Config documents for the bounds left
// unset.
func withDefaults(cfg Config) Config {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 120 * time.Second
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 4
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 30 * time.Second
	}
	if cfg.MaxResponseBytes <= 0 {
		cfg.MaxResponseBytes = 4 << 20
	}
	return cfg
}

// boundedClient returns a copy of cfg.HTTPClient (or of a client without
// a timeout of its own) whose answers are cut at cfg.MaxResponseBytes.
// The body bound applies before the library decodes: a larger answer
// fails its read with errTooLarge.
func boundedClient(cfg Config) *http.Client {
	httpClient := cfg.HTTPClient
	if httpClient == nil {
		httpClient = &http.Client{}
	}
	bounded := *httpClient
	base := bounded.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	bounded.Transport = boundedTransport{next: base, max: cfg.MaxResponseBytes}
	return &bounded
}

// Endpoint returns the URL the model posts to.
func (m *Model) Endpoint() string { return m.endpoint }

// Answer sends prompt.System and prompt.User and returns the first
// choice's content; a reply cut at the length limit ends with
// agent.LengthNote. The model's tool calls run through agent.RunTool (a
// consequential one with untrusted content in play, the context or a tool
// result read before, only after the run's person approved it), and their
// answers go back to the model until it answers in text. The in-play trust
// is that of ctx's agent.Task (the run's); without one, a Task of the call
// starting at prompt.Lowest.
//
// Errors: ctx.Err() (wrapped) when ctx ends, which aborts a request in
// flight; context.DeadlineExceeded (wrapped) when Timeout passes;
// *agent.ModelHTTPError for an error status after the last attempt or a
// status that is not retried; an error wrapping agent.ErrModelReply for an
// empty or malformed reply.
func (m *Model) Answer(ctx context.Context, prompt agent.Prompt) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.Timeout)
	defer cancel()
	if agent.TaskFrom(ctx) == nil {
		// Called outside a run: the conversation of this call keeps the
		// in-play rule on a Task of its own.
		ctx = agent.WithTask(ctx, agent.NewTask(prompt))
	}
	log := m.log.With("run_id", prompt.Context.RunID)
	params := sdk.ChatCompletionNewParams{
		Model:    shared.ChatModel(m.cfg.Model),
		Messages: []sdk.ChatCompletionMessageParamUnion{sdk.SystemMessage(prompt.System), sdk.UserMessage(prompt.User)},
	}
	if m.cfg.MaxTokens > 0 {
		params.MaxTokens = sdk.Int(int64(m.cfg.MaxTokens))
	}
	for _, t := range m.cfg.Tools {
		def := shared.FunctionDefinitionParam{Name: t.Name}
		if t.Description != "" {
			def.Description = sdk.String(t.Description)
		}
		if len(t.Parameters) > 0 {
			var p shared.FunctionParameters
			if err := json.Unmarshal(t.Parameters, &p); err != nil {
				return "", fmt.Errorf("openai: the parameters of tool %s are no JSON object", t.Name)
			}
			def.Parameters = p
		}
		params.Tools = append(params.Tools, sdk.ChatCompletionFunctionTool(def))
	}
	rounds := m.cfg.MaxToolRounds
	if rounds <= 0 {
		rounds = 8
	}
	for round := 0; ; round++ {
		if round == rounds {
			params.Tools = nil // the last word is text
		}
		msg, text, err := m.complete(ctx, log, params)
		if err != nil || msg == nil || len(msg.ToolCalls) == 0 {
			return text, err
		}
		params.Messages = append(params.Messages, msg.ToParam())
		for _, call := range msg.ToolCalls {
			params.Messages = append(params.Messages, sdk.ToolMessage(m.runTool(ctx, log, call), call.ID))
		}
	}
}

// runTool runs one tool call of the model behind the gate (agent.RunTool,
// which also lowers the run's in-play trust by the tool's output) and
// returns what the model reads back; a failure is text for the model,
// never the end of the answer, unless the run itself ended. The log says
// what happened to the call: ran, denied by the person, or failed.
func (m *Model) runTool(ctx context.Context, log *slog.Logger, call sdk.ChatCompletionMessageToolCallUnion) string {
	for _, t := range m.cfg.Tools {
		if t.Name != call.Function.Name {
			continue
		}
		return agent.ToolAnswer(ctx, log, t, json.RawMessage(call.Function.Arguments))
	}
	return "There is no tool named " + safeWord(call.Function.Name) + "."
}

// complete asks for one completion, retrying 429, 5xx and network
// failures: the message (with its tool calls) and its text.
func (m *Model) complete(ctx context.Context, log *slog.Logger, params sdk.ChatCompletionNewParams) (*sdk.ChatCompletionMessage, string, error) {
	delay := m.cfg.RetryBackoff
	for attempt := 1; ; attempt++ {
		began := time.Now()
		msg, text, wait, err := m.attempt(ctx, log, params)
		if err == nil {
			return msg, text, nil
		}
		if wait < 0 || attempt >= m.cfg.MaxAttempts || ctx.Err() != nil {
			var he *agent.ModelHTTPError
			if errors.As(err, &he) {
				he.Attempts = attempt
			}
			if ctx.Err() != nil {
				return nil, "", fmt.Errorf("openai: model request: %w", context.Cause(ctx))
			}
			return nil, "", err
		}
		pause := wait
		if pause == 0 {
			// Full jitter in the upper half keeps retries of many runs from
			// arriving together while still growing the pause.
			pause = delay/2 + rand.N(delay/2+1)
			delay = min(delay*2, m.cfg.MaxBackoff)
		}
		pause = min(pause, m.cfg.MaxBackoff)
		log.Warn("model request failed, retrying", "attempt", attempt, "error", errKind(err), "ms", time.Since(began).Milliseconds(), "retry_in", pause.String())
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, "", fmt.Errorf("openai: model request: %w", context.Cause(ctx))
		}
	}
}

// attempt sends one request. wait is the pause the server asked for
// (Retry-After), 0 for a retryable failure without one, and -1 when
// repeating cannot help.
func (m *Model) attempt(ctx context.Context, log *slog.Logger, params sdk.ChatCompletionNewParams) (msg *sdk.ChatCompletionMessage, text string, wait time.Duration, err error) {
	// The answer's status decides, whether or not the library could read
	// its error body (servers word errors in their own shapes).
	var raw *http.Response
	var out *sdk.ChatCompletion
	if m.cfg.Stream {
		out, err = m.stream(ctx, params, &raw)
	} else {
		out, err = m.client.Chat.Completions.New(ctx, params, option.WithResponseInto(&raw))
	}
	if err != nil {
		wait, err = m.failed(ctx, err, raw)
		return nil, "", wait, err
	}
	return choice(log, out)
}

// failed turns the failure err of a request, whose answer is raw when
// there was one, into the error of the attempt and the wait as attempt
// says.
func (m *Model) failed(ctx context.Context, err error, raw *http.Response) (wait time.Duration, _ error) {
	var apiErr *sdk.Error
	status := 0
	if errors.As(err, &apiErr) {
		status = apiErr.StatusCode
	} else if raw != nil && raw.StatusCode >= 400 {
		status = raw.StatusCode
	}
	switch {
	case status != 0:
		return statusFailure(status, raw, apiErr)
	case errors.Is(err, errTooLarge):
		return -1, fmt.Errorf("%w: larger than %d bytes", agent.ErrModelReply, m.cfg.MaxResponseBytes)
	case ctx.Err() != nil:
		return -1, fmt.Errorf("openai: model request: %w", ctx.Err())
	case isDecodeError(err):
		return -1, fmt.Errorf("%w: no chat completion document", agent.ErrModelReply)
	default:
		// A transport failure; the library's text names the URL, never
		// the key or the body.
		return 0, fmt.Errorf("openai: model request: %w", err)
	}
}

// statusFailure is the failure of an answer with the error status status
// (raw, or the response apiErr holds): 429 and 5xx are retried, after
// the pause its Retry-After names; any other gets -1.
func statusFailure(status int, raw *http.Response, apiErr *sdk.Error) (wait time.Duration, _ error) {
	if status == http.StatusTooManyRequests || status >= 500 {
		var after string
		if raw != nil {
			after = raw.Header.Get("Retry-After")
		} else if apiErr != nil && apiErr.Response != nil {
			after = apiErr.Response.Header.Get("Retry-After")
		}
		return parseRetryAfter(after), &agent.ModelHTTPError{Status: status}
	}
	// 400 (context too long, unknown model), 401, 403, 404: a repeat
	// gets the same answer.
	return -1, &agent.ModelHTTPError{Status: status}
}

// choice reads the first choice of the completion out: the message when
// it calls tools, else its text (marked when cut at the length limit).
// wait and err as for attempt: a completion without a usable choice is
// not retried.
func choice(log *slog.Logger, out *sdk.ChatCompletion) (msg *sdk.ChatCompletionMessage, text string, wait time.Duration, err error) {
	if len(out.Choices) == 0 {
		return nil, "", -1, fmt.Errorf("%w: no choices", agent.ErrModelReply)
	}
	c := out.Choices[0]
	if !c.Message.JSON.Content.Valid() && c.Message.JSON.Content.Raw() != "null" && c.Message.JSON.Content.Raw() != "" {
		// content that is no string (an array of parts) was not decoded.
		return nil, "", -1, fmt.Errorf("%w: content is no text", agent.ErrModelReply)
	}
	if len(c.Message.ToolCalls) > 0 {
		log.Info("model called tools", "calls", len(c.Message.ToolCalls), "prompt_tokens", out.Usage.PromptTokens, "completion_tokens", out.Usage.CompletionTokens)
		return &c.Message, "", 0, nil
	}
	if strings.TrimSpace(c.Message.Content) == "" {
		return nil, "", -1, fmt.Errorf("%w: empty content (finish_reason %q)", agent.ErrModelReply, safeWord(c.FinishReason))
	}
	log.Info("model answered", "finish_reason", safeWord(c.FinishReason), "prompt_tokens", out.Usage.PromptTokens, "completion_tokens", out.Usage.CompletionTokens)
	text = c.Message.Content
	if c.FinishReason == "length" {
		text = strings.TrimRight(text, " \t\n") + agent.LengthNote
	}
	return &c.Message, text, 0, nil
}

// stream asks for the answer as server-sent events and assembles the
// chunks into one completion (the library's accumulator).
func (m *Model) stream(ctx context.Context, params sdk.ChatCompletionNewParams, raw **http.Response) (*sdk.ChatCompletion, error) {
	params.StreamOptions = sdk.ChatCompletionStreamOptionsParam{IncludeUsage: sdk.Bool(true)}
	s := m.client.Chat.Completions.NewStreaming(ctx, params, option.WithResponseInto(raw))
	defer s.Close()
	acc := sdk.ChatCompletionAccumulator{}
	for s.Next() {
		chunk := s.Current()
		acc.AddChunk(chunk)
		if len(chunk.Choices) > 0 {
			// Readers of the thread see the answer grow (Config.Live).
			agent.Stream(ctx, chunk.Choices[0].Delta.Content)
		}
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	return &acc.ChatCompletion, nil
}

// isDecodeError reports whether err is the library failing to read a
// 200 answer as a chat completion (not JSON, the wrong shape, cut off).
func isDecodeError(err error) bool {
	var syntax *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	return errors.As(err, &syntax) || errors.As(err, &typeErr) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		strings.Contains(err.Error(), "unmarshal") || strings.Contains(err.Error(), "decod") ||
		strings.Contains(err.Error(), "expected destination type") // an answer that is not application/json
}

// errTooLarge fails the read of an answer above Config.MaxResponseBytes.
var errTooLarge = errors.New("openai: the answer is larger than allowed")

// boundedTransport cuts every response body at max bytes: reading beyond
// fails with errTooLarge, so that no answer makes the process hold more.
type boundedTransport struct {
	next http.RoundTripper
	max  int64
}

// RoundTrip sends r and bounds the body of its answer.
func (b boundedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := b.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = &boundedBody{ReadCloser: resp.Body, left: b.max}
	return resp, nil
}

// boundedBody reads at most left bytes and fails beyond.
type boundedBody struct {
	io.ReadCloser
	left int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n, errTooLarge
	}
	return n, err
}

// parseRetryAfter reads Retry-After as seconds or an HTTP date; 0 when
// absent or unreadable (the caller then backs off on its own).
func parseRetryAfter(v string) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil {
		if n <= 0 {
			return 0
		}
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}

// errKind names an error for the log without its text, which may carry a
// server's words.
func errKind(err error) string {
	var he *agent.ModelHTTPError
	switch {
	case errors.As(err, &he):
		return "status_" + strconv.Itoa(he.Status)
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, agent.ErrModelReply):
		return "malformed_reply"
	}
	return "network"
}

// safeWord keeps a server-chosen word (a finish reason) fit for a log:
// lowercase letters, digits and underscores, at most 32 of them.
func safeWord(s string) string {
	if len(s) > 32 {
		return "other"
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return "other"
		}
	}
	return s
}
