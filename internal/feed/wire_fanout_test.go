package feed_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/platform/config"
)

// wsMsg is a graphql-transport-ws message.
type wsMsg struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// listener is one WebSocket connection with one events subscription.
type listener struct {
	t testing.TB
	c *websocket.Conn
}

// listen connects as token and subscribes to the events after the end of
// the log.
func listen(t testing.TB, env *apitest.Env, token string) *listener {
	t.Helper()
	return listenAt(t, env.URL, token, fmt.Sprint(env.Count(`SELECT coalesce(max(seq), 0)::int FROM event_log`)))
}

// listenAt connects to the server at url as token and subscribes to the
// events after the cursor after.
func listenAt(t testing.TB, url, token, after string) *listener {
	t.Helper()
	l := connect(t, url, token)
	p, _ := json.Marshal(map[string]any{"query": `subscription($a: String) { events(after: $a) { seq type ... on MessageEvent { messageId message { id contentMd } } } }`,
		"variables": map[string]any{"a": after}})
	l.send(wsMsg{ID: "s", Type: "subscribe", Payload: p})
	return l
}

// connect opens a WebSocket connection to the server at url, acknowledged
// for token.
func connect(t testing.TB, url, token string) *listener {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, strings.Replace(url, "http", "ws", 1)+"/graphql", &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(websocket.StatusNormalClosure, "") })
	l := &listener{t: t, c: c}
	l.send(wsMsg{Type: "connection_init", Payload: json.RawMessage(`{"Authorization":"Bearer ` + token + `"}`)})
	if m := l.read(); m.Type != "connection_ack" {
		t.Fatalf("want connection_ack, got %+v", m)
	}
	return l
}

func (l *listener) send(m wsMsg) {
	l.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := wsjson.Write(ctx, l.c, m); err != nil {
		l.t.Fatal(err)
	}
}

// read returns the next message other than the server's keep-alive ping,
// which it answers as a client must: opening thousands of listeners takes
// longer than the server's ping interval.
func (l *listener) read() wsMsg {
	l.t.Helper()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var m wsMsg
		err := wsjson.Read(ctx, l.c, &m)
		cancel()
		if err != nil {
			l.t.Fatal(err)
		}
		if m.Type != "ping" {
			return m
		}
		l.send(wsMsg{Type: "pong"})
	}
}

// until reads events up to the message.created of message id, which must
// come with its content.
func (l *listener) until(id string) {
	l.t.Helper()
	if p := l.payloadOf(id); !strings.Contains(p, `"contentMd":"for everybody listening"`) {
		l.t.Fatalf("the message came without its content: %s", p)
	}
}

// TestFanoutStatementsDoNotGrowWithListeners: a thread started (with its
// first message) while 1, then 100 connections of three people listen to
// the events (each selecting the message's content) costs the same number
// of statements, its delivery to all of them included: the replica reads
// the new events once, decides them, re-authenticates the connections'
// tokens and reads the message for all listeners together. Each measure
// starts a thread of its own, so that its place is decided in the measure
// whatever verdicts the fan-out kept from before.
func TestFanoutStatementsDoNotGrowWithListeners(t *testing.T) {
	t.Parallel()
	counter := &apitest.StatementCounter{}
	// 34 connections of each person, past the default per-person bound;
	// the read limit's tokens cover the subscriptions' starts.
	env := apitest.Start(t, apitest.Options{Tracer: counter, Config: map[string]string{
		config.WebsocketMaxConnections: "40", config.RateReadPerMinute: "100000", config.RateReadBurst: "1000"}})
	allgemein := env.Main("Support/Allgemein")
	people := []string{"alex", "sam", "robin"}
	var ls []*listener
	// start has writer (write, no trigger: no run) start a thread in
	// Allgemein, which all three read, and returns the statements from
	// the request to the first message's arrival at every listener.
	start := func(key string) int64 {
		t.Helper()
		before := counter.Count()
		content := "the thread " + key
		env.MustREST(t, http.MethodPost, "/api/v1/channels/"+env.World.Channel("Support/Allgemein").ID+"/threads", env.World.Token("writer"),
			map[string]any{"title": key, "first_message": map[string]any{"client_msg_id": key, "content_md": content}}, http.StatusCreated)
		for _, l := range ls {
			l.untilContent(content)
		}
		return counter.Count() - before
	}
	measure := func(n int) int64 {
		for len(ls) < n {
			ls = append(ls, listen(t, env, env.World.Token(people[len(ls)%len(people)])))
		}
		// The first post after new listeners joined brings each of them
		// into the shared window; the thread after it is measured.
		m := env.MustPost("writer", allgemein, fmt.Sprintf("warm-%d", n), "for everybody listening")
		for _, l := range ls {
			l.until(m["id"].(string))
		}
		return start(fmt.Sprintf("measured-%d", n))
	}
	one := measure(1)
	hundred := measure(100)
	if hundred != one {
		t.Fatalf("a thread cost %d statements with 1 listener and %d with 100:\n%s", one, hundred,
			strings.Join(counter.Since(counter.Count()-hundred), "\n"))
	}
}

