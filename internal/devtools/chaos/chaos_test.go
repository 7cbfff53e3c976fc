//go:build chaos

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/platform/config"
)

// defaultSeed is the seed of make chaos; CHAOS_SEED replaces it.
const defaultSeed = 26

const (
	// lease and sweep are run.lease_timeout and run.sweep_interval: short,
	// so that a killed adapter's run goes back to queued within about 2 s.
	lease = 2 * time.Second
	sweep = 200 * time.Millisecond
	// slots is how many adapter processes serve lotse at once: three of
	// the reference adapter (bothy agent run), one of the Python SDK's
	// model example and one of the TypeScript SDK's (sdkSlots).
	slots = 5
	// writers is how many people's conversations run at once.
	writers = 5
	// minRuns is the fewest runs a chaos run must create; targetRuns is
	// where the people stop writing (CHAOS_RUNS replaces it).
	minRuns    = 60
	targetRuns = 70
	// chaosMax bounds the phase of writing and killing, settleMax the
	// wait for every run to end afterwards (longer than the adapter's
	// DeliveryWait of 2 minutes, so that a run waiting for it still ends
	// within the bound): with the build and the database the whole test
	// stays under about 5 minutes.
	chaosMax  = 120 * time.Second
	settleMax = 150 * time.Second
	// lifeMin and lifeMax bound the life of an adapter process between
	// kills.
	lifeMin = 200 * time.Millisecond
	lifeMax = 4 * time.Second
)

