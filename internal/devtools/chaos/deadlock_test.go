//go:build chaos

package chaos

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/sdk/agent"
)

// gate is an http.RoundTripper for an adapter's client that can hold its
// long polls (operation AgentEvents) back, so that the test decides which
// process sees an invocation first, and that notes which message ids the
// polls it let through have returned.
type gate struct {
	mu     sync.Mutex
	closed bool
	open   chan struct{}
	seen   string // every AgentEvents answer so far
	waiter chan struct{}
}

func newGate() *gate { return &gate{open: make(chan struct{}), waiter: make(chan struct{}, 1)} }

// close holds every poll that starts from now on.
func (g *gate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed {
		g.closed, g.open = true, make(chan struct{})
	}
}

// release lets the held polls through.
func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		g.closed = false
		close(g.open)
	}
}

// holding reports whether a poll waits at the closed gate.
func (g *gate) holding() bool {
	select {
	case <-g.waiter:
		return true
	default:
		return false
	}
}

// saw reports whether a poll answer held id.
func (g *gate) saw(id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return strings.Contains(g.seen, id)
}

func (g *gate) RoundTrip(r *http.Request) (*http.Response, error) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	poll := bytes.Contains(body, []byte(`"operationName":"AgentEvents"`))
	if poll {
		g.mu.Lock()
		closed, open := g.closed, g.open
		g.mu.Unlock()
		if closed {
			select {
			case g.waiter <- struct{}{}:
			default:
			}
			select {
			case <-open:
			case <-r.Context().Done():
				return nil, r.Context().Err()
			}
		}
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || !poll {
		return resp, err
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(data))
	g.mu.Lock()
	g.seen += string(data)
	g.mu.Unlock()
	return resp, nil
}

// heldModel is a model whose every answer the test releases: each call
// waits on the channel calls until the test sends on its release.
type heldModel struct{ calls chan *heldCall }

type heldCall struct {
	prompt  agent.Prompt
	release chan struct{}
}

