package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/99designs/gqlgen/graphql/handler/transport"
	coderws "github.com/coder/websocket"

	"bothy.example.com/bothy/graph"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/clock"
	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/platform/httpx"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/runs"
)

// The close codes of GraphQL WebSocket connections. 4400, 4401, 4403,
// 4406, 4409 and 4429 are those of the graphql-transport-ws protocol; 4413
// is Bothy's own.
const (
	closeInvalidMessage = 4400
	closeUnauthorized   = 4401
	closeForbidden      = 4403
	closeBadSubprotocol = 4406
	closeDuplicateID    = 4409
	closeTooManyInits   = 4429
	closeTooManySockets = 4429
	closeSendQueueFull  = 4413
	// closeRestart (1012, service restart) ends every connection of a
	// draining server: the client reconnects, to another replica, and
	// resumes from its cursor; never a complete, which clients take for
	// the normal end.
	closeRestart = 1012
	// closeTryAgain (1013, try again later) ends a connection whose
	// authentication or subscription met a database error: an outage is
	// temporary, not a refusal of the token.
	closeTryAgain        = 1013
	transportWSProtocol  = "graphql-transport-ws"
	reasonSendQueueFull  = "send queue full: resume from the last cursor received"
	reasonTooManySockets = "too many connections for this principal"
)

// live serves GraphQL subscriptions over WebSocket (the graphql-transport-ws
// protocol of the graphql-ws library) on /graphql: it authenticates
// connection_init, counts connections per principal, closes connections
// whose token or principal stops authenticating, and enforces the protocol
// rules gqlgen's transport leaves open (duplicate ids, unknown messages,
// subscriptions per connection).
type live struct {
	ident *identity.Service
	// tokens re-authenticates the tokens of all connections together, once
	// per commit.
	tokens  *identity.LiveTokens
	hub     *runs.Hub
	log     *slog.Logger
	origins []string
	// recheck is how often an idle connection re-authenticates its token:
	// half of events.poll_max_wait, so a revocation closes it within that.
	recheck  time.Duration
	maxSubs  int
	maxConns int
	ping     time.Duration
	init     time.Duration

	mu    sync.Mutex
	conns map[string]int
	// open counts the connections being served (upgraded or not yet
	// refused), for bothy_websocket_connections; served is the same as a
	// WaitGroup, for the drain.
	open int
	// subs counts the running subscriptions of all connections (an
	// atomic: it changes under a connection's lock, never under mu).
	subs   atomic.Int64
	served sync.WaitGroup
}

// drained waits until every WebSocket connection ended, or ctx ended
// (its error then).
func (l *live) drained(ctx context.Context) error {
	done := make(chan struct{})
	go func() { l.served.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Open returns how many WebSocket connections are being served now.
func (l *live) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// Subscriptions is the number of subscriptions running on this replica's
// connections now (bothy_websocket_subscriptions).
func (l *live) Subscriptions() int { return int(l.subs.Load()) }

// countSubs adds n (negative at an end) to the running subscriptions.
func (l *live) countSubs(n int) { l.subs.Add(int64(n)) }

func newLive(cfg *config.Config, ident *identity.Service, tokens *identity.LiveTokens, hub *runs.Hub, log *slog.Logger) *live {
	l := &live{ident: ident, tokens: tokens, hub: hub, log: log, conns: map[string]int{},
		recheck: cfg.Duration(config.EventsPollMaxWait) / 2, maxSubs: cfg.Int(config.WebsocketMaxSubscriptions),
		maxConns: cfg.Int(config.WebsocketMaxConnections), ping: cfg.Duration(config.WebsocketPingInterval),
		init: cfg.Duration(config.WebsocketInitTimeout)}
	if l.recheck < 50*time.Millisecond {
		l.recheck = 50 * time.Millisecond
	}
	for _, o := range strings.Split(cfg.String(config.WebsocketAllowedOrigins), ",") {
		if o = strings.TrimSpace(o); o != "" {
			l.origins = append(l.origins, strings.ToLower(o))
		}
	}
	return l
}

// transport returns gqlgen's WebSocket transport wired to l.
func (l *live) transport() transport.Websocket {
	return transport.Websocket{
		Implementation:   wsImplementation{},
		InitFunc:         l.initConn,
		InitTimeout:      l.init,
		PingPongInterval: l.ping,
	}
}

// route sends WebSocket upgrades of /graphql to exec (which authenticates in
// connection_init) and every other request to rest.
func (l *live) route(exec http.Handler, rest http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			rest.ServeHTTP(w, r)
			return
		}
		if !l.originAllowed(r) {
			httpx.WriteProblem(w, r, problem.Newf(problem.Forbidden, "origin_not_allowed", "this origin may not open WebSocket connections (websocket.allowed_origins)"))
			return
		}
		// A subscription lives for hours: net/http clears the request's
		// read and write deadlines (server timeouts) when the upgrade
		// hijacks the connection (TestSubscriptionOutlivesHTTPTimeouts).
		c := &wsConn{live: l, active: map[string]bool{}, closeDone: make(chan struct{})}
		ctx, cancel := context.WithCancel(r.Context())
		c.cancel = cancel
		l.mu.Lock()
		l.open++
		l.mu.Unlock()
		l.served.Add(1)
		defer func() {
			c.finish()
			c.mu.Lock()
			left := len(c.active)
			clear(c.active)
			c.mu.Unlock()
			l.countSubs(-left)
			l.mu.Lock()
			l.open--
			l.mu.Unlock()
			l.served.Done()
		}()
		exec.ServeHTTP(w, r.WithContext(context.WithValue(ctx, wsConnKey{}, c)))
	})
}

