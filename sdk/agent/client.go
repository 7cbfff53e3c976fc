package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ClientOptions tune a Client; the zero value is usable.
type ClientOptions struct {
	// HTTPClient sends the requests; nil uses a client of its own. Its
	// Timeout should be zero: the Client bounds every call by its context,
	// and a fixed client timeout would cut long polls short.
	HTTPClient *http.Client
	// Timeout bounds one call (default 30 s). A long poll may take its
	// wait on top of it.
	Timeout time.Duration
	// MaxResponseBytes bounds the body read of one answer (default 32 MiB,
	// well above agent.context_max_bytes plus the trigger message).
	MaxResponseBytes int64
	// UserAgent is sent with every request (default "bothy-adapter").
	UserAgent string
}

// Client speaks the public GraphQL API of a Bothy server over HTTP (POST
// /graphql with a bearer token). Answers are decoded strictly into typed
// structs: a member the query did not select fails the call, so a drift
// between schema and client shows at once instead of as silently empty
// fields. A Client is safe for concurrent use.
type Client struct {
	endpoint string
	token    string
	http     *http.Client
	timeout  time.Duration
	maxBytes int64
	agent    string
}

// NewClient returns a client for the server at serverURL (its base URL,
// such as http://127.0.0.1:8080; a URL already ending in /graphql is used as
// it is) that authenticates with token.
//
// Errors: serverURL is not an absolute http or https URL without
// credentials and query, or
// token is empty or holds white space (it could not travel in a header).
func NewClient(serverURL, token string, opts ClientOptions) (*Client, error) {
	endpoint, err := graphqlEndpoint(serverURL)
	if err != nil {
		return nil, err
	}
	if token == "" || strings.ContainsFunc(token, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return nil, errors.New("adapter: the token is empty or holds white space or control characters")
	}
	c := &Client{endpoint: endpoint, token: token, http: opts.HTTPClient, timeout: opts.Timeout, maxBytes: opts.MaxResponseBytes, agent: opts.UserAgent}
	if c.http == nil {
		c.http = &http.Client{Transport: http.DefaultTransport}
	}
	if c.timeout <= 0 {
		c.timeout = 30 * time.Second
	}
	if c.maxBytes <= 0 {
		c.maxBytes = 32 << 20
	}
	if c.agent == "" {
		c.agent = "bothy-adapter"
	}
	return c, nil
}

// graphqlEndpoint checks serverURL as NewClient says and returns the
// GraphQL URL of that server: serverURL with /graphql appended unless it
// ends in it already.
func graphqlEndpoint(serverURL string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(serverURL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		// Credentials in the URL would end up in error texts and logs;
		// the token travels only in the Authorization header.
		return "", errors.New("adapter: the server URL must be an absolute http or https URL without credentials or query")
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	if !strings.HasSuffix(u.Path, "/graphql") {
		u.Path += "/graphql"
	}
	return u.String(), nil
}

// Endpoint returns the GraphQL URL the client posts to.
func (c *Client) Endpoint() string { return c.endpoint }

// FieldError is one entry of extensions.fieldErrors: the input member that
// was refused (Field, its argument path in the request, e.g. input.runId;
// Pointer, the same member in a REST body) and why.
type FieldError struct {
	Field   string `json:"field"`
	Pointer string `json:"pointer"`
	Code    string `json:"code"`
	Detail  string `json:"detail"`
}

// ErrorExtensions are the extensions Bothy puts on every GraphQL error; the
// code vocabulary is that of the REST problems (the server's OpenAPI document).
type ErrorExtensions struct {
	Code              string       `json:"code"`
	Reason            string       `json:"reason"`
	Status            int          `json:"status"`
	FieldErrors       []FieldError `json:"fieldErrors"`
	RetryAfterSeconds int          `json:"retryAfterSeconds"`
	// CurrentVersion is the live box's version of a live_version conflict.
	CurrentVersion *int `json:"currentVersion"`
}

// GraphQLError is one entry of a response's errors.
type GraphQLError struct {
	Message    string          `json:"message"`
	Path       []any           `json:"path"`
	Extensions ErrorExtensions `json:"extensions"`
}

// Error is a refused call: the server answered GraphQL errors, or an HTTP
// status without a usable GraphQL answer. Code, Reason and Status read the
// first error. When the answer was no GraphQL document the client fills in
// a code from the HTTP status (unauthorized, forbidden, not_found,
// rate_limited, internal_error, unavailable) or invalid_response.
type Error struct {
	Op         string         // operation name, such as "StartRun"
	HTTPStatus int            // status of the HTTP response
	Errors     []GraphQLError // at least one
	RetryAfter time.Duration  // from Retry-After or extensions.retryAfterSeconds; 0 when absent
}

// Error describes the refusal with code, reason and status. Bothy's error
// messages carry no content (the privacy rules of the model design), so the text is
// safe to log.
func (e *Error) Error() string {
	s := fmt.Sprintf("adapter: %s refused: %s", e.Op, e.Code())
	if r := e.Reason(); r != "" {
		s += " (" + r + ")"
	}
	return s + fmt.Sprintf(", status %d: %s", e.Status(), e.Errors[0].Message)
}

// Code returns extensions.code of the first error.
func (e *Error) Code() string { return e.Errors[0].Extensions.Code }

// Reason returns extensions.reason of the first error ("" when absent).
func (e *Error) Reason() string { return e.Errors[0].Extensions.Reason }

// Status returns extensions.status of the first error, or the HTTP status
// when the error carries none.
func (e *Error) Status() int {
	if s := e.Errors[0].Extensions.Status; s != 0 {
		return s
	}
	return e.HTTPStatus
}

// ErrorCode returns the code of err when it is (or wraps) an *Error, else
// "".
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code()
	}
	return ""
}

