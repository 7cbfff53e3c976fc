package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"

	"github.com/coder/websocket"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"

	"bothy.example.com/bothy/internal/mcpface"
	"bothy.example.com/bothy/internal/rest"
)

// proxy stands between the adapter and the kit's server: the adapter's
// BOTHY_SERVER is the proxy's address. It forwards every request as it
// came (GraphQL over HTTP and WebSocket, REST, MCP) and names each by its
// operation, so that scenarios can see what the adapter did (its first
// read of the event stream) and act at the exact moment of a call (kill
// the adapter once its answer is stored, before it reads the reply).
type proxy struct {
	target *url.URL
	rp     *httputil.ReverseProxy
	routes *http.ServeMux    // the REST routes' patterns
	fields map[string]string // a REST route's pattern → its root field

	mu     sync.Mutex
	counts map[string]int
	hooks  map[int]hook
	nextID int
	// changed is closed and replaced whenever a count grows.
	changed chan struct{}
}

// hook acts on the adapter's calls of one operation.
type hook struct {
	op string
	// before runs before the call is forwarded (it may block it).
	before func()
	// after runs once the server answered the call and before the
	// adapter gets the answer; status and body are the server's. A
	// subscription's every event (a WebSocket "next" message) is such an
	// answer, with status 200.
	after func(status int, body []byte)
	// answered runs at the same moment as after, with the holder that
	// made the call too: scenarios with two processes of the adapter tell
	// their calls apart by it.
	answered func(c call)
}

// call is one answered call of the adapter.
type call struct {
	// holder is the holder the call named (the GraphQL variable holder,
	// the Bothy-Run-Holder header or REST's body field holder); "" for
	// none, the anonymous holder.
	holder string
	status int
	body   []byte
}

// reason returns the reason of the server's refusal of c: the GraphQL
// error's extensions.reason or the REST problem's reason ("" when the
// call was not refused).
func (c call) reason() string {
	var out struct {
		Reason string `json:"reason"`
		Errors []struct {
			Extensions struct {
				Reason string `json:"reason"`
			} `json:"extensions"`
		} `json:"errors"`
	}
	if json.Unmarshal(c.body, &out) != nil {
		return ""
	}
	if len(out.Errors) > 0 {
		return out.Errors[0].Extensions.Reason
	}
	return out.Reason
}

// refused reports whether the server refused c (a status of 400 and up,
// or GraphQL errors).
func (c call) refused() bool {
	if c.status >= 400 {
		return true
	}
	var out struct {
		Errors []json.RawMessage `json:"errors"`
	}
	return json.Unmarshal(c.body, &out) == nil && len(out.Errors) > 0
}

// agentEventsOp is the operation of the agent's event stream, over HTTP
// (the poll, REST's GET /api/v1/agent/events) and WebSocket (the
// subscription).
const agentEventsOp = "agentEvents"

// mcpWaitOp is the MCP face's tool that waits for the agent's next run: an
// adapter on MCP reads its event stream through it (the proxy names an MCP
// tools/call by its tool).
const mcpWaitOp = "wait_for_run"

// newProxy returns a proxy that forwards to target.
func newProxy(target string) (*proxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	p := &proxy{target: u, routes: http.NewServeMux(), fields: map[string]string{}, counts: map[string]int{}, hooks: map[int]hook{}, changed: make(chan struct{})}
	for _, r := range rest.Table() {
		pattern := r.Method + " " + r.Path
		p.routes.Handle(pattern, http.NotFoundHandler())
		p.fields[pattern] = r.Result
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite:        func(pr *httputil.ProxyRequest) { pr.SetURL(u); pr.Out.Host = pr.In.Host },
		FlushInterval:  -1,
		ModifyResponse: p.modify,
		// A call the adapter gave up (a killed process, a cancelled
		// poll) is no news: the adapter sees a broken connection either
		// way.
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) },
	}
	return p, nil
}

// opKey carries the operations and the holder of a forwarded request
// (forwarded) to modify.
type opKey struct{}

// forwarded is what modify needs to know of a request.
type forwarded struct {
	ops    []string
	holder string
}