// originAllowed accepts requests without Origin (not from a browser), from
// the server's own host, and from the configured origins: a full origin
// (scheme://host[:port], the form of http.cors_allowed_origins) matches
// exactly, a bare host pattern (path.Match syntax) matches the host.
func (l *live) originAllowed(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	host := strings.ToLower(u.Host)
	if strings.EqualFold(host, r.Host) {
		return true
	}
	for _, p := range l.origins {
		if strings.Contains(p, "://") {
			if strings.EqualFold(strings.TrimSuffix(p, "/"), u.Scheme+"://"+host) {
				return true
			}
			continue
		}
		if ok, _ := path.Match(p, host); ok {
			return true
		}
	}
	return false
}

// initConn authenticates connection_init: the payload's Authorization, or
// else the upgrade request's header. A token that does not authenticate
// closes the socket with 4403; one connection more than
// websocket.max_connections_per_principal with 4429.
func (l *live) initConn(ctx context.Context, payload transport.InitPayload) (context.Context, *transport.InitPayload, error) {
	c, _ := ctx.Value(wsConnKey{}).(*wsConn)
	if c == nil || c.inner == nil {
		return transport.WithWebsocketCloseCode(ctx, closeForbidden), nil, errors.New("forbidden")
	}
	auth := payload.Authorization()
	if auth == "" {
		auth = c.header.Get("Authorization")
	}
	tok, ok := bearer(auth)
	if !ok {
		return transport.WithWebsocketCloseCode(transport.AppendCloseReason(ctx, "Forbidden"), closeForbidden), nil, errors.New("forbidden")
	}
	p, expires, err := l.ident.AuthenticateUntil(ctx, tok)
	if err != nil {
		if pe := problem.From("server.initConn", err); pe.Code == problem.InternalError || pe.Code == problem.Unavailable {
			// The database did not answer: not a verdict on the token.
			// 1013 tells the client to come back; 4403 would make it stop.
			if pe.Cause() != nil {
				l.log.WarnContext(ctx, "websocket authentication failed: try again later", "error", pe.Cause().Error())
			}
			return transport.WithWebsocketCloseCode(transport.AppendCloseReason(ctx, "Try again later"), closeTryAgain), nil, errors.New("try again later")
		}
		return transport.WithWebsocketCloseCode(transport.AppendCloseReason(ctx, "Forbidden"), closeForbidden), nil, errors.New("forbidden")
	}
	l.mu.Lock()
	if l.conns[p.ID] >= l.maxConns {
		l.mu.Unlock()
		return transport.WithWebsocketCloseCode(transport.AppendCloseReason(ctx, reasonTooManySockets), closeTooManySockets), nil, errors.New(reasonTooManySockets)
	}
	l.conns[p.ID]++
	l.mu.Unlock()
	c.mu.Lock()
	c.principal, c.token = p.ID, tok
	c.mu.Unlock()
	l.tokens.Add(tok)
	httpx.NotePrincipal(ctx, p.ID)
	go c.watch(ctx, tok, p.ID, expires)
	ctx = identity.WithToken(identity.WithPrincipal(ctx, p), tok)
	return graph.WithSubscriptionConn(ctx, c), nil, nil
}