// ErrorReason returns the reason of err when it is (or wraps) an *Error,
// else "".
func ErrorReason(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason()
	}
	return ""
}

// ReasonError is one reason of the protocol's refusals (extensions.reason
// of GraphQL, reason of a REST problem). errors.Is(err, ErrRunClaimed)
// holds when err is, or wraps, an *Error with that reason, so a caller
// tells the refusals apart without comparing strings.
type ReasonError struct{ reason string }

// Error names the reason.
func (r *ReasonError) Error() string { return "agent: refused: " + r.reason }

// Reason is the reason's code, as the server sends it ("run_claimed").
func (r *ReasonError) Reason() string { return r.reason }

// The reasons of refusals an adapter acts on (the adapter guide).
var (
	// ErrRunClaimed: another process of the agent holds the run (fencing):
	// stop working on it, post nothing.
	ErrRunClaimed = &ReasonError{"run_claimed"}
	// ErrRunNotActive: the run has ended (completed, failed, cancelled or
	// timed out): nothing more is accepted for it.
	ErrRunNotActive = &ReasonError{"run_not_active"}
	// ErrRunNotStarted: the run is queued and must be claimed (startRun)
	// before it is renewed, answered or finished.
	ErrRunNotStarted = &ReasonError{"run_not_started"}
	// ErrTriggerRevoked: the person who asked lost the right to ask (or
	// the trigger was moved or deleted): drop the reply.
	ErrTriggerRevoked = &ReasonError{"trigger_revoked"}
	// ErrIdempotencyKeyReused: the answer's key (clientMsgId) was used
	// before for different content.
	ErrIdempotencyKeyReused = &ReasonError{"idempotency_key_reused"}
	// ErrLiveVersion: the live box moved past the base version of an
	// update (Error.Errors[0].Extensions.CurrentVersion has its version).
	ErrLiveVersion = &ReasonError{"live_version"}
	// ErrApprovalPending: the run already waits on an approval.
	ErrApprovalPending = &ReasonError{"approval_pending"}
	// ErrAlreadyDecided: the approval was decided before.
	ErrAlreadyDecided = &ReasonError{"already_decided"}
)

// Is reports whether target is the *ReasonError of e's reason, for
// errors.Is.
func (e *Error) Is(target error) bool {
	r, ok := target.(*ReasonError)
	return ok && r.reason != "" && e.Reason() == r.reason
}

// IsTemporary reports whether repeating the call may succeed: a network
// failure, a timeout of the call itself, rate_limited, unavailable or
// internal_error. A cancelled or expired caller context is not temporary:
// the caller gave up. Only repeat calls that are idempotent (queries,
// createMessage with the same clientMsgId, startRun, finishRun).
func IsTemporary(err error) bool {
	if err == nil {
		return false
	}
	var e *Error
	if errors.As(err, &e) {
		switch e.Code() {
		case "rate_limited", "unavailable", "internal_error":
			return true
		}
		return false
	}
	var ce *callError
	if errors.As(err, &ce) {
		return ce.temporary
	}
	return false
}