// TestChaos runs adapter processes of lotse (the reference adapter, bothy
// agent run, over the poll and ws transports, and the model examples of the
// Python and TypeScript SDKs) against a fake model while people write
// requests and follow-ups, kills the processes with SIGKILL at random
// moments and restarts them, suspends one with SIGSTOP past its lease and
// resumes it, and then accounts for every run and request from the
// database and the API (account). It fails when a run did not end exactly
// once, a request has no answer or more than one, a follow-up is lost or
// answered twice, or a run is stuck, and prints the table either way.
func TestChaos(t *testing.T) {
	seed := uint64(defaultSeed)
	if v := os.Getenv("CHAOS_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED %q is no unsigned integer", v)
		}
		seed = n
	}
	target := targetRuns
	if v := os.Getenv("CHAOS_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("CHAOS_RUNS %q is no positive integer", v)
		}
		target = n
	}
	least := min(minRuns, target)
	t.Logf("chaos: seed %d (CHAOS_SEED=%d replays this schedule), %d runs wanted, leases of %s swept every %s", seed, seed, target, lease, sweep)

	logDir, err := os.MkdirTemp("", "bothy-chaos-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("chaos: the logs of the server and of every adapter process are kept in %s", logDir)
			return
		}
		os.RemoveAll(logDir)
	})
	bin := buildBothy(t)
	flag := baseURLFlag(t, bin)
	b := startBothy(t, logDir, map[string]string{
		config.RunLeaseTimeout:  lease.String(),
		config.RunSweepInterval: sweep.String(),
		// A run may be taken over as often as the chaos needs: what is
		// tested is that it ends once, not that it gives up.
		config.RunMaxAttempts: "1000",
		// The limits are tested elsewhere (docs/reliability.md); here
		// they would only slow the people and the adapters down.
		config.RateMessagePerMinute:          "100000",
		config.RateMessageBurst:              "10000",
		config.RateAgentRuntimePerMinute:     "100000",
		config.RateAgentRuntimeBurst:         "10000",
		config.RateReadPerMinute:             "100000",
		config.RateReadBurst:                 "10000",
		config.HTTPMaxConcurrentPerPrincipal: "64",
	})
	model := newFakeModel(t, seed)
	args := []string{"--server", b.URL, "--model", "openai", flag, model.BaseURL(), "--model-name", "chaos"}
	env := append(os.Environ(), "BOTHY_AGENT_TOKEN="+b.World.Token("lotse"), "BOTHY_SERVER="+b.URL,
		"BOTHY_MODEL_BASE_URL="+model.BaseURL(), "BOTHY_MODEL_NAME=chaos", "BOTHY_MODEL_API_KEY=chaos-key")
	sup := newSupervisor(t, bin, args, env, logDir)
	sup.sdks = sdkCommands(t)
	// Registered after the server, so run before it stops.
	t.Cleanup(func() {
		sup.mu.Lock()
		procs := append([]*proc(nil), sup.procs...)
		sup.mu.Unlock()
		for _, p := range procs {
			sup.kill(p)
		}
	})
	ppl := newPeople(b)
	ctx := context.Background()

	// The phase of chaos ends when enough runs exist or at chaosMax.
	began := time.Now()
	phase, endPhase := context.WithTimeout(ctx, chaosMax)
	defer endPhase()
	go func() {
		for phase.Err() == nil {
			var n int
			if err := b.Pool.QueryRow(ctx, `SELECT count(*) FROM runs WHERE agent_id = $1`, b.World.ID("lotse")).Scan(&n); err == nil && n >= target {
				endPhase()
				return
			}
			sleepCtx(phase, 250*time.Millisecond)
		}
	}()
	stop := func() bool { return phase.Err() != nil }
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		for t0 := time.Now(); ; {
			select {
			case <-phase.Done():
				return
			case <-time.After(15 * time.Second):
			}
			t.Logf("chaos: %3.0fs: %s", time.Since(t0).Seconds(), progress(ctx, b, sup))
		}
	}()

	// The adapters: each slot runs one process at a time and kills it
	// after a random life.
	stopKills := make(chan struct{})
	suspend := make([]chan suspendRequest, slots)
	var susp atomic.Pointer[suspension]
	var killers sync.WaitGroup
	for slot := range slots {
		suspend[slot] = make(chan suspendRequest)
		killers.Add(1)
		go func() {
			defer killers.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(100+slot)))
			for gen := 0; ; gen++ {
				select {
				case <-stopKills:
					return
				default:
				}
				p := sup.start(slot, gen, transportOf(slot, gen))
				life := time.NewTimer(lifeMin + time.Duration(rng.Int64N(int64(lifeMax-lifeMin))))
			wait:
				for {
					select {
					case <-life.C:
						sup.kill(p)
						break wait
					case <-p.done:
						if !p.killed.Load() {
							sup.exited(p)
						}
						break wait
					case req := <-suspend[slot]:
						if req.rs.proc != p || !p.alive() {
							req.done <- false
							continue
						}
						s := suspendPastLease(ctx, b, req.rs)
						req.done <- s != nil
						if s == nil {
							continue
						}
						life.Stop()
						susp.Store(s)
						sup.kill(p)
						break wait
					case <-stopKills:
						life.Stop()
						return
					}
				}
				sleepCtx(ctx, time.Duration(rng.Int64N(int64(300*time.Millisecond))))
			}
		}()
	}
	// Once, a process that has just started a run (its model works) is
	// suspended past its lease.
	suspendAt := 5*time.Second + time.Duration(rand.New(rand.NewPCG(seed, 3)).Int64N(int64(10*time.Second)))
	go func() {
		sleepCtx(phase, suspendAt)
		for {
			select {
			case rs := <-sup.started:
				if time.Since(rs.at) > 300*time.Millisecond || !rs.proc.alive() {
					continue
				}
				req := suspendRequest{rs: rs, done: make(chan bool, 1)}
				select {
				case suspend[rs.proc.slot] <- req:
					if <-req.done {
						return
					}
				default:
				}
			case <-phase.Done():
				return
			}
		}
	}()

	// The people.
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := ppl.converse(phase, rand.New(rand.NewPCG(seed, uint64(200+w))), stop); err != nil {
				errs <- err
				endPhase()
			}
		}()
	}
	wg.Wait()
	endPhase()
	close(errs)
	for err := range errs {
		t.Errorf("a person could not write: %v", err)
	}
	chaos := time.Since(began)
	<-progressDone

	// Calm: no more kills, one live process per slot, until every run has
	// ended.
	close(stopKills)
	killers.Wait()
	sup.mu.Lock()
	var dead []int
	for slot := range slots {
		if p := sup.current[slot]; p == nil || !p.alive() {
			dead = append(dead, slot)
		}
	}
	sup.mu.Unlock()
	for _, slot := range dead {
		sup.start(slot, 999, transportOf(slot, 0))
	}
	calm := time.Now()
	left := waitSettled(ctx, b, settleMax, 20*time.Second, func() {
		t.Logf("chaos: no run has ended for 20 s of calm:\n%s", dumpActive(ctx, b, sup))
	})
	settled := time.Since(calm)
	if left != 0 {
		t.Logf("chaos: %d runs still active after %s of calm:\n%s", left, settleMax, dumpActive(ctx, b, sup))
	}
	sup.mu.Lock()
	procs := append([]*proc(nil), sup.procs...)
	sup.mu.Unlock()
	for _, p := range procs {
		if left == 0 {
			// Every run ended: the processes stop as an operator stops
			// them, which must end no run.
			sup.stop(p)
		} else {
			// Runs are stuck: SIGTERM would fail them (adapter_stopped)
			// and blur what the table shows.
			sup.kill(p)
		}
	}
	t.Logf("chaos: %s of chaos, then %s until every run ended (%d still active)", chaos.Round(time.Second), settled.Round(time.Second), left)

	res, err := account(ctx, b, ppl, model, sup, logDir, least)
	if err != nil {
		t.Fatalf("account: %v", err)
	}
	s := susp.Load()
	n := 0
	if s != nil {
		n = 1
		s.end(ctx, b)
		if !s.takenOver {
			res.detail("the suspended process's run %s was not taken over while it was stopped", s.runID)
		}
	}
	if chaos < suspendAt+5*time.Second && n == 0 {
		// A short run (CHAOS_RUNS) may end before the moment of the
		// suspension; it cannot be asked for one then.
		res.add("adapter processes suspended past their lease (SIGSTOP, then SIGCONT; the chaos ended before its moment)", n)
	} else {
		res.must("adapter processes suspended past their lease (SIGSTOP, then SIGCONT)", n, 1)
	}
	res.add("seconds of chaos (people writing, adapters killed)", int(chaos.Round(time.Second).Seconds()))
	res.add("seconds from the last kill until every run ended", int(settled.Round(time.Second).Seconds()))

	t.Logf("chaos: seed %d\n\n%s", seed, res.table())
	if s != nil {
		t.Logf("chaos: suspension\n%s", s.story())
	}
	t.Logf("chaos: adapter log lines by level and message:\n%s", strings.Join(sup.messageCounts(), "\n"))
	sup.mu.Lock()
	errLines := sup.errors
	sup.mu.Unlock()
	if len(errLines) > 0 {
		t.Logf("chaos: ERROR lines of the adapters (%d):\n%s", len(errLines), strings.Join(errLines[:min(len(errLines), 40)], "\n"))
	}
	if len(res.details) > 0 {
		t.Logf("chaos: details:\n%s", strings.Join(res.details, "\n"))
	}
	for _, r := range res.failed() {
		t.Errorf("chaos: %s: %d, must be %s (seed %d)", r.what, r.got, r.want, seed)
	}
}