type wsConnKey struct{}

// wsImplementation accepts the upgrade with gqlgen's coder/websocket
// implementation, offering graphql-transport-ws only, and wraps the
// connection in the wsConn the route prepared.
type wsImplementation struct{}

func (wsImplementation) Accept(w http.ResponseWriter, r *http.Request, opts transport.WebsocketAcceptOptions) (transport.WebsocketConn, error) {
	c, _ := r.Context().Value(wsConnKey{}).(*wsConn)
	if c == nil {
		return nil, errors.New("websocket outside /graphql")
	}
	opts.Subprotocols = []string{transportWSProtocol}
	// The route checked the origin already, with the configured patterns.
	inner, err := transport.CoderWebsocketImplementation{AcceptOptions: coderws.AcceptOptions{InsecureSkipVerify: true}}.Accept(w, r, opts)
	if err != nil {
		return nil, err
	}
	c.inner, c.header = inner, r.Header
	if inner.Subprotocol() != transportWSProtocol {
		c.closeWith(closeBadSubprotocol, "Subprotocol not acceptable")
	}
	return c, nil
}

// wsConn is one GraphQL WebSocket connection: gqlgen's transport reads and
// writes through it, and it checks each client message before gqlgen sees
// it.
type wsConn struct {
	live   *live
	inner  transport.WebsocketConn
	header http.Header
	cancel context.CancelFunc

	mu        sync.Mutex
	principal string
	// token is the connection's token, registered in live.tokens while
	// the connection lives.
	token  string
	inited bool
	closed bool
	// closeDone is closed once the close frame of the first closeWith
	// went out (or gave up) and the connection was dropped.
	closeDone chan struct{}
	// active are the ids of running subscriptions (subscribe seen, neither
	// side completed yet).
	active map[string]bool
}

var (
	_ transport.WebsocketConn          = (*wsConn)(nil)
	_ transport.WebsocketReadLimiter   = (*wsConn)(nil)
	_ transport.WebsocketReadDeadliner = (*wsConn)(nil)
	_ graph.SubscriptionConn           = (*wsConn)(nil)
)

// wsMessage is the envelope of graphql-transport-ws messages.
type wsMessage struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// NextReader hands gqlgen the next client message that the protocol allows
// it to handle. A second connection_init closes with 4429, a message before
// connection_init with 4401, a subscribe with an id in use with 4409, an
// unknown type with 4400; a subscribe beyond
// websocket.max_subscriptions_per_connection gets an error message for its
// id and goes no further.
func (c *wsConn) NextReader() (int, io.Reader, error) {
	for {
		typ, r, err := c.inner.NextReader()
		if err != nil {
			return typ, r, err
		}
		data, err := io.ReadAll(r)
		if err != nil {
			return typ, nil, err
		}
		var m wsMessage
		if json.Unmarshal(data, &m) != nil {
			c.closeWith(closeInvalidMessage, "Invalid message received")
			return 0, nil, transport.ErrWebsocketClosed
		}
		code, reason, refuse := c.admit(m)
		if code != 0 {
			c.closeWith(code, reason)
			return 0, nil, transport.ErrWebsocketClosed
		}
		if refuse {
			if err := c.refuseSubscription(m.ID); err != nil {
				return 0, nil, err
			}
			continue
		}
		return typ, bytes.NewReader(data), nil
	}
}

// admit decides whether the protocol lets gqlgen handle the client
// message m, and notes what m changes on the connection (initialised, the
// running subscriptions). A message that closes the connection has its
// close code and reason; refuse says m is a subscribe beyond
// websocket.max_subscriptions_per_connection.
func (c *wsConn) admit(m wsMessage) (code int, reason string, refuse bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch m.Type {
	case "connection_init":
		code, reason = c.admitInit(m.Payload)
		return code, reason, false
	case "ping", "pong":
		return 0, "", false
	case "subscribe", "complete":
		return c.admitSubscription(m)
	default:
		return closeInvalidMessage, "Invalid message received", false
	}
}

// admitInit decides on a connection_init with payload (admit; c.mu held):
// one per connection, with an object or no payload.
func (c *wsConn) admitInit(payload json.RawMessage) (code int, reason string) {
	switch {
	case c.inited:
		code, reason = closeTooManyInits, "Too many initialisation requests"
	case !objectOrAbsent(payload):
		// A payload that is no object (a string, a number, an array, a
		// boolean) is no valid init: gqlgen's transport would stop on it
		// without a close and leave the socket open. Absent (or null) is
		// allowed: the token may come from the upgrade request's header.
		code, reason = closeInvalidMessage, "Invalid message received"
	}
	c.inited = true
	return code, reason
}