// callError is a call that got no answer: a network failure or a timeout.
type callError struct {
	op        string
	err       error
	temporary bool
}

func (e *callError) Error() string { return "adapter: " + e.op + ": " + e.err.Error() }
func (e *callError) Unwrap() error { return e.err }

// request is the GraphQL-over-HTTP request body.
type request struct {
	Query         string         `json:"query"`
	OperationName string         `json:"operationName"`
	Variables     map[string]any `json:"variables,omitempty"`
}

// response is the GraphQL-over-HTTP answer. extensions is allowed by the
// GraphQL specification and ignored.
type response struct {
	Data       json.RawMessage `json:"data"`
	Errors     json.RawMessage `json:"errors"`
	Extensions json.RawMessage `json:"extensions"`
}

// Do posts the operation op (query must define an operation of that name)
// with vars and decodes data strictly into out, a pointer to a struct
// mirroring the selection. The call ends after the client's timeout plus
// extra, or when ctx ends.
//
// Errors: *Error when the server refused (GraphQL errors or an error
// status); an error wrapping ctx.Err() when ctx ended; a network or
// timeout error (IsTemporary is true); a decode error when the answer does
// not match out.
func (c *Client) Do(ctx context.Context, op, query string, vars map[string]any, out any, extra time.Duration) error {
	body, err := json.Marshal(request{Query: query, OperationName: op, Variables: vars})
	if err != nil {
		return fmt.Errorf("adapter: %s: encode variables: %w", op, err)
	}
	return c.send(ctx, op, "application/json", body, out, extra)
}

// send posts body of contentType as the operation op and decodes the
// answer as Do says. A multipart body (a file upload) also carries the
// GraphQL-Require-Preflight header the server asks of multipart requests.
func (c *Client) send(ctx context.Context, op, contentType string, body []byte, out any, extra time.Duration) error {
	callCtx, cancel := context.WithTimeout(ctx, c.timeout+extra)
	defer cancel()
	req, err := c.newRequest(callCtx, contentType, body)
	if err != nil {
		return fmt.Errorf("adapter: %s: %w", op, err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return c.failed(ctx, op, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, c.maxBytes+1))
	if err != nil {
		return c.failed(ctx, op, err)
	}
	if int64(len(data)) > c.maxBytes {
		return statusError(op, resp, "invalid_response", "the answer exceeds the client's response limit")
	}
	return decodeAnswer(op, resp, data, out)
}

// newRequest builds the POST of body of contentType to the endpoint, with
// the client's headers and the trace of ctx.
func (c *Client) newRequest(ctx context.Context, contentType string, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", contentType)
	if strings.HasPrefix(contentType, "multipart/") {
		req.Header.Set("GraphQL-Require-Preflight", "1")
	}
	// graphql-response+json gives proper statuses for request errors;
	// plain JSON stays acceptable for servers that do not offer it.
	req.Header.Set("Accept", "application/graphql-response+json, application/json;q=0.9")
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("User-Agent", c.agent)
	if tp := Traceparent(ctx); tp != "" {
		req.Header.Set(TraceparentHeader, tp)
	}
	return req, nil
}

// decodeAnswer reads data, the body of resp to the operation op, as Do
// says: an *Error for GraphQL errors, an answer that is no GraphQL
// document or an error status, else data decoded strictly into out
// (unless out is nil).
func decodeAnswer(op string, resp *http.Response, data []byte, out any) error {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt != "application/json" && mt != "application/graphql-response+json" {
		// A proxy or load balancer answered, not the GraphQL endpoint.
		return statusError(op, resp, codeForStatus(resp.StatusCode), "the answer is no GraphQL document")
	}
	var env response
	if err := strictDecode(data, &env); err != nil {
		return statusError(op, resp, codeForStatus(resp.StatusCode), "the answer is no GraphQL document")
	}
	if len(env.Errors) > 0 && string(env.Errors) != "null" {
		// Errors are decoded leniently: a member added to an error must
		// never hide the error itself behind a decode failure.
		var errs []GraphQLError
		if err := json.Unmarshal(env.Errors, &errs); err != nil || len(errs) == 0 {
			return statusError(op, resp, "invalid_response", "the errors of the answer do not decode")
		}
		e := &Error{Op: op, HTTPStatus: resp.StatusCode, Errors: errs, RetryAfter: retryAfter(resp, errs[0])}
		return e
	}
	if resp.StatusCode != http.StatusOK {
		return statusError(op, resp, codeForStatus(resp.StatusCode), "unexpected HTTP status")
	}
	if len(env.Data) == 0 || string(env.Data) == "null" {
		return statusError(op, resp, "invalid_response", "the answer has neither data nor errors")
	}
	if out == nil {
		return nil
	}
	if err := strictDecode(env.Data, out); err != nil {
		return fmt.Errorf("adapter: %s: the data does not match the query: %w", op, err)
	}
	return nil
}

// failed wraps a transport failure: the caller's own context ending is not
// temporary; the call's timeout and network failures are.
func (c *Client) failed(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil {
		// Only the context's end is wrapped; the transport failure it
		// caused goes in as text, so that errors.Is and ErrorKind see that
		// the caller stopped, not a timeout or network error of the call.
		return &callError{op: op, err: fmt.Errorf("%w (%s)", ctx.Err(), err.Error())}
	}
	var ne net.Error
	temporary := errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
	if !temporary {
		// Other transport errors (connection reset wrapped by url.Error)
		// are network failures too; only a malformed request is not.
		var ue *url.Error
		temporary = errors.As(err, &ue)
	}
	return &callError{op: op, err: err, temporary: temporary}
}

func strictDecode(data []byte, out any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON document")
	}
	return nil
}

