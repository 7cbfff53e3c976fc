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

	"github.com/jackc/pgx/v5"
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
//
// Its phases, in this order (the details of the table come in this order
// too): readLedger reads the database; countRuns, countAnswers,
// countRequests, countFollowUps, compareAPI, countPrompts and
// countProcesses count what the lines of the table need; lines writes
// them.
func account(ctx context.Context, b *bothy, ppl *people, model *fakeModel, sup *supervisor, logDir string, minRuns int) (*result, error) {
	l, err := readLedger(ctx, b)
	if err != nil {
		return nil, err
	}
	a := &accounting{ledger: l, res: &result{}, tagOf: map[string]string{}, answered: map[string]int{}}
	a.countRuns()
	a.countAnswers(ppl)
	a.countRequests(ppl)
	a.countFollowUps(ppl)
	a.compareAPI(ctx, ppl)
	a.countPrompts(model.prompts())
	a.countProcesses(sup)
	a.lines(sup, logDir, minRuns)
	return a.res, nil
}

// ledger is what the account reads of lotse from the database.
type ledger struct {
	runs []runRow
	// byID are the runs by id.
	byID    map[string]runRow
	follows []followRow
	answers []answerRow
	// ends is how often each run reached an end state, after how often
	// its state changed after its first end.
	ends, after map[string]int
	// requests are the message ids of each run's requests in order
	// (readRequests); moved is how many follow-ups moved to a next run.
	requests map[string][]string
	moved    int
}

// readLedger reads the ledger, part by part.
func readLedger(ctx context.Context, b *bothy) (*ledger, error) {
	lotse := b.World.ID("lotse")
	l := &ledger{byID: map[string]runRow{}, ends: map[string]int{}, after: map[string]int{}}
	if err := l.readRuns(ctx, b, lotse); err != nil {
		return nil, err
	}
	if err := l.readFollows(ctx, b, lotse); err != nil {
		return nil, err
	}
	if err := l.readAnswers(ctx, b, lotse); err != nil {
		return nil, err
	}
	if err := l.readEnds(ctx, b); err != nil {
		return nil, err
	}
	if err := l.readRequests(ctx, b, lotse); err != nil {
		return nil, err
	}
	return l, nil
}

