package agent

import (
	"bytes"
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
)

// OpenAIConfig configures an OpenAIModel. BaseURL and Model are required.
type OpenAIConfig struct {
	// BaseURL is the API root of an OpenAI-compatible server, the part
	// before /chat/completions: https://api.openai.com/v1 or, for a local
	// Ollama, http://localhost:11434/v1.
	BaseURL string
	// Model is the model name the server knows (gpt-4o-mini, llama3.2).
	Model string
	// APIKey is sent as a bearer token; empty sends no Authorization
	// header (local servers need none). It is never logged.
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
	// Tools are the function tools offered to the model. They are sent
	// only when ToolsAllowed(prompt.Lowest) holds: never while untrusted
	// content is in the context. The reference adapter offers none.
	Tools []Tool
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

// Tool is a function tool in the OpenAI chat completions format.
type Tool struct {
	// Name is the function name the model calls.
	Name string
	// Description tells the model what the tool does.
	Description string
	// Parameters is the JSON Schema of the arguments.
	Parameters json.RawMessage
}

// ToolsAllowed reports whether a model backend may expose tools to a run
// whose context has the lowest trust lowest (RunContext.trustSummary):
// never when untrusted content is in play, and never for a level this code
// does not know. Adapters written in other languages should apply the same
// gate.
func ToolsAllowed(lowest Trust) bool {
	switch lowest {
	case TrustTrigger, TrustAuthorized, TrustSelf, TrustSystem:
		return true
	}
	return false
}

// LengthNote ends an answer the server cut at its token limit
// (finish_reason length), so the people in the thread know it is
// incomplete.
const LengthNote = "\n\n_(This answer was cut off at the model's length limit.)_"

// ErrModelReply is wrapped by the errors of a reply that holds no usable
// answer: no choices, empty content, or a body that is no chat completion.
var ErrModelReply = errors.New("adapter: the model server's reply holds no answer")

// ModelHTTPError is an error status of the model server after the last
// attempt. It holds the status only: the body may quote the prompt.
type ModelHTTPError struct {
	Status   int
	Attempts int
}

// Error names the status and the attempts.
func (e *ModelHTTPError) Error() string {
	return fmt.Sprintf("adapter: the model server answered status %d (after %d attempts)", e.Status, e.Attempts)
}

// OpenAIModel is a Model that asks an OpenAI-compatible chat completions
// endpoint (OpenAI, Ollama, vLLM, llama.cpp's server, LM Studio, ...):
// POST {BaseURL}/chat/completions with the rendered prompt as one system
// and one user message, streaming off. It retries 429, 5xx and network
// failures with bounded backoff, marks a reply cut at the length limit,
// and refuses an empty or malformed reply.
type OpenAIModel struct {
	cfg      OpenAIConfig
	endpoint string
	http     *http.Client
	log      *slog.Logger
}

// NewOpenAIModel checks cfg and returns the model.
//
// Errors: BaseURL is no absolute http or https URL, or Model is empty.
func NewOpenAIModel(cfg OpenAIConfig) (*OpenAIModel, error) {
	u, err := url.Parse(strings.TrimSpace(cfg.BaseURL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("adapter: the model base URL must be an absolute http or https URL")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, errors.New("adapter: the model base URL must have no query or fragment")
	}
	if strings.TrimSpace(cfg.Model) == "" {
		return nil, errors.New("adapter: the model name is empty")
	}
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
	m := &OpenAIModel{cfg: cfg, endpoint: strings.TrimRight(u.String(), "/") + "/chat/completions", http: cfg.HTTPClient, log: cfg.Logger}
	if m.http == nil {
		m.http = &http.Client{}
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	return m, nil
}

// Endpoint returns the URL the model posts to.
func (m *OpenAIModel) Endpoint() string { return m.endpoint }

// chatMessage is one message of a chat completions request.
type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// chatTool is a tool of a chat completions request.
type chatTool struct {
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// chatRequest is the body of POST /chat/completions.
type chatRequest struct {
	Model     string        `json:"model"`
	Messages  []chatMessage `json:"messages"`
	Stream    bool          `json:"stream"`
	MaxTokens int           `json:"max_tokens,omitempty"`
	Tools     []chatTool    `json:"tools,omitempty"`
}

// chatResponse is the part of a chat completion the model reads. Unknown
// members are ignored: servers add their own.
type chatResponse struct {
	Choices []struct {
		Message struct {
			Content *string `json:"content"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// Answer sends prompt.System and prompt.User and returns the first
// choice's content; a reply cut at the length limit ends with LengthNote.
// Tools are offered only when ToolsAllowed(prompt.Lowest).
//
// Errors: ctx.Err() (wrapped) when ctx ends, which aborts a request in
// flight; context.DeadlineExceeded (wrapped) when Timeout passes;
// *ModelHTTPError for an error status after the last attempt or a status
// that is not retried; an error wrapping ErrModelReply for an empty or
// malformed reply.
func (m *OpenAIModel) Answer(ctx context.Context, prompt Prompt) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.Timeout)
	defer cancel()
	log := m.log.With("run_id", prompt.Context.RunID)
	req := chatRequest{Model: m.cfg.Model, Stream: false, MaxTokens: m.cfg.MaxTokens,
		Messages: []chatMessage{{Role: "system", Content: prompt.System}, {Role: "user", Content: prompt.User}}}
	if len(m.cfg.Tools) > 0 {
		if ToolsAllowed(prompt.Lowest) {
			for _, t := range m.cfg.Tools {
				req.Tools = append(req.Tools, chatTool{Type: "function", Function: chatFunction(t)})
			}
		} else {
			log.Info("tools withheld: untrusted content in the context", "lowest", strings.ToLower(string(prompt.Lowest)), "tools", len(m.cfg.Tools))
		}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return "", fmt.Errorf("adapter: encode the model request: %w", err)
	}
	delay := m.cfg.RetryBackoff
	for attempt := 1; ; attempt++ {
		began := time.Now()
		text, wait, err := m.attempt(ctx, log, body)
		if err == nil {
			return text, nil
		}
		if wait < 0 || attempt >= m.cfg.MaxAttempts || ctx.Err() != nil {
			var he *ModelHTTPError
			if errors.As(err, &he) {
				he.Attempts = attempt
			}
			if ctx.Err() != nil {
				return "", fmt.Errorf("adapter: model request: %w", context.Cause(ctx))
			}
			return "", err
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
		if !sleep(ctx, pause) {
			return "", fmt.Errorf("adapter: model request: %w", context.Cause(ctx))
		}
	}
}

// attempt sends one request. wait is the pause the server asked for
// (Retry-After), 0 for a retryable failure without one, and -1 when
// repeating cannot help.
func (m *OpenAIModel) attempt(ctx context.Context, log *slog.Logger, body []byte) (text string, wait time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.endpoint, bytes.NewReader(body))
	if err != nil {
		return "", -1, fmt.Errorf("adapter: model request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if m.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+m.cfg.APIKey)
	}
	resp, err := m.http.Do(req)
	if err != nil {
		// The transport error names the URL, never the key or body.
		return "", 0, fmt.Errorf("adapter: model request: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, m.cfg.MaxResponseBytes+1))
	if err != nil {
		return "", 0, fmt.Errorf("adapter: read the model reply: %w", err)
	}
	switch {
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return "", parseRetryAfter(resp.Header.Get("Retry-After")), &ModelHTTPError{Status: resp.StatusCode}
	case resp.StatusCode != http.StatusOK:
		// 400 (context too long, unknown model), 401, 403, 404: a repeat
		// gets the same answer.
		return "", -1, &ModelHTTPError{Status: resp.StatusCode}
	}
	if int64(len(data)) > m.cfg.MaxResponseBytes {
		return "", -1, fmt.Errorf("%w: larger than %d bytes", ErrModelReply, m.cfg.MaxResponseBytes)
	}
	var out chatResponse
	if err := json.Unmarshal(data, &out); err != nil {
		return "", -1, fmt.Errorf("%w: no chat completion document", ErrModelReply)
	}
	if len(out.Choices) == 0 {
		return "", -1, fmt.Errorf("%w: no choices", ErrModelReply)
	}
	c := out.Choices[0]
	if c.Message.Content == nil || strings.TrimSpace(*c.Message.Content) == "" {
		return "", -1, fmt.Errorf("%w: empty content (finish_reason %q)", ErrModelReply, safeWord(c.FinishReason))
	}
	log.Info("model answered", "finish_reason", safeWord(c.FinishReason), "prompt_tokens", out.Usage.PromptTokens, "completion_tokens", out.Usage.CompletionTokens)
	text = *c.Message.Content
	if c.FinishReason == "length" {
		text = strings.TrimRight(text, " \t\n") + LengthNote
	}
	return text, 0, nil
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
// URL with credentials in user info or a server's words.
func errKind(err error) string {
	var he *ModelHTTPError
	switch {
	case errors.As(err, &he):
		return "status_" + strconv.Itoa(he.Status)
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, ErrModelReply):
		return "malformed_reply"
	}
	return "network"
}