// statusError builds an *Error for an answer that carries no GraphQL
// errors.
func statusError(op string, resp *http.Response, code, msg string) *Error {
	e := &Error{Op: op, HTTPStatus: resp.StatusCode, Errors: []GraphQLError{{Message: msg, Extensions: ErrorExtensions{Code: code, Status: resp.StatusCode}}}}
	e.RetryAfter = retryAfter(resp, e.Errors[0])
	return e
}

// codeForStatus maps an HTTP status to the code vocabulary of the REST
// problems (the server's OpenAPI document).
func codeForStatus(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "unauthorized"
	case status == http.StatusForbidden:
		return "forbidden"
	case status == http.StatusNotFound:
		return "not_found"
	case status == http.StatusRequestEntityTooLarge:
		return "payload_too_large"
	case status == http.StatusTooManyRequests:
		return "rate_limited"
	case status == http.StatusBadGateway || status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout:
		return "unavailable"
	case status >= 500:
		return "internal_error"
	case status >= 400:
		return "validation_failed"
	}
	return "invalid_response"
}

// retryAfter reads the Retry-After header (seconds) or the error's
// retryAfterSeconds.
func retryAfter(resp *http.Response, e GraphQLError) time.Duration {
	for _, s := range []string{resp.Header.Get("Retry-After"), strconv.Itoa(e.Extensions.RetryAfterSeconds)} {
		if n, err := strconv.Atoi(strings.TrimSpace(s)); err == nil && n > 0 {
			return time.Duration(n) * time.Second
		}
	}
	return 0
}