// ServeHTTP forwards one request of the adapter.
func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		p.relay(w, r)
		return
	}
	ops, holder := p.operations(r)
	for _, op := range ops {
		p.count(op)
		for _, h := range p.hooksOf(op) {
			if h.before != nil {
				h.before()
			}
		}
	}
	p.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), opKey{}, forwarded{ops: ops, holder: holder})))
}

// modify runs the after hooks of a call's operations with the server's
// answer, before the answer goes to the adapter.
func (p *proxy) modify(resp *http.Response) error {
	fw, _ := resp.Request.Context().Value(opKey{}).(forwarded)
	var hs []hook
	for _, op := range fw.ops {
		for _, h := range p.hooksOf(op) {
			if h.after != nil || h.answered != nil {
				hs = append(hs, h)
			}
		}
	}
	if len(hs) == 0 {
		return nil
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	for _, h := range hs {
		h.run(call{holder: fw.holder, status: resp.StatusCode, body: body})
	}
	return nil
}

// run calls h's after and answered with c.
func (h hook) run(c call) {
	if h.after != nil {
		h.after(c.status, c.body)
	}
	if h.answered != nil {
		h.answered(c)
	}
}

// operations names what a request does (the root fields of a GraphQL
// document, or the root field of the REST route it matches) and the
// holder it names (call.holder).
func (p *proxy) operations(r *http.Request) (ops []string, holder string) {
	holder = r.Header.Get(rest.HolderHeader)
	var body []byte
	if r.Method == http.MethodPost && r.Body != nil {
		var err error
		body, err = io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if err != nil {
			return nil, holder
		}
	}
	if r.URL.Path == "/graphql" {
		query := r.URL.Query().Get("query")
		if r.Method == http.MethodPost {
			var req struct {
				Query     string `json:"query"`
				Variables struct {
					Holder string `json:"holder"`
				} `json:"variables"`
			}
			if json.Unmarshal(body, &req) != nil {
				return nil, holder
			}
			query = req.Query
			if req.Variables.Holder != "" {
				holder = req.Variables.Holder
			}
		}
		return rootFields(query), holder
	}
	// REST's startRun and renewRun keep the holder in their body.
	var req struct {
		Holder string `json:"holder"`
	}
	if holder == "" && json.Unmarshal(body, &req) == nil {
		holder = req.Holder
	}
	if r.URL.Path == mcpface.Path && r.Method == http.MethodPost {
		return mcpTools(body), holder
	}
	if _, pattern := p.routes.Handler(r); p.fields[pattern] != "" {
		return []string{p.fields[pattern]}, holder
	}
	return nil, holder
}

// mcpTools names the tool an MCP request (JSON-RPC, one message: the
// face refuses batches) calls, none for other methods.
func mcpTools(body []byte) []string {
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Method != "tools/call" || msg.Params.Name == "" {
		return nil
	}
	return []string{msg.Params.Name}
}

// rootFields returns the root fields of the operations of a GraphQL
// document (none when it does not parse: the server refuses it).
func rootFields(query string) []string {
	doc, err := parser.ParseQuery(&ast.Source{Input: query})
	if err != nil {
		return nil
	}
	var out []string
	for _, op := range doc.Operations {
		for _, sel := range op.SelectionSet {
			if f, ok := sel.(*ast.Field); ok {
				out = append(out, f.Name)
			}
		}
	}
	return out
}

// relay forwards a WebSocket connection of the adapter (GraphQL over
// WebSocket) message by message, counting its subscriptions.
func (p *proxy) relay(w http.ResponseWriter, r *http.Request) {
	protos := strings.Split(r.Header.Get("Sec-WebSocket-Protocol"), ",")
	for i := range protos {
		protos[i] = strings.TrimSpace(protos[i])
	}
	header := http.Header{}
	for _, h := range []string{"Authorization", "Cookie", "Origin"} {
		if v := r.Header.Get(h); v != "" {
			header.Set(h, v)
		}
	}
	target := "ws://" + p.target.Host + r.URL.RequestURI()
	up, resp, err := websocket.Dial(r.Context(), target, &websocket.DialOptions{Subprotocols: protos, HTTPHeader: header})
	if err != nil {
		status := http.StatusBadGateway
		if resp != nil {
			status = resp.StatusCode
		}
		http.Error(w, "the kit's server refused the WebSocket", status)
		return
	}
	down, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{up.Subprotocol()}, InsecureSkipVerify: true})
	if err != nil {
		up.CloseNow()
		return
	}
	up.SetReadLimit(-1)
	down.SetReadLimit(-1)
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	done := make(chan struct{}, 2)
	subs := &subscriptions{ops: map[string][]string{}}
	go func() { pipe(ctx, down, up, func(msg []byte) { p.noteNext(subs, msg) }); cancel(); done <- struct{}{} }()
	go func() {
		pipe(ctx, up, down, func(msg []byte) { p.noteSubscribe(subs, msg) })
		cancel()
		done <- struct{}{}
	}()
	<-done
	<-done
}

