package runs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"bothy.example.com/bothy/internal/devtools/apitest"
)

// liveBox is a RunLive in the GraphQL shape.
type liveBox struct {
	RunID     string  `json:"runId"`
	Version   int     `json:"version"`
	Text      string  `json:"text"`
	Status    string  `json:"status"`
	UpdatedAt *string `json:"updatedAt"`
	Done      bool    `json:"done"`
}

const liveSel = `runId version text status updatedAt done`

// updateLive changes run's box as agent from holder over GraphQL.
func updateLive(t *testing.T, env *apitest.Env, agent, run, holder string, in map[string]any) (liveBox, []apitest.GQLError) {
	t.Helper()
	var out struct {
		UpdateRunLive *liveBox `json:"updateRunLive"`
	}
	vars := map[string]any{"r": run, "in": in}
	if holder != "" {
		vars["h"] = holder
	}
	res := env.GraphQL(env.World.Token(agent), `mutation($r: ID!, $h: String, $in: RunLiveUpdate!) { updateRunLive(runId: $r, holder: $h, input: $in) { `+liveSel+` } }`, vars, &out)
	if out.UpdateRunLive == nil {
		return liveBox{}, res.Errors
	}
	return *out.UpdateRunLive, res.Errors
}

// updateLiveREST changes run's box as agent from holder over REST.
func updateLiveREST(env *apitest.Env, agent, run, holder string, body map[string]any) *apitest.Response {
	h := http.Header{}
	if holder != "" {
		h.Set("Bothy-Run-Holder", holder)
	}
	return env.RESTWith(http.MethodPost, "/api/v1/runs/"+run+"/live", env.World.Token(agent), body, h)
}

// readLive reads run's box as who through both faces and fails unless
// they agree.
func readLive(t *testing.T, env *apitest.Env, who, run string) liveBox {
	t.Helper()
	var out struct {
		Run *struct {
			Live liveBox `json:"live"`
		} `json:"run"`
	}
	if res := env.GraphQL(env.World.Token(who), `query($id: ID!) { run(id: $id) { live { `+liveSel+` } } }`, map[string]any{"id": run}, &out); len(res.Errors) > 0 || out.Run == nil {
		t.Fatalf("read live: %+v", res.Errors)
	}
	var r struct {
		Live struct {
			RunID   string `json:"run_id"`
			Version int    `json:"version"`
			Text    string `json:"text"`
			Status  string `json:"status"`
			Done    bool   `json:"done"`
		} `json:"live"`
	}
	env.REST(http.MethodGet, "/api/v1/runs/"+run, env.World.Token(who), nil).JSON(t, &r)
	g := out.Run.Live
	if r.Live.RunID != g.RunID || r.Live.Version != g.Version || r.Live.Text != g.Text || r.Live.Status != g.Status || r.Live.Done != g.Done {
		t.Fatalf("GraphQL %+v and REST %+v differ", g, r.Live)
	}
	return g
}

// liveChange is a RunLiveUpdatedEvent as a subscription delivers it.
type liveChange struct {
	Typename  string  `json:"__typename"`
	RunID     string  `json:"runId"`
	MessageID string  `json:"messageId"`
	Version   int     `json:"version"`
	Append    string  `json:"append"`
	Replace   *string `json:"replace"`
	Status    string  `json:"status"`
	Done      bool    `json:"done"`
	Seq       string  `json:"seq"`
	ChannelID string  `json:"channelId"`
}

// liveReader is one WebSocket connection with an events subscription.
type liveReader struct {
	t testing.TB
	c *websocket.Conn
}

// subscribeLive connects to env as token and subscribes to the events from
// the end of the log with liveFrom (nil for none).
func subscribeLive(t testing.TB, env *apitest.Env, token string, liveFrom []map[string]any) *liveReader {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, strings.Replace(env.URL, "http", "ws", 1)+"/graphql", &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(1 << 20)
	t.Cleanup(func() { c.Close(websocket.StatusNormalClosure, "") })
	l := &liveReader{t: t, c: c}
	l.send(map[string]any{"type": "connection_init", "payload": map[string]any{"Authorization": "Bearer " + token}})
	if m := l.read(); m["type"] != "connection_ack" {
		t.Fatalf("want connection_ack, got %+v", m)
	}
	// From the end of the log as it is now: what is posted after this call
	// reaches the subscription, however late it starts.
	end := env.Count(`SELECT coalesce(max(seq), 0)::int FROM event_log`)
	vars := map[string]any{"lf": liveFrom, "a": fmt.Sprint(end)}
	l.send(map[string]any{"id": "s", "type": "subscribe", "payload": map[string]any{"query": `subscription($lf: [LiveCursor!], $a: String) { events(after: $a, liveFrom: $lf) { __typename seq channelId ... on MessageEvent { messageId } ... on RunLiveUpdatedEvent { runId messageId version append replace status done } } }`,
		"variables": vars}})
	return l
}

