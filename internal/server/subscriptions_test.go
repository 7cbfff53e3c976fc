package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"bothy.example.com/bothy/internal/apitest"
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
		t.Fatal("node is not installed: install Node.js and npm (make test runs internal/graphqlws/install.sh)")
	}
	script, _ := filepath.Abs("../graphqlws/client.mjs")
	v, _ := json.Marshal(vars)
	cmd := exec.Command(node, script, wsURL(env), token, query, string(v))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start client.mjs: %v (make test runs internal/graphqlws/install.sh first)", err)
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

// TestSubscriptionEvents: a person subscribed to events through the
// graphql-ws client receives message.created of messages posted through
// REST, in order and as listEvents gives them; after the grant that let
// them read the channel is revoked, nothing of it; a bad token is refused
// at connection_init with 4403; revoking the token while subscribed closes
// the socket with 4403 within events.poll_max_wait.
func TestSubscriptionEvents(t *testing.T) {
	env := apitest.Start(t, apitest.Options{Config: map[string]string{"events.poll_max_wait": "2s"}})
	samID := env.World.ID("sam")
	eskalation := env.World.Channel("Support/Eskalation").ID
	grant := mustREST(t, env, http.MethodPost, "/api/v1/grants", "robin", map[string]any{"subject_id": samID, "subject_kind": "principal",
		"target_kind": "channel", "target_id": eskalation, "level": "read"}, http.StatusCreated)
	samTok := mustREST(t, env, http.MethodPost, "/api/v1/principals/"+samID+"/tokens", "robin", map[string]any{"label": "subscriber"}, http.StatusCreated)
	token := samTok["token"].(string)

	bad := subscribeJS(t, env, "not-a-token", `subscription { events { seq } }`, nil)
	if code := bad.closed(10 * time.Second); code != 4403 {
		t.Fatalf("bad token closed with %d, want 4403", code)
	}

	sub := subscribeJS(t, env, token, `subscription { events { `+wsEventSel+` } }`, nil)
	sub.connected()
	time.Sleep(300 * time.Millisecond) // the subscribe message reaches the server
	main := env.Main("Support/Eskalation")
	m1 := env.MustPost("alex", main, "ws1", "first live message")
	m2 := env.MustPost("alex", main, "ws2", "second live message")
	// A post into a main thread with auto_thread creates a thread too: its
	// events come as well, in commit order.
	var got []wsMessageEvent
	for len(got) == 0 || got[len(got)-1].MessageID != m2["id"] {
		var e wsMessageEvent
		sub.event("events", &e)
		if len(got) > 0 && seqNum(e.Seq) <= seqNum(got[len(got)-1].Seq) {
			t.Fatalf("out of order: %s after %s", e.Seq, got[len(got)-1].Seq)
		}
		got = append(got, e)
	}
	var mine []wsMessageEvent
	for _, e := range got {
		if e.MessageID == m1["id"] || e.MessageID == m2["id"] {
			mine = append(mine, e)
		}
	}
	if len(mine) != 2 || mine[0].MessageID != m1["id"] || mine[0].Type != "message.created" || mine[1].MessageID != m2["id"] || mine[0].Message == nil || mine[0].Message.ContentMd != "first live message" {
		t.Fatalf("delivered %+v", got)
	}
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
	mustREST(t, env, http.MethodDelete, "/api/v1/grants/"+grant["id"].(string), "robin", nil, http.StatusOK)
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

	// The token is revoked while subscribed: closed with 4403.
	start := time.Now()
	mustREST(t, env, http.MethodDelete, "/api/v1/tokens/"+samTok["id"].(string), "robin", nil, http.StatusOK)
	if code := sub.closed(5 * time.Second); code != 4403 {
		t.Fatalf("revoked token closed with %d, want 4403", code)
	}
	if d := time.Since(start); d > 2*time.Second+500*time.Millisecond {
		t.Fatalf("closed after %s, more than events.poll_max_wait", d)
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

func subscribeMsg(id, query string) rawMsg {
	p, _ := json.Marshal(map[string]any{"query": query})
	return rawMsg{ID: id, Type: "subscribe", Payload: p}
}

// TestSubscriptionProtocol audits the graphql-transport-ws rules: ping is
// answered with pong; subscribe delivers next messages and complete stops
// them; an operation that is not a subscription completes after its one
// result; a duplicate id closes with 4409; an unknown message type with
// 4400; a subscribe before connection_init with 4401; a second
// connection_init with 4429; the upgrade header may carry the token; more
// subscriptions than websocket.max_subscriptions_per_connection get an
// error for the id; an origin that is not allowed is refused with 403.
func TestSubscriptionProtocol(t *testing.T) {
	env := apitest.Start(t, apitest.Options{Config: map[string]string{"websocket.max_subscriptions_per_connection": "2",
		"websocket.allowed_origins": "chat.example.com"}})
	alex := env.World.Token("alex")
	main := env.Main("Support/Allgemein")

	w := dialRaw(t, env, nil)
	w.init(alex)
	w.send(rawMsg{Type: "ping"})
	w.want("pong")
	w.send(subscribeMsg("a", `subscription { events { seq type } }`))
	time.Sleep(200 * time.Millisecond)
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
	w.send(subscribeMsg("b", `subscription { events { seq type } }`))
	w.send(subscribeMsg("c", `subscription { events { seq } }`))
	if m := w.skipTo("c", "a", "b"); m.Type != "error" || !strings.Contains(string(m.Payload), "too_many_subscriptions") {
		t.Fatalf("over the limit %+v", m)
	}
	// complete from the client stops a: the next post reaches b only.
	w.send(rawMsg{ID: "a", Type: "complete"})
	time.Sleep(200 * time.Millisecond)
	env.MustPost("alex", main, "p2", "protocol two")
	w.created("b")
	// A duplicate id closes with 4409.
	w.send(subscribeMsg("b", `subscription { events { seq } }`))
	w.wantClose(4409)

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

	// Origins: a configured one passes, another is refused before the upgrade.
	ok := dialRaw(t, env, http.Header{"Origin": {"https://chat.example.com"}})
	ok.init(alex)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, resp, err := websocket.Dial(ctx, wsURL(env), &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"},
		HTTPHeader: http.Header{"Origin": {"https://evil.example.org"}}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("foreign origin: %v %v", err, resp)
	}
}