// The operations of the adapter. Each is named, so logs and test fakes can
// tell them apart; the selections are exactly the typed structs above,
// because answers are decoded strictly.
const (
	runFields = `fragment RunFields on Run { id threadId state version triggerKind triggeringMessageId cancelRequested queuedAt startedAt endedAt endReason session { id mode } agent { id kind handle displayName } attempt holder leaseExpiresAt traceparent }`

	ctxFields = `fragment ContextMessage on RunContextMessage { messageId threadSeq createdAt channelId author { id kind handle displayName } role origin kind contentMd truncated attachments { fileId name mimeType size scanStatus transcript textStatus } replyToMessageId trust provenance alreadyDelivered }`

	queryViewer = `query Viewer { viewer { id kind handle displayName status } }`

	queryAgentEvents = `query AgentEvents($after: String, $wait: Int) { agentEvents(after: $after, waitSeconds: $wait) { events { seq type createdAt payload } nextAfter } }`

	queryRunContext = `query RunContext($id: ID!) { run(id: $id) { context { runId contextFloorSeq triggerMessage { ...ContextMessage } threadContext { ...ContextMessage } channelContext { ...ContextMessage } truncatedBeforeSeq followUps { ...ContextMessage } trustSummary { lowest counts { trust count } } } } } ` + ctxFields

	// Run and StartRun also select the run's answers: what a takeover
	// reads before it answers, and what the adapter reads to decide about
	// a reply after the run ended. The other calls leave them out, so that
	// lease renewals stay cheap.
	queryRun = `query Run($id: ID!) { run(id: $id) { ...RunFields answers { messageId clientMsgId } } } ` + runFields

	// RunState is the acknowledger's look at a run another process holds:
	// only whether it is still active.
	queryRunState = `query RunState($id: ID!) { run(id: $id) { id state } }`

	mutationStartRun = `mutation StartRun($id: ID!, $holder: String) { startRun(id: $id, holder: $holder) { ...RunFields answers { messageId clientMsgId } } } ` + runFields

	mutationRenewRun = `mutation RenewRun($id: ID!, $holder: String!) { renewRun(id: $id, holder: $holder) { ...RunFields } } ` + runFields

	mutationCreateRunToken = `mutation CreateRunToken($runId: ID!, $holder: String!) { createRunToken(runId: $runId, holder: $holder) { token runId holder } }`

	mutationAckAgentEvents = `mutation AckAgentEvents($upTo: String!) { ackAgentEvents(upTo: $upTo) { position } }`

	mutationFinishRun = `mutation FinishRun($id: ID!, $input: RunFinish!, $holder: String) { finishRun(id: $id, input: $input, holder: $holder) { ...RunFields } } ` + runFields

	mutationCreateMessage = `mutation CreateMessage($threadId: ID!, $input: MessageCreate!, $holder: String) { createMessage(threadId: $threadId, input: $input, holder: $holder) { replayed message { id threadId threadSeq } } }`
)

// Viewer returns the authenticated principal. The adapter calls it first
// to prove the token and that it belongs to an agent.
//
// Errors: as Do; unauthorized for a bad token.
func (c *Client) Viewer(ctx context.Context) (Principal, error) {
	var out struct {
		Viewer Principal `json:"viewer"`
	}
	err := c.Do(ctx, "Viewer", queryViewer, nil, &out, 0)
	return out.Viewer, err
}

// AgentEvents long-polls the caller's agent stream: the events after the
// cursor after ("" sends no cursor, which continues after the agent's
// acknowledged position; the server refuses an empty string itself. "0"
// is the start of the stream, "now" its end), waiting up to wait (the
// server caps it at events.poll_max_wait, and counts whole seconds) for the
// first one.
//
// Errors: as Do; forbidden for a token that is not an agent's,
// validation_failed for a bad cursor.
func (c *Client) AgentEvents(ctx context.Context, after string, wait time.Duration) (EventPage, error) {
	secs := int(wait / time.Second)
	vars := map[string]any{"wait": secs}
	if after != "" {
		vars["after"] = after
	}
	var out struct {
		AgentEvents EventPage `json:"agentEvents"`
	}
	err := c.Do(ctx, "AgentEvents", queryAgentEvents, vars, &out, time.Duration(secs)*time.Second)
	return out.AgentEvents, err
}

// RunContext reads the context of the caller's own active run runID
// (run.context.read). The server recomputes it, trust included, on every
// read.
//
// Errors: as Do; not_found for an unknown run, a foreign one, or an own run
// that is no longer active (all three answer alike).
func (c *Client) RunContext(ctx context.Context, runID string) (RunContext, error) {
	var out struct {
		Run *struct {
			Context RunContext `json:"context"`
		} `json:"run"`
	}
	if err := c.Do(ctx, "RunContext", queryRunContext, map[string]any{"id": runID}, &out, 0); err != nil {
		return RunContext{}, err
	}
	if out.Run == nil {
		return RunContext{}, notFound("RunContext")
	}
	return out.Run.Context, nil
}