func (l *liveReader) send(m any) {
	l.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := wsjson.Write(ctx, l.c, m); err != nil {
		l.t.Fatal(err)
	}
}

func (l *liveReader) read() map[string]any {
	l.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var m map[string]any
	if err := wsjson.Read(ctx, l.c, &m); err != nil {
		l.t.Fatal(err)
	}
	return m
}

// next returns the next change of a live box, skipping log events.
func (l *liveReader) next() liveChange {
	l.t.Helper()
	for {
		m := l.read()
		if m["type"] != "next" {
			l.t.Fatalf("want next, got %+v", m)
		}
		b, _ := json.Marshal(m["payload"])
		var p struct {
			Data struct {
				Events liveChange `json:"events"`
			} `json:"data"`
			Errors []any `json:"errors"`
		}
		if err := json.Unmarshal(b, &p); err != nil || len(p.Errors) > 0 {
			l.t.Fatalf("bad next %s: %v", b, err)
		}
		if p.Data.Events.Typename == "RunLiveUpdatedEvent" {
			return p.Data.Events
		}
	}
}

// apply applies c to text as a reader does.
func (c liveChange) apply(text string) string {
	if c.Replace != nil {
		text = *c.Replace
	}
	return text + c.Append
}

// wantNewBox fails the test unless run's box, before any update, is
// version 0, empty, not done, never updated, and names its run.
func wantNewBox(t *testing.T, env *apitest.Env, run string) {
	t.Helper()
	if got := readLive(t, env, "alex", run); got.Version != 0 || got.Text != "" || got.Done || got.UpdatedAt != nil || got.RunID != run {
		t.Fatalf("a new box: %+v", got)
	}
}

// writeTwoVersionsOnWire writes run's box as proc-a, once over GraphQL
// (append with a status) and once over REST (append), and fails the test
// unless each answers its version and text, and Run.live answers version
// 2 before any write to the database.
func writeTwoVersionsOnWire(t *testing.T, env *apitest.Env, run string) {
	t.Helper()
	b, errs := updateLive(t, env, "lotse", run, "proc-a", map[string]any{"baseVersion": 0, "append": "The printer ", "status": "checking the queue"})
	if len(errs) > 0 || b.Version != 1 || b.Text != "The printer " || b.Status != "checking the queue" || b.UpdatedAt == nil {
		t.Fatalf("first update: %+v %+v", b, errs)
	}
	r := updateLiveREST(env, "lotse", run, "proc-a", map[string]any{"base_version": 1, "append": "is back."})
	var rb map[string]any
	r.JSON(t, &rb)
	if r.Status != http.StatusOK || rb["version"] != float64(2) || rb["text"] != "The printer is back." || rb["run_id"] != run || rb["done"] != false {
		t.Fatalf("REST update: %d %s", r.Status, r.Body)
	}
	// Stored every hour here: the latest version is answered from memory.
	if got := readLive(t, env, "alex", run); got.Version != 2 || got.Text != "The printer is back." {
		t.Fatalf("Run.live before a write: %+v", got)
	}
}

// readTwoVersions reads the changes of writeTwoVersionsOnWire from reader
// and fails the test unless they come in order, each naming the run, its
// anchor and the channel, and make the text written.
func readTwoVersions(t *testing.T, env *apitest.Env, reader *liveReader, run string) {
	t.Helper()
	text := ""
	for want := 1; want <= 2; want++ {
		c := reader.next()
		if c.Version != want || c.RunID != run || c.MessageID == "" || c.ChannelID != env.World.Channel("Support/Eskalation").ID {
			t.Fatalf("change %d: %+v", want, c)
		}
		text = c.apply(text)
	}
	if text != "The printer is back." {
		t.Fatalf("the reader holds %q", text)
	}
}