// untilContent reads events up to a message event whose message has
// content.
func (l *listener) untilContent(content string) {
	l.t.Helper()
	for {
		m := l.read()
		if m.Type != "next" {
			l.t.Fatalf("want next, got %+v", m)
		}
		if strings.Contains(string(m.Payload), `"contentMd":"`+content+`"`) {
			return
		}
	}
}

// seenUntil reads events up to the message.created of message id and
// answers the message ids it saw on the way, id included.
func (l *listener) seenUntil(id string) []string {
	l.t.Helper()
	var seen []string
	for {
		m := l.read()
		if m.Type != "next" {
			l.t.Fatalf("want next, got %+v", m)
		}
		got := messageIDField.FindSubmatch(m.Payload)
		if got == nil {
			continue
		}
		seen = append(seen, string(got[1]))
		if string(got[1]) == id {
			return seen
		}
	}
}

// TestFanoutRightsChangeReachesEveryListener: the fan-out keeps its
// verdicts per principal and place across commits, so a change of rights
// must still reach every connection of the principal at once, and only
// theirs. Three connections of sam, two of alex (who reads
// Support/Eskalation through a grant on the space) and one of robin
// listen; sam may not read Support/Eskalation, is granted it, and loses it
// again, with a message posted in between each time: every connection of
// sam follows each change from the next message on, and every connection
// of alex keeps receiving the channel's messages throughout.
func TestFanoutRightsChangeReachesEveryListener(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	eskalation := env.Main("Support/Eskalation")
	allgemein := env.Main("Support/Allgemein")
	robin := listen(t, env, env.World.Token("robin"))
	var sams, alexes []*listener
	for range 3 {
		sams = append(sams, listen(t, env, env.World.Token("sam")))
	}
	for range 2 {
		alexes = append(alexes, listen(t, env, env.World.Token("alex")))
	}
	post := func(thread, key string) string {
		t.Helper()
		id := env.MustPost("robin", thread, key, "for everybody listening")["id"].(string)
		robin.until(id)
		return id
	}
	// Each of sam's connections must see the message in Eskalation, or
	// not, by the message in Allgemein that closes the step (the grant's
	// own system messages may come between).
	step := func(name, thread string, visible bool) {
		t.Helper()
		hidden := post(thread, name)
		marker := post(allgemein, name+"-marker")
		for i, l := range sams {
			seen := l.seenUntil(marker)
			if got := slices.Contains(seen, hidden); got != visible {
				t.Fatalf("%s: connection %d of sam saw %s: %v, want %v", name, i, hidden, got, visible)
			}
		}
		for i, l := range alexes {
			if seen := l.seenUntil(marker); !slices.Contains(seen, hidden) {
				t.Fatalf("%s: connection %d of alex missed %s, which alex may read throughout", name, i, hidden)
			}
		}
	}
	step("before-grant", eskalation, false)
	g := env.CreateGrant(t, map[string]any{"subject_id": env.World.ID("sam"), "subject_kind": "principal",
		"target_kind": "channel", "target_id": env.World.Channel("Support/Eskalation").ID, "level": "read"})
	step("granted", eskalation, true)
	env.MustREST(t, http.MethodDelete, "/api/v1/grants/"+g["id"].(string), env.World.Token("robin"), nil, http.StatusOK)
	step("revoked", eskalation, false)
}