// Run reads run runID, its answers included.
//
// Errors: as Do; not_found when the run is unknown or invisible.
func (c *Client) Run(ctx context.Context, runID string) (RunInfo, error) {
	var out struct {
		Run *RunInfo `json:"run"`
	}
	if err := c.Do(ctx, "Run", queryRun, map[string]any{"id": runID}, &out, 0); err != nil {
		return RunInfo{}, err
	}
	if out.Run == nil {
		return RunInfo{}, notFound("Run")
	}
	return *out.Run, nil
}

// runState reads the state of run runID.
//
// Errors: as Do; not_found when the run is unknown or invisible.
func (c *Client) runState(ctx context.Context, runID string) (RunState, error) {
	var out struct {
		Run *struct {
			ID    string   `json:"id"`
			State RunState `json:"state"`
		} `json:"run"`
	}
	if err := c.Do(ctx, "RunState", queryRunState, map[string]any{"id": runID}, &out, 0); err != nil {
		return "", err
	}
	if out.Run == nil {
		return "", notFound("RunState")
	}
	return out.Run.State, nil
}

// StartRun claims the caller's own run runID for holder (this adapter
// process) and moves it to running (from queued or waiting_input; the same
// holder gets a running run unchanged, so a repeat is safe). The run comes
// back with its answers: after a takeover, what earlier holders posted.
//
// Errors: as Do; conflict with reason run_claimed while another holder's
// lease lives, run_not_active when the run ended, trigger_revoked when its
// person lost trigger.
func (c *Client) StartRun(ctx context.Context, runID, holder string) (RunInfo, error) {
	var out struct {
		StartRun RunInfo `json:"startRun"`
	}
	err := c.Do(ctx, "StartRun", mutationStartRun, map[string]any{"id": runID, "holder": optional(holder)}, &out, 0)
	return out.StartRun, err
}

// RenewRun extends holder's lease on the caller's own run runID by the
// server's run.lease_timeout.
//
// Errors: as Do; conflict with reason run_claimed when holder no longer
// holds the run, run_not_active when it ended, trigger_revoked when its
// person lost trigger (the run is then cancelled).
func (c *Client) RenewRun(ctx context.Context, runID, holder string) (RunInfo, error) {
	var out struct {
		RenewRun RunInfo `json:"renewRun"`
	}
	err := c.Do(ctx, "RenewRun", mutationRenewRun, map[string]any{"id": runID, "holder": optional(holder)}, &out, 0)
	return out.RenewRun, err
}

// CreateRunToken mints a run token for the agent's own run, held by
// holder: a bearer token that may call only that run's operations (as
// holder when a call names none) and read its thread, and that dies when
// the run ends. bothy agent run --runner hands one to each child process.
// It renews holder's lease.
//
// Errors: as Do; conflict run_claimed when holder does not hold the run,
// run_not_active once it ended; forbidden run_token_scope when the client
// itself holds a run token.
func (c *Client) CreateRunToken(ctx context.Context, runID, holder string) (string, error) {
	var out struct {
		CreateRunToken struct {
			Token  string `json:"token"`
			RunID  string `json:"runId"`
			Holder string `json:"holder"`
		} `json:"createRunToken"`
	}
	err := c.Do(ctx, "CreateRunToken", mutationCreateRunToken, map[string]any{"runId": runID, "holder": optional(holder)}, &out, 0)
	return out.CreateRunToken.Token, err
}

// AckAgentEvents stores that the agent handled its stream up to upTo; a
// later AgentEvents without cursor continues behind the stored position.
// Acknowledging backwards is a no-op. It returns the stored position.
//
// Errors: as Do; validation_failed (invalid_cursor) beyond the end.
func (c *Client) AckAgentEvents(ctx context.Context, upTo string) (string, error) {
	var out struct {
		AckAgentEvents struct {
			Position string `json:"position"`
		} `json:"ackAgentEvents"`
	}
	err := c.Do(ctx, "AckAgentEvents", mutationAckAgentEvents, map[string]any{"upTo": upTo}, &out, 0)
	return out.AckAgentEvents.Position, err
}

