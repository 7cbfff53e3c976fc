package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/identity"
)

// wsURL is the GraphQL WebSocket address of env.
func wsURL(env *apitest.Env) string { return "ws" + strings.TrimPrefix(env.URL, "http") + "/graphql" }

// jsClient is one subscription of the graphql-ws npm client (client.mjs).
type jsClient struct {
	t     *testing.T
	lines chan map[string]json.RawMessage
	cmd   *exec.Cmd
}

// subscribeJS starts client.mjs for token with query and vars and waits
// until the connection is acknowledged (or closed).
func subscribeJS(t *testing.T, env *apitest.Env, token, query string, vars map[string]any) *jsClient {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed: install Node.js and npm (make test runs internal/devtools/graphqlws/install.sh)")
	}
	script, _ := filepath.Abs("../devtools/graphqlws/client.mjs")
	v, _ := json.Marshal(vars)
	cmd := exec.Command(node, script, wsURL(env), token, query, string(v))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start client.mjs: %v (make test runs internal/devtools/graphqlws/install.sh first)", err)
	}
	c := &jsClient{t: t, lines: make(chan map[string]json.RawMessage, 1024), cmd: cmd}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Errorf("client.mjs wrote %q", sc.Text())
				continue
			}
			c.lines <- m
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() && stderr.Len() > 0 {
			t.Logf("client.mjs stderr: %s", stderr.String())
		}
	})
	return c
}

// next returns the next line of the client, failing after wait.
func (c *jsClient) next(wait time.Duration) map[string]json.RawMessage {
	c.t.Helper()
	select {
	case m, ok := <-c.lines:
		if !ok {
			c.t.Fatal("client.mjs ended")
		}
		return m
	case <-time.After(wait):
		c.t.Fatalf("client.mjs wrote nothing in %s", wait)
	}
	return nil
}

// connected waits for the acknowledgement of connection_init.
func (c *jsClient) connected() {
	c.t.Helper()
	if m := c.next(10 * time.Second); m["connected"] == nil {
		c.t.Fatalf("want connected, got %v", m)
	}
}

// event waits for the next delivered item and decodes data.<field> into out.
func (c *jsClient) event(field string, out any) {
	c.t.Helper()
	m := c.next(10 * time.Second)
	if m["next"] == nil {
		c.t.Fatalf("want next, got %s", dump(m))
	}
	var payload struct {
		Data   map[string]json.RawMessage `json:"data"`
		Errors []apitest.GQLError         `json:"errors"`
	}
	if err := json.Unmarshal(m["next"], &payload); err != nil || len(payload.Errors) > 0 {
		c.t.Fatalf("next payload %s: %v", m["next"], err)
	}
	dec := json.NewDecoder(strings.NewReader(string(payload.Data[field])))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		c.t.Fatalf("%s does not decode into %T: %v", payload.Data[field], out, err)
	}
}

// closed waits up to wait for the close of the socket and returns its code.
func (c *jsClient) closed(wait time.Duration) int {
	c.t.Helper()
	m := c.next(wait)
	if m["closed"] == nil {
		c.t.Fatalf("want closed, got %s", dump(m))
	}
	var code int
	_ = json.Unmarshal(m["closed"], &code)
	return code
}

// nextSeq is the seq of the event in a next message of events.
func nextSeq(m rawMsg) string {
	var q struct {
		Data struct {
			Events struct {
				Seq string `json:"seq"`
			} `json:"events"`
		} `json:"data"`
	}
	_ = json.Unmarshal(m.Payload, &q)
	return q.Data.Events.Seq
}

