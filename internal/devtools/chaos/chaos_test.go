//go:build chaos

package chaos

import (
	"context"
	"encoding/json"
	"errors"
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
	// suspendStopMax bounds how long the suspended process stays stopped
	// (it is resumed as soon as another holder holds its run), and
	// suspendWatch how long it is watched after its resume. suspendCourse
	// is a suspension's usual course: a lease until the run may be taken
	// over, a second for the takeover, and the watch. A run with a budget
	// (CHAOS_BUDGET) begins a suspension only when that fits before its
	// deadline, and resumes the process at the latest suspendWatch before
	// it, so that a slow takeover cannot carry the suspension past it.
	suspendStopMax = 20 * time.Second
	suspendWatch   = 8 * time.Second
	suspendCourse  = lease + time.Second + suspendWatch
	// servingMax bounds the wait of a slot that owes its SDK's kill
	// (schedule.owe) for its process to start serving: an SDK's example
	// starts in about a second, in several on a loaded machine.
	servingMax = 30 * time.Second
)

// settings are the knobs of a chaos run, read from the environment.
type settings struct {
	seed uint64
	// target is the count of runs at which the people stop writing
	// (CHAOS_RUNS); least is the fewest runs the account accepts.
	target, least int
	// budget (CHAOS_BUDGET; 0, the default, for none) bounds a short run
	// by construction, as the smoke of make test needs: nothing of the
	// chaos reaches past budget after the test's start. The people stop
	// writing and the slots stop killing at that deadline (or earlier, at
	// target), and a suspension begins only when its usual course ends
	// before it and is over by it in any case. The test then waits for
	// every run to end and accounts in full: a short run checks
	// exactly-once as the long one does. What is left after the deadline
	// is the runs in flight (a model call of at most 3 s, a lease of 2 s
	// when a kill left one behind), the kill a slot owes its SDK
	// (schedule.owe: an SDK's start, about a second) and the account.
	budget time.Duration
}

// readSettings reads CHAOS_SEED, CHAOS_RUNS and CHAOS_BUDGET.
func readSettings(t *testing.T) settings {
	t.Helper()
	s := settings{seed: defaultSeed, target: targetRuns}
	if v := os.Getenv("CHAOS_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED %q is no unsigned integer", v)
		}
		s.seed = n
	}
	if v := os.Getenv("CHAOS_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("CHAOS_RUNS %q is no positive integer", v)
		}
		s.target = n
	}
	if v := os.Getenv("CHAOS_BUDGET"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("CHAOS_BUDGET %q is no positive duration (such as 15s)", v)
		}
		s.budget = d
	}
	s.least = min(minRuns, s.target)
	return s
}

// TestChaos runs adapter processes of lotse (the reference adapter, bothy
// agent run, over the poll and ws transports, and the model examples of the
// Python and TypeScript SDKs) against a fake model while people write
// requests and follow-ups, kills the processes with SIGKILL at random
// moments (each SDK's at least once while it serves) and restarts them,
// suspends one with SIGSTOP past its lease and resumes it, and then
// accounts for every run and request from the database and the API
// (account). It fails when a run did not end exactly once, a request has
// no answer or more than one, a follow-up is lost or answered twice, a run
// is stuck, or an SDK's example was never killed while serving, and prints
// the table either way, and at the end how long each part took.
//
// Its phases are methods of chaosRun, in this order: setUp, writeAndKill
// (the chaos), calmDown (until every run ended) and report (the account).
func TestChaos(t *testing.T) {
	r := &chaosRun{start: time.Now(), ctx: context.Background()}
	r.cfg = readSettings(t)
	r.budget = "none"
	if r.cfg.budget > 0 {
		r.budget = r.cfg.budget.String()
	}
	t.Logf("chaos: seed %d (CHAOS_SEED=%d replays this schedule), %d runs wanted, budget %s, leases of %s swept every %s",
		r.cfg.seed, r.cfg.seed, r.cfg.target, r.budget, lease, sweep)
	r.setUp(t)
	r.writeAndKill(t)
	r.calmDown(t)
	r.report(t)
}