// CreateMessage posts a text message into thread threadID as holder (the
// process that holds in.RunID; "" for the anonymous holder, and ignored
// without RunID). The server deduplicates by (author, ClientMsgID), so
// repeating a call with the same input is safe and answers Replayed.
//
// Errors: as Do; with RunID set, validation_failed (fieldErrors run_mismatch)
// when RunID is no own active run of this thread, conflict with reason
// run_not_active when that run ended, run_claimed when another process
// holds it, trigger_revoked when its person lost trigger (nothing is stored
// in all three cases).
func (c *Client) CreateMessage(ctx context.Context, threadID, holder string, in MessageCreate) (MessageResult, error) {
	var out struct {
		CreateMessage MessageResult `json:"createMessage"`
	}
	err := c.Do(ctx, "CreateMessage", mutationCreateMessage, map[string]any{"threadId": threadID, "input": in, "holder": optional(holder)}, &out, 0)
	return out.CreateMessage, err
}

// FinishRun ends the caller's own run runID with in.Outcome (and a reason
// without content) as holder ("" for the anonymous holder).
//
// Errors: as Do; conflict with reason run_not_active when the run ended
// already, run_claimed when another process holds it.
func (c *Client) FinishRun(ctx context.Context, runID, holder string, in RunFinish) (RunInfo, error) {
	var out struct {
		FinishRun RunInfo `json:"finishRun"`
	}
	err := c.Do(ctx, "FinishRun", mutationFinishRun, map[string]any{"id": runID, "input": in, "holder": optional(holder)}, &out, 0)
	return out.FinishRun, err
}

// optional is s as an optional GraphQL argument: null when empty.
func optional(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// notFound is the error of a nullable field answered null without error.
func notFound(op string) *Error {
	return &Error{Op: op, HTTPStatus: http.StatusOK, Errors: []GraphQLError{{Message: "Not found", Extensions: ErrorExtensions{Code: "not_found", Status: http.StatusNotFound}}}}
}

// RunLive is a run's live box: what its anchor shows while the agent writes.
type RunLive struct {
	RunID   string `json:"runId"`
	Version int    `json:"version"`
	Text    string `json:"text"`
	Status  string `json:"status"`
	Done    bool   `json:"done"`
}

// LiveUpdate is a change of a run's live box (updateRunLive): Append is
// added after the text (after Replace when it is set); Status, when set,
// replaces the status line; Done finishes the box.
type LiveUpdate struct {
	BaseVersion int
	Append      string
	Replace     *string
	Status      *string
	Done        bool
}

const liveSel = `runId version text status done`

const (
	mutationUpdateRunLive = `mutation UpdateRunLive($id: ID!, $holder: String, $input: RunLiveUpdate!) { updateRunLive(runId: $id, holder: $holder, input: $input) { ` + liveSel + ` } }`
	queryRunLive          = `query RunLive($id: ID!) { run(id: $id) { live { ` + liveSel + ` } } }`
)

// UpdateRunLive changes the live box of the caller's own run runID as
// holder; every reader of the thread sees the change at once.
//
// Errors: as Do; conflict with reason live_version when u.BaseVersion is
// not the box's version (read it with RunLive and continue from there),
// run_claimed, run_not_active, run_not_started, trigger_revoked as for the
// other calls on a run.
func (c *Client) UpdateRunLive(ctx context.Context, runID, holder string, u LiveUpdate) (RunLive, error) {
	in := map[string]any{"baseVersion": u.BaseVersion}
	if u.Append != "" {
		in["append"] = u.Append
	}
	if u.Replace != nil {
		in["replace"] = *u.Replace
	}
	if u.Status != nil {
		in["status"] = *u.Status
	}
	if u.Done {
		in["done"] = true
	}
	vars := map[string]any{"id": runID, "input": in}
	if holder != "" {
		vars["holder"] = holder
	}
	var out struct {
		UpdateRunLive RunLive `json:"updateRunLive"`
	}
	err := c.Do(ctx, "UpdateRunLive", mutationUpdateRunLive, vars, &out, 0)
	return out.UpdateRunLive, err
}

// RunLive reads the live box of run runID.
//
// Errors: as Do; not_found when the caller may not read the run.
func (c *Client) RunLive(ctx context.Context, runID string) (RunLive, error) {
	var out struct {
		Run *struct {
			Live RunLive `json:"live"`
		} `json:"run"`
	}
	if err := c.Do(ctx, "RunLive", queryRunLive, map[string]any{"id": runID}, &out, 0); err != nil {
		return RunLive{}, err
	}
	if out.Run == nil {
		return RunLive{}, notFound("RunLive")
	}
	return out.Run.Live, nil
}
