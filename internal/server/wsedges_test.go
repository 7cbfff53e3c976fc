package server_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"bothy.example.com/bothy/internal/devtools/apitest"
)

// waitConnections waits until the server serves n WebSocket connections
// (bothy_websocket_connections): the server's own count, which a socket
// left open on its side keeps up.
func waitConnections(t *testing.T, env *apitest.Env, n float64) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for env.Metric("bothy_websocket_connections") != n {
		if time.Now().After(deadline) {
			t.Fatalf("the server serves %v WebSocket connections, want %v", env.Metric("bothy_websocket_connections"), n)
		}
		time.Sleep(10 * time.Millisecond) // the poll's pace, not a wait that decides
	}
}

// testMalformedInitCloses4400: a connection_init whose payload is present
// but no object closes 4400, and the server lets go of the connection
// (its count of connections returns to zero once the client is gone); an
// absent or null payload still initialises.
func testMalformedInitCloses4400(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	for _, payload := range []string{`"x"`, `42`, `[]`, `true`, `false`} {
		w := dialRaw(t, env, nil)
		w.send(rawMsg{Type: "connection_init", Payload: json.RawMessage(payload)})
		w.wantClose(4400)
		w.c.CloseNow()
		waitConnections(t, env, 0)
	}
	for _, payload := range []string{``, `null`} {
		header := map[string][]string{"Authorization": {"Bearer " + env.World.Token("alex")}}
		w := dialRaw(t, env, header)
		m := rawMsg{Type: "connection_init"}
		if payload != "" {
			m.Payload = json.RawMessage(payload)
		}
		w.send(m)
		w.want("connection_ack")
		w.c.CloseNow()
		waitConnections(t, env, 0)
	}
}

// testDrainClosesSubscriptions1012: when the server drains, an open
// subscription's connection closes with 1012 (service restart), never
// with a complete for its subscription.
func testDrainClosesSubscriptions1012(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	// A second server of its own, on the same database, to stop while the
	// test's runs on.
	peer := env.Peer()
	w := &rawWS{t: t}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+peer.URL[len("http"):]+"/graphql", &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	w.c = c
	w.init(env.World.Token("alex"))
	w.send(subscribeAfter("s", `subscription($a: String) { events(after: $a) { seq type } }`, logEnd(env)))
	env.MustPost("alex", env.Main("Support/Allgemein"), "drain-1", "before the drain")
	w.created("s")
	var stopped sync.WaitGroup
	stopped.Add(1)
	go func() { defer stopped.Done(); peer.Stop() }()
	w.wantClose(1012)
	stopped.Wait()
}

// testSubscriptionWithTwoRootFieldsIsInvalid: a subscription selects
// exactly one root field; two (aliased) are a validation error on the
// WebSocket transport, never an internal error.
func testSubscriptionWithTwoRootFieldsIsInvalid(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	w := dialRaw(t, env, nil)
	w.init(env.World.Token("alex"))
	w.send(subscribeMsg("s", `subscription { a: events { seq } b: events { seq } }`))
	m := w.want("error")
	var errs []apitest.GQLError
	if err := json.Unmarshal(m.Payload, &errs); err != nil || len(errs) == 0 {
		t.Fatalf("error payload %s", m.Payload)
	}
	if e := errs[0].Extensions; e.Code != "validation_failed" {
		t.Fatalf("two root fields: %+v", errs)
	}
}

// TestWebSocketCloseCodes runs the cases of the close codes and refusals of the WebSocket transport.
func TestWebSocketCloseCodes(t *testing.T) {
	t.Parallel()
	t.Run("malformed init 4400", testMalformedInitCloses4400)
	t.Run("drain 1012", testDrainClosesSubscriptions1012)
	t.Run("two root fields", testSubscriptionWithTwoRootFieldsIsInvalid)
}

// TestSubscriptionAndListenerMetrics: bothy_websocket_subscriptions counts
// the subscriptions running on the replica (up at subscribe, down at the
// client's complete and when the connection goes), and
// bothy_listener_notifications_total grows with what the LISTEN
// connection hears: a message's commit reaches the subscriber through it.
func TestSubscriptionAndListenerMetrics(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	heard := env.Metric("bothy_listener_notifications_total")
	w := dialRaw(t, env, nil)
	w.init(env.World.Token("alex"))
	q := `subscription($a: String) { events(after: $a) { seq type } }`
	w.send(subscribeAfter("s1", q, logEnd(env)))
	w.send(subscribeAfter("s2", q, logEnd(env)))
	env.MustPost("alex", env.Main("Support/Eskalation"), "metric-1", "hello")
	for seen := map[string]bool{}; !seen["s1"] || !seen["s2"]; {
		if m := w.want("next"); strings.Contains(string(m.Payload), "message.created") {
			seen[m.ID] = true
		}
	}
	if got := env.Metric("bothy_websocket_subscriptions"); got != 2 {
		t.Fatalf("%v subscriptions, want 2", got)
	}
	if got := env.Metric("bothy_listener_notifications_total"); got <= heard {
		t.Fatalf("the listener heard %v notifications, %v before the message", got, heard)
	}
	w.send(rawMsg{ID: "s1", Type: "complete"})
	// s2 still delivers after s1's complete was read: the count followed it.
	env.MustPost("alex", env.Main("Support/Eskalation"), "metric-2", "again")
	w.skipTo("s2", "s1")
	if got := env.Metric("bothy_websocket_subscriptions"); got != 1 {
		t.Fatalf("%v subscriptions after a complete, want 1", got)
	}
	w.c.Close(websocket.StatusNormalClosure, "")
	waitConnections(t, env, 0)
	if got := env.Metric("bothy_websocket_subscriptions"); got != 0 {
		t.Fatalf("%v subscriptions after the connection went, want 0", got)
	}
}
