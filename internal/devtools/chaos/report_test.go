//go:build chaos

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// runRow is a run of lotse as stored.
type runRow struct {
	ID, Thread, Trigger, State, EndReason string
	Attempt                               int
	TriggerSeq                            int64
}

// active reports whether the run has not ended.
func (r runRow) active() bool {
	return r.State == "queued" || r.State == "running" || r.State == "waiting_input"
}

// followRow is a follow-up of a run of lotse as stored (after every move
// between runs).
type followRow struct {
	Run, Message, State, DropReason string
	Delivered                       bool
	Seq                             int64
}

// answerRow is a text message of lotse: an answer when its key is
// answer-<run id>-<message id>.
type answerRow struct {
	ID, Key, Thread, Content string
	// Listed is the run whose run_answers lists it ("" for none: an
	// answer sent without runId after its run ended).
	Listed string
}

// key is an answer key taken apart.
type key struct {
	run, request string // request "" for the older per-run key answer-<run id>
}

// parseKey takes an answer key apart (agent.AnswerKey in sdk/agent); ok
// is false for any other client message id.
func parseKey(k string) (key, bool) {
	rest, ok := strings.CutPrefix(k, "answer-")
	if !ok || len(rest) < 36 {
		return key{}, false
	}
	if len(rest) == 36 {
		return key{run: rest}, true
	}
	if rest[36] != '-' || len(rest) != 73 {
		return key{}, false
	}
	return key{run: rest[:36], request: rest[37:]}, true
}

// row is one line of the result table.
type row struct {
	what string
	got  int
	// want is the figure the line must have ("" for a line that only
	// informs); ok says whether got is it.
	want string
	ok   bool
}

// result is what the test found, with the details behind every failed
// line.
type result struct {
	rows    []row
	details []string
}

// add is a line that only informs.
func (r *result) add(what string, got int) {
	r.rows = append(r.rows, row{what: what, got: got, ok: true})
}

// must is a line whose figure must be want.
func (r *result) must(what string, got, want int) {
	r.rows = append(r.rows, row{what: what, got: got, want: fmt.Sprint(want), ok: got == want})
}

// atLeast is a line whose figure must be least or more.
func (r *result) atLeast(what string, got, least int) {
	r.rows = append(r.rows, row{what: what, got: got, want: fmt.Sprintf("at least %d", least), ok: got >= least})
}

func (r *result) detail(format string, args ...any) {
	if len(r.details) < 200 {
		r.details = append(r.details, fmt.Sprintf(format, args...))
	}
}

// failed returns the lines whose figure is not the wanted one.
func (r *result) failed() []row {
	var out []row
	for _, x := range r.rows {
		if !x.ok {
			out = append(out, x)
		}
	}
	return out
}

// table renders the rows as a Markdown table.
func (r *result) table() string {
	var b strings.Builder
	b.WriteString("| what | count | must be |\n| --- | ---: | --- |\n")
	for _, x := range r.rows {
		want := x.want
		if !x.ok {
			want += " **failed**"
		}
		fmt.Fprintf(&b, "| %s | %d | %s |\n", x.what, x.got, want)
	}
	return b.String()
}

