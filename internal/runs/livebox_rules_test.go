package runs_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/devtools/runtest"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/runs"
	"bothy.example.com/bothy/internal/runs/domain"
)

// listenLive runs the runs module's own listener (runs.Hub.Listen on a
// connection of its own, as the server runs it) and its box writer
// (Service.RunLive) for env until the test ends, and returns once the
// listener is connected: live box updates are ordered by the notifications
// that listener hears, so without it an update is never decided.
func listenLive(t *testing.T, env *moduletest.Env) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	connect := func(ctx context.Context) (*pgx.Conn, error) { return pgx.Connect(ctx, env.DBURL) }
	go func() { defer wg.Done(); env.Modules.Hub.Listen(ctx, connect, time.Second, env.Log) }()
	go func() { defer wg.Done(); env.Runs.RunLive(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	wctx, wcancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer wcancel()
	if !env.Modules.Hub.RetryNow(wctx) {
		t.Fatal("the runs listener did not connect")
	}
}

// liveOf reads run's box through Service.Lives.
func liveOf(t *testing.T, env *moduletest.Env, run string) runs.Live {
	t.Helper()
	m, err := env.Runs.Lives(t.Context(), []string{run})
	if err != nil {
		t.Fatalf("lives: %v", err)
	}
	l, ok := m[run]
	if !ok {
		t.Fatalf("run %s has no live box", run)
	}
	return l
}

// nextLive returns the next change of sub, failing after ten seconds.
func nextLive(t *testing.T, sub *runs.LiveSubscription) runs.LiveEvent {
	t.Helper()
	select {
	case ev := <-sub.Events():
		return ev
	case <-sub.Full():
		t.Fatal("the live subscription fell behind")
	case <-time.After(10 * time.Second):
		t.Fatal("no live change arrived")
	}
	return runs.LiveEvent{}
}

// wantFieldError fails the test unless err is validation_failed with one
// field error pointer/code.
func wantFieldError(t *testing.T, what string, err error, pointer, code string) {
	t.Helper()
	p := problem.From("runs.wantFieldError", err)
	if p == nil || p.Code != problem.ValidationFailed || len(p.Fields) != 1 || p.Fields[0].Pointer != pointer || p.Fields[0].Code != code {
		t.Fatalf("%s: %v, want validation_failed %s %s", what, err, pointer, code)
	}
}

// liveUpdater sends an update of one run's box as who, held by h.
type liveUpdater = func(who string, h runs.Holder, u runs.LiveUpdate) (runs.Live, error)

// checkNewLiveBox fails the test unless the box of run, which has had no
// update, is version 0, empty, not done, never updated, and names its run
// and an anchor.
func checkNewLiveBox(t *testing.T, env *moduletest.Env, run string) {
	t.Helper()
	if l := liveOf(t, env, run); l.Version != 0 || l.Text != "" || l.Done || !l.UpdatedAt.IsZero() || l.RunID != run || l.AnchorID == "" {
		t.Fatalf("a new box: %+v", l)
	}
}

// checkFirstLiveUpdates sends the holder's first two updates of run's box
// (append with a status, then replace and append) and fails the test
// unless each adds one version with the text and status they make, Lives
// answers version 2 with the same anchor, and nothing was written to the
// database yet (the flush interval is an hour).
func checkFirstLiveUpdates(t *testing.T, env *moduletest.Env, run string, update liveUpdater) {
	t.Helper()
	l, err := update("lotse", holder, runs.LiveUpdate{BaseVersion: 0, Append: "The printer ", Status: strPtr("checking the queue")})
	if err != nil || l.Version != 1 || l.Text != "The printer " || l.Status != "checking the queue" || l.UpdatedAt.IsZero() {
		t.Fatalf("first update: %+v %v", l, err)
	}
	anchor := l.AnchorID
	if l, err = update("lotse", holder, runs.LiveUpdate{BaseVersion: 1, Replace: strPtr("Printer "), Append: "is back."}); err != nil || l.Version != 2 || l.Text != "Printer is back." || l.Status != "checking the queue" {
		t.Fatalf("replace and append: %+v %v", l, err)
	}
	if l := liveOf(t, env, run); l.Version != 2 || l.Text != "Printer is back." || l.AnchorID != anchor {
		t.Fatalf("Lives before any write: %+v", l)
	}
	if n := env.Count(`SELECT version FROM run_live WHERE run_id = $1`, run); n != 0 {
		t.Fatalf("an update was written to the database: stored version %d", n)
	}
}

// checkDoneAndReopen finishes the box at version 2 and fails the test
// unless done keeps its text as version 3 and an update without done
// opens it again as version 4.
func checkDoneAndReopen(t *testing.T, update liveUpdater) {
	t.Helper()
	if l, err := update("lotse", holder, runs.LiveUpdate{BaseVersion: 2, Done: true}); err != nil || l.Version != 3 || !l.Done || l.Text != "Printer is back." {
		t.Fatalf("done: %+v %v", l, err)
	}
	if l, err := update("lotse", holder, runs.LiveUpdate{BaseVersion: 3, Append: " More."}); err != nil || l.Version != 4 || l.Done || l.Text != "Printer is back. More." {
		t.Fatalf("reopened: %+v %v", l, err)
	}
}

// TestLiveBoxRules_Update pins the updates of a run's live box on the runs
// service (docs/design/runs.md#live-box): a new box is version 0 and
// empty; a queued run takes no update (run_not_started); the holder's
// updates each add one version (replace, then append; status replaced);
// Lives answers the latest version although nothing was written yet (the
// flush interval is an hour); a stale base version is conflict
// live_version naming the current version; another holder and no holder
// are run_claimed, another agent not_found and a person forbidden
// subject_kind_not_allowed; a status over 200 bytes, an append over
// run.live_max_bytes and an append that would make the text longer than it
// are invalid input; done finishes the box and an update without it opens
// it again; none of the refusals changes the box. An answer naming the
// run empties the box (done, status kept); once the run ended the box
// takes no update (run_not_active) and the stored copy holds the final box.
func TestLiveBoxRules_Update(t *testing.T) {
	t.Parallel()
	env := moduletest.Build(t, moduletest.Options{Config: map[string]string{"run.live_flush_interval": "1h", "run.live_max_bytes": "40"}})
	listenLive(t, env)
	ctx := t.Context()
	lotse := env.Principal("lotse")
	esk := env.Main("Support/Eskalation")
	run := runtest.RunOf(t, env, env.Post("alex", esk, "lr-q", "@lotse is the printer back?"))
	update := func(who string, h runs.Holder, u runs.LiveUpdate) (runs.Live, error) {
		return env.Runs.UpdateLive(ctx, env.Principal(who), run, h, u)
	}

	checkNewLiveBox(t, env, run)
	_, err := update("lotse", holder, runs.LiveUpdate{Append: "early"})
	wantConflict(t, "update of a queued run", err, "run_not_started")
	runtest.StartAs(t, env, "lotse", run)
	checkFirstLiveUpdates(t, env, run, update)

	checkLiveRefusals(t, update)
	if l := liveOf(t, env, run); l.Version != 2 || l.Text != "Printer is back." || l.Done {
		t.Fatalf("refused updates changed the box: %+v", l)
	}
	checkDoneAndReopen(t, update)

	// The answer empties the box in its commit.
	if _, _, err := env.Messaging.Create(ctx, lotse, runtest.ReadRun(t, env, "lotse", run).ThreadID, messaging.Input{ClientMsgID: "lr-answer", ContentMD: "Printer is back. More.", RunID: run, Holder: holder}); err != nil {
		t.Fatalf("answer: %v", err)
	}
	if l := liveOf(t, env, run); l.Version != 5 || l.Text != "" || !l.Done || l.Status != "checking the queue" {
		t.Fatalf("box after the answer: %+v", l)
	}
	runtest.FinishAs(t, env, "lotse", run, domain.RunCompleted)
	_, err = update("lotse", holder, runs.LiveUpdate{BaseVersion: 5, Append: "x"})
	wantConflict(t, "update of an ended run", err, "run_not_active")
	waitStoredDone(t, env, run, 5)
}

// strPtr returns a pointer to s.
func strPtr(s string) *string { return &s }

// checkLiveRefusals sends the updates of TestLiveBoxRules_Update that are
// refused on a box at version 2: a stale base version (conflict
// live_version naming version 2), another holder and no holder
// (run_claimed), another agent (not_found), a person (forbidden
// subject_kind_not_allowed), a status over 200 bytes, an append over
// run.live_max_bytes (40) and an append that would make the text longer.
func checkLiveRefusals(t *testing.T, update liveUpdater) {
	t.Helper()
	_, err := update("lotse", holder, runs.LiveUpdate{BaseVersion: 1, Append: "again"})
	if p := problem.From("runs.TestLiveBoxRules_Update", err); p == nil || p.Code != problem.Conflict || p.Reason != "live_version" || p.CurrentVersion == nil || *p.CurrentVersion != 2 {
		t.Fatalf("stale version: %v", err)
	}
	for _, h := range []string{"proc-b", ""} {
		_, err = update("lotse", runs.Holder(h), runs.LiveUpdate{BaseVersion: 2, Append: "x"})
		runtest.WantClaimed(t, "update by holder "+h, err)
	}
	if _, err = update("texter", holder, runs.LiveUpdate{BaseVersion: 2, Append: "x"}); problem.CodeOf(err) != problem.NotFound {
		t.Fatalf("another agent: %v", err)
	}
	_, err = update("alex", holder, runs.LiveUpdate{BaseVersion: 2, Append: "x"})
	if p := problem.From("runs.TestLiveBoxRules_Update", err); p == nil || p.Code != problem.Forbidden || p.Reason != "subject_kind_not_allowed" {
		t.Fatalf("a person: %v", err)
	}
	_, err = update("lotse", holder, runs.LiveUpdate{BaseVersion: 2, Status: strPtr(strings.Repeat("s", 201))})
	wantFieldError(t, "long status", err, "/status", "too_long")
	_, err = update("lotse", holder, runs.LiveUpdate{BaseVersion: 2, Append: strings.Repeat("a", 41)})
	wantFieldError(t, "append over the limit", err, "/append", "too_long")
	_, err = update("lotse", holder, runs.LiveUpdate{BaseVersion: 2, Append: strings.Repeat("a", 30)})
	wantFieldError(t, "text over the limit", err, "/append", "too_long")
}

// waitStoredDone waits until the stored copy of run's box is done at
// version v, failing after ten seconds without a write.
func waitStoredDone(t *testing.T, env *moduletest.Env, run string, v int) {
	t.Helper()
	for {
		_, next := env.Runs.LiveWrites()
		if got := env.Count(`SELECT coalesce((SELECT version FROM run_live WHERE run_id = $1 AND done), -1)`, run); got == v {
			return
		}
		select {
		case <-next:
		case <-time.After(10 * time.Second):
			t.Fatal("the final box was never stored")
		}
	}
}

// appendSixPieces appends six words to run's box as its holder, one
// update a version, fails the test unless each adds one version, and
// returns the text they make.
func appendSixPieces(t *testing.T, env *moduletest.Env, run string) string {
	t.Helper()
	var want strings.Builder
	for v := 0; v < 6; v++ {
		piece := "word" + string(rune('a'+v)) + " "
		l, err := env.Runs.UpdateLive(t.Context(), env.Principal("lotse"), run, holder, runs.LiveUpdate{BaseVersion: v, Append: piece})
		if err != nil || l.Version != v+1 {
			t.Fatalf("update %d: %+v %v", v, l, err)
		}
		want.WriteString(piece)
	}
	return want.String()
}

// readSixChanges reads the six changes of appendSixPieces from sub, fails
// the test unless they come in version order with run, thread and anchor
// and append only, and returns the text they make.
func readSixChanges(t *testing.T, sub *runs.LiveSubscription, run, thread string) string {
	t.Helper()
	text := ""
	for v := 1; v <= 6; v++ {
		ev := nextLive(t, sub)
		if ev.RunID != run || ev.ThreadID != thread || ev.MessageID == "" || ev.Delta.Version != v || ev.Delta.Replace != nil {
			t.Fatalf("change %d: %+v", v, ev)
		}
		text += ev.Delta.Append
	}
	return text
}

// checkResumedSince3 fails the test unless Since(run, 3) hands a reader
// at version 3 the three later changes in order, which make want of what
// it holds.
func checkResumedSince3(t *testing.T, sub *runs.LiveSubscription, run, want string) {
	t.Helper()
	since := sub.Since(run, 3)
	if len(since) != 3 {
		t.Fatalf("since 3: %d changes", len(since))
	}
	resumed := "worda wordb wordc " // what a reader at version 3 holds
	for i, ev := range since {
		if ev.Delta.Version != 4+i || ev.RunID != run {
			t.Fatalf("since 3, change %d: %+v", i, ev)
		}
		resumed += ev.Delta.Append
	}
	if resumed != want {
		t.Fatalf("resumed from version 3: %q", resumed)
	}
}

// TestLiveBoxRules_SubscribeOrder pins the readers' side of the live box on
// the runs service (docs/design/runs.md#live-box): a subscription gets
// every change of the box in version order, each once, with the run, the
// anchor and the thread; Since(run, V) hands a reader that read version V
// the changes after it (none when it is current); the answer's change
// replaces the text with nothing and is done.
func TestLiveBoxRules_SubscribeOrder(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	listenLive(t, env)
	ctx := t.Context()
	lotse := env.Principal("lotse")
	run := runtest.RunOf(t, env, env.Post("alex", env.Main("Support/Eskalation"), "ls-q", "@lotse write me a long answer"))
	r := runtest.StartAs(t, env, "lotse", run)
	sub := env.Runs.SubscribeLive(64)
	defer sub.Close()
	want := appendSixPieces(t, env, run)
	if text := readSixChanges(t, sub, run, r.ThreadID); text != want {
		t.Fatalf("the reader holds %q, want %q", text, want)
	}
	checkResumedSince3(t, sub, run, want)
	if cur := sub.Since(run, 6); len(cur) != 0 {
		t.Fatalf("a current reader got %d changes", len(cur))
	}
	if _, _, err := env.Messaging.Create(ctx, lotse, r.ThreadID, messaging.Input{ClientMsgID: "ls-answer", ContentMD: want, RunID: run, Holder: holder}); err != nil {
		t.Fatalf("answer: %v", err)
	}
	ev := nextLive(t, sub)
	if ev.Delta.Version != 7 || !ev.Delta.Done || ev.Delta.Replace == nil || *ev.Delta.Replace != "" || ev.Delta.Append != "" {
		t.Fatalf("the answer's change: %+v", ev.Delta)
	}
	select {
	case ev := <-sub.Events():
		t.Fatalf("a change after the answer's: %+v", ev)
	default:
	}
}