// chaosRun is one run of TestChaos: what its phases hand on to each other.
type chaosRun struct {
	cfg settings
	// budget is cfg.budget as the log lines name it ("none" for none).
	budget string
	ctx    context.Context
	// start is the test's start, began the start of the phase of chaos;
	// deadline is the budget's (the zero time for none).
	start, began, deadline time.Time
	logDir                 string
	b                      *bothy
	model                  *fakeModel
	sup                    *supervisor
	ppl                    *people
	sched                  *schedule
	// killers are the slots' goroutines (schedule.run).
	killers sync.WaitGroup
	// suspendAt is the moment of the suspension into the phase of chaos.
	suspendAt time.Duration
	// chaos is how long the phase of chaos took and why says why it ended;
	// wound is how long the kills and the suspension took to end after
	// it, settled how long the calm took until every run ended (from
	// calm), with left runs still active then.
	chaos, wound, settled time.Duration
	why                   string
	calm                  time.Time
	left                  int
}

// setUp makes the folder of the logs, builds bothy, serves the server
// (chaosConfig) and starts the fake model, the supervisor of the adapter
// processes and the people. The cleanups run in reverse order of their
// registration: the adapters are killed before the server stops, and the
// logs are removed (or named, when the test failed) last.
func (r *chaosRun) setUp(t *testing.T) {
	t.Helper()
	r.logDir = chaosLogDir(t)
	bin := buildBothy(t)
	flag := baseURLFlag(t, bin)
	r.b = startBothy(t, r.logDir, chaosConfig())
	r.model = newFakeModel(t, r.cfg.seed)
	args := []string{"--server", r.b.URL, "--model", "openai", flag, r.model.BaseURL(), "--model-name", "chaos"}
	// BOTHY_MODEL_API_KEY is set per process (supervisor.start).
	env := append(os.Environ(), "BOTHY_AGENT_TOKEN="+r.b.World.Token("lotse"), "BOTHY_SERVER="+r.b.URL,
		"BOTHY_MODEL_BASE_URL="+r.model.BaseURL(), "BOTHY_MODEL_NAME=chaos")
	r.sup = newSupervisor(t, bin, args, env, r.logDir)
	r.sup.sdks = sdkCommands(t)
	// Registered after the server, so run before it stops.
	t.Cleanup(func() {
		r.sup.mu.Lock()
		procs := append([]*proc(nil), r.sup.procs...)
		r.sup.mu.Unlock()
		for _, p := range procs {
			r.sup.kill(p)
		}
	})
	r.ppl = newPeople(r.b)
}

// chaosLogDir makes the folder of the logs of the server and of every
// adapter process: removed after a passing test, kept and named after a
// failed one, to read what went wrong.
func chaosLogDir(t *testing.T) string {
	t.Helper()
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
	return logDir
}

// chaosConfig is the server's configuration for the chaos: short leases
// swept often (lease, sweep), so that a killed adapter's run goes back to
// queued soon, and no limit in the way.
func chaosConfig() map[string]string {
	return map[string]string{
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
	}
}

// writeAndKill is the phase of chaos: the slots run adapter processes and
// kill them, one process is suspended past its lease, and the people
// write. It notes how long the phase took and why it ended, and returns
// once the writers and the progress log have stopped; the slots go on
// until calmDown stops them.
func (r *chaosRun) writeAndKill(t *testing.T) {
	t.Helper()
	// The phase of chaos ends when enough runs exist, at chaosMax, or at
	// the budget's deadline.
	r.began = time.Now()
	end := r.began.Add(chaosMax)
	if r.cfg.budget > 0 {
		r.deadline = r.start.Add(r.cfg.budget)
		if r.deadline.Before(end) {
			end = r.deadline
		}
	}
	phase, endPhase := context.WithDeadline(r.ctx, end)
	defer endPhase()
	reached := r.watchTarget(phase, endPhase)
	progressDone := r.logProgress(t, phase)
	r.startSlots(phase)
	r.letPeopleWrite(t, phase, endPhase)
	r.chaos = time.Since(r.began)
	r.why = phaseEnd(reached.Load(), phase.Err(), end, r.deadline)
	<-progressDone
}