func seqNum(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

func dump(m map[string]json.RawMessage) string {
	b, _ := json.Marshal(m)
	return string(b)
}

// wsMessageEvent is a MessageEvent as both listEvents and the events
// subscription select it.
type wsMessageEvent struct {
	Typename  string `json:"__typename"`
	Seq       string `json:"seq"`
	Type      string `json:"type"`
	CreatedAt string `json:"createdAt"`
	ChannelID string `json:"channelId"`
	MessageID string `json:"messageId"`
	ThreadID  string `json:"threadId"`
	Message   *struct {
		ID        string `json:"id"`
		ContentMd string `json:"contentMd"`
	} `json:"message"`
}

const wsEventSel = `__typename seq type createdAt channelId ... on MessageEvent { messageId threadId message { id contentMd } }`

// testSubscriptionEvents: a person subscribed to events through the
// graphql-ws client receives message.created of messages posted through
// REST, in order and as listEvents gives them; after the grant that let
// them read the channel is revoked, nothing of it; a bad token is refused
// at connection_init with 4403; revoking the token while subscribed closes
// the socket with 4403 within events.poll_max_wait.
func testSubscriptionEvents(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{Config: map[string]string{"events.poll_max_wait": "2s"}})
	samID := env.World.ID("sam")
	eskalation := env.World.Channel("Support/Eskalation").ID
	grant := env.MustREST(t, http.MethodPost, "/api/v1/grants", env.World.Token("robin"), map[string]any{"subject_id": samID, "subject_kind": "principal",
		"target_kind": "channel", "target_id": eskalation, "level": "read"}, http.StatusCreated)
	samTok := env.MustREST(t, http.MethodPost, "/api/v1/principals/"+samID+"/tokens", env.World.Token("robin"), map[string]any{"label": "subscriber"}, http.StatusCreated)
	token := samTok["token"].(string)

	bad := subscribeJS(t, env, "not-a-token", `subscription { events { seq } }`, nil)
	if code := bad.closed(10 * time.Second); code != 4403 {
		t.Fatalf("bad token closed with %d, want 4403", code)
	}

	sub := subscribeJS(t, env, token, `subscription($a: String) { events(after: $a) { `+wsEventSel+` } }`, map[string]any{"a": logEnd(env)})
	sub.connected()
	main := env.Main("Support/Eskalation")
	wantLiveAsListed(t, env, sub, token, main)
	wantGrantRevocationFollowed(t, env, sub, grant["id"].(string), main)

	// The token is revoked while subscribed: closed with 4403.
	start := time.Now()
	env.MustREST(t, http.MethodDelete, "/api/v1/tokens/"+samTok["id"].(string), env.World.Token("robin"), nil, http.StatusOK)
	if code := sub.closed(5 * time.Second); code != 4403 {
		t.Fatalf("revoked token closed with %d, want 4403", code)
	}
	if d := time.Since(start); d > 2*time.Second+500*time.Millisecond {
		t.Fatalf("closed after %s, more than events.poll_max_wait", d)
	}
}

// wantLiveAsListed posts two messages into main as alex and checks that
// the subscription sub (of token) delivers them, with the events of the
// thread the first one creates, in commit order and as listEvents gives
// them.
func wantLiveAsListed(t *testing.T, env *apitest.Env, sub *jsClient, token, main string) {
	t.Helper()
	m1 := env.MustPost("alex", main, "ws1", "first live message")
	m2 := env.MustPost("alex", main, "ws2", "second live message")
	// A post into a main thread with auto_thread creates a thread too: its
	// events come as well, in commit order.
	got := eventsInOrderUntil(t, sub, m2["id"])
	var mine []wsMessageEvent
	for _, e := range got {
		if e.MessageID == m1["id"] || e.MessageID == m2["id"] {
			mine = append(mine, e)
		}
	}
	if len(mine) != 2 || mine[0].MessageID != m1["id"] || mine[0].Type != "message.created" || mine[1].MessageID != m2["id"] || mine[0].Message == nil || mine[0].Message.ContentMd != "first live message" {
		t.Fatalf("delivered %+v", got)
	}
	wantListedAsDelivered(t, env, token, got)
}

// eventsInOrderUntil reads the events of the subscription sub up to the
// one of the message last, failing unless their seqs rise.
func eventsInOrderUntil(t *testing.T, sub *jsClient, last any) []wsMessageEvent {
	t.Helper()
	var got []wsMessageEvent
	for len(got) == 0 || got[len(got)-1].MessageID != last {
		var e wsMessageEvent
		sub.event("events", &e)
		if len(got) > 0 && seqNum(e.Seq) <= seqNum(got[len(got)-1].Seq) {
			t.Fatalf("out of order: %s after %s", e.Seq, got[len(got)-1].Seq)
		}
		got = append(got, e)
	}
	return got
}