// transportOf is the transport of generation gen of slot: slot 0 long
// polls, slot 1 holds the WebSocket subscription, slot 2 alternates.
func transportOf(slot, gen int) string {
	if kind, ok := sdkSlots[slot]; ok {
		return kind
	}
	switch {
	case slot == 0:
		return "poll"
	case slot == 1:
		return "ws"
	case gen%2 == 0:
		return "poll"
	}
	return "ws"
}

// suspension is what happened to the process suspended past its lease.
type suspension struct {
	proc             *proc
	holder, runID    string
	attempt          int
	stopped, resumed time.Time
	// takenOver says whether another holder held the run, or it had
	// ended, when the process was resumed; state, by and attemptThen say
	// how it was.
	takenOver   bool
	state, by   string
	attemptThen int
	// lines are the process's log lines about the run after it resumed.
	lines []string
	// final is how the run ended, with its answers' keys.
	final string
}

// end notes how the suspended process's run ended, once every run has.
func (s *suspension) end(ctx context.Context, b *bothy) {
	var state, reason string
	var attempt int
	if err := b.Pool.QueryRow(ctx, `SELECT state, coalesce(end_reason, ''), attempt FROM runs WHERE id = $1`, s.runID).Scan(&state, &reason, &attempt); err != nil {
		s.final = err.Error()
		return
	}
	var keys []string
	rows, err := b.Pool.Query(ctx, `SELECT m.client_msg_id FROM messages m WHERE m.author_principal_id = $1 AND m.client_msg_id LIKE $2 ORDER BY m.created_at`,
		b.World.ID("lotse"), "answer-"+s.runID+"%")
	if err == nil {
		for rows.Next() {
			var k string
			if rows.Scan(&k) == nil {
				keys = append(keys, k)
			}
		}
		rows.Close()
	}
	s.final = fmt.Sprintf("the run ended %s %q after %d attempts, with %d answer(s): %s", state, reason, attempt, len(keys), strings.Join(keys, ", "))
}