// watchTarget ends the phase once lotse has cfg.target runs; the flag it
// returns says that it did.
func (r *chaosRun) watchTarget(phase context.Context, endPhase context.CancelFunc) *atomic.Bool {
	var reached atomic.Bool
	go func() {
		for phase.Err() == nil {
			var n int
			if err := r.b.Pool.QueryRow(r.ctx, `SELECT count(*) FROM runs WHERE agent_id = $1`, r.b.World.ID("lotse")).Scan(&n); err == nil && n >= r.cfg.target {
				reached.Store(true)
				endPhase()
				return
			}
			sleepCtx(phase, 250*time.Millisecond)
		}
	}()
	return &reached
}

// logProgress logs the progress every 15 s of the phase, so that a long
// run shows how it goes; the channel closes when it has stopped.
func (r *chaosRun) logProgress(t *testing.T, phase context.Context) <-chan struct{} {
	t.Helper()
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		for t0 := time.Now(); ; {
			select {
			case <-phase.Done():
				return
			case <-time.After(15 * time.Second):
			}
			t.Logf("chaos: %3.0fs: %s", time.Since(t0).Seconds(), progress(r.ctx, r.b, r.sup))
		}
	}()
	return progressDone
}

// startSlots starts the adapters: each slot runs one process at a time and
// kills it after a random life (schedule.run); once, a process that has
// just started a run is suspended past its lease, at a moment of the
// seed's stream 3 (schedule.suspendOne).
func (r *chaosRun) startSlots(phase context.Context) {
	r.sched = newSchedule(r.ctx, r.b, r.sup, r.cfg.seed, r.deadline)
	for slot := range slots {
		r.killers.Add(1)
		go func() {
			defer r.killers.Done()
			r.sched.run(slot)
		}()
	}
	r.suspendAt = 5*time.Second + time.Duration(rand.New(rand.NewPCG(r.cfg.seed, 3)).Int64N(int64(10*time.Second)))
	go r.sched.suspendOne(phase, r.suspendAt)
}

