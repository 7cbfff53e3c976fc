package capacity

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
)

// wsMsg is a message of the graphql-transport-ws protocol.
type wsMsg struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// eventsQuery is every listener's subscription: the events from now on,
// with a message's content, as a chat client shows them.
const eventsQuery = `subscription { events { seq type ... on MessageEvent { messageId message { id contentMd } } } }`

var messageIDField = regexp.MustCompile(`"messageId":"([^"]+)"`)

// arrivals counts, per message id, the subscriptions it reached and when
// the last of them got it.
type arrivals struct {
	mu   sync.Mutex
	seen map[string]int
	last map[string]time.Time
	all  int
	cond *sync.Cond
}

func newArrivals() *arrivals {
	a := &arrivals{seen: map[string]int{}, last: map[string]time.Time{}}
	a.cond = sync.NewCond(&a.mu)
	return a
}

// note records that one subscription received message id now.
func (a *arrivals) note(id string, now time.Time) {
	a.mu.Lock()
	a.seen[id]++
	a.last[id] = now
	a.all++
	a.mu.Unlock()
	a.cond.Broadcast()
}

// wait waits until every id reached n subscriptions or the deadline
// passed, and returns how many did not.
func (a *arrivals) wait(ids []string, n int, deadline time.Time) int {
	stop := time.AfterFunc(time.Until(deadline), a.cond.Broadcast)
	defer stop.Stop()
	a.mu.Lock()
	defer a.mu.Unlock()
	for {
		missing := 0
		for _, id := range ids {
			if a.seen[id] < n {
				missing++
			}
		}
		if missing == 0 || !time.Now().Before(deadline) {
			return missing
		}
		a.cond.Wait()
	}
}

// conn is one listener: a WebSocket connection with its subscriptions.
type conn struct {
	c      *websocket.Conn
	cancel context.CancelFunc
	done   chan struct{}
}

// dial opens a listener as token with subs events subscriptions whose
// events go to a; a broken connection or a refused subscription is
// reported to fail.
func dial(ctx context.Context, server, token string, subs int, a *arrivals, fail func(string)) (*conn, error) {
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	u := "ws" + strings.TrimPrefix(strings.TrimRight(server, "/"), "http") + "/graphql"
	c, _, err := websocket.Dial(dctx, u, &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		return nil, fmt.Errorf("listener connects: %w", err)
	}
	c.SetReadLimit(1 << 20)
	init, _ := json.Marshal(map[string]string{"Authorization": "Bearer " + token})
	var ack wsMsg
	if err := wsjson.Write(dctx, c, wsMsg{Type: "connection_init", Payload: init}); err != nil {
		return nil, fmt.Errorf("listener connects: %w", err)
	}
	if err := wsjson.Read(dctx, c, &ack); err != nil {
		c.CloseNow()
		return nil, fmt.Errorf("listener connects: no connection_ack: %w", err)
	}
	if ack.Type != "connection_ack" {
		c.CloseNow()
		return nil, fmt.Errorf("listener connects: %q instead of connection_ack", ack.Type)
	}
	p, _ := json.Marshal(map[string]string{"query": eventsQuery})
	for i := range subs {
		if err := wsjson.Write(dctx, c, wsMsg{ID: fmt.Sprintf("s%d", i), Type: "subscribe", Payload: p}); err != nil {
			c.CloseNow()
			return nil, fmt.Errorf("listener subscribes: %w", err)
		}
	}
	rctx, rcancel := context.WithCancel(context.Background())
	l := &conn{c: c, cancel: rcancel, done: make(chan struct{})}
	go l.read(rctx, a, fail)
	return l, nil
}

// read receives events until the connection ends; any end before close
// is a failure.
func (l *conn) read(ctx context.Context, a *arrivals, fail func(string)) {
	defer close(l.done)
	for {
		var m wsMsg
		if err := wsjson.Read(ctx, l.c, &m); err != nil {
			if ctx.Err() == nil {
				fail("listener's connection ended: " + err.Error())
			}
			return
		}
		switch m.Type {
		case "next":
			if id := messageIDField.FindSubmatch(m.Payload); id != nil {
				a.note(string(id[1]), time.Now())
			}
		case "ping":
			// The server's keep-alive: a client that does not answer it is
			// dropped (websocket.ping_interval).
			if err := wsjson.Write(ctx, l.c, wsMsg{Type: "pong"}); err != nil && ctx.Err() == nil {
				fail("listener's pong: " + err.Error())
			}
		case "error", "complete":
			fail(fmt.Sprintf("listener's subscription ended: %s %.200s", m.Type, m.Payload))
		}
	}
}

// alive reports whether the listener's connection is still open.
func (l *conn) alive() bool {
	select {
	case <-l.done:
		return false
	default:
		return true
	}
}

// close ends the listener.
func (l *conn) close() {
	l.cancel()
	l.c.Close(websocket.StatusNormalClosure, "")
	<-l.done
}