// queryEach runs query with args and hands each row to scan; it returns
// the first error of the query, of scan or of the rows.
func queryEach(ctx context.Context, b *bothy, scan func(pgx.Rows) error, query string, args ...any) error {
	rows, err := b.Pool.Query(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	rows.Close()
	return rows.Err()
}

// readRuns reads the runs of lotse in the order they were queued.
func (l *ledger) readRuns(ctx context.Context, b *bothy, lotse string) error {
	err := queryEach(ctx, b, func(rows pgx.Rows) error {
		var x runRow
		if err := rows.Scan(&x.ID, &x.Thread, &x.Trigger, &x.State, &x.EndReason, &x.Attempt, &x.TriggerSeq); err != nil {
			return err
		}
		l.runs = append(l.runs, x)
		return nil
	}, `SELECT r.id::text, r.thread_id::text, coalesce(r.triggering_message_id::text, ''), r.state, coalesce(r.end_reason, ''),
		r.attempt, coalesce(m.thread_seq, 0) FROM runs r LEFT JOIN messages m ON m.id = r.triggering_message_id WHERE r.agent_id = $1 ORDER BY r.queued_at`, lotse)
	if err != nil {
		return err
	}
	for _, r := range l.runs {
		l.byID[r.ID] = r
	}
	return nil
}

// readFollows reads the follow-ups of the runs of lotse.
func (l *ledger) readFollows(ctx context.Context, b *bothy, lotse string) error {
	return queryEach(ctx, b, func(rows pgx.Rows) error {
		var x followRow
		if err := rows.Scan(&x.Run, &x.Message, &x.State, &x.DropReason, &x.Delivered, &x.Seq); err != nil {
			return err
		}
		l.follows = append(l.follows, x)
		return nil
	}, `SELECT f.run_id::text, f.message_id::text, f.state, coalesce(f.drop_reason, ''), f.delivered_at IS NOT NULL, m.thread_seq
		FROM run_followups f JOIN runs r ON r.id = f.run_id JOIN messages m ON m.id = f.message_id WHERE r.agent_id = $1`, lotse)
}

// readAnswers reads the text messages of lotse in the order they were
// written, with the run whose run_answers lists each.
func (l *ledger) readAnswers(ctx context.Context, b *bothy, lotse string) error {
	return queryEach(ctx, b, func(rows pgx.Rows) error {
		var x answerRow
		if err := rows.Scan(&x.ID, &x.Key, &x.Thread, &x.Content, &x.Listed); err != nil {
			return err
		}
		l.answers = append(l.answers, x)
		return nil
	}, `SELECT m.id::text, coalesce(m.client_msg_id, ''), m.thread_id::text, m.content_md, coalesce(a.run_id::text, '')
		FROM messages m LEFT JOIN run_answers a ON a.message_id = m.id WHERE m.author_principal_id = $1 AND m.kind = 'text' ORDER BY m.created_at`, lotse)
}

// readEnds reads how often each run reached an end state, and whether its
// state changed again after the first end (event_log keeps every
// run.state_changed with the run as payload).
func (l *ledger) readEnds(ctx context.Context, b *bothy) error {
	return queryEach(ctx, b, func(rows pgx.Rows) error {
		var id string
		var n, m int
		if err := rows.Scan(&id, &n, &m); err != nil {
			return err
		}
		l.ends[id], l.after[id] = n, m
		return nil
	}, `WITH e AS (SELECT seq, payload->>'id' AS run, payload->>'state' AS state FROM event_log WHERE type = 'run.state_changed'),
		f AS (SELECT run, min(seq) AS seq FROM e WHERE state IN ('completed', 'failed', 'cancelled') GROUP BY run)
		SELECT e.run, count(*) FILTER (WHERE e.state IN ('completed', 'failed', 'cancelled')), count(*) FILTER (WHERE e.seq > f.seq)
		FROM e JOIN f ON f.run = e.run GROUP BY e.run`)
}

// readRequests finds the requests of each run in order: its trigger, then
// its follow-ups by their place in the thread (the order of the run
// context). A follow-up moved to the next run when its run ended
// (run_followups then names the next run) stays a request of the run it
// came to first: the agent.followup events keep both.
func (l *ledger) readRequests(ctx context.Context, b *bothy, lotse string) error {
	member := map[[2]string]int64{}
	for _, f := range l.follows {
		member[[2]string{f.Run, f.Message}] = f.Seq
	}
	err := queryEach(ctx, b, func(rows pgx.Rows) error {
		var run, msg string
		var seq int64
		if err := rows.Scan(&run, &msg, &seq); err != nil {
			return err
		}
		if _, ok := member[[2]string{run, msg}]; !ok {
			member[[2]string{run, msg}] = seq
			l.moved++
		}
		return nil
	}, `SELECT DISTINCT e.run_id::text, e.message_id::text, m.thread_seq FROM agent_events e JOIN messages m ON m.id = e.message_id
		WHERE e.agent_id = $1 AND e.type = 'agent.followup'`, lotse)
	if err != nil {
		return err
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
	l.requests = map[string][]string{}
	for _, r := range l.runs {
		l.requests[r.ID] = []string{r.Trigger}
	}
	for _, it := range items {
		l.requests[it.run] = append(l.requests[it.run], it.msg)
	}
	return nil
}

// accounting is an account under way: the ledger it reads, the result
// its phases fill with details, and the figures they count for the lines
// of the table (lines).
type accounting struct {
	*ledger
	res *result
	// tagOf is the tag of each message the people wrote, by its id;
	// answered is how many answers cover each request (countAnswers).
	tagOf    map[string]string
	answered map[string]int
	f        figures
}

// figures are the counts of the account, by the phase that counts them.
type figures struct {
	// countRuns
	created, endedOnce, stuck, completed, takeovers, maxAttempt int
	endReasons                                                  map[string]int
	// countAnswers
	unkeyed, badKey, misfiled, textMismatch, repeated int
	// countRequests
	written, refused, unknown, foreign, once, none, twice int
	// countFollowUps
	fuWritten, fuDuring, lost, fuTwice int
	fuStates                           map[string]int
	// compareAPI
	apiDiffers int
	// countPrompts
	prompts                          []prompt
	aborted, unparsed, withFollowUps int
	// countProcesses
	kills, procs, ws, selfExits int
}

// countRuns counts the runs: ended exactly once, stuck, completed or
// ended otherwise (by state and reason), taken over.
func (a *accounting) countRuns() {
	f := &a.f
	f.created = len(a.runs)
	f.endReasons = map[string]int{}
	for _, r := range a.runs {
		switch {
		case r.active():
			f.stuck++
			a.res.detail("stuck run %s: %s, attempt %d", r.ID, r.State, r.Attempt)
		case a.ends[r.ID] == 1 && a.after[r.ID] == 0:
			f.endedOnce++
		default:
			a.res.detail("run %s (%s %s) reached an end %d times, changed %d times after its first end", r.ID, r.State, r.EndReason, a.ends[r.ID], a.after[r.ID])
		}
		if r.State == "completed" {
			f.completed++
		} else if !r.active() {
			f.endReasons[r.State+" "+r.EndReason]++
			a.res.detail("run %s ended %s with reason %q", r.ID, r.State, r.EndReason)
		}
		if r.Attempt > 1 {
			f.takeovers++
		}
		f.maxAttempt = max(f.maxAttempt, r.Attempt)
	}
}

// keyedAnswer is an answer with the place, among its run's requests, of
// the request its key names.
type keyedAnswer struct {
	a   answerRow
	idx int
}

// countAnswers counts the answers: each covers the requests of its run
// after the one the run's previous answer is keyed by, up to its own
// key's request (agent.AnswerKey: one answer may cover several requests
// and is keyed by the last of them).
func (a *accounting) countAnswers(ppl *people) {
	perRun := a.keyAnswers()
	for _, p := range ppl.all() {
		a.tagOf[p.ID] = p.Tag
	}
	for runID, list := range perRun {
		sort.SliceStable(list, func(i, j int) bool { return list[i].idx < list[j].idx })
		reqs := a.requests[runID]
		prev := -1
		for _, k := range list {
			prev = a.coverAnswer(k, reqs, prev)
		}
	}
}

// keyAnswers finds the run and request each answer's key names, and
// counts the answers without a key, with a key of no request, or filed
// under another run or thread; it returns the keyed answers by run.
func (a *accounting) keyAnswers() map[string][]keyedAnswer {
	perRun := map[string][]keyedAnswer{}
	for _, x := range a.answers {
		k, ok := parseKey(x.Key)
		if !ok {
			a.f.unkeyed++
			a.res.detail("message %s of lotse has no answer key: %q", x.ID, x.Key)
			continue
		}
		if x.Listed != "" && x.Listed != k.run {
			a.f.misfiled++
			a.res.detail("answer %s (%s) is listed under run %s", x.ID, x.Key, x.Listed)
		}
		if r, ok := a.byID[k.run]; ok && r.Thread != x.Thread {
			a.f.misfiled++
			a.res.detail("answer %s (%s) is in thread %s, its run in %s", x.ID, x.Key, x.Thread, r.Thread)
		}
		reqs, known := a.requests[k.run]
		idx := 0
		if k.request != "" {
			idx = slices.Index(reqs, k.request)
		}
		if !known || idx < 0 {
			a.f.badKey++
			a.res.detail("answer %s has key %s, which names no request of a run", x.ID, x.Key)
			continue
		}
		perRun[k.run] = append(perRun[k.run], keyedAnswer{x, idx})
	}
	return perRun
}

// coverAnswer counts the requests of reqs (its run's) that answer k
// covers, given prev, the highest request an earlier answer of the run
// is keyed by (-1 for none), and checks k's text against them; it
// returns prev for the run's next answer.
func (a *accounting) coverAnswer(k keyedAnswer, reqs []string, prev int) int {
	from := prev + 1
	if k.idx <= prev {
		// A second answer keyed by a request an earlier answer
		// covers already: that request is answered again.
		from = k.idx
	}
	for i := from; i <= k.idx; i++ {
		a.answered[reqs[i]]++
	}
	// The text names the requests the model saw: it must hold
	// every request the key newly covers and none after the key's.
	said := map[string]bool{}
	for _, tag := range tagPattern.FindAllString(k.a.Content, -1) {
		said[tag] = true
	}
	for i := from; i <= k.idx; i++ {
		if !said[a.tagOf[reqs[i]]] {
			a.f.textMismatch++
			a.res.detail("answer %s (%s) is keyed past request %s (%s), which its text does not answer", k.a.ID, k.a.Key, reqs[i], a.tagOf[reqs[i]])
		}
	}
	for i := k.idx + 1; i < len(reqs); i++ {
		if said[a.tagOf[reqs[i]]] {
			a.f.textMismatch++
			a.res.detail("answer %s (%s) answers request %s (%s), which is after its key", k.a.ID, k.a.Key, reqs[i], a.tagOf[reqs[i]])
		}
	}
	for i := 0; i < from; i++ {
		if said[a.tagOf[reqs[i]]] {
			a.f.repeated++
		}
	}
	return max(prev, k.idx)
}

// countRequests counts the requests: the messages the people wrote that
// the server took as a trigger or a follow-up, each of which must have
// one answer; and the requests of the database the people did not write.
func (a *accounting) countRequests(ppl *people) {
	f := &a.f
	inDB := a.requestIDs()
	writtenIDs := map[string]bool{}
	for _, p := range ppl.all() {
		if p.State != "ACCEPTED" && p.State != "FOLLOWUP" {
			f.refused++
			a.res.detail("request %s (%s) was refused: %s %s", p.ID, p.Tag, p.State, p.Reason)
			continue
		}
		f.written++
		writtenIDs[p.ID] = true
		if !inDB[p.ID] {
			f.unknown++
			a.res.detail("request %s (%s, %s) is neither a run's trigger nor a follow-up", p.ID, p.Tag, p.State)
		}
		switch n := a.answered[p.ID]; n {
		case 1:
			f.once++
		case 0:
			f.none++
			a.res.detail("request %s (%s, written %s) has no answer", p.ID, p.Tag, p.State)
		default:
			f.twice++
			a.res.detail("request %s (%s) has %d answers", p.ID, p.Tag, n)
		}
	}
	for id := range inDB {
		if !writtenIDs[id] {
			f.foreign++
			a.res.detail("request %s of the database was not written by the test", id)
		}
	}
}

// requestIDs are the message ids of every run's requests.
func (a *accounting) requestIDs() map[string]bool {
	inDB := map[string]bool{}
	for _, reqs := range a.requests {
		for _, id := range reqs {
			inDB[id] = true
		}
	}
	return inDB
}

// countFollowUps counts the follow-ups: written (while their thread's run
// was running, too), by state, lost and answered twice.
func (a *accounting) countFollowUps(ppl *people) {
	f := &a.f
	f.fuWritten, f.fuDuring = followUpsWritten(ppl)
	f.fuStates = map[string]int{}
	promotedTo := map[string]string{}
	for _, r := range a.runs {
		promotedTo[r.Trigger] = r.ID
	}
	for _, fu := range a.follows {
		f.fuStates[fu.State]++
		n := a.answered[fu.Message]
		switch {
		case n >= 2:
			f.fuTwice++
			a.res.detail("follow-up %s (%s) of run %s, %s: %d answers", fu.Message, a.tagOf[fu.Message], fu.Run, fu.State, n)
		case n == 0 && a.byID[fu.Run].active():
			// Not lost yet: its run is stuck, and counted so.
			a.res.detail("follow-up %s (%s) waits in stuck run %s: %s, delivered %v", fu.Message, a.tagOf[fu.Message], fu.Run, fu.State, fu.Delivered)
		case n == 0:
			f.lost++
			a.res.detail("follow-up %s (%s) of run %s is lost: %s (%s), delivered %v, no answer", fu.Message, a.tagOf[fu.Message], fu.Run, fu.State, fu.DropReason, fu.Delivered)
		case fu.State == "promoted" && promotedTo[fu.Message] == "":
			f.lost++
			a.res.detail("follow-up %s (%s) of run %s is promoted but triggers no run", fu.Message, a.tagOf[fu.Message], fu.Run)
		}
	}
}

// followUpsWritten counts the follow-ups the people wrote, and those of
// them written while their thread's run was running.
func followUpsWritten(ppl *people) (written, during int) {
	for _, p := range ppl.all() {
		if p.State == "FOLLOWUP" {
			written++
			if p.During {
				during++
			}
		}
	}
	return written, during
}

// compareAPI checks that the API tells the same as the database: every
// run ended, with the answers of run_answers.
func (a *accounting) compareAPI(ctx context.Context, ppl *people) {
	listed := map[string][]string{}
	for _, x := range a.answers {
		if x.Listed != "" {
			listed[x.Listed] = append(listed[x.Listed], x.ID)
		}
	}
	for _, r := range a.runs {
		var got struct {
			State   string `json:"state"`
			Answers []struct {
				MessageID   string `json:"message_id"`
				ClientMsgID string `json:"client_msg_id"`
			} `json:"answers"`
		}
		if err := ppl.rest(ctx, "lotse", "/api/v1/runs/"+r.ID, &got); err != nil {
			a.f.apiDiffers++
			a.res.detail("API: run %s: %v", r.ID, err)
			continue
		}
		var ids []string
		for _, x := range got.Answers {
			ids = append(ids, x.MessageID)
		}
		want := listed[r.ID]
		slices.Sort(ids)
		slices.Sort(want)
		if got.State != r.State || !slices.Equal(ids, want) {
			a.f.apiDiffers++
			a.res.detail("API: run %s is %s with answers %v; the database says %s with %v", r.ID, got.State, ids, r.State, want)
		}
	}
}

// countPrompts counts the fake model's requests: aborted, without a
// trigger block, with follow-ups.
func (a *accounting) countPrompts(prompts []prompt) {
	f := &a.f
	f.prompts = prompts
	for _, p := range prompts {
		if p.Aborted {
			f.aborted++
		}
		if p.Unparsed {
			f.unparsed++
		}
		if len(p.Requests) > 1 {
			f.withFollowUps++
		}
	}
}

// countProcesses counts the adapter processes: started, with the ws
// transport, killed, exited by themselves (each a detail).
func (a *accounting) countProcesses(sup *supervisor) {
	f := &a.f
	sup.mu.Lock()
	defer sup.mu.Unlock()
	f.kills, f.procs, f.selfExits = sup.kills, len(sup.procs), len(sup.selfExits)
	for _, p := range sup.procs {
		if p.transport == "ws" {
			f.ws++
		}
	}
	for _, e := range sup.selfExits {
		a.res.detail("adapter exited by itself: %s", e)
	}
}

// lines writes the lines of the table from the figures, in their fixed
// order, with those of the SDKs (sdkLines) and of the server's log
// (serverLines), and the details of how the runs that did not complete
// ended.
func (a *accounting) lines(sup *supervisor, logDir string, minRuns int) {
	f, res := &a.f, a.res
	res.atLeast("runs created", f.created, minRuns)
	res.must("runs ended exactly once (final state, one end event, no change after it)", f.endedOnce, f.created)
	res.add("runs completed", f.completed)
	res.must("runs stuck (still active at the end)", f.stuck, 0)
	res.add("runs taken over (attempt > 1)", f.takeovers)
	res.add("highest attempt of a run", f.maxAttempt)
	res.add("requests written (triggers and follow-ups)", f.written)
	res.must("requests answered exactly once", f.once, f.written)
	res.must("requests without an answer", f.none, 0)
	res.must("requests answered more than once", f.twice, 0)
	res.add("follow-ups written", f.fuWritten)
	res.add("follow-ups written while their thread's run was running", f.fuDuring)
	res.add("follow-ups absorbed by their run", f.fuStates["absorbed"])
	res.add("follow-ups promoted to a next run", f.fuStates["promoted"])
	res.add("follow-ups moved to a next run", a.moved)
	res.must("follow-ups lost", f.lost, 0)
	res.must("follow-ups answered twice", f.fuTwice, 0)
	res.must("messages refused as a trigger", f.refused, 0)
	res.must("requests the server does not know, or the test did not write", f.unknown+f.foreign, 0)
	res.must("answers without a key, with a key of no request, or in another run or thread", f.unkeyed+f.badKey+f.misfiled, 0)
	res.must("answers whose text disagrees with their key", f.textMismatch, 0)
	res.add("requests repeated in a later answer of their run (takeover after a partial answer)", f.repeated)
	res.must("runs whose state or answers differ between API and database", f.apiDiffers, 0)
	res.add("model requests", len(f.prompts))
	res.add("model requests aborted by a killed adapter", f.aborted)
	res.add("model requests with follow-ups in the prompt", f.withFollowUps)
	res.must("model requests without a trigger block", f.unparsed, 0)
	res.add("adapter processes started", f.procs)
	res.add("adapter processes started with --transport ws", f.ws)
	res.add("adapter processes killed with SIGKILL", f.kills)
	sdkLines(res, sup, f.prompts)
	res.must("adapter processes that exited by themselves", f.selfExits, 0)
	res.add("adapter runs that posted before their follow-ups were delivered (DeliveryWait ran out)",
		sup.count("WARN", "follow-ups not delivered in time; answering anyway, the server may answer them again in a next run"))
	for _, x := range serverLines(logDir) {
		res.add("server log: "+x.msg, x.n)
	}
	for reason, n := range f.endReasons {
		res.detail("%d runs ended %s", n, reason)
	}
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
