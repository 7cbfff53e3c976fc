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
//
// Its phases: replay builds the stream e1 to e5, answerBoth lets both
// models answer, and checkCompleted asks for both runs to complete soon.
func TestFreshAdapterLearnsTheAcknowledgedPosition(t *testing.T) {
	sb := newStallBench(t)
	st := sb.replay(t)
	answered := sb.answerBoth(t, st)
	sb.checkCompleted(t, st, answered)
}

// stallDeliveryWait is the Config.DeliveryWait of the adapters of
// TestFreshAdapterLearnsTheAcknowledgedPosition.
const stallDeliveryWait = 20 * time.Second

// stallBench is the bench of TestFreshAdapterLearnsTheAcknowledgedPosition:
// the server and its people, and the context and goroutines of the
// adapters it starts (start), which end with the test.
type stallBench struct {
	b   *bothy
	ppl *people
	ctx context.Context
	wg  sync.WaitGroup
	// rng draws the phrases of the people's messages (post).
	rng *rand.Rand
}

// newStallBench serves Bothy for t; the adapters stop before it does.
func newStallBench(t *testing.T) *stallBench {
	t.Helper()
	b := startBothy(t, t.TempDir(), nil)
	ctx, cancel := context.WithCancel(context.Background())
	sb := &stallBench{b: b, ppl: newPeople(b), ctx: ctx, rng: rand.New(rand.NewPCG(1, 2))}
	t.Cleanup(func() { cancel(); sb.wg.Wait() })
	return sb
}