// wantListedAsDelivered checks that listEvents (as token) gives, between
// the first and the last seq of got, exactly the events got that a
// subscription delivered.
func wantListedAsDelivered(t *testing.T, env *apitest.Env, token string, got []wsMessageEvent) {
	t.Helper()
	var page struct {
		Events struct {
			Events []wsMessageEvent `json:"events"`
		} `json:"events"`
	}
	env.GraphQL(token, `{ events { events { `+wsEventSel+` } } }`, nil, &page)
	var listed []wsMessageEvent
	for _, e := range page.Events.Events {
		if seqNum(e.Seq) >= seqNum(got[0].Seq) && seqNum(e.Seq) <= seqNum(got[len(got)-1].Seq) {
			listed = append(listed, e)
		}
	}
	if !reflect.DeepEqual(listed, got) {
		t.Fatalf("subscription %+v\nlistEvents %+v", got, listed)
	}
}

// wantGrantRevocationFollowed revokes sam's grant grantID on
// Support/Eskalation while sam's subscription sub runs: nothing more of
// Eskalation comes (main is its main thread), Marketing still does.
func wantGrantRevocationFollowed(t *testing.T, env *apitest.Env, sub *jsClient, grantID, main string) {
	t.Helper()
	eskalation := env.World.Channel("Support/Eskalation").ID
	// What committed before the revocation may still come: read up to a
	// message of Marketing (sam's own space) first.
	barrier := env.MustPost("sam", env.Main("Marketing/Kampagnen"), "ws-barrier", "barrier")
	for {
		var e wsMessageEvent
		sub.event("events", &e)
		if e.MessageID == barrier["id"] {
			break
		}
	}
	// Revoked: Eskalation is gone, Marketing still comes.
	env.MustREST(t, http.MethodDelete, "/api/v1/grants/"+grantID, env.World.Token("robin"), nil, http.StatusOK)
	env.MustPost("alex", main, "ws3", "after the revocation")
	mk := env.MustPost("sam", env.Main("Marketing/Kampagnen"), "ws4", "in marketing")
	for {
		var e wsMessageEvent
		sub.event("events", &e)
		// The revocation's own access.changed tells sam of it, as in
		// listEvents; nothing else of Eskalation may come.
		if e.ChannelID == eskalation && e.Type != "access.changed" {
			t.Fatalf("delivered an event of a channel no longer visible: %+v", e)
		}
		if e.Type == "message.created" {
			if e.MessageID != mk["id"] {
				t.Fatalf("delivered %+v", e)
			}
			break
		}
	}
}

// rawWS is a graphql-transport-ws connection driven message by message.
type rawWS struct {
	t *testing.T
	c *websocket.Conn
}

func dialRaw(t *testing.T, env *apitest.Env, header http.Header) *rawWS {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, wsURL(env), &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}, HTTPHeader: header})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	c.SetReadLimit(1 << 22)
	t.Cleanup(func() { c.CloseNow() })
	return &rawWS{t: t, c: c}
}

type rawMsg struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

func (w *rawWS) send(m any) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := wsjson.Write(ctx, w.c, m); err != nil {
		w.t.Fatalf("send %v: %v", m, err)
	}
}

// read returns the next message, or the close status when the socket closed.
func (w *rawWS) read(wait time.Duration) (rawMsg, websocket.StatusCode) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var m rawMsg
	err := wsjson.Read(ctx, w.c, &m)
	if err != nil {
		if s := websocket.CloseStatus(err); s != -1 {
			return rawMsg{}, s
		}
		w.t.Fatalf("read: %v", err)
	}
	return m, 0
}

func (w *rawWS) want(typ string) rawMsg {
	w.t.Helper()
	m, code := w.read(10 * time.Second)
	if code != 0 || m.Type != typ {
		w.t.Fatalf("want %s, got %+v (close %d)", typ, m, code)
	}
	return m
}

func (w *rawWS) wantClose(code websocket.StatusCode) {
	w.t.Helper()
	for {
		m, got := w.read(10 * time.Second)
		if got == 0 {
			if m.Type == "ping" || m.Type == "pong" || m.Type == "next" {
				continue
			}
			w.t.Fatalf("want close %d, got %+v", code, m)
		}
		if got != code {
			w.t.Fatalf("closed with %d, want %d", got, code)
		}
		return
	}
}