// checkAnswerEmptiesBox has proc-a answer in run and fails the test
// unless the reader gets version 3, done with the empty text and the
// status kept, and Run.live answers the same box.
func checkAnswerEmptiesBox(t *testing.T, env *apitest.Env, reader *liveReader, run string) {
	t.Helper()
	if errs := answerAs(t, env, "lotse", env.Main("Support/Eskalation"), run, "proc-a", "live-answer", "The printer is back."); len(errs) > 0 {
		t.Fatal(errs)
	}
	c := reader.next()
	if c.Version != 3 || !c.Done || c.Replace == nil || *c.Replace != "" || c.Status != "checking the queue" {
		t.Fatalf("answer change: %+v", c)
	}
	if got := readLive(t, env, "alex", run); got.Version != 3 || got.Text != "" || !got.Done || got.Status != "checking the queue" {
		t.Fatalf("box after the answer: %+v", got)
	}
}

// TestLiveBox_OnBothFaces: the holder of a running run writes its live box
// over GraphQL and REST; Run.live answers the latest version before any
// write to the database; a reader subscribed from version 0 gets every
// change in order; a stale version, another holder, a too long status and
// an ended run are refused with the API's answers and change nothing; the
// answer empties the box and keeps its status.
func TestLiveBox_OnBothFaces(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{Config: map[string]string{"run.live_flush_interval": "1h"}})
	run, _ := startedByProcA(t, env, "live-q", "@lotse is the printer back?")
	wantNewBox(t, env, run)
	reader := subscribeLive(t, env, env.World.Token("alex"), []map[string]any{{"runId": run, "version": 0}})
	writeTwoVersionsOnWire(t, env, run)

	checkLiveRefusalsOnWire(t, env, run)
	if got := readLive(t, env, "alex", run); got.Version != 2 || got.Text != "The printer is back." {
		t.Fatalf("refused updates changed the box: %+v", got)
	}
	readTwoVersions(t, env, reader, run)

	// The answer: the box is done, empty, and keeps its status.
	checkAnswerEmptiesBox(t, env, reader, run)
	checkAnchorShowsBox(t, env, run)

	// Ended: run_not_active, and the stored copy holds the final box.
	if _, errs := heldOp(t, env, "lotse", "finishRun", run, "proc-a", "COMPLETED"); len(errs) > 0 {
		t.Fatal(errs)
	}
	apitest.WantProblem(t, "ended", updateLiveREST(env, "lotse", run, "proc-a", map[string]any{"base_version": 3, "append": "x"}), http.StatusConflict, "conflict", "run_not_active")
	waitStored(t, env, run, 3)
}

// checkLiveRefusalsOnWire sends the updates of run's box at version 2
// that are refused, on both faces: a stale version (409 live_version with
// the current version), another holder, no holder, a too long status,
// another agent and a person.
func checkLiveRefusalsOnWire(t *testing.T, env *apitest.Env, run string) {
	t.Helper()
	// A stale version: 409 live_version with the current version.
	stale := updateLiveREST(env, "lotse", run, "proc-a", map[string]any{"base_version": 1, "append": "again"})
	if p := apitest.WantProblem(t, "stale REST", stale, http.StatusConflict, "conflict", "live_version"); p.CurrentVersion == nil || *p.CurrentVersion != 2 {
		t.Fatalf("current_version %v in %s", p.CurrentVersion, stale.Body)
	}
	if _, errs := updateLive(t, env, "lotse", run, "proc-a", map[string]any{"baseVersion": 0, "append": "x"}); len(errs) != 1 ||
		errs[0].Extensions.Reason != "live_version" || errs[0].Extensions.CurrentVersion == nil || *errs[0].Extensions.CurrentVersion != 2 {
		t.Fatalf("stale GraphQL: %+v", errs)
	}
	// Another holder, no holder, a too long status, another agent.
	apitest.WantProblem(t, "other holder", updateLiveREST(env, "lotse", run, "proc-b", map[string]any{"base_version": 2, "append": "x"}), http.StatusConflict, "conflict", "run_claimed")
	apitest.WantProblem(t, "no holder", updateLiveREST(env, "lotse", run, "", map[string]any{"base_version": 2, "append": "x"}), http.StatusConflict, "conflict", "run_claimed")
	apitest.WantProblem(t, "long status", updateLiveREST(env, "lotse", run, "proc-a", map[string]any{"base_version": 2, "status": strings.Repeat("s", 201)}), http.StatusBadRequest, "validation_failed", "")
	apitest.WantProblem(t, "other agent", updateLiveREST(env, "texter", run, "proc-a", map[string]any{"base_version": 2, "append": "x"}), http.StatusNotFound, "not_found", "")
	apitest.WantProblem(t, "a person", updateLiveREST(env, "alex", run, "proc-a", map[string]any{"base_version": 2, "append": "x"}), http.StatusForbidden, "forbidden", "subject_kind_not_allowed")
}

