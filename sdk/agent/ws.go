package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
)

// Transports of the agent stream (Config.Transport).
const (
	// TransportPoll long-polls agentEvents over HTTP (the default).
	TransportPoll = "poll"
	// TransportAuto subscribes over WebSocket and falls back to the long
	// poll for the rest of the process when the server (or a proxy before
	// it) does not upgrade the connection; agent.Run's default.
	TransportAuto = "auto"
	// TransportWS subscribes to agentEvents over WebSocket
	// (graphql-transport-ws).
	TransportWS = "ws"
)

const subscriptionAgentEvents = `subscription AgentEvents($after: String) { agentEvents(after: $after) { seq type createdAt payload } }`

// wsBuffer bounds the events read from the socket that the loop has not
// taken yet; a full buffer stops reading, and the server closes a
// subscription that falls that far behind (4413), after which the stream
// resumes from its cursor.
const wsBuffer = 256

// AgentStream reads the caller's agent stream through the agentEvents
// subscription over WebSocket. Next has the contract of Client.AgentEvents,
// so the adapter's loop is the same for both transports: the subscription
// is (re)opened from the cursor Next is given whenever it differs from the
// position the subscription reached, or after the socket closed.
type AgentStream struct {
	c *Client

	conn   *websocket.Conn
	cancel context.CancelFunc
	pos    string // cursor behind the last event Next handed out
	events chan AgentEvent
	// done is closed when the reader ends; err then says why.
	done chan struct{}
	mu   sync.Mutex
	err  error
}

// AgentStream returns a stream over the client's server and token; it
// connects on the first Next.
func (c *Client) AgentStream() *AgentStream { return &AgentStream{c: c} }

// Close ends the subscription and its socket.
func (s *AgentStream) Close() {
	if s.conn != nil {
		s.cancel()
		s.conn.Close(websocket.StatusNormalClosure, "")
		<-s.done
		s.conn = nil
	}
}

// Next returns the events after the cursor after ("" continues after the
// acknowledged position, "0" the start, "now" the end), waiting up to wait
// for the first one; NextAfter is the last seq handed out, or after when
// none came.
//
// Errors: unauthorized when the server refused the token at
// connection_init or closed the socket with 4403 (revoked, expired,
// disabled), forbidden for a token that is not an agent's,
// validation_failed for a bad cursor; other failures are temporary (the
// next call reconnects from the cursor).
func (s *AgentStream) Next(ctx context.Context, after string, wait time.Duration) (EventPage, error) {
	page := EventPage{Events: []AgentEvent{}, NextAfter: after}
	if s.conn != nil && after != s.pos {
		s.Close()
	}
	if s.conn == nil {
		if err := s.open(ctx, after); err != nil {
			return page, err
		}
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case ev := <-s.events:
		page.Events = append(page.Events, ev)
	case <-s.done:
		// Events read before the end are still delivered, in order.
		select {
		case ev := <-s.events:
			page.Events = append(page.Events, ev)
		default:
			s.mu.Lock()
			err := s.err
			s.mu.Unlock()
			s.Close()
			return page, err
		}
	case <-timer.C:
		return page, nil
	case <-ctx.Done():
		return page, ctx.Err()
	}
	for len(page.Events) < wsBuffer {
		select {
		case ev := <-s.events:
			page.Events = append(page.Events, ev)
			continue
		default:
		}
		break
	}
	page.NextAfter = page.Events[len(page.Events)-1].Seq
	s.pos = page.NextAfter
	return page, nil
}

// open dials, initialises and subscribes from after.
func (s *AgentStream) open(ctx context.Context, after string) error {
	u := "ws" + strings.TrimPrefix(s.c.endpoint, "http")
	dctx, cancel := context.WithTimeout(ctx, s.c.timeout)
	defer cancel()
	conn, resp, err := websocket.Dial(dctx, u, &websocket.DialOptions{HTTPClient: s.c.http, Subprotocols: []string{"graphql-transport-ws"},
		HTTPHeader: http.Header{"User-Agent": {s.c.agent}}})
	if err != nil {
		if resp != nil && noWebSocket(resp.StatusCode) {
			return fmt.Errorf("%w (status %d)", ErrNoWebSocket, resp.StatusCode)
		}
		if resp != nil && resp.StatusCode >= 400 {
			return statusError("AgentEvents", resp, codeForStatus(resp.StatusCode), "websocket upgrade refused")
		}
		return &callError{op: "AgentEvents", err: err, temporary: true}
	}
	conn.SetReadLimit(s.c.maxBytes)
	fail := func(err error) error {
		conn.CloseNow()
		return closeError(err)
	}
	init, _ := json.Marshal(map[string]string{"Authorization": "Bearer " + s.c.token})
	if err := wsjson.Write(dctx, conn, wsMsg{Type: "connection_init", Payload: init}); err != nil {
		return fail(err)
	}
	for {
		var m wsMsg
		if err := wsjson.Read(dctx, conn, &m); err != nil {
			return fail(err)
		}
		if m.Type == "connection_ack" {
			break
		}
		if m.Type == "ping" {
			if err := wsjson.Write(dctx, conn, wsMsg{Type: "pong"}); err != nil {
				return fail(err)
			}
		}
	}
	vars := map[string]any{}
	if after != "" {
		vars["after"] = after
	}
	sub, _ := json.Marshal(map[string]any{"query": subscriptionAgentEvents, "variables": vars})
	if err := wsjson.Write(dctx, conn, wsMsg{ID: "1", Type: "subscribe", Payload: sub}); err != nil {
		return fail(err)
	}
	rctx, rcancel := context.WithCancel(context.WithoutCancel(ctx))
	s.conn, s.cancel, s.pos = conn, rcancel, after
	s.events, s.done, s.err = make(chan AgentEvent, wsBuffer), make(chan struct{}), nil
	go s.read(rctx, conn)
	return nil
}

