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
	// adapter gets the answer; status and body are the server's.
	after func(status int, body []byte)
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
	for _, r := range rest.Table {
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

// opKey carries the operation of a forwarded request to modify.
type opKey struct{}

// ServeHTTP forwards one request of the adapter.
func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		p.relay(w, r)
		return
	}
	ops := p.operations(r)
	for _, op := range ops {
		p.count(op)
		for _, h := range p.hooksOf(op) {
			if h.before != nil {
				h.before()
			}
		}
	}
	p.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), opKey{}, ops)))
}

// modify runs the after hooks of a call's operations with the server's
// answer, before the answer goes to the adapter.
func (p *proxy) modify(resp *http.Response) error {
	ops, _ := resp.Request.Context().Value(opKey{}).([]string)
	var hs []hook
	for _, op := range ops {
		for _, h := range p.hooksOf(op) {
			if h.after != nil {
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
		h.after(resp.StatusCode, body)
	}
	return nil
}

// operations names what a request does: the root fields of a GraphQL
// document, or the root field of the REST route it matches.
func (p *proxy) operations(r *http.Request) []string {
	if r.URL.Path == "/graphql" {
		query := r.URL.Query().Get("query")
		if r.Method == http.MethodPost && r.Body != nil {
			body, err := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if err != nil {
				return nil
			}
			var req struct {
				Query         string `json:"query"`
				OperationName string `json:"operationName"`
			}
			if json.Unmarshal(body, &req) != nil {
				return nil
			}
			query = req.Query
		}
		return rootFields(query)
	}
	if r.URL.Path == mcpface.Path && r.Method == http.MethodPost && r.Body != nil {
		return mcpTools(r)
	}
	if _, pattern := p.routes.Handler(r); p.fields[pattern] != "" {
		return []string{p.fields[pattern]}
	}
	return nil
}

// mcpTools names the tool an MCP request (JSON-RPC, one message: the
// face refuses batches) calls, none for other methods.
func mcpTools(r *http.Request) []string {
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return nil
	}
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
	// The adapter's messages (down) go up, noted: its subscribe messages
	// are its reads of the stream. The server's come down as they are.
	go func() { pipe(ctx, up, down, p.noteSubscribe); cancel(); done <- struct{}{} }()
	go func() { pipe(ctx, down, up, nil); cancel(); done <- struct{}{} }()
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

// noteSubscribe counts the operations of a client's subscribe message.
func (p *proxy) noteSubscribe(msg []byte) {
	var m struct {
		Type    string `json:"type"`
		Payload struct {
			Query string `json:"query"`
		} `json:"payload"`
	}
	if json.Unmarshal(msg, &m) != nil || (m.Type != "subscribe" && m.Type != "start") {
		return
	}
	for _, op := range rootFields(m.Payload.Query) {
		p.count(op)
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
	for {
		p.mu.Lock()
		got, changed := p.counts[op], p.changed
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