// start runs an adapter of lotse in this process, named name, whose
// client goes through g, with model m, logging to logs.
func (sb *stallBench) start(t *testing.T, name string, g *gate, m *heldModel, logs *apitest.Buffer) {
	t.Helper()
	client, err := agent.NewClient(sb.b.URL, sb.b.World.Token("lotse"), agent.ClientOptions{HTTPClient: &http.Client{Transport: g}})
	if err != nil {
		t.Fatal(err)
	}
	// The long poll: the gate holds polls back (operation
	// AgentEvents), and a WebSocket would pass it by. New reads the
	// stream over the WebSocket by default since it shares Run's
	// defaults.
	a, err := agent.New(agent.Config{Client: client, Model: m, Holder: "adapter-" + name, DeliveryWait: stallDeliveryWait,
		Transport: agent.TransportPoll,
		Logger:    slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	sb.wg.Add(1)
	go func() { defer sb.wg.Done(); _ = a.Run(sb.ctx) }()
}

// waitFor waits until ok, failing t when that takes longer than d.
func waitFor(t *testing.T, what string, d time.Duration, ok func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !ok() {
		if time.Now().After(end) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// acked is lotse's acknowledged position in its stream.
func (sb *stallBench) acked() int64 {
	var n int64
	_ = sb.b.Pool.QueryRow(sb.ctx, `SELECT coalesce(max(acked_seq), 0) FROM agent_cursors WHERE agent_id = $1`, sb.b.World.ID("lotse")).Scan(&n)
	return n
}

// seqOf is the place in lotse's stream of the event of type typ about
// message msg (0 for none).
func (sb *stallBench) seqOf(typ, msg string) int64 {
	var n int64
	_ = sb.b.Pool.QueryRow(sb.ctx, `SELECT coalesce(max(seq), 0) FROM agent_events WHERE agent_id = $1 AND type = $2 AND message_id = $3`,
		sb.b.World.ID("lotse"), typ, msg).Scan(&n)
	return n
}

// runOf is the id of the run message msg triggered ("" for none).
func (sb *stallBench) runOf(msg string) string {
	var id string
	_ = sb.b.Pool.QueryRow(sb.ctx, `SELECT id::text FROM runs WHERE triggering_message_id = $1`, msg).Scan(&id)
	return id
}

// state is the state of run.
func (sb *stallBench) state(run string) string {
	var s string
	_ = sb.b.Pool.QueryRow(sb.ctx, `SELECT state FROM runs WHERE id = $1`, run).Scan(&s)
	return s
}

// post writes a request of who into thread, failing t when it cannot; it
// returns the message and the thread the conversation continues in.
func (sb *stallBench) post(t *testing.T, who, thread string) (posted, string) {
	t.Helper()
	m, next, err := sb.ppl.write(sb.ctx, sb.rng, who, thread, false)
	if err != nil {
		t.Fatal(err)
	}
	return m, next
}

// stall is the stream e1 to e5 as replay made it: the adapters' gates,
// models and logs, the requests (Ra, Rb) and follow-ups (Fa0, Fb1, Fa1),
// and each model's first call, still held.
type stall struct {
	gateA, gateB   *gate
	modelA, modelB *heldModel
	logsA, logsB   apitest.Buffer
	ra, rb         posted
	fa0, fb1, fa1  posted
	a1, b1         *heldCall
}

// replay builds the stream e1 to e5 step by step, holding A's polls at
// its gate (gate) while B starts behind the stored position and claims
// Rb, so that each event reaches the adapter the stall needs; it fails t
// when a step does not happen within 10 s or a follow-up was not taken as
// one.
func (sb *stallBench) replay(t *testing.T) *stall {
	t.Helper()
	main := sb.b.World.Channel("Support/Allgemein").MainThreadID

	// A claims Ra and acknowledges its invocation; its model waits.
	st := &stall{gateA: newGate(), gateB: newGate(),
		modelA: &heldModel{calls: make(chan *heldCall, 4)}, modelB: &heldModel{calls: make(chan *heldCall, 4)}}
	sb.start(t, "a", st.gateA, st.modelA, &st.logsA)
	ra, ta := sb.post(t, "alex", main)
	st.ra = ra
	st.a1 = st.modelA.next(t, "Ra")
	waitFor(t, "A acknowledges Ra's invocation", 10*time.Second, func() bool { return sb.acked() >= sb.seqOf("agent.invocation", ra.ID) })

	// e2: Fa0 reaches A's parked poll; A's next poll waits at its gate.
	st.gateA.close()
	st.fa0, _ = sb.post(t, "alex", ta)
	waitFor(t, "A reads Fa0 and polls again", 10*time.Second, func() bool { return st.gateA.saw(st.fa0.ID) && st.gateA.holding() })

	// B starts behind the stored position: the first event it reads is
	// Fa0, a follow-up of A's run.
	sb.start(t, "b", st.gateB, st.modelB, &st.logsB)
	waitFor(t, "B reads Fa0", 10*time.Second, func() bool { return st.gateB.saw(st.fa0.ID) })

	// e3, e4: B claims Rb (A's polls wait), then Fb1 comes; e5: Fa1.
	rb, tb := sb.post(t, "sam", main)
	st.rb = rb
	st.b1 = st.modelB.next(t, "Rb")
	st.fb1, _ = sb.post(t, "sam", tb)
	st.fa1, _ = sb.post(t, "alex", ta)
	if st.fb1.State != "FOLLOWUP" || st.fa1.State != "FOLLOWUP" || st.fa0.State != "FOLLOWUP" {
		t.Fatalf("follow-ups were taken as %s, %s, %s", st.fa0.State, st.fb1.State, st.fa1.State)
	}
	st.gateA.release()
	waitFor(t, "A reads Fa1", 10*time.Second, func() bool { return st.gateA.saw(st.fa1.ID) })
	return st
}

// answerBoth lets each model answer, seeing its run's follow-ups in a
// second round, and then the acknowledgers run a few rounds; it returns
// when the models answered.
func (sb *stallBench) answerBoth(t *testing.T, st *stall) time.Time {
	t.Helper()
	// Each model sees its run's follow-ups in a second round.
	close(st.a1.release)
	a2 := st.modelA.next(t, "Ra, round 2")
	close(a2.release)
	close(st.b1.release)
	b2 := st.modelB.next(t, "Rb, round 2")
	close(b2.release)
	answered := time.Now()
	// Let the acknowledgers run a few rounds (blocker checks every 3 s).
	time.Sleep(8 * time.Second)
	t.Logf("8 s after both models answered: acknowledged %d", sb.acked())
	return answered
}

// checkCompleted waits for both runs to complete (at most the
// DeliveryWait and 15 s more), logs the stream and how the runs ended,
// and fails t when they took longer than 10 s after the models answered
// or a follow-up they answered was promoted, with the adapters' logs.
func (sb *stallBench) checkCompleted(t *testing.T, st *stall, answered time.Time) {
	t.Helper()
	// Both runs must complete soon: every follow-up they wait for is
	// seen by its run's model.
	runA, runB := sb.runOf(st.ra.ID), sb.runOf(st.rb.ID)
	end := time.Now().Add(stallDeliveryWait + 15*time.Second)
	for time.Now().Before(end) && (sb.state(runA) != "completed" || sb.state(runB) != "completed") {
		time.Sleep(100 * time.Millisecond)
	}
	took := time.Since(answered)
	var promoted int
	_ = sb.b.Pool.QueryRow(sb.ctx, `SELECT count(*) FROM run_followups WHERE message_id = ANY($1::uuid[]) AND state = 'promoted'`,
		[]string{st.fa0.ID, st.fb1.ID, st.fa1.ID}).Scan(&promoted)
	t.Logf("stream: Ra invocation %d, Fa0 %d, Rb invocation %d, Fb1 %d, Fa1 %d; acknowledged %d",
		sb.seqOf("agent.invocation", st.ra.ID), sb.seqOf("agent.followup", st.fa0.ID), sb.seqOf("agent.invocation", st.rb.ID),
		sb.seqOf("agent.followup", st.fb1.ID), sb.seqOf("agent.followup", st.fa1.ID), sb.acked())
	t.Logf("Ra %s %s, Rb %s %s, %s after both models answered; follow-ups promoted after being answered: %d",
		runA, sb.state(runA), runB, sb.state(runB), took.Round(100*time.Millisecond), promoted)
	if took > 10*time.Second || promoted > 0 {
		t.Errorf("the runs waited %s for deliveries that need each other (DeliveryWait %s), and %d answered follow-ups were promoted to answer again",
			took.Round(100*time.Millisecond), stallDeliveryWait, promoted)
		logAdapters(t, st)
	}
}

// logAdapters logs the lines of both adapters, but for the skipped
// invocations, to show where they waited.
func logAdapters(t *testing.T, st *stall) {
	t.Helper()
	for name, logs := range map[string]*apitest.Buffer{"A": &st.logsA, "B": &st.logsB} {
		for _, l := range strings.Split(logs.String(), "\n") {
			if l != "" && !strings.Contains(l, "invocation skipped") {
				t.Logf("%s: %s", name, l)
			}
		}
	}
}