// read moves the subscription's events into s.events until the socket or
// the subscription ends, and answers the server's pings.
func (s *AgentStream) read(ctx context.Context, conn *websocket.Conn) {
	defer close(s.done)
	end := func(err error) {
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
	}
	for {
		var m wsMsg
		if err := wsjson.Read(ctx, conn, &m); err != nil {
			end(closeError(err))
			return
		}
		switch m.Type {
		case "ping":
			if err := wsjson.Write(ctx, conn, wsMsg{Type: "pong"}); err != nil {
				end(closeError(err))
				return
			}
		case "next":
			var p struct {
				Data *struct {
					AgentEvents AgentEvent `json:"agentEvents"`
				} `json:"data"`
				Errors []GraphQLError `json:"errors"`
			}
			if err := json.Unmarshal(m.Payload, &p); err != nil {
				end(&callError{op: "AgentEvents", err: fmt.Errorf("invalid next message: %w", err), temporary: true})
				return
			}
			if len(p.Errors) > 0 || p.Data == nil {
				end(graphQLError(p.Errors))
				return
			}
			select {
			case s.events <- p.Data.AgentEvents:
			case <-ctx.Done():
				end(ctx.Err())
				return
			}
		case "error":
			var errs []GraphQLError
			_ = json.Unmarshal(m.Payload, &errs)
			end(graphQLError(errs))
			return
		case "complete":
			end(&callError{op: "AgentEvents", err: errors.New("the server completed the subscription"), temporary: true})
			return
		}
	}
}

// wsMsg is a graphql-transport-ws message.
type wsMsg struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// graphQLError is the refusal errs as an *Error (invalid_response when the
// server sent none).
func graphQLError(errs []GraphQLError) error {
	if len(errs) == 0 {
		errs = []GraphQLError{{Message: "no data in the subscription's answer", Extensions: ErrorExtensions{Code: "invalid_response"}}}
	}
	return &Error{Op: "AgentEvents", HTTPStatus: errs[0].Extensions.Status, Errors: errs}
}

// closeError maps how the socket ended to the client's errors: 4401 and
// 4403 (the token no longer authenticates) are unauthorized, 4406 (no
// common subprotocol) and 4429 (too many connections) are refusals, none
// of which the adapter retries; everything else, 1012 (the server
// restarts) and 1013 (try again later: a database outage) included, is
// temporary and reconnects with backoff from the cursor.
func closeError(err error) error {
	switch code := websocket.CloseStatus(err); code {
	case 4403, 4401:
		return &Error{Op: "AgentEvents", HTTPStatus: http.StatusUnauthorized,
			Errors: []GraphQLError{{Message: "the server closed the subscription: the token does not authenticate", Extensions: ErrorExtensions{Code: "unauthorized", Status: http.StatusUnauthorized}}}}
	case 4406, 4429:
		return &Error{Op: "AgentEvents", HTTPStatus: http.StatusBadRequest,
			Errors: []GraphQLError{{Message: fmt.Sprintf("the server refused the subscription (%d)", code), Extensions: ErrorExtensions{Code: "forbidden", Status: http.StatusForbidden}}}}
	case -1:
		return &callError{op: "AgentEvents", err: err, temporary: true}
	default:
		return &callError{op: "AgentEvents", err: fmt.Errorf("the server closed the subscription (%d)", code), temporary: true}
	}
}

// ErrNoWebSocket says the server, or a proxy before it, answered the
// WebSocket upgrade with something else than a switch of protocols and
// than a verdict on the token or the load: the stream can only be long
// polled there (TransportAuto falls back).
var ErrNoWebSocket = errors.New("agent: the server does not upgrade to WebSocket")

// noWebSocket reports whether an answer of status to the upgrade request
// means no WebSocket is to be had there: anything but 101, 401, 403, 429
// and the 5xx of a server that is away for now.
func noWebSocket(status int) bool {
	switch {
	case status == http.StatusSwitchingProtocols, status == http.StatusUnauthorized, status == http.StatusForbidden,
		status == http.StatusTooManyRequests, status >= 500:
		return false
	}
	return true
}