// created reads until a message.created arrives for id; next messages of
// other event types for id pass, those of another id fail.
func (w *rawWS) created(id string) {
	w.t.Helper()
	for {
		m := w.want("next")
		if m.ID != id {
			w.t.Fatalf("next for %s, want only %s: %s", m.ID, id, m.Payload)
		}
		if strings.Contains(string(m.Payload), "message.created") {
			return
		}
	}
}

// skipTo reads until a message for id arrives, passing next messages of
// the subscriptions in other.
func (w *rawWS) skipTo(id string, other ...string) rawMsg {
	w.t.Helper()
	for {
		m, code := w.read(10 * time.Second)
		if code != 0 {
			w.t.Fatalf("closed with %d waiting for %s", code, id)
		}
		if m.ID == id {
			return m
		}
		if m.Type != "next" || !slicesContains(other, m.ID) {
			w.t.Fatalf("waiting for %s: %+v", id, m)
		}
	}
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func (w *rawWS) init(token string) {
	w.t.Helper()
	w.send(rawMsg{Type: "connection_init", Payload: json.RawMessage(`{"Authorization":"Bearer ` + token + `"}`)})
	w.want("connection_ack")
}

// logEnd is the seq of the last client event committed ("0" when none).
func logEnd(env *apitest.Env) string {
	return strconv.Itoa(env.Count(`SELECT coalesce(max(seq), 0)::int FROM event_log`))
}

// subscribeAfter is a subscribe message with the variable a = after.
func subscribeAfter(id, query, after string) rawMsg {
	p, _ := json.Marshal(map[string]any{"query": query, "variables": map[string]any{"a": after}})
	return rawMsg{ID: id, Type: "subscribe", Payload: p}
}

func subscribeMsg(id, query string) rawMsg {
	p, _ := json.Marshal(map[string]any{"query": query})
	return rawMsg{ID: id, Type: "subscribe", Payload: p}
}

// testSubscriptionProtocol audits the graphql-transport-ws rules: ping is
// answered with pong; subscribe delivers next messages and complete stops
// them; an operation that is not a subscription completes after its one
// result; a duplicate id closes with 4409; an unknown message type with
// 4400; a subscribe before connection_init with 4401; a second
// connection_init with 4429; the upgrade header may carry the token; more
// subscriptions than websocket.max_subscriptions_per_connection get an
// error for the id; an origin that is not allowed is refused with 403.
func testSubscriptionProtocol(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{Config: map[string]string{"websocket.max_subscriptions_per_connection": "2",
		"websocket.allowed_origins": "chat.example.com, https://app.example.com"}})
	alex := env.World.Token("alex")
	main := env.Main("Support/Allgemein")

	w := dialRaw(t, env, nil)
	w.init(alex)
	w.send(rawMsg{Type: "ping"})
	w.want("pong")
	w.send(subscribeAfter("a", `subscription($a: String) { events(after: $a) { seq type } }`, logEnd(env)))
	env.MustPost("alex", main, "p1", "protocol one")
	w.created("a")
	// A query over the socket: one next, then complete.
	w.send(subscribeMsg("q", `{ __typename }`))
	if m := w.skipTo("q", "a"); m.Type != "next" || !strings.Contains(string(m.Payload), `"Query"`) {
		t.Fatalf("query result %+v", m)
	}
	if m := w.skipTo("q", "a"); m.Type != "complete" {
		t.Fatalf("complete %+v", m)
	}
	// Limit: a and b run, c is refused with an error for its id.
	w.send(subscribeAfter("b", `subscription($a: String) { events(after: $a) { seq type } }`, logEnd(env)))
	w.send(subscribeMsg("c", `subscription { events { seq } }`))
	if m := w.skipTo("c", "a", "b"); m.Type != "error" || !strings.Contains(string(m.Payload), "too_many_subscriptions") {
		t.Fatalf("over the limit %+v", m)
	}
	// complete from the client stops a: the next post reaches b only.
	w.send(rawMsg{ID: "a", Type: "complete"})
	// The server reads in order: once the pong of a later ping is back, the
	// complete took effect (nexts of a written before it may come first).
	w.send(rawMsg{Type: "ping"})
	for {
		m, code := w.read(10 * time.Second)
		if code != 0 {
			t.Fatalf("closed with %d waiting for pong", code)
		}
		if m.Type == "pong" {
			break
		}
		if m.Type != "next" || (m.ID != "a" && m.ID != "b") {
			t.Fatalf("waiting for pong: %+v", m)
		}
	}
	env.MustPost("alex", main, "p2", "protocol two")
	w.created("b")
	// A duplicate id closes with 4409.
	w.send(subscribeMsg("b", `subscription { events { seq } }`))
	w.wantClose(4409)

	wantConnectionRules(t, env, alex)
	wantOriginsChecked(t, env, alex)
}