// letPeopleWrite runs the people: as many writers at once as writers
// says (people.converse, each with its own stream of the seed), until the
// phase ends. A writer that could not write ends the phase for all and
// fails t.
func (r *chaosRun) letPeopleWrite(t *testing.T, phase context.Context, endPhase context.CancelFunc) {
	t.Helper()
	stop := func() bool { return phase.Err() != nil }
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.ppl.converse(phase, rand.New(rand.NewPCG(r.cfg.seed, uint64(200+w))), stop); err != nil {
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
}

// phaseEnd says why the phase of chaos ended, for the log line of the
// run's duration: reached the target, the phase's end (the budget's
// deadline or chaosMax) or a person's error.
func phaseEnd(reached bool, err error, end, deadline time.Time) string {
	why := "at the run target"
	switch {
	case reached:
	case errors.Is(err, context.DeadlineExceeded) && end.Equal(deadline):
		why = "at the budget's deadline"
	case errors.Is(err, context.DeadlineExceeded):
		why = "after chaosMax"
	default:
		why = "by a person's error"
	}
	return why
}

// calmDown is the calm after the chaos: no more kills (a slot that owes
// its SDK's kill pays it, a suspension under way ends), one live process
// per slot, until every run has ended (at most settleMax); then the
// adapters stop (stopAdapters).
func (r *chaosRun) calmDown(t *testing.T) {
	t.Helper()
	close(r.sched.stop)
	r.killers.Wait()
	r.wound = time.Since(r.began) - r.chaos
	r.restartDead()
	r.calm = time.Now()
	r.left = waitSettled(r.ctx, r.b, settleMax, 20*time.Second, func() {
		t.Logf("chaos: no run has ended for 20 s of calm:\n%s", dumpActive(r.ctx, r.b, r.sup))
	})
	r.settled = time.Since(r.calm)
	if r.left != 0 {
		t.Logf("chaos: %d runs still active after %s of calm:\n%s", r.left, settleMax, dumpActive(r.ctx, r.b, r.sup))
	}
	r.stopAdapters()
	t.Logf("chaos: %s of chaos, then %s until every run ended (%d still active)", r.chaos.Round(time.Second), r.settled.Round(time.Second), r.left)
}

// restartDead starts a process in every slot whose last one is dead, so
// that the runs left by the chaos have adapters to end them.
func (r *chaosRun) restartDead() {
	r.sup.mu.Lock()
	var dead []int
	for slot := range slots {
		if p := r.sup.current[slot]; p == nil || !p.alive() {
			dead = append(dead, slot)
		}
	}
	r.sup.mu.Unlock()
	for _, slot := range dead {
		r.sup.start(slot, 999, transportOf(slot, 0))
	}
}

// stopAdapters ends every adapter process once the calm is over.
func (r *chaosRun) stopAdapters() {
	r.sup.mu.Lock()
	procs := append([]*proc(nil), r.sup.procs...)
	r.sup.mu.Unlock()
	for _, p := range procs {
		if r.left == 0 {
			// Every run ended: the processes stop as an operator stops
			// them, which must end no run.
			r.sup.stop(p)
		} else {
			// Runs are stuck: SIGTERM would fail them (adapter_stopped)
			// and blur what the table shows.
			r.sup.kill(p)
		}
	}
}

// report accounts for every run and request (account) and the
// suspension, logs the table and what explains it (logAccount) and the
// run's duration part by part, and fails t for each line of the table
// whose figure is not the wanted one.
func (r *chaosRun) report(t *testing.T) {
	t.Helper()
	res, err := account(r.ctx, r.b, r.ppl, r.model, r.sup, r.logDir, r.cfg.least)
	if err != nil {
		t.Fatalf("account: %v", err)
	}
	s := r.accountSuspension(res)
	res.add("seconds of chaos (people writing, adapters killed)", int(r.chaos.Round(time.Second).Seconds()))
	res.add("seconds from the last kill until every run ended", int(r.settled.Round(time.Second).Seconds()))
	r.logAccount(t, res, s)
	// The run's duration, part by part: make test prints this line of its
	// smoke (the Makefile greps "chaos: the run took").
	round := func(d time.Duration) time.Duration { return d.Round(100 * time.Millisecond) }
	t.Logf("chaos: the run took %s (budget %s): %s to start, %s of chaos (ended %s), %s until the kills and the suspension ended, %s until every run ended, %s to stop the adapters and account",
		round(time.Since(r.start)), r.budget, round(r.began.Sub(r.start)), round(r.chaos), r.why, round(r.wound), round(r.settled), round(time.Since(r.calm)-r.settled))
	for _, x := range res.failed() {
		t.Errorf("chaos: %s: %d, must be %s (seed %d)", x.what, x.got, x.want, r.cfg.seed)
	}
}

// accountSuspension adds the suspension's line to res: the run of a
// suspended process must have been taken over while it was stopped, and
// one suspension is due unless the chaos ended before its moment. It
// returns the suspension, nil for none.
func (r *chaosRun) accountSuspension(res *result) *suspension {
	s := r.sched.susp.Load()
	n := 0
	if s != nil {
		n = 1
		s.end(r.ctx, r.b)
		if !s.takenOver {
			res.detail("the suspended process's run %s was not taken over while it was stopped", s.runID)
		}
	}
	// A short run (CHAOS_RUNS) may end before the moment of the
	// suspension, and a budget may leave no room for its course after
	// that moment: it cannot be asked for one then.
	due := r.began.Add(r.suspendAt + 5*time.Second)
	if n == 0 && (r.chaos < r.suspendAt+5*time.Second || !r.deadline.IsZero() && r.deadline.Add(-suspendCourse).Before(due)) {
		res.add("adapter processes suspended past their lease (SIGSTOP, then SIGCONT; the chaos ended before its moment)", n)
	} else {
		res.must("adapter processes suspended past their lease (SIGSTOP, then SIGCONT)", n, 1)
	}
	return s
}

// logAccount logs the table and what explains its figures: the
// suspension's story (s, nil for none), the adapters' log lines by level
// and message, their first ERROR lines and the details of the account.
func (r *chaosRun) logAccount(t *testing.T, res *result, s *suspension) {
	t.Helper()
	t.Logf("chaos: seed %d\n\n%s", r.cfg.seed, res.table())
	if s != nil {
		t.Logf("chaos: suspension\n%s", s.story())
	}
	t.Logf("chaos: adapter log lines by level and message:\n%s", strings.Join(r.sup.messageCounts(), "\n"))
	r.sup.mu.Lock()
	errLines := r.sup.errors
	r.sup.mu.Unlock()
	if len(errLines) > 0 {
		t.Logf("chaos: ERROR lines of the adapters (%d):\n%s", len(errLines), strings.Join(errLines[:min(len(errLines), 40)], "\n"))
	}
	if len(res.details) > 0 {
		t.Logf("chaos: details:\n%s", strings.Join(res.details, "\n"))
	}
}

// schedule is the chaos of the slots: each runs one adapter process at a
// time, kills it with SIGKILL after a random life from its own stream of
// the seed, and restarts it, until stop is closed.
type schedule struct {
	ctx  context.Context
	b    *bothy
	sup  *supervisor
	seed uint64
	// deadline is the budget's (the zero time for none): the suspension
	// is over by it.
	deadline time.Time
	// stop ends the kills.
	stop chan struct{}
	// suspend asks a slot to suspend its process (suspendOne).
	suspend []chan suspendRequest
	// susp is the suspension, once there was one.
	susp atomic.Pointer[suspension]
}

func newSchedule(ctx context.Context, b *bothy, sup *supervisor, seed uint64, deadline time.Time) *schedule {
	s := &schedule{ctx: ctx, b: b, sup: sup, seed: seed, deadline: deadline, stop: make(chan struct{}), suspend: make([]chan suspendRequest, slots)}
	for slot := range slots {
		s.suspend[slot] = make(chan suspendRequest)
	}
	return s
}

// run is the life of one slot until stop closes; then it pays the kill
// the slot owes (owe).
func (s *schedule) run(slot int) {
	rng := rand.New(rand.NewPCG(s.seed, uint64(100+slot)))
	for gen := 0; ; gen++ {
		select {
		case <-s.stop:
			s.owe(slot, nil, gen)
			return
		default:
		}
		p := s.sup.start(slot, gen, transportOf(slot, gen))
		if !s.live(slot, p, rng) {
			s.owe(slot, p, gen+1)
			return
		}
		sleepCtx(s.ctx, time.Duration(rng.Int64N(int64(300*time.Millisecond))))
	}
}

// live runs p until its life ends (a kill), it exits by itself, or it
// is suspended past its lease (then killed); it reports false when stop
// closed first, with p left alive.
func (s *schedule) live(slot int, p *proc, rng *rand.Rand) bool {
	life := time.NewTimer(lifeMin + time.Duration(rng.Int64N(int64(lifeMax-lifeMin))))
	defer life.Stop()
	for {
		select {
		case <-life.C:
			s.sup.chaosKill(p)
			return true
		case <-p.done:
			if !p.killed.Load() {
				s.sup.exited(p)
			}
			return true
		case req := <-s.suspend[slot]:
			if req.rs.proc != p || !p.alive() {
				req.done <- false
				continue
			}
			var resumeBy time.Time
			if !s.deadline.IsZero() {
				resumeBy = s.deadline.Add(-suspendWatch)
			}
			sp := suspendPastLease(s.ctx, s.b, req.rs, resumeBy)
			req.done <- sp != nil
			if sp == nil {
				continue
			}
			s.susp.Store(sp)
			s.sup.chaosKill(p)
			return true
		case <-s.stop:
			return false
		}
	}
}

// owe keeps the schedule's promise to the SDK slots (issue 43: a chaos
// run with the Python and TypeScript examples among the killed
// processes): each kills a process of its SDK with SIGKILL at least once
// after it started serving. Random lives keep that promise in a long run
// many times over, but a short one (the smoke) may end before a life
// does, and a life of 0.2 s may end before an SDK's start. So a slot
// that has not kept it when the kills stop waits until its process serves
// (starting one, as generation gen, if p is nil or dead) and kills it
// then: the account's line for it cannot fail by the schedule's luck.
func (s *schedule) owe(slot int, p *proc, gen int) {
	if _, ok := sdkSlots[slot]; !ok || s.sup.servingKills(slot) > 0 {
		return
	}
	if p == nil || !p.alive() {
		p = s.sup.start(slot, gen, transportOf(slot, gen))
	}
	select {
	case <-p.serving:
	case <-p.done:
		if !p.killed.Load() {
			s.sup.exited(p)
		}
		return
	case <-time.After(servingMax):
		s.sup.t.Logf("chaos: %s did not start serving within %s; killed unserved", p.name, servingMax)
	}
	s.sup.chaosKill(p)
}

// suspendOne suspends, once, a process that has just started a run (its
// model works) past its lease: the first run start at suspendAt into the
// phase or after it. A run with a budget begins none later than
// suspendCourse before its deadline.
func (s *schedule) suspendOne(phase context.Context, suspendAt time.Duration) {
	sleepCtx(phase, suspendAt)
	for {
		select {
		case rs := <-s.sup.started:
			if !s.deadline.IsZero() && time.Now().After(s.deadline.Add(-suspendCourse)) {
				return
			}
			if time.Since(rs.at) > 300*time.Millisecond || !rs.proc.alive() {
				continue
			}
			req := suspendRequest{rs: rs, done: make(chan bool, 1)}
			select {
			case s.suspend[rs.proc.slot] <- req:
				if <-req.done {
					return
				}
			default:
			}
		case <-phase.Done():
			return
		}
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
// the run ended; at most suspendStopMax, and not past resumeBy unless that
// is the zero time), resumes it with SIGCONT and watches it for
// suspendWatch: it must notice that it lost the run and post nothing for it. It
// returns nil, after resuming the process at once, when the process no
// longer held the run when it stopped (on a loaded machine the notice may
// come late).
func suspendPastLease(ctx context.Context, b *bothy, rs runStart, resumeBy time.Time) *suspension {
	p := rs.proc
	s := &suspension{proc: p, holder: p.Holder(), runID: rs.runID, attempt: rs.attempt, stopped: time.Now()}
	_ = p.cmd.Process.Signal(syscall.SIGSTOP)
	var state, holder string
	if err := b.Pool.QueryRow(ctx, `SELECT state, coalesce(holder, '') FROM runs WHERE id = $1`, rs.runID).Scan(&state, &holder); err != nil ||
		state != "running" || holder != s.holder {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		return nil
	}
	s.awaitTakeover(ctx, b, resumeBy)
	p.mu.Lock()
	p.watch = true
	p.mu.Unlock()
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	s.resumed = time.Now()
	select {
	case <-p.done:
	case <-time.After(suspendWatch):
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

// awaitTakeover waits while the process is stopped until another holder
// holds its run or the run ended (takenOver), at most suspendStopMax and,
// unless it is the zero time, until resumeBy; it notes how the run was.
func (s *suspension) awaitTakeover(ctx context.Context, b *bothy, resumeBy time.Time) {
	for time.Since(s.stopped) < suspendStopMax && (resumeBy.IsZero() || time.Now().Before(resumeBy)) {
		time.Sleep(100 * time.Millisecond)
		var state, holder string
		var attempt int
		if err := b.Pool.QueryRow(ctx, `SELECT state, coalesce(holder, ''), attempt FROM runs WHERE id = $1`, s.runID).Scan(&state, &holder, &attempt); err != nil {
			continue
		}
		s.state, s.by, s.attemptThen = state, holder, attempt
		ended := state == "completed" || state == "failed" || state == "cancelled"
		if time.Since(s.stopped) > lease && (ended || holder != "" && holder != s.holder) {
			s.takenOver = true
			return
		}
	}
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