// account reads every run, follow-up and answer of lotse from the database
// and the API once every process has stopped, and checks that every run
// ended once and every request has exactly one answer.
func account(ctx context.Context, b *bothy, ppl *people, model *fakeModel, sup *supervisor, logDir string, minRuns int) (*result, error) {
	res := &result{}
	lotse := b.World.ID("lotse")

	var runs []runRow
	rows, err := b.Pool.Query(ctx, `SELECT r.id::text, r.thread_id::text, coalesce(r.triggering_message_id::text, ''), r.state, coalesce(r.end_reason, ''),
		r.attempt, coalesce(m.thread_seq, 0) FROM runs r LEFT JOIN messages m ON m.id = r.triggering_message_id WHERE r.agent_id = $1 ORDER BY r.queued_at`, lotse)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var x runRow
		if err := rows.Scan(&x.ID, &x.Thread, &x.Trigger, &x.State, &x.EndReason, &x.Attempt, &x.TriggerSeq); err != nil {
			return nil, err
		}
		runs = append(runs, x)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	byID := map[string]runRow{}
	for _, r := range runs {
		byID[r.ID] = r
	}

	var follows []followRow
	rows, err = b.Pool.Query(ctx, `SELECT f.run_id::text, f.message_id::text, f.state, coalesce(f.drop_reason, ''), f.delivered_at IS NOT NULL, m.thread_seq
		FROM run_followups f JOIN runs r ON r.id = f.run_id JOIN messages m ON m.id = f.message_id WHERE r.agent_id = $1`, lotse)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var x followRow
		if err := rows.Scan(&x.Run, &x.Message, &x.State, &x.DropReason, &x.Delivered, &x.Seq); err != nil {
			return nil, err
		}
		follows = append(follows, x)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}

	var answers []answerRow
	rows, err = b.Pool.Query(ctx, `SELECT m.id::text, coalesce(m.client_msg_id, ''), m.thread_id::text, m.content_md, coalesce(a.run_id::text, '')
		FROM messages m LEFT JOIN run_answers a ON a.message_id = m.id WHERE m.author_principal_id = $1 AND m.kind = 'text' ORDER BY m.created_at`, lotse)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var x answerRow
		if err := rows.Scan(&x.ID, &x.Key, &x.Thread, &x.Content, &x.Listed); err != nil {
			return nil, err
		}
		answers = append(answers, x)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}

	// How often each run reached an end state, and whether its state
	// changed again after the first end (event_log keeps every
	// run.state_changed with the run as payload).
	ends, after := map[string]int{}, map[string]int{}
	rows, err = b.Pool.Query(ctx, `WITH e AS (SELECT seq, payload->>'id' AS run, payload->>'state' AS state FROM event_log WHERE type = 'run.state_changed'),
		f AS (SELECT run, min(seq) AS seq FROM e WHERE state IN ('completed', 'failed', 'cancelled') GROUP BY run)
		SELECT e.run, count(*) FILTER (WHERE e.state IN ('completed', 'failed', 'cancelled')), count(*) FILTER (WHERE e.seq > f.seq)
		FROM e JOIN f ON f.run = e.run GROUP BY e.run`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var id string
		var n, m int
		if err := rows.Scan(&id, &n, &m); err != nil {
			return nil, err
		}
		ends[id], after[id] = n, m
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}

	// The requests of each run in order: its trigger, then its follow-ups
	// by their place in the thread (the order of the run context). A
	// follow-up moved to the next run when its run ended (run_followups
	// then names the next run) stays a request of the run it came to
	// first: the agent.followup events keep both.
	member := map[[2]string]int64{}
	for _, f := range follows {
		member[[2]string{f.Run, f.Message}] = f.Seq
	}
	rows, err = b.Pool.Query(ctx, `SELECT DISTINCT e.run_id::text, e.message_id::text, m.thread_seq FROM agent_events e JOIN messages m ON m.id = e.message_id
		WHERE e.agent_id = $1 AND e.type = 'agent.followup'`, lotse)
	if err != nil {
		return nil, err
	}
	moved := 0
	for rows.Next() {
		var run, msg string
		var seq int64
		if err := rows.Scan(&run, &msg, &seq); err != nil {
			return nil, err
		}
		if _, ok := member[[2]string{run, msg}]; !ok {
			member[[2]string{run, msg}] = seq
			moved++
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	type item struct {
		run, msg string
		seq      int64
	}
	var items []item
	for k, seq := range member {
		items = append(items, item{k[0], k[1], seq})
	}
	sort.Slice(items, func(i, j int) bool { return items[i].seq < items[j].seq })
	requests := map[string][]string{}
	for _, r := range runs {
		requests[r.ID] = []string{r.Trigger}
	}
	for _, it := range items {
		requests[it.run] = append(requests[it.run], it.msg)
	}

	// Runs.
	created, endedOnce, stuck, completed := len(runs), 0, 0, 0
	takeovers, maxAttempt := 0, 0
	endReasons := map[string]int{}
	for _, r := range runs {
		switch {
		case r.active():
			stuck++
			res.detail("stuck run %s: %s, attempt %d", r.ID, r.State, r.Attempt)
		case ends[r.ID] == 1 && after[r.ID] == 0:
			endedOnce++
		default:
			res.detail("run %s (%s %s) reached an end %d times, changed %d times after its first end", r.ID, r.State, r.EndReason, ends[r.ID], after[r.ID])
		}
		if r.State == "completed" {
			completed++
		} else if !r.active() {
			endReasons[r.State+" "+r.EndReason]++
			res.detail("run %s ended %s with reason %q", r.ID, r.State, r.EndReason)
		}
		if r.Attempt > 1 {
			takeovers++
		}
		maxAttempt = max(maxAttempt, r.Attempt)
	}

	// Answers: each covers the requests of its run after the one the
	// run's previous answer is keyed by, up to its own key's request
	// (agent.AnswerKey: one answer may cover several requests and is
	// keyed by the last of them).
	type keyed struct {
		a   answerRow
		idx int
	}
	perRun := map[string][]keyed{}
	unkeyed, badKey, misfiled := 0, 0, 0
	for _, a := range answers {
		k, ok := parseKey(a.Key)
		if !ok {
			unkeyed++
			res.detail("message %s of lotse has no answer key: %q", a.ID, a.Key)
			continue
		}
		if a.Listed != "" && a.Listed != k.run {
			misfiled++
			res.detail("answer %s (%s) is listed under run %s", a.ID, a.Key, a.Listed)
		}
		if r, ok := byID[k.run]; ok && r.Thread != a.Thread {
			misfiled++
			res.detail("answer %s (%s) is in thread %s, its run in %s", a.ID, a.Key, a.Thread, r.Thread)
		}
		reqs, known := requests[k.run]
		idx := 0
		if k.request != "" {
			idx = slices.Index(reqs, k.request)
		}
		if !known || idx < 0 {
			badKey++
			res.detail("answer %s has key %s, which names no request of a run", a.ID, a.Key)
			continue
		}
		perRun[k.run] = append(perRun[k.run], keyed{a, idx})
	}
	tagOf := map[string]string{}
	for _, p := range ppl.all() {
		tagOf[p.ID] = p.Tag
	}
	answered := map[string]int{} // request message id: answers that cover it
	textMismatch, repeated := 0, 0
	for runID, list := range perRun {
		sort.SliceStable(list, func(i, j int) bool { return list[i].idx < list[j].idx })
		reqs := requests[runID]
		prev := -1
		for _, k := range list {
			from := prev + 1
			if k.idx <= prev {
				// A second answer keyed by a request an earlier answer
				// covers already: that request is answered again.
				from = k.idx
			}
			for i := from; i <= k.idx; i++ {
				answered[reqs[i]]++
			}
			// The text names the requests the model saw: it must hold
			// every request the key newly covers and none after the key's.
			said := map[string]bool{}
			for _, tag := range tagPattern.FindAllString(k.a.Content, -1) {
				said[tag] = true
			}
			for i := from; i <= k.idx; i++ {
				if !said[tagOf[reqs[i]]] {
					textMismatch++
					res.detail("answer %s (%s) is keyed past request %s (%s), which its text does not answer", k.a.ID, k.a.Key, reqs[i], tagOf[reqs[i]])
				}
			}
			for i := k.idx + 1; i < len(reqs); i++ {
				if said[tagOf[reqs[i]]] {
					textMismatch++
					res.detail("answer %s (%s) answers request %s (%s), which is after its key", k.a.ID, k.a.Key, reqs[i], tagOf[reqs[i]])
				}
			}
			for i := 0; i < from; i++ {
				if said[tagOf[reqs[i]]] {
					repeated++
				}
			}
			prev = max(prev, k.idx)
		}
	}

	// Requests: the messages the people wrote that the server took as a
	// trigger or a follow-up, each of which must have one answer.
	inDB := map[string]bool{}
	for _, reqs := range requests {
		for _, id := range reqs {
			inDB[id] = true
		}
	}
	written, refused, unknown := 0, 0, 0
	once, none, twice := 0, 0, 0
	writtenIDs := map[string]bool{}
	for _, p := range ppl.all() {
		if p.State != "ACCEPTED" && p.State != "FOLLOWUP" {
			refused++
			res.detail("request %s (%s) was refused: %s %s", p.ID, p.Tag, p.State, p.Reason)
			continue
		}
		written++
		writtenIDs[p.ID] = true
		if !inDB[p.ID] {
			unknown++
			res.detail("request %s (%s, %s) is neither a run's trigger nor a follow-up", p.ID, p.Tag, p.State)
		}
		switch n := answered[p.ID]; n {
		case 1:
			once++
		case 0:
			none++
			res.detail("request %s (%s, written %s) has no answer", p.ID, p.Tag, p.State)
		default:
			twice++
			res.detail("request %s (%s) has %d answers", p.ID, p.Tag, n)
		}
	}
	foreign := 0
	for id := range inDB {
		if !writtenIDs[id] {
			foreign++
			res.detail("request %s of the database was not written by the test", id)
		}
	}

	// Follow-ups.
	fuWritten, fuDuring := 0, 0
	for _, p := range ppl.all() {
		if p.State == "FOLLOWUP" {
			fuWritten++
			if p.During {
				fuDuring++
			}
		}
	}
	fuStates := map[string]int{}
	lost, fuTwice := 0, 0
	promotedTo := map[string]string{}
	for _, r := range runs {
		promotedTo[r.Trigger] = r.ID
	}
	for _, f := range follows {
		fuStates[f.State]++
		n := answered[f.Message]
		switch {
		case n >= 2:
			fuTwice++
			res.detail("follow-up %s (%s) of run %s, %s: %d answers", f.Message, tagOf[f.Message], f.Run, f.State, n)
		case n == 0 && byID[f.Run].active():
			// Not lost yet: its run is stuck, and counted so.
			res.detail("follow-up %s (%s) waits in stuck run %s: %s, delivered %v", f.Message, tagOf[f.Message], f.Run, f.State, f.Delivered)
		case n == 0:
			lost++
			res.detail("follow-up %s (%s) of run %s is lost: %s (%s), delivered %v, no answer", f.Message, tagOf[f.Message], f.Run, f.State, f.DropReason, f.Delivered)
		case f.State == "promoted" && promotedTo[f.Message] == "":
			lost++
			res.detail("follow-up %s (%s) of run %s is promoted but triggers no run", f.Message, tagOf[f.Message], f.Run)
		}
	}

	// The API must tell the same: every run ended, with the answers of
	// run_answers.
	apiDiffers := 0
	listed := map[string][]string{}
	for _, a := range answers {
		if a.Listed != "" {
			listed[a.Listed] = append(listed[a.Listed], a.ID)
		}
	}
	for _, r := range runs {
		var got struct {
			State   string `json:"state"`
			Answers []struct {
				MessageID   string `json:"message_id"`
				ClientMsgID string `json:"client_msg_id"`
			} `json:"answers"`
		}
		if err := ppl.rest(ctx, "lotse", "/api/v1/runs/"+r.ID, &got); err != nil {
			apiDiffers++
			res.detail("API: run %s: %v", r.ID, err)
			continue
		}
		var ids []string
		for _, a := range got.Answers {
			ids = append(ids, a.MessageID)
		}
		want := listed[r.ID]
		slices.Sort(ids)
		slices.Sort(want)
		if got.State != r.State || !slices.Equal(ids, want) {
			apiDiffers++
			res.detail("API: run %s is %s with answers %v; the database says %s with %v", r.ID, got.State, ids, r.State, want)
		}
	}

	prompts := model.prompts()
	aborted, unparsed, withFollowUps := 0, 0, 0
	for _, p := range prompts {
		if p.Aborted {
			aborted++
		}
		if p.Unparsed {
			unparsed++
		}
		if len(p.Requests) > 1 {
			withFollowUps++
		}
	}
	sup.mu.Lock()
	kills, procs, ws, selfExits := sup.kills, len(sup.procs), 0, len(sup.selfExits)
	for _, p := range sup.procs {
		if p.transport == "ws" {
			ws++
		}
	}
	for _, e := range sup.selfExits {
		res.detail("adapter exited by itself: %s", e)
	}
	sup.mu.Unlock()

	res.atLeast("runs created", created, minRuns)
	res.must("runs ended exactly once (final state, one end event, no change after it)", endedOnce, created)
	res.add("runs completed", completed)
	res.must("runs stuck (still active at the end)", stuck, 0)
	res.add("runs taken over (attempt > 1)", takeovers)
	res.add("highest attempt of a run", maxAttempt)
	res.add("requests written (triggers and follow-ups)", written)
	res.must("requests answered exactly once", once, written)
	res.must("requests without an answer", none, 0)
	res.must("requests answered more than once", twice, 0)
	res.add("follow-ups written", fuWritten)
	res.add("follow-ups written while their thread's run was running", fuDuring)
	res.add("follow-ups absorbed by their run", fuStates["absorbed"])
	res.add("follow-ups promoted to a next run", fuStates["promoted"])
	res.add("follow-ups moved to a next run", moved)
	res.must("follow-ups lost", lost, 0)
	res.must("follow-ups answered twice", fuTwice, 0)
	res.must("messages refused as a trigger", refused, 0)
	res.must("requests the server does not know, or the test did not write", unknown+foreign, 0)
	res.must("answers without a key, with a key of no request, or in another run or thread", unkeyed+badKey+misfiled, 0)
	res.must("answers whose text disagrees with their key", textMismatch, 0)
	res.add("requests repeated in a later answer of their run (takeover after a partial answer)", repeated)
	res.must("runs whose state or answers differ between API and database", apiDiffers, 0)
	res.add("model requests", len(prompts))
	res.add("model requests aborted by a killed adapter", aborted)
	res.add("model requests with follow-ups in the prompt", withFollowUps)
	res.must("model requests without a trigger block", unparsed, 0)
	res.add("adapter processes started", procs)
	res.add("adapter processes started with --transport ws", ws)
	res.add("adapter processes killed with SIGKILL", kills)
	sdkLines(res, sup, prompts)
	res.must("adapter processes that exited by themselves", selfExits, 0)
	res.add("adapter runs that posted before their follow-ups were delivered (DeliveryWait ran out)",
		sup.count("WARN", "follow-ups not delivered in time; answering anyway, the server may answer them again in a next run"))
	for _, x := range serverLines(logDir) {
		res.add("server log: "+x.msg, x.n)
	}
	for reason, n := range endReasons {
		res.detail("%d runs ended %s", n, reason)
	}
	return res, nil
}

// sdkLines are the lines of the SDKs' examples (issue 43: a chaos run with
// the Python and TypeScript examples among the killed processes answers
// every request exactly once), by the name their slot gives them: how many
// processes started, how many the schedule killed with SIGKILL after they
// had started serving (schedule.owe makes that at least one, in a short
// run too) and before, and how many of their model requests a kill cut
// off (aborted once the kill was sent: the kernel closes a killed
// process's connections at once, while an abort of the adapter's own, on
// a lost claim for example, comes before any kill): the kills that hit a
// run while its model worked.
func sdkLines(res *result, sup *supervisor, prompts []prompt) {
	sup.mu.Lock()
	byName := map[string]*proc{}
	started, serving, early := map[string]int{}, map[string]int{}, map[string]int{}
	for _, p := range sup.procs {
		byName[p.name] = p
		if _, ok := sup.sdks[p.transport]; !ok {
			continue
		}
		started[p.transport]++
		switch {
		case !p.scheduled.Load():
		case p.served():
			serving[p.transport]++
		default:
			early[p.transport]++
		}
	}
	sup.mu.Unlock()
	cut := map[string]int{}
	for _, pr := range prompts {
		p := byName[pr.Proc]
		if p == nil || !pr.Aborted || !p.scheduled.Load() {
			continue
		}
		p.mu.Lock()
		killedAt := p.killedAt
		p.mu.Unlock()
		if !pr.Ended.Before(killedAt) {
			cut[p.transport]++
		}
	}
	for _, kind := range []string{"python", "typescript"} {
		res.atLeast("processes of the "+kind+" SDK's model example started", started[kind], 1)
		res.atLeast("processes of the "+kind+" SDK's model example killed with SIGKILL while serving", serving[kind], 1)
		res.add("processes of the "+kind+" SDK's model example killed with SIGKILL before they served", early[kind])
		res.add("model requests of the "+kind+" SDK's model example cut off by its SIGKILL", cut[kind])
	}
}

// waitSettled waits until lotse has no active run, at most d; it returns
// the active runs left. When no run has ended for stalled while some are
// active, it calls onStall once (to describe what holds them up).
func waitSettled(ctx context.Context, b *bothy, d, stalled time.Duration, onStall func()) int {
	end := time.Now().Add(d)
	lastEnded, lastChange, reported := -1, time.Now(), false
	for {
		var active, ended int
		if err := b.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state IN ('queued', 'running', 'waiting_input')),
			count(*) FILTER (WHERE state NOT IN ('queued', 'running', 'waiting_input')) FROM runs WHERE agent_id = $1`,
			b.World.ID("lotse")).Scan(&active, &ended); err != nil {
			return -1
		}
		if active == 0 || time.Now().After(end) {
			return active
		}
		if ended != lastEnded {
			lastEnded, lastChange = ended, time.Now()
		} else if !reported && time.Since(lastChange) > stalled {
			reported = true
			onStall()
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// dumpActive describes what holds the active runs up: the agent's
// acknowledged position, every active run with its holder (named by
// process) and follow-ups, and the first events after the position, each
// with the state of its run. It is printed when the runs did not settle.
func dumpActive(ctx context.Context, b *bothy, sup *supervisor) string {
	lotse := b.World.ID("lotse")
	names := map[string]string{}
	sup.mu.Lock()
	for _, p := range sup.procs {
		alive := "dead"
		if p.alive() {
			alive = "alive"
		}
		names[p.Holder()] = p.name + " " + alive
	}
	sup.mu.Unlock()
	var out strings.Builder
	var acked int64
	_ = b.Pool.QueryRow(ctx, `SELECT coalesce(max(acked_seq), 0) FROM agent_cursors WHERE agent_id = $1`, lotse).Scan(&acked)
	fmt.Fprintf(&out, "acknowledged position %d\n", acked)
	rows, err := b.Pool.Query(ctx, `SELECT r.id::text, r.state, coalesce(r.holder, ''), r.attempt, coalesce(to_char(r.lease_expires_at, 'HH24:MI:SS.MS'), ''),
		coalesce((SELECT string_agg(f.message_id::text || ' ' || f.state || CASE WHEN f.delivered_at IS NULL THEN '' ELSE ' delivered' END
			|| ' seq ' || coalesce((SELECT max(e.seq) FROM agent_events e WHERE e.run_id = f.run_id AND e.message_id = f.message_id AND e.type = 'agent.followup')::text, '?'), '; ')
			FROM run_followups f WHERE f.run_id = r.id), '')
		FROM runs r WHERE r.agent_id = $1 AND r.state IN ('queued', 'running', 'waiting_input') ORDER BY r.queued_at`, lotse)
	if err != nil {
		return err.Error()
	}
	for rows.Next() {
		var id, state, holder, lease, fus string
		var attempt int
		if err := rows.Scan(&id, &state, &holder, &attempt, &lease, &fus); err != nil {
			rows.Close()
			return err.Error()
		}
		fmt.Fprintf(&out, "run %s %s attempt %d holder %s (%s) lease until %s; follow-ups: %s\n", id, state, attempt, holder, names[holder], lease, fus)
	}
	rows.Close()
	rows, err = b.Pool.Query(ctx, `SELECT e.seq, e.type, coalesce(e.run_id::text, ''), coalesce(e.message_id::text, ''), coalesce(r.state, ''), coalesce(r.holder, '')
		FROM agent_events e LEFT JOIN runs r ON r.id = e.run_id WHERE e.agent_id = $1 AND e.seq > $2 ORDER BY e.seq LIMIT 40`, lotse, acked)
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	out.WriteString("first events after the position:\n")
	for rows.Next() {
		var seq int64
		var typ, run, msg, state, holder string
		if err := rows.Scan(&seq, &typ, &run, &msg, &state, &holder); err != nil {
			return err.Error()
		}
		fmt.Fprintf(&out, "  %d %s run %s message %s: run %s, holder %s (%s)\n", seq, typ, run, msg, state, holder, names[holder])
	}
	return out.String()
}

// logCount is how often the server logged a message.
type logCount struct {
	msg string
	n   int
}

// serverLines counts the server's log lines of level WARN and ERROR by
// message (what an operator would be alarmed by), and its answers
// internal_error or 5xx by status and code (the request log).
func serverLines(logDir string) []logCount {
	data, err := os.ReadFile(filepath.Join(logDir, "server.log"))
	if err != nil {
		return []logCount{{msg: "unreadable: " + err.Error(), n: 1}}
	}
	counts := map[string]int{}
	for _, l := range strings.Split(string(data), "\n") {
		var m struct {
			Level, Msg, Code string
			Status           int
		}
		if json.Unmarshal([]byte(l), &m) != nil {
			continue
		}
		switch {
		case m.Msg == "request" && (m.Code == "internal_error" || m.Status >= 500):
			counts[fmt.Sprintf("requests answered %d %s", m.Status, m.Code)]++
		case m.Level == "WARN" || m.Level == "ERROR":
			counts[m.Level+" "+m.Msg]++
		}
	}
	var out []logCount
	for k, n := range counts {
		out = append(out, logCount{k, n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].msg < out[j].msg })
	return out
}