// wantConnectionRules checks the rules of a connection's start and of
// message types, each on a connection of its own: an unknown type closes
// with 4400, a subscribe before connection_init with 4401, a second
// connection_init with 4429; the token may come in the upgrade header, and
// a bad one in connection_init closes with 4403.
func wantConnectionRules(t *testing.T, env *apitest.Env, alex string) {
	t.Helper()
	u := dialRaw(t, env, nil)
	u.init(alex)
	u.send(rawMsg{Type: "shout"})
	u.wantClose(4400)

	early := dialRaw(t, env, nil)
	early.send(subscribeMsg("x", `subscription { events { seq } }`))
	early.wantClose(4401)

	twice := dialRaw(t, env, nil)
	twice.init(alex)
	twice.send(rawMsg{Type: "connection_init"})
	twice.wantClose(4429)

	// The token in the upgrade request's header; an empty init payload.
	h := dialRaw(t, env, http.Header{"Authorization": {"Bearer " + alex}})
	h.send(rawMsg{Type: "connection_init"})
	h.want("connection_ack")
	// A bad token in connection_init: 4403.
	b := dialRaw(t, env, nil)
	b.send(rawMsg{Type: "connection_init", Payload: json.RawMessage(`{"Authorization":"Bearer nope"}`)})
	b.wantClose(4403)
}

// wantOriginsChecked checks websocket.allowed_origins: a configured origin
// and the server's own pass, another is refused with 403 before the
// upgrade.
func wantOriginsChecked(t *testing.T, env *apitest.Env, alex string) {
	t.Helper()
	ok := dialRaw(t, env, http.Header{"Origin": {"https://chat.example.com"}})
	ok.init(alex)
	full := dialRaw(t, env, http.Header{"Origin": {"https://app.example.com"}})
	full.init(alex)
	// The playground's own origin (this server) passes.
	self := dialRaw(t, env, http.Header{"Origin": {env.URL}})
	self.init(alex)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, resp, err := websocket.Dial(ctx, wsURL(env), &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"},
		HTTPHeader: http.Header{"Origin": {"https://evil.example.org"}}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("foreign origin: %v %v", err, resp)
	}
	// A full origin matches its scheme too.
	_, resp, err = websocket.Dial(ctx, wsURL(env), &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"},
		HTTPHeader: http.Header{"Origin": {"http://app.example.com"}}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("other scheme of an allowed origin: %v %v", err, resp)
	}
}

// wsInvocation is an agent event as the agentEvents subscription selects it.
type wsInvocation struct {
	Seq       string `json:"seq"`
	Type      string `json:"type"`
	RunID     string `json:"runId"`
	MessageID string `json:"messageId"`
}

const wsAgentSel = `seq type ... on AgentInvocationEvent { runId messageId }`