// checkAnchorShowsBox checks that the main thread of Support/Eskalation
// holds one anchor of run, which shows its done box at version 3, and that
// no other message has a live box.
func checkAnchorShowsBox(t *testing.T, env *apitest.Env, run string) {
	t.Helper()
	var msgs struct {
		Thread struct {
			Messages struct {
				Messages []struct {
					Kind  string   `json:"kind"`
					RunID *string  `json:"runId"`
					Live  *liveBox `json:"live"`
				} `json:"messages"`
			} `json:"messages"`
		} `json:"thread"`
	}
	env.GraphQL(env.World.Token("alex"), `query($t: ID!) { thread(id: $t) { messages { messages { kind runId live { `+liveSel+` } } } } }`, map[string]any{"t": env.Main("Support/Eskalation")}, &msgs)
	anchors := 0
	for _, m := range msgs.Thread.Messages.Messages {
		if m.Kind == "RUN" && m.RunID != nil && *m.RunID == run {
			anchors++
			if m.Live == nil || m.Live.Version != 3 || !m.Live.Done {
				t.Fatalf("anchor's box: %+v", m.Live)
			}
		} else if m.Live != nil {
			t.Fatalf("a %s message has a live box", m.Kind)
		}
	}
	if anchors != 1 {
		t.Fatalf("%d anchors of the run", anchors)
	}
}

// waitStored waits until the stored copy of run's box has version v (the
// final write follows the end at once, whatever the flush interval).
func waitStored(t *testing.T, env *apitest.Env, run string, v int) {
	t.Helper()
	for {
		_, next := env.Runs.LiveWrites()
		if got := env.Count(`SELECT coalesce((SELECT version FROM run_live WHERE run_id = '` + run + `'), -1)`); got == v {
			return
		}
		select {
		case <-next:
		case <-time.After(10 * time.Second):
			t.Fatalf("the stored box of %s never reached version %d", run, v)
		}
	}
}

// TestLiveBox_OnlyReadersOfTheThreadReceive: Sam, who may not read
// Support/Eskalation, subscribes as Alex does and receives none of the
// box's changes; Alex receives them.
func TestLiveBox_OnlyReadersOfTheThreadReceive(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	run, _ := startedByProcA(t, env, "live-hidden", "@lotse what is open?")
	sam := subscribeLive(t, env, env.World.Token("sam"), nil)
	alex := subscribeLive(t, env, env.World.Token("alex"), []map[string]any{{"runId": run, "version": 0}})
	// Sam reads his own channel's events: a message he sees marks where
	// his stream stands after the box's changes.
	if _, errs := updateLive(t, env, "lotse", run, "proc-a", map[string]any{"baseVersion": 0, "append": "secret draft"}); len(errs) > 0 {
		t.Fatal(errs)
	}
	if c := alex.next(); c.Version != 1 || c.Append != "secret draft" {
		t.Fatalf("alex got %+v", c)
	}
	marker := env.MustPost("sam", env.Main("Support/Allgemein"), "live-marker", "a marker for sam")
	for {
		m := sam.read()
		s, _ := json.Marshal(m)
		if strings.Contains(string(s), "RunLiveUpdatedEvent") || strings.Contains(string(s), "secret draft") {
			t.Fatalf("sam received a change of a box he may not read: %s", s)
		}
		// Sam's stream stands after the box's change once his own
		// message arrives.
		if strings.Contains(string(s), `"messageId":"`+marker["id"].(string)+`"`) {
			break
		}
	}
}