// admitSubscription decides on a subscribe or complete m (admit; c.mu
// held): only after connection_init and with an id, a subscribe with an id
// not running and within the connection's cap. It keeps the running
// subscriptions and their count.
func (c *wsConn) admitSubscription(m wsMessage) (code int, reason string, refuse bool) {
	switch {
	case !c.inited:
		return closeUnauthorized, "Unauthorized", false
	case m.ID == "":
		return closeInvalidMessage, "Invalid message received", false
	case m.Type == "complete":
		if c.active[m.ID] {
			delete(c.active, m.ID)
			c.live.countSubs(-1)
		}
		return 0, "", false
	case c.active[m.ID]:
		return closeDuplicateID, "Subscriber for " + m.ID + " already exists", false
	case len(c.active) >= c.live.maxSubs:
		return 0, "", true
	default:
		c.active[m.ID] = true
		c.live.countSubs(1)
		return 0, "", false
	}
}

// refuseSubscription answers the subscribe with id beyond
// websocket.max_subscriptions_per_connection with an error message for its
// id; the connection stays open.
func (c *wsConn) refuseSubscription(id string) error {
	payload, _ := json.Marshal([]map[string]any{{"message": "too many subscriptions on this connection (websocket.max_subscriptions_per_connection)",
		"extensions": map[string]any{"code": string(problem.RateLimited), "status": problem.RateLimited.Status(), "reason": "too_many_subscriptions"}}})
	return c.inner.WriteJSON(wsMessage{ID: id, Type: "error", Payload: payload})
}

// objectOrAbsent reports whether a message payload is absent, null or a
// JSON object.
func objectOrAbsent(p json.RawMessage) bool {
	p = bytes.TrimSpace(p)
	return len(p) == 0 || bytes.Equal(p, []byte("null")) || p[0] == '{'
}

// WriteJSON writes a server message; complete and error end their id. A
// subscription the client completed itself gets no complete back (the
// protocol's complete goes one way for an id).
func (c *wsConn) WriteJSON(v any) error {
	typ, id, ok := messageHead(v)
	if !ok {
		// Not a message of the transport's shape: read its head from its
		// encoding (never on the transport's own path).
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		var m wsMessage
		if json.Unmarshal(b, &m) == nil {
			typ, id = m.Type, m.ID
		}
		v = json.RawMessage(b)
	}
	if typ == "complete" || typ == "error" || typ == "next" {
		c.mu.Lock()
		running := c.active[id]
		if typ != "next" && running {
			delete(c.active, id)
			c.live.countSubs(-1)
		}
		c.mu.Unlock()
		if !running {
			return nil
		}
	}
	return c.inner.WriteJSON(v)
}

// messageHead reads the type and id of a message the transport writes
// without encoding it: gqlgen's graphql-transport-ws message is a struct
// (unexported, so no type switch reaches it) with the string fields Type
// and ID. ok is false for any other value.
func messageHead(v any) (typ, id string, ok bool) {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer {
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Struct {
		return "", "", false
	}
	t, i := rv.FieldByName("Type"), rv.FieldByName("ID")
	if !t.IsValid() || !i.IsValid() || t.Kind() != reflect.String || i.Kind() != reflect.String {
		return "", "", false
	}
	return t.String(), i.String(), true
}

// WriteClose sends a close frame.
func (c *wsConn) WriteClose(code int, reason string) error {
	return c.inner.WriteClose(code, reason)
}

// Close closes the connection.
func (c *wsConn) Close() error { return c.inner.Close() }

// Subprotocol is the negotiated subprotocol.
func (c *wsConn) Subprotocol() string { return c.inner.Subprotocol() }

// SetReadLimit bounds a client message.
func (c *wsConn) SetReadLimit(n int64) {
	if l, ok := c.inner.(transport.WebsocketReadLimiter); ok {
		l.SetReadLimit(n)
	}
}

// SetReadDeadline lets the transport drop a client that misses pongs.
func (c *wsConn) SetReadDeadline(t time.Time) error {
	if d, ok := c.inner.(transport.WebsocketReadDeadliner); ok {
		return d.SetReadDeadline(t)
	}
	return nil
}

// QueueFull closes the connection with 4413: a subscription's consumer fell
// behind by websocket.send_queue events.
func (c *wsConn) QueueFull() { c.closeWith(closeSendQueueFull, reasonSendQueueFull) }

// Restarting closes the connection with 1012: the server drains.
func (c *wsConn) Restarting() {
	c.closeWith(closeRestart, "server restarting: reconnect and resume from the last cursor received")
}

// TryAgainLater closes the connection with 1013: a subscription met a
// database error.
func (c *wsConn) TryAgainLater() {
	c.closeWith(closeTryAgain, "try again later: reconnect and resume from the last cursor received")
}

// closeWith sends the close frame with code and ends the connection (once):
// gqlgen's read loop then ends and the route cleans up.
func (c *wsConn) closeWith(code int, reason string) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		// A second caller (the pump and the watcher both see a drain)
		// returns only once the first one's close went out: returning at
		// once let the pump end its subscription, and gqlgen's own close
		// (1000) could overtake the 1012 still being written.
		<-c.closeDone
		return
	}
	c.closed = true
	c.mu.Unlock()
	defer close(c.closeDone)
	// The close frame waits behind a write blocked on a consumer that
	// does not read; give it a moment, then drop the connection.
	done := make(chan struct{})
	go func() { defer close(done); _ = c.inner.WriteClose(code, reason) }()
	select {
	case <-done:
	case <-time.After(time.Second):
	}
	_ = c.inner.Close()
	if c.cancel != nil {
		c.cancel()
	}
}