func (m *heldModel) Answer(ctx context.Context, p agent.Prompt) (string, error) {
	c := &heldCall{prompt: p, release: make(chan struct{})}
	select {
	case m.calls <- c:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	select {
	case <-c.release:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	tags, _ := requestTags(p.User)
	return "answer to " + strings.Join(tags, " "), nil
}

// next returns the model's next call, failing t after 20 s.
func (m *heldModel) next(t *testing.T, what string) *heldCall {
	t.Helper()
	select {
	case c := <-m.calls:
		return c
	case <-time.After(20 * time.Second):
		t.Fatalf("no model call for %s within 20 s", what)
		return nil
	}
}

// TestFreshAdapterLearnsTheAcknowledgedPosition replays, step by step,
// the stall the chaos test met (docs/reliability.md#chaos): two adapter
// processes A and B of lotse; B has not acknowledged anything yet when the
// first event it reads is a follow-up of A's run. Each run's model has
// seen its own follow-ups, which lie behind a follow-up of the other's run:
//
//	e1 invocation Ra (A)   e2 follow-up Fa0 of Ra   e3 invocation Rb (B)
//	e4 follow-up Fb1 of Rb e5 follow-up Fa1 of Ra
//
// A acknowledges up to e3 (delivering Fa0) and then waits for e4, which
// only B may pass; B's ledger starts at e2 and B must learn that the
// stored position passed it. The contract (docs/adapter.md,
// "Acknowledging the stream") says this cannot deadlock: both runs must
// complete soon after their models answered, and no follow-up may be
// answered twice. The test fails while an adapter that has not yet
// acknowledged successfully never asks the server for the stored position
// (Adapter.ackOnce returns when its last acknowledgement is empty), so
// that both runs wait until Config.DeliveryWait runs out and then post
// anyway, and the server promotes the follow-ups the answers covered.
//
// make chaos runs it after TestChaos; alone, run it with
// go test -tags chaos -run TestFreshAdapterLearnsTheAcknowledgedPosition ./internal/devtools/chaos/
func TestFreshAdapterLearnsTheAcknowledgedPosition(t *testing.T) {
	b := startBothy(t, t.TempDir(), nil)
	ppl := newPeople(b)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	const deliveryWait = 20 * time.Second
	start := func(name string, g *gate, m *heldModel, logs *apitest.Buffer) {
		client, err := agent.NewClient(b.URL, b.World.Token("lotse"), agent.ClientOptions{HTTPClient: &http.Client{Transport: g}})
		if err != nil {
			t.Fatal(err)
		}
		// The long poll: the gate holds polls back (operation
		// AgentEvents), and a WebSocket would pass it by. New reads the
		// stream over the WebSocket by default since it shares Run's
		// defaults.
		a, err := agent.New(agent.Config{Client: client, Model: m, Holder: "adapter-" + name, DeliveryWait: deliveryWait,
			Transport: agent.TransportPoll,
			Logger:    slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); _ = a.Run(ctx) }()
	}
	waitFor := func(what string, d time.Duration, ok func() bool) {
		t.Helper()
		end := time.Now().Add(d)
		for !ok() {
			if time.Now().After(end) {
				t.Fatalf("%s: not within %s", what, d)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	acked := func() int64 {
		var n int64
		_ = b.Pool.QueryRow(ctx, `SELECT coalesce(max(acked_seq), 0) FROM agent_cursors WHERE agent_id = $1`, b.World.ID("lotse")).Scan(&n)
		return n
	}
	seqOf := func(typ, msg string) int64 {
		var n int64
		_ = b.Pool.QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM agent_events WHERE agent_id = $1 AND type = $2 AND message_id = $3`,
			b.World.ID("lotse"), typ, msg).Scan(&n)
		return n
	}
	runOf := func(msg string) string {
		var id string
		_ = b.Pool.QueryRow(ctx, `SELECT id::text FROM runs WHERE triggering_message_id = $1`, msg).Scan(&id)
		return id
	}
	rng := rand.New(rand.NewPCG(1, 2))
	main := b.World.Channel("Support/Allgemein").MainThreadID
	post := func(who, thread string) (posted, string) {
		t.Helper()
		m, next, err := ppl.write(ctx, rng, who, thread, false)
		if err != nil {
			t.Fatal(err)
		}
		return m, next
	}

	// A claims Ra and acknowledges its invocation; its model waits.
	gateA, gateB := newGate(), newGate()
	modelA, modelB := &heldModel{calls: make(chan *heldCall, 4)}, &heldModel{calls: make(chan *heldCall, 4)}
	var logsA, logsB apitest.Buffer
	start("a", gateA, modelA, &logsA)
	ra, ta := post("alex", main)
	a1 := modelA.next(t, "Ra")
	waitFor("A acknowledges Ra's invocation", 10*time.Second, func() bool { return acked() >= seqOf("agent.invocation", ra.ID) })

	// e2: Fa0 reaches A's parked poll; A's next poll waits at its gate.
	gateA.close()
	fa0, _ := post("alex", ta)
	waitFor("A reads Fa0 and polls again", 10*time.Second, func() bool { return gateA.saw(fa0.ID) && gateA.holding() })

	// B starts behind the stored position: the first event it reads is
	// Fa0, a follow-up of A's run.
	start("b", gateB, modelB, &logsB)
	waitFor("B reads Fa0", 10*time.Second, func() bool { return gateB.saw(fa0.ID) })

	// e3, e4: B claims Rb (A's polls wait), then Fb1 comes; e5: Fa1.
	rb, tb := post("sam", main)
	b1 := modelB.next(t, "Rb")
	fb1, _ := post("sam", tb)
	fa1, _ := post("alex", ta)
	if fb1.State != "FOLLOWUP" || fa1.State != "FOLLOWUP" || fa0.State != "FOLLOWUP" {
		t.Fatalf("follow-ups were taken as %s, %s, %s", fa0.State, fb1.State, fa1.State)
	}
	gateA.release()
	waitFor("A reads Fa1", 10*time.Second, func() bool { return gateA.saw(fa1.ID) })

	// Each model sees its run's follow-ups in a second round.
	close(a1.release)
	a2 := modelA.next(t, "Ra, round 2")
	close(a2.release)
	close(b1.release)
	b2 := modelB.next(t, "Rb, round 2")
	close(b2.release)
	answered := time.Now()
	// Let the acknowledgers run a few rounds (blocker checks every 3 s).
	time.Sleep(8 * time.Second)
	t.Logf("8 s after both models answered: acknowledged %d", acked())

	// Both runs must complete soon: every follow-up they wait for is
	// seen by its run's model.
	state := func(run string) string {
		var s string
		_ = b.Pool.QueryRow(ctx, `SELECT state FROM runs WHERE id = $1`, run).Scan(&s)
		return s
	}
	runA, runB := runOf(ra.ID), runOf(rb.ID)
	end := time.Now().Add(deliveryWait + 15*time.Second)
	for time.Now().Before(end) && (state(runA) != "completed" || state(runB) != "completed") {
		time.Sleep(100 * time.Millisecond)
	}
	took := time.Since(answered)
	var promoted int
	_ = b.Pool.QueryRow(ctx, `SELECT count(*) FROM run_followups WHERE message_id = ANY($1::uuid[]) AND state = 'promoted'`,
		[]string{fa0.ID, fb1.ID, fa1.ID}).Scan(&promoted)
	t.Logf("stream: Ra invocation %d, Fa0 %d, Rb invocation %d, Fb1 %d, Fa1 %d; acknowledged %d",
		seqOf("agent.invocation", ra.ID), seqOf("agent.followup", fa0.ID), seqOf("agent.invocation", rb.ID),
		seqOf("agent.followup", fb1.ID), seqOf("agent.followup", fa1.ID), acked())
	t.Logf("Ra %s %s, Rb %s %s, %s after both models answered; follow-ups promoted after being answered: %d",
		runA, state(runA), runB, state(runB), took.Round(100*time.Millisecond), promoted)
	if took > 10*time.Second || promoted > 0 {
		t.Errorf("the runs waited %s for deliveries that need each other (DeliveryWait %s), and %d answered follow-ups were promoted to answer again",
			took.Round(100*time.Millisecond), deliveryWait, promoted)
		for name, logs := range map[string]*apitest.Buffer{"A": &logsA, "B": &logsB} {
			for _, l := range strings.Split(logs.String(), "\n") {
				if l != "" && !strings.Contains(l, "invocation skipped") {
					t.Logf("%s: %s", name, l)
				}
			}
		}
	}
}