// pipe copies the messages of from to to until either side closes, and
// closes to with from's close status.
func pipe(ctx context.Context, to, from *websocket.Conn, note func([]byte)) {
	for {
		typ, msg, err := from.Read(ctx)
		if err != nil {
			code, reason := websocket.CloseStatus(err), ""
			var ce websocket.CloseError
			if errors.As(err, &ce) {
				reason = ce.Reason
			}
			if code == -1 {
				to.CloseNow()
				return
			}
			_ = to.Close(code, reason)
			return
		}
		if note != nil {
			note(msg)
		}
		if err := to.Write(ctx, typ, msg); err != nil {
			from.CloseNow()
			return
		}
	}
}

// subscriptions are the operations of one WebSocket connection's
// subscriptions, by the id the client gave each.
type subscriptions struct {
	mu  sync.Mutex
	ops map[string][]string
}

// wsMessage is a message of GraphQL over WebSocket, either way.
type wsMessage struct {
	ID      string          `json:"id"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload"`
}

// noteSubscribe counts the operations of a client's subscribe message and
// remembers them under its id.
func (p *proxy) noteSubscribe(subs *subscriptions, msg []byte) {
	var m wsMessage
	var payload struct {
		Query string `json:"query"`
	}
	if json.Unmarshal(msg, &m) != nil || (m.Type != "subscribe" && m.Type != "start") || json.Unmarshal(m.Payload, &payload) != nil {
		return
	}
	ops := rootFields(payload.Query)
	subs.mu.Lock()
	subs.ops[m.ID] = ops
	subs.mu.Unlock()
	for _, op := range ops {
		p.count(op)
	}
}

// noteNext runs the after hooks of a subscription's operations on each
// event the server sends for it, before the client gets it: what the
// server hands out over WebSocket is seen as what it answers a poll.
func (p *proxy) noteNext(subs *subscriptions, msg []byte) {
	var m wsMessage
	if json.Unmarshal(msg, &m) != nil || (m.Type != "next" && m.Type != "data") {
		return
	}
	subs.mu.Lock()
	ops := subs.ops[m.ID]
	subs.mu.Unlock()
	for _, op := range ops {
		for _, h := range p.hooksOf(op) {
			h.run(call{status: http.StatusOK, body: m.Payload})
		}
	}
}

// count notes one call of op.
func (p *proxy) count(op string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.counts[op]++
	close(p.changed)
	p.changed = make(chan struct{})
}

// calls returns how often the adapter called op so far.
func (p *proxy) calls(op string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts[op]
}

// waitCalls waits until the adapter called op more than n times.
func (p *proxy) waitCalls(ctx context.Context, op string, n int) error {
	return p.waitTotal(ctx, n, op)
}

// waitTotal waits until the adapter's calls of ops add up to more than n.
func (p *proxy) waitTotal(ctx context.Context, n int, ops ...string) error {
	for {
		p.mu.Lock()
		got, changed := 0, p.changed
		for _, op := range ops {
			got += p.counts[op]
		}
		p.mu.Unlock()
		if got > n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// on adds a hook until the returned function removes it.
func (p *proxy) on(h hook) (off func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id := p.nextID
	p.nextID++
	p.hooks[id] = h
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		delete(p.hooks, id)
	}
}

// hooksOf returns the hooks of op.
func (p *proxy) hooksOf(op string) []hook {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []hook
	for _, h := range p.hooks {
		if h.op == op {
			out = append(out, h)
		}
	}
	return out
}