// suspendRequest asks a slot to suspend its process; done says whether
// it did.
type suspendRequest struct {
	rs   runStart
	done chan bool
}

// suspendPastLease stops rs's process with SIGSTOP right after it started
// run rs.runID, keeps it stopped until another holder holds the run (or
// the run ended; at most 20 s), resumes it with SIGCONT and watches it for
// 8 s: it must notice that it lost the run and post nothing for it. It
// returns nil, after resuming the process at once, when the process no
// longer held the run when it stopped (on a loaded machine the notice may
// come late).
func suspendPastLease(ctx context.Context, b *bothy, rs runStart) *suspension {
	p := rs.proc
	s := &suspension{proc: p, holder: p.Holder(), runID: rs.runID, attempt: rs.attempt, stopped: time.Now()}
	_ = p.cmd.Process.Signal(syscall.SIGSTOP)
	var state, holder string
	if err := b.Pool.QueryRow(ctx, `SELECT state, coalesce(holder, '') FROM runs WHERE id = $1`, rs.runID).Scan(&state, &holder); err != nil ||
		state != "running" || holder != s.holder {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		return nil
	}
	for time.Since(s.stopped) < 20*time.Second {
		time.Sleep(100 * time.Millisecond)
		var state, holder string
		var attempt int
		if err := b.Pool.QueryRow(ctx, `SELECT state, coalesce(holder, ''), attempt FROM runs WHERE id = $1`, rs.runID).Scan(&state, &holder, &attempt); err != nil {
			continue
		}
		s.state, s.by, s.attemptThen = state, holder, attempt
		ended := state == "completed" || state == "failed" || state == "cancelled"
		if time.Since(s.stopped) > lease && (ended || holder != "" && holder != s.holder) {
			s.takenOver = true
			break
		}
	}
	p.mu.Lock()
	p.watch = true
	p.mu.Unlock()
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	s.resumed = time.Now()
	select {
	case <-p.done:
	case <-time.After(8 * time.Second):
	}
	p.mu.Lock()
	for _, l := range p.watched {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["run_id"] == rs.runID {
			s.lines = append(s.lines, l)
		}
	}
	p.mu.Unlock()
	return s
}

// story tells the suspension for the report.
func (s *suspension) story() string {
	var b strings.Builder
	fmt.Fprintf(&b, "process %s (holder %s) suspended right after it started run %s (attempt %d), resumed after %s;\n",
		s.proc.name, s.holder, s.runID, s.attempt, s.resumed.Sub(s.stopped).Round(100*time.Millisecond))
	fmt.Fprintf(&b, "at the resume the run was %s, held by %q, attempt %d (taken over: %v); its log lines about the run after the resume:\n",
		s.state, s.by, s.attemptThen, s.takenOver)
	for _, l := range s.lines {
		b.WriteString("  " + l + "\n")
	}
	b.WriteString(s.final + "\n")
	return b.String()
}

// progress tells how far the runs are: created, active, the agent's
// stream behind its acknowledged position (what a restarted adapter reads
// again), and the kills so far.
func progress(ctx context.Context, b *bothy, sup *supervisor) string {
	var runs, active int
	var last, acked int64
	lotse := b.World.ID("lotse")
	_ = b.Pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE state IN ('queued', 'running', 'waiting_input')) FROM runs WHERE agent_id = $1`, lotse).Scan(&runs, &active)
	_ = b.Pool.QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM agent_events WHERE agent_id = $1`, lotse).Scan(&last)
	_ = b.Pool.QueryRow(ctx, `SELECT coalesce(max(acked_seq), 0) FROM agent_cursors WHERE agent_id = $1`, lotse).Scan(&acked)
	sup.mu.Lock()
	kills := sup.kills
	sup.mu.Unlock()
	var behind int
	_ = b.Pool.QueryRow(ctx, `SELECT count(*) FROM agent_events WHERE agent_id = $1 AND seq > $2`, lotse, acked).Scan(&behind)
	return fmt.Sprintf("%d runs (%d active), %d SIGKILLs, stream at %d, acknowledged %d (%d events behind)", runs, active, kills, last, acked, behind)
}