// testSubscriptionAgentEventsAcrossReplicas: an agent subscribed on replica
// B receives the invocation of a run triggered on replica A; after a
// reconnect from the seq it last received it gets what came meanwhile,
// without a gap or a duplicate, and then what comes live.
func testSubscriptionAgentEventsAcrossReplicas(t *testing.T) {
	t.Parallel()
	a := apitest.Start(t, apitest.Options{})
	b := a.Peer()
	lotse := a.World.Token("lotse")
	main := a.Main("Support/Allgemein")
	query := `subscription($after: String) { agentEvents(after: $after) { ` + wsAgentSel + ` } }`

	sub := subscribeJS(t, b, lotse, query, map[string]any{"after": strconv.Itoa(a.Count(`SELECT coalesce(max(seq), 0)::int FROM agent_events`))})
	sub.connected()
	m1 := a.MustPost("alex", main, "ag1", "@lotse first question")
	var first wsInvocation
	sub.event("agentEvents", &first)
	if first.Type != "agent.invocation" || first.MessageID != m1["id"] || first.RunID == "" {
		t.Fatalf("first %+v", first)
	}
	// Disconnected: a second run is triggered on A meanwhile.
	_ = sub.cmd.Process.Kill()
	m2 := a.MustPost("alex", main, "ag2", "@lotse second question")
	again := subscribeJS(t, b, lotse, query, map[string]any{"after": first.Seq})
	again.connected()
	var second wsInvocation
	again.event("agentEvents", &second)
	if second.MessageID != m2["id"] || seqNum(second.Seq) <= seqNum(first.Seq) {
		t.Fatalf("after the reconnect %+v (first %+v)", second, first)
	}
	// The long poll from the same cursor hands out the same next event.
	evs, _ := b.Poll(t, "lotse", first.Seq, 0)
	if len(evs) != 1 || evs[0].Seq != second.Seq {
		t.Fatalf("poll after %s: %+v", first.Seq, evs)
	}
	m3 := a.MustPost("alex", main, "ag3", "@lotse third question")
	var third wsInvocation
	again.event("agentEvents", &third)
	if third.MessageID != m3["id"] {
		t.Fatalf("live after the reconnect %+v", third)
	}
	// A person may not subscribe to an agent stream.
	person := subscribeJS(t, b, a.World.Token("alex"), query, nil)
	person.connected()
	// The refusal comes as the subscription's one result, with the error in
	// the shared vocabulary, then complete.
	if m := person.next(10 * time.Second); m["next"] == nil || !strings.Contains(string(m["next"]), `"code":"forbidden"`) {
		t.Fatalf("a person's agentEvents: %s", dump(m))
	}
}