// TestLiveBox_AcrossReplicasAndReconnect: the holder writes through one
// replica while a reader reads the box and subscribes on the other; the
// reader drops its connection in the middle of the stream, reads the box
// again, subscribes from the version it read, and ends with the final
// text byte for byte, every version once.
func TestLiveBox_AcrossReplicasAndReconnect(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	peer := env.Peer()
	run, _ := startedByProcA(t, env, "live-peer", "@lotse write me a long answer")
	first := subscribeLive(t, peer, peer.World.Token("alex"), []map[string]any{{"runId": run, "version": 0}})
	var want strings.Builder
	version := 0
	write := func(n int) {
		for i := 0; i < n; i++ {
			piece := fmt.Sprintf("word%d ", version)
			b, errs := updateLive(t, env, "lotse", run, "proc-a", map[string]any{"baseVersion": version, "append": piece})
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			version = b.Version
			want.WriteString(piece)
		}
	}
	write(10)
	text, seen := "", 0
	for seen < 5 {
		c := first.next()
		if c.Version != seen+1 {
			t.Fatalf("version %d after %d", c.Version, seen)
		}
		text, seen = c.apply(text), c.Version
	}
	first.c.Close(websocket.StatusNormalClosure, "")
	// Away: more words are written.
	write(10)
	box := readLive(t, peer, "alex", run)
	text, seen = box.Text, box.Version
	second := subscribeLive(t, peer, peer.World.Token("alex"), []map[string]any{{"runId": run, "version": seen}})
	write(10)
	// A change larger than a notification's payload travels through the
	// database and arrives all the same.
	big := strings.Repeat("long paragraph ", 800) // 12,000 bytes
	if b, errs := updateLive(t, env, "lotse", run, "proc-a", map[string]any{"baseVersion": version, "append": big}); len(errs) > 0 || b.Version != version+1 {
		t.Fatalf("large update: %+v %+v", b, errs)
	}
	version++
	want.WriteString(big)
	if r := updateLiveREST(env, "lotse", run, "proc-a", map[string]any{"base_version": version, "replace": want.String(), "append": "the end.", "done": true}); r.Status != http.StatusOK {
		t.Fatalf("last update: %d %s", r.Status, r.Body)
	}
	want.WriteString("the end.")
	version++
	for seen < version {
		c := second.next()
		if c.Version != seen+1 {
			t.Fatalf("version %d after %d", c.Version, seen)
		}
		text, seen = c.apply(text), c.Version
	}
	if text != want.String() {
		t.Fatalf("the reader holds\n%q\nwant\n%q", text, want.String())
	}
	if b := readLive(t, peer, "alex", run); b.Version != version || b.Text != want.String() || !b.Done {
		t.Fatalf("the peer's box: %+v", b)
	}
}

// checkTakeoverEmptied fails the test unless the reader gets the change
// of the takeover of run (version 2, text, status and done all emptied)
// and Run.live answers the same empty box.
func checkTakeoverEmptied(t *testing.T, env *apitest.Env, reader *liveReader, run string) {
	t.Helper()
	c := reader.next()
	if c.Version != 2 || c.Replace == nil || *c.Replace != "" || c.Append != "" || c.Status != "" || c.Done {
		t.Fatalf("change at the takeover: %+v", c)
	}
	if got := readLive(t, env, "alex", run); got.Version != 2 || got.Text != "" || got.Status != "" || got.Done {
		t.Fatalf("box after the takeover: %+v", got)
	}
}

// TestLiveBox_TakeoverEmptiesTheBox: when proc-a's lease lapses and proc-b
// claims the run, the half-written text of the lost attempt leaves the
// box in the claim (version bumped, a change with the empty text), so no
// reader shows it until proc-b's answer; proc-b writes from the new
// version.
func TestLiveBox_TakeoverEmptiesTheBox(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{Config: map[string]string{"run.live_flush_interval": "1h"}})
	run, _ := startedByProcA(t, env, "live-takeover", "@lotse is the printer back?")
	reader := subscribeLive(t, env, env.World.Token("alex"), []map[string]any{{"runId": run, "version": 0}})
	if _, errs := updateLive(t, env, "lotse", run, "proc-a", map[string]any{"baseVersion": 0, "append": "The printer is", "status": "checking"}); len(errs) > 0 {
		t.Fatal(errs)
	}
	if c := reader.next(); c.Version != 1 || c.Append != "The printer is" {
		t.Fatalf("first change %+v", c)
	}
	env.Clock.Advance(2 * time.Minute)
	if n, err := env.Server.Runs.SweepOnce(t.Context()); err != nil || n != 1 {
		t.Fatalf("lease sweep changed %d (%v)", n, err)
	}
	// Lapsed but not yet claimed: the box still shows what was written.
	if got := readLive(t, env, "alex", run); got.Version != 1 || got.Text != "The printer is" {
		t.Fatalf("box before the takeover: %+v", got)
	}
	if b, errs := claim(t, env, "lotse", "startRun", run, "proc-b"); len(errs) > 0 || b.Attempt != 2 {
		t.Fatalf("takeover %+v %+v", b, errs)
	}
	checkTakeoverEmptied(t, env, reader, run)
	b, errs := updateLive(t, env, "lotse", run, "proc-b", map[string]any{"baseVersion": 2, "append": "Yes, it is back."})
	if len(errs) > 0 || b.Version != 3 || b.Text != "Yes, it is back." {
		t.Fatalf("the new holder's update: %+v %+v", b, errs)
	}
}