// watch re-authenticates the connection's token at every wake-up of the hub
// (at most once a second) and on a timer, and closes the connection with
// 4403 once the token is revoked or expired or the principal disabled. A
// token that expires (expires, nil for none) closes the connection at that
// moment by the clock, not at the next check.
func (c *wsConn) watch(ctx context.Context, tok, principal string, expires *time.Time) {
	t := time.NewTimer(c.live.recheck)
	defer t.Stop()
	var expiry <-chan time.Time
	if expires != nil {
		expiry = clock.At(c.live.ident.Clock(), *expires)
	}
	var last time.Time
	for {
		changed := c.live.hub.Changed()
		select {
		case <-ctx.Done():
			return
		case <-expiry:
			c.closeWith(closeForbidden, "Forbidden")
			return
		case <-c.live.hub.Stopping():
			c.Restarting()
			return
		case <-changed:
			if wait := time.Second - time.Since(last); wait > 0 {
				// At most one check a second: this wake-up is checked when
				// the second is over, not dropped (a revocation would wait
				// for the next timer otherwise).
				resetTimer(t, wait)
				continue
			}
		case <-t.C:
			t.Reset(c.live.recheck)
		}
		last = time.Now()
		p, ok, err := c.checkToken(ctx, tok)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			continue
		}
		if !ok || p.ID != principal {
			c.closeWith(closeForbidden, "Forbidden")
			return
		}
	}
}

// resetTimer stops t, drops a tick it may have queued, and sets it to fire
// after d.
func resetTimer(t *time.Timer, d time.Duration) {
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
	t.Reset(d)
}

// checkToken authenticates the connection's token again for watch: ok is
// false once it no longer authenticates anyone; err is an error of the
// check itself, which decides nothing.
func (c *wsConn) checkToken(ctx context.Context, tok string) (p identity.Principal, ok bool, err error) {
	// One statement for all connections of the replica per commit
	// (identity.LiveTokens), whatever their number; alone while
	// commits do not reach this replica, since no generation then
	// tells a batch is stale.
	if c.live.hub.Connected() {
		return c.live.tokens.Check(ctx, c.live.hub.Changed(), tok)
	}
	p, err = c.live.ident.Authenticate(ctx, tok)
	switch {
	case err == nil:
		return p, true, nil
	case problem.CodeOf(err) == problem.Unauthorized:
		return p, false, nil
	default:
		return p, false, err
	}
}

// finish runs when the connection ended: it frees its place in the count of
// its principal and stops its subscriptions and watcher.
func (c *wsConn) finish() {
	c.cancel()
	c.mu.Lock()
	id, tok := c.principal, c.token
	c.principal, c.token = "", ""
	c.mu.Unlock()
	if id == "" {
		return
	}
	l := c.live
	l.tokens.Remove(tok)
	l.mu.Lock()
	if l.conns[id]--; l.conns[id] <= 0 {
		delete(l.conns, id)
	}
	l.mu.Unlock()
}