// renderedDocs are the documents of TestFanoutRendersOncePerPrincipalAndDocument:
// the same text with its content included or not by a variable, and
// another text.
const (
	renderedDoc      = `subscription($a: String, $c: Boolean!) { events(after: $a) { seq ... on MessageEvent { messageId message { id contentMd @include(if: $c) } } } }`
	renderedOtherDoc = `subscription($a: String) { events(after: $a) { seq type ... on MessageEvent { messageId message { id kind } } } }`
)

// listenWith connects as token and subscribes with query and variables
// after the end of the log ($a).
func listenWith(t testing.TB, env *apitest.Env, token, query string, vars map[string]any) *listener {
	t.Helper()
	l := connect(t, env.URL, token)
	vars["a"] = fmt.Sprint(env.Count(`SELECT coalesce(max(seq), 0)::int FROM event_log`))
	p, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	l.send(wsMsg{ID: "s", Type: "subscribe", Payload: p})
	return l
}

// payloadOf reads events up to the one about message id and answers its
// payload.
func (l *listener) payloadOf(id string) string {
	l.t.Helper()
	for {
		m := l.read()
		if m.Type != "next" {
			l.t.Fatalf("want next, got %+v", m)
		}
		if strings.Contains(string(m.Payload), `"messageId":"`+id+`"`) {
			return string(m.Payload)
		}
	}
}

// TestFanoutRendersOncePerPrincipalAndDocument: the connections of one
// principal with the same document and variables get the bytes the first
// of them rendered for an event; every other principal, document or
// variable renders its own. Ten connections of alex and ten of sam with
// one document, five of alex with the same text but the content left out
// by a variable, and five of alex with another document: a message is
// rendered four times for the thirty, and each connection gets the shape
// its own document asks for.
func TestFanoutRendersOncePerPrincipalAndDocument(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{Config: map[string]string{
		config.WebsocketMaxConnections: "40", config.RateReadPerMinute: "100000", config.RateReadBurst: "1000"}})
	allgemein := env.Main("Support/Allgemein")
	type group struct {
		who, query string
		vars       func() map[string]any
		ls         []*listener
		want       []string // in every payload
		absent     string   // in none
	}
	groups := []*group{
		{who: "alex", query: renderedDoc, vars: func() map[string]any { return map[string]any{"c": true} }, want: []string{`"contentMd":"rendered once"`}},
		{who: "sam", query: renderedDoc, vars: func() map[string]any { return map[string]any{"c": true} }, want: []string{`"contentMd":"rendered once"`}},
		{who: "alex", query: renderedDoc, vars: func() map[string]any { return map[string]any{"c": false} }, absent: `contentMd`},
		{who: "alex", query: renderedOtherDoc, vars: func() map[string]any { return map[string]any{} }, want: []string{`"kind":"`, `"type":"message.created"`}, absent: `contentMd`},
	}
	for i, g := range groups {
		for range []int{10, 10, 5, 5}[i] {
			g.ls = append(g.ls, listenWith(t, env, env.World.Token(g.who), g.query, g.vars()))
		}
	}
	// The first post brings every connection into the shared window.
	warm := env.MustPost("writer", allgemein, "rendered-warm", "warming up")["id"].(string)
	for _, g := range groups {
		for _, l := range g.ls {
			l.payloadOf(warm)
		}
	}
	keptBefore, reusedBefore := env.Modules.Fanout.Renderings()
	id := env.MustPost("writer", allgemein, "rendered-once", "rendered once")["id"].(string)
	for gi, g := range groups {
		for li, l := range g.ls {
			p := l.payloadOf(id)
			for _, w := range g.want {
				if !strings.Contains(p, w) {
					t.Errorf("group %d, connection %d: %s lacks %s", gi, li, p, w)
				}
			}
			if g.absent != "" && strings.Contains(p, g.absent) {
				t.Errorf("group %d, connection %d: %s has %s, which its document leaves out", gi, li, p, g.absent)
			}
		}
	}
	kept, reused := env.Modules.Fanout.Renderings()
	if kept-keptBefore != 4 || reused-reusedBefore != 26 {
		t.Fatalf("the message was rendered %d times and reused %d times for 30 connections, want 4 and 26", kept-keptBefore, reused-reusedBefore)
	}
}