// TestSubscriptionSlowConsumer: a consumer that stops reading while many
// large events commit has its connection closed once its queue
// (websocket.send_queue) overflows; the server's heap does not grow with
// the events it could not send, the connection's place is freed, and the
// client resumes from its cursor and gets every event in order.
func TestSubscriptionSlowConsumer(t *testing.T) {
	// Not parallel: it measures the heap of the whole test process, which
	// the other tests of the package would grow while it runs.
	env := apitest.Start(t, apitest.Options{Config: map[string]string{"websocket.send_queue": "8",
		"websocket.max_connections_per_principal": "1"}})
	alex := env.World.Token("alex")
	ch := env.World.Channel("Support/Allgemein").ID
	main := env.Main("Support/Allgemein")
	const n, size = 600, 32 << 10

	w := dialRaw(t, env, nil)
	w.init(alex)
	w.send(subscribeAfter("s", `subscription($a: String) { events(after: $a) { seq type payload } }`, logEnd(env)))
	// Caught up and live: a post arrives (and whatever it committed).
	env.MustPost("alex", main, "slow-0", "live")
	var seen string
	for {
		m := w.want("next")
		seen = nextSeq(m)
		if strings.Contains(string(m.Payload), "message.created") {
			break
		}
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	// n events of size bytes each (about 19 MB), committed at once; the
	// consumer reads none of them.
	env.Exec(`INSERT INTO event_log (type, channel_id, thread_id, payload, created_at)
		SELECT 'thread.closed', $1, $2, jsonb_build_object('filler', repeat('x', $3::int), 'i', i), now() FROM generate_series(1, $4::int) i`,
		ch, main, size, n)
	env.Exec(`SELECT pg_notify('bothy_agent_events', 'events')`)
	// The server lets go of the connection: its one place is free again.
	r := dialWhenFreed(t, env, alex)
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > n*size/4 {
		t.Fatalf("heap grew by %d bytes for a consumer that does not read", grew)
	}
	// The stalled client now reads what reached it, then the close: 4413.
	last, got := readUntilQueueFull(t, w)
	if got >= n {
		t.Fatalf("the stalled consumer got all %d events", got)
	}
	// Resume from the cursor on the new connection: the rest, in order, no
	// gap, no duplicate.
	after0 := last
	if after0 == "" {
		after0 = seen
	}
	end := int64(env.Count(`SELECT max(seq)::int FROM event_log WHERE type = 'thread.closed'`))
	p, _ := json.Marshal(map[string]any{"query": `subscription($a: String) { events(after: $a) { seq } }`, "variables": map[string]any{"a": after0}})
	r.send(rawMsg{ID: "r", Type: "subscribe", Payload: p})
	for prev := seqNum(after0); prev < end; prev++ {
		if s := seqNum(nextSeq(r.want("next"))); s != prev+1 {
			t.Fatalf("resumed at %d after %d", s, prev)
		}
	}
}

// dialWhenFreed opens a connection for alex, retrying for 30 s while the
// principal's one place is taken (4429), and returns it acknowledged.
func dialWhenFreed(t *testing.T, env *apitest.Env, alex string) *rawWS {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var r *rawWS
	for r == nil {
		c := dialRaw(t, env, nil)
		c.send(rawMsg{Type: "connection_init", Payload: json.RawMessage(`{"Authorization":"Bearer ` + alex + `"}`)})
		m, code := c.read(10 * time.Second)
		if code == 0 && m.Type == "connection_ack" {
			r = c
			break
		}
		if code != 4429 || time.Now().After(deadline) {
			t.Fatalf("second connection: %+v %d", m, code)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return r
}

// readUntilQueueFull reads the next messages of the stalled client w up to
// its close, which must be 4413 (the send queue overflowed), and returns
// the seq of the last one and their number.
func readUntilQueueFull(t *testing.T, w *rawWS) (string, int) {
	t.Helper()
	var last string
	got := 0
	for {
		m, code := w.read(10 * time.Second)
		if code != 0 {
			if code != 4413 {
				t.Fatalf("closed with %d, want 4413", code)
			}
			break
		}
		if m.Type != "next" {
			t.Fatalf("want next or close, got %+v", m)
		}
		last = nextSeq(m)
		got++
	}
	return last, got
}

// testSubscriptionClosedWhenPrincipalDisabled: disabling the subscriber's
// principal closes its socket with 4403 within events.poll_max_wait.
func testSubscriptionClosedWhenPrincipalDisabled(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{Config: map[string]string{"events.poll_max_wait": "2s"}})
	sub := subscribeJS(t, env, env.World.Token("lotse"), `subscription { agentEvents(after: "now") { seq } }`, nil)
	sub.connected()
	start := time.Now()
	env.SetStatus("lotse", identity.StatusDisabled)
	if code := sub.closed(5 * time.Second); code != 4403 {
		t.Fatalf("disabled principal closed with %d, want 4403", code)
	}
	if d := time.Since(start); d > 2*time.Second+500*time.Millisecond {
		t.Fatalf("closed after %s, more than events.poll_max_wait", d)
	}
}

// testSubscriptionEventsAcrossReplicas: a person subscribed to events on
// replica B receives the message posted through REST on replica A (the
// client event commit wakes B through LISTEN/NOTIFY).
func testSubscriptionEventsAcrossReplicas(t *testing.T) {
	t.Parallel()
	a := apitest.Start(t, apitest.Options{})
	b := a.Peer()
	sub := subscribeJS(t, b, a.World.Token("sam"), `subscription($a: String) { events(after: $a) { `+wsEventSel+` } }`, map[string]any{"a": logEnd(a)})
	sub.connected()
	m := a.MustPost("sam", a.Main("Marketing/Kampagnen"), "rep-1", "across replicas")
	for {
		var e wsMessageEvent
		sub.event("events", &e)
		if e.Type == "message.created" {
			if e.MessageID != m["id"] || e.Message == nil || e.Message.ContentMd != "across replicas" {
				t.Fatalf("delivered %+v", e)
			}
			return
		}
	}
}

// TestSubscriptionOutlivesHTTPTimeouts: behind an http.Server with short
// read and write timeouts a subscription still delivers after they passed:
// the hijack of the upgrade clears the request's deadlines.
func TestSubscriptionOutlivesHTTPTimeouts(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: env.Server.Handler(), ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond}
	dl := &deadlineListener{Listener: ln}
	go hs.Serve(dl)
	t.Cleanup(func() { hs.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws://"+ln.Addr().String()+"/graphql", &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	w := &rawWS{t: t, c: c}
	w.init(env.World.Token("alex"))
	w.send(subscribeAfter("s", `subscription($a: String) { events(after: $a) { seq type } }`, logEnd(env)))
	// Wait out the latest deadline http.Server set on the connection (the
	// one the timeouts would end it by), not a guess of it.
	last := dl.latest()
	if last.IsZero() {
		t.Fatal("the server set no deadline on the connection")
	}
	time.Sleep(time.Until(last) + 10*time.Millisecond)
	env.MustPost("alex", env.Main("Support/Allgemein"), "late", "after the timeouts")
	w.created("s")
}

// testSubscriptionFieldsUseLoaders: fields of a delivered event that read
// through the per-request loaders (here Message.startedThread, which needs
// the chat module's loader) answer in a subscription as they do over HTTP.
func testSubscriptionFieldsUseLoaders(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	w := dialRaw(t, env, nil)
	w.init(env.World.Token("alex"))
	w.send(subscribeAfter("s", `subscription($a: String) { events(after: $a) { type ... on MessageEvent { messageId message { id startedThread { id } } } } }`, logEnd(env)))
	m := env.MustPost("alex", env.Main("Support/Allgemein"), "loaders-1", "@lotse the printer is down")
	for {
		msg := w.skipTo("s")
		var p struct {
			Data struct {
				Events struct {
					Type      string
					MessageID string
					Message   *struct {
						ID            string
						StartedThread *struct{ ID string }
					}
				}
			}
			Errors []any
		}
		if err := json.Unmarshal(msg.Payload, &p); err != nil {
			t.Fatal(err)
		}
		if len(p.Errors) > 0 {
			t.Fatalf("event with errors: %s", msg.Payload)
		}
		if p.Data.Events.Type != "message.created" || p.Data.Events.MessageID != m["id"] {
			continue
		}
		if p.Data.Events.Message == nil || p.Data.Events.Message.StartedThread == nil || p.Data.Events.Message.StartedThread.ID == "" {
			t.Fatalf("the started thread is missing: %s", msg.Payload)
		}
		return
	}
}

// deadlineListener records the latest read or write deadline that the
// server set on any of its connections.
type deadlineListener struct {
	net.Listener
	mu   sync.Mutex
	last time.Time
}

func (l *deadlineListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &deadlineConn{Conn: c, l: l}, nil
}

func (l *deadlineListener) note(t time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t.After(l.last) {
		l.last = t
	}
}

func (l *deadlineListener) latest() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

type deadlineConn struct {
	net.Conn
	l *deadlineListener
}

func (c *deadlineConn) SetDeadline(t time.Time) error { c.l.note(t); return c.Conn.SetDeadline(t) }
func (c *deadlineConn) SetReadDeadline(t time.Time) error {
	c.l.note(t)
	return c.Conn.SetReadDeadline(t)
}
func (c *deadlineConn) SetWriteDeadline(t time.Time) error {
	c.l.note(t)
	return c.Conn.SetWriteDeadline(t)
}

// TestSubscriptions runs the tests of subscriptions: events, protocol, replicas, loaders as subtests: one
// top-level test per area keeps internal/server's list short enough to
// read (fewer than 80 top-level tests, issue 48).
func TestSubscriptions(t *testing.T) {
	t.Run("SubscriptionEvents", testSubscriptionEvents)
	t.Run("SubscriptionProtocol", testSubscriptionProtocol)
	t.Run("SubscriptionAgentEventsAcrossReplicas", testSubscriptionAgentEventsAcrossReplicas)
	t.Run("SubscriptionClosedWhenPrincipalDisabled", testSubscriptionClosedWhenPrincipalDisabled)
	t.Run("SubscriptionEventsAcrossReplicas", testSubscriptionEventsAcrossReplicas)
	t.Run("SubscriptionFieldsUseLoaders", testSubscriptionFieldsUseLoaders)
}
