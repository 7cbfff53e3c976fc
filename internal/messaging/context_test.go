package messaging_test

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/platform/ids"
)

// listCut is message.list_content_max_bytes of this test: far below the
// long message, so a history list cuts it while the run context must not.
const listCut = 16

// longContent is a message above listCut (200 bytes, multi-byte included).
var longContent = "long: " + strings.Repeat("äbcdefghij", 17) + strings.Repeat("x", 7)

// reportsFixture is a post of the forum Support/Reports (no operator, so no
// message starts a run) with messages by seq:
//
//	1 alex   m1 (first message of the post)
//	2 lotse  m2
//	3 alex   m3
//	4 robin  m4, deleted (tombstone)
//	5 lotse  m5
//	6 alex   m6
//	7 alex   longContent
//	8 alex   m8, a reply to m6
//
// ids maps the seq to the message id.
type reportsFixture struct {
	thread string
	ids    map[int64]string
}

func newReportsFixture(t *testing.T, env *moduletest.Env) reportsFixture {
	t.Helper()
	th, first, _, err := env.Messaging.CreateThread(t.Context(), env.Principal("alex"), env.World.Channel("Support/Reports").ID,
		messaging.ThreadInput{Title: "Printer report", First: messaging.Input{ClientMsgID: "m1", ContentMD: "m1"}})
	if err != nil {
		t.Fatalf("create post: %v", err)
	}
	f := reportsFixture{thread: th.ID, ids: map[int64]string{1: first.ID}}
	post := func(seq int64, who, content, replyTo string) {
		t.Helper()
		m, _, err := env.Messaging.Create(t.Context(), env.Principal(who), f.thread,
			messaging.Input{ClientMsgID: fmt.Sprintf("m%d", seq), ContentMD: content, ReplyToMessageID: replyTo})
		if err != nil {
			t.Fatalf("post m%d by %s: %v", seq, who, err)
		}
		if got := m.ThreadSeq; got != seq {
			t.Fatalf("m%d has thread_seq %d", seq, got)
		}
		f.ids[seq] = m.ID
	}
	post(2, "lotse", "m2", "")
	post(3, "alex", "m3", "")
	post(4, "robin", "m4", "")
	post(5, "lotse", "m5", "")
	post(6, "alex", "m6", "")
	post(7, "alex", longContent, "")
	post(8, "alex", "m8", f.ids[6])
	if _, err := env.Messaging.Delete(t.Context(), env.Principal("robin"), f.ids[4]); err != nil {
		t.Fatalf("delete m4: %v", err)
	}
	if n := env.Count(`SELECT count(*) FROM messages WHERE thread_id = $1 AND kind = 'run'`, f.thread); n != 0 {
		t.Fatalf("the Reports post holds %d run anchors; the fixture needs none", n)
	}
	return f
}

// anchorFixture is the auto thread of a run in Support/Allgemein: seq 1 is
// the run anchor (kind run), then a message by writer (seq 2) and one by the
// app feedbot (seq 3), neither of which triggers anything.
func anchorFixture(t *testing.T, env *moduletest.Env) (thread string, anchor string) {
	t.Helper()
	m := env.Post("alex", env.Main("Support/Allgemein"), "ask", "@lotse the printer on floor 2 is broken")
	if m.TriggerState != "accepted" {
		t.Fatalf("trigger_state %v", m.TriggerState)
	}
	if err := env.Pool.QueryRow(t.Context(), `SELECT id::text FROM threads WHERE parent_message_id = $1`, m.ID).Scan(&thread); err != nil {
		t.Fatalf("auto thread: %v", err)
	}
	if err := env.Pool.QueryRow(t.Context(), `SELECT id::text FROM messages WHERE thread_id = $1 AND thread_seq = 1 AND kind = 'run'`, thread).Scan(&anchor); err != nil {
		t.Fatalf("run anchor at seq 1: %v", err)
	}
	for i, who := range []string{"writer", "feedbot"} {
		r := env.Post(who, thread, "after-anchor-"+who, "by "+who)
		if got := r.ThreadSeq; got != int64(i+2) {
			t.Fatalf("message by %s has thread_seq %d", who, got)
		}
	}
	if n := env.Count(`SELECT count(*) FROM messages WHERE thread_id = $1`, thread); n != 3 {
		t.Fatalf("auto thread holds %d messages, want 3", n)
	}
	return thread, anchor
}

func seqsOf(items []messaging.ContextItem) []int64 {
	out := make([]int64, len(items))
	for i, it := range items {
		out[i] = it.ThreadSeq
	}
	return out
}

// metricValue reads one sample of /metrics (0 when the series is absent).
func metricValue(t *testing.T, env *moduletest.Env, series string) float64 { return env.Metric(series) }

func principal(t *testing.T, env *moduletest.Env, handle string) identity.Principal {
	t.Helper()
	p, err := env.Identity.Get(t.Context(), env.World.ID(handle))
	if err != nil {
		t.Fatalf("principal %s: %v", handle, err)
	}
	return p
}

// TestContextWindow checks the window query of the run context over the
// real database: newest Limit kept in ascending order, tombstones, run
// anchors and the excluded author neither selected nor counted, HasOlder
// exact at its edges, exclusive bounds, full content above
// message.list_content_max_bytes; plus ContextMessages and the filter-mode
// check that counts a denied item as filter_mismatch.
func TestContextWindow(t *testing.T) {
	t.Parallel()
	env := moduletest.Build(t, moduletest.Options{Config: map[string]string{"message.list_content_max_bytes": strconv.Itoa(listCut)}})
	f := newReportsFixture(t, env)
	t.Run("window", func(t *testing.T) { testWindowCases(t, env, f) })
	t.Run("item fields and full content", func(t *testing.T) { testItemFields(t, env, f) })
	t.Run("run anchors are never selected", func(t *testing.T) { testAnchorsNeverSelected(t, env) })
	t.Run("ContextMessages returns messages as stored", func(t *testing.T) { testContextMessages(t, env, f) })
	t.Run("filter mode counts a denied item as filter_mismatch", func(t *testing.T) { testFilterMismatch(t, env) })
}

// windowCase is one case of the window table of TestContextWindow.
type windowCase struct {
	name      string
	q         messaging.ContextQuery
	want      []int64
	hasOlder  bool
	threadKey string // "" is the Reports post
}

// windowCases are the window queries over the Reports post: newest Limit
// kept ascending, tombstones and the excluded author neither selected nor
// counted, HasOlder exact at its edges, exclusive bounds.
func windowCases(lotse string) []windowCase {
	return []windowCase{
		{"newest Limit kept ascending", messaging.ContextQuery{BeforeSeq: 9, Limit: 3}, []int64{6, 7, 8}, true, ""},
		{"tombstone skipped, not counted (limit 4)", messaging.ContextQuery{BeforeSeq: 9, Limit: 4}, []int64{5, 6, 7, 8}, true, ""},
		{"tombstone skipped, not counted (limit 5)", messaging.ContextQuery{BeforeSeq: 9, Limit: 5}, []int64{3, 5, 6, 7, 8}, true, ""},
		{"Limit+1 selectable gives HasOlder", messaging.ContextQuery{BeforeSeq: 9, Limit: 6}, []int64{2, 3, 5, 6, 7, 8}, true, ""},
		{"exactly Limit selectable gives no HasOlder", messaging.ContextQuery{BeforeSeq: 9, Limit: 7}, []int64{1, 2, 3, 5, 6, 7, 8}, false, ""},
		{"Limit above the selectable count", messaging.ContextQuery{BeforeSeq: 9, Limit: 50}, []int64{1, 2, 3, 5, 6, 7, 8}, false, ""},
		{"excluded author not selected, not counted", messaging.ContextQuery{BeforeSeq: 9, Limit: 4, ExcludeAuthorID: lotse}, []int64{3, 6, 7, 8}, true, ""},
		{"excluded author: exactly Limit left", messaging.ContextQuery{BeforeSeq: 9, Limit: 5, ExcludeAuthorID: lotse}, []int64{1, 3, 6, 7, 8}, false, ""},
		{"excluded author only below the window", messaging.ContextQuery{AfterSeq: 1, BeforeSeq: 6, Limit: 1, ExcludeAuthorID: lotse}, []int64{3}, false, ""},
		{"AfterSeq is exclusive", messaging.ContextQuery{AfterSeq: 3, BeforeSeq: 9, Limit: 50}, []int64{5, 6, 7, 8}, false, ""},
		{"floor cuts the older ones: no HasOlder", messaging.ContextQuery{AfterSeq: 3, BeforeSeq: 9, Limit: 4}, []int64{5, 6, 7, 8}, false, ""},
		{"floor one lower: HasOlder", messaging.ContextQuery{AfterSeq: 2, BeforeSeq: 9, Limit: 4}, []int64{5, 6, 7, 8}, true, ""},
		{"BeforeSeq is exclusive", messaging.ContextQuery{BeforeSeq: 7, Limit: 50}, []int64{1, 2, 3, 5, 6}, false, ""},
		{"BeforeSeq with a limit", messaging.ContextQuery{BeforeSeq: 7, Limit: 2}, []int64{5, 6}, true, ""},
		{"both bounds", messaging.ContextQuery{AfterSeq: 2, BeforeSeq: 6, Limit: 50}, []int64{3, 5}, false, ""},
		{"only a tombstone between the bounds", messaging.ContextQuery{AfterSeq: 3, BeforeSeq: 5, Limit: 5}, []int64{}, false, ""},
		{"empty range", messaging.ContextQuery{AfterSeq: 5, BeforeSeq: 6, Limit: 5}, []int64{}, false, ""},
		{"inverted range", messaging.ContextQuery{AfterSeq: 8, BeforeSeq: 3, Limit: 5}, []int64{}, false, ""},
		{"Limit 0 with selectable messages", messaging.ContextQuery{BeforeSeq: 9, Limit: 0}, []int64{}, true, ""},
		{"Limit 0 over a tombstone only", messaging.ContextQuery{AfterSeq: 3, BeforeSeq: 5, Limit: 0}, []int64{}, false, ""},
		{"Limit 0 over the excluded author only", messaging.ContextQuery{AfterSeq: 4, BeforeSeq: 6, Limit: 0, ExcludeAuthorID: lotse}, []int64{}, false, ""},
		{"Limit 0 with the excluded author and others", messaging.ContextQuery{AfterSeq: 4, BeforeSeq: 7, Limit: 0, ExcludeAuthorID: lotse}, []int64{}, true, ""},
		{"Limit 0 with the floor at the trigger", messaging.ContextQuery{AfterSeq: 8, BeforeSeq: 9, Limit: 0}, []int64{}, false, ""},
		{"unknown thread", messaging.ContextQuery{ThreadID: ids.New(), BeforeSeq: 9, Limit: 5}, []int64{}, false, "unknown"},
	}
}

// testWindowCases runs every window case: the window itself, the combined
// read against the two reads apart, and ContextAuthors.
func testWindowCases(t *testing.T, env *moduletest.Env, f reportsFixture) {
	for _, tc := range windowCases(env.World.ID("lotse")) {
		t.Run(tc.name, func(t *testing.T) {
			q := tc.q
			if tc.threadKey == "" {
				q.ThreadID = f.thread
			}
			page := checkWindow(t, env, f, q, tc)
			// The combined read answers exactly what the two reads
			// answer apart, whatever the window.
			want := []string{f.ids[4], f.ids[8], ids.New()}
			msgs := checkCombinedRead(t, env, want, q, page)
			checkContextAuthors(t, env, want, q, msgs)
		})
	}
}

// checkWindow reads the window of q and checks it against tc: the seqs,
// HasOlder, and that every item is selectable and is the fixture's
// message. It returns the page.
func checkWindow(t *testing.T, env *moduletest.Env, f reportsFixture, q messaging.ContextQuery, tc windowCase) messaging.ContextPage {
	t.Helper()
	page, err := env.Messaging.ContextWindow(t.Context(), q)
	if err != nil {
		t.Fatalf("ContextWindow: %v", err)
	}
	if page.Items == nil {
		t.Errorf("Items is nil; want an empty slice")
	}
	if got := seqsOf(page.Items); fmt.Sprint(got) != fmt.Sprint(tc.want) {
		t.Errorf("seqs %v, want %v", got, tc.want)
	}
	if page.HasOlder != tc.hasOlder {
		t.Errorf("HasOlder %v, want %v", page.HasOlder, tc.hasOlder)
	}
	for _, it := range page.Items {
		if it.Deleted || it.Kind == "run" || (q.ExcludeAuthorID != "" && it.AuthorID == q.ExcludeAuthorID) {
			t.Errorf("item %d must not be selectable: %+v", it.ThreadSeq, it)
		}
		if it.ThreadID != q.ThreadID || it.ID != f.ids[it.ThreadSeq] {
			t.Errorf("item %d: id %s thread %s", it.ThreadSeq, it.ID, it.ThreadID)
		}
	}
	return page
}

// checkCombinedRead checks that ContextMessagesAndWindow answers what
// ContextMessages of want and the window page of q answer apart. It
// returns the messages.
func checkCombinedRead(t *testing.T, env *moduletest.Env, want []string, q messaging.ContextQuery, page messaging.ContextPage) map[string]messaging.ContextItem {
	t.Helper()
	msgs, err := env.Messaging.ContextMessages(t.Context(), want)
	if err != nil {
		t.Fatal(err)
	}
	gotMsgs, gotPage, err := env.Messaging.ContextMessagesAndWindow(t.Context(), want, q)
	if err != nil {
		t.Fatalf("ContextMessagesAndWindow: %v", err)
	}
	if !reflect.DeepEqual(gotPage, page) {
		t.Errorf("combined window %+v, want %+v", gotPage, page)
	}
	if !reflect.DeepEqual(gotMsgs, msgs) {
		t.Errorf("combined messages %+v, want %+v", gotMsgs, msgs)
	}
	return msgs
}

// checkContextAuthors checks that ContextAuthors names the authors of the
// rows the combined read reads: the window with its extra row (a window
// one longer) and the messages asked by id.
func checkContextAuthors(t *testing.T, env *moduletest.Env, want []string, q messaging.ContextQuery, msgs map[string]messaging.ContextItem) {
	t.Helper()
	ctx := t.Context()
	wider := q
	wider.Limit++
	widerPage, err := env.Messaging.ContextWindow(ctx, wider)
	if err != nil {
		t.Fatal(err)
	}
	wantAuthors := map[string]bool{}
	for _, it := range widerPage.Items {
		wantAuthors[it.AuthorID] = true
	}
	for _, m := range msgs {
		wantAuthors[m.AuthorID] = true
	}
	rel := messaging.ContextAuthors(want, q)
	if rel.Func != "context_authors" || len(rel.Args) != 6 {
		t.Fatalf("ContextAuthors = %+v, want context_authors with six arguments", rel)
	}
	rows, err := env.Pool.Query(ctx, `SELECT a.id::text FROM context_authors($1, $2, $3, $4, $5, $6) a (id)`, rel.Args...)
	if err != nil {
		t.Fatalf("ContextAuthors: %v", err)
	}
	gotAuthors := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		gotAuthors[id] = true
	}
	rows.Close()
	if !reflect.DeepEqual(gotAuthors, wantAuthors) {
		t.Errorf("ContextAuthors %v, want %v", gotAuthors, wantAuthors)
	}
}

// testItemFields checks the fields of the window's items and that the
// long message comes back whole while the history list cuts it.
func testItemFields(t *testing.T, env *moduletest.Env, f reportsFixture) {
	ctx := t.Context()
	page, err := env.Messaging.ContextWindow(ctx, messaging.ContextQuery{ThreadID: f.thread, BeforeSeq: 9, Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	by := map[int64]messaging.ContextItem{}
	for _, it := range page.Items {
		by[it.ThreadSeq] = it
	}
	long := by[7]
	if long.ContentMD != longContent || len(long.ContentMD) != 200 {
		t.Errorf("long content came back with %d bytes, want the stored 200: %q", len(long.ContentMD), long.ContentMD)
	}
	if m2 := by[2]; m2.AuthorID != env.World.ID("lotse") || m2.Origin != "agent" || m2.Kind != "text" || m2.ContentMD != "m2" {
		t.Errorf("m2 %+v", m2)
	}
	if m8 := by[8]; m8.AuthorID != env.World.ID("alex") || m8.Origin != "human" || m8.ReplyToMessageID != f.ids[6] || m8.CreatedAt.IsZero() {
		t.Errorf("m8 %+v", m8)
	}
	if m6 := by[6]; m6.ReplyToMessageID != "" {
		t.Errorf("m6 has reply_to %q", m6.ReplyToMessageID)
	}
	wantHistoryCutsLong(t, env, f)
}

// wantHistoryCutsLong checks that alex's history list of the fixture's
// thread cuts the long message (7) at listCut bytes: the setting the
// context reads must not apply is in force.
func wantHistoryCutsLong(t *testing.T, env *moduletest.Env, f reportsFixture) {
	t.Helper()
	// The history list does cut it, so the setting is in force.
	list, err := env.Messaging.History(t.Context(), env.Principal("alex"), f.thread, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	cut := false
	for _, m := range list.Messages {
		if m.ID == f.ids[7] {
			cut = m.ContentTruncated && len(m.ContentMD) <= listCut
		}
	}
	if !cut {
		t.Fatalf("the history list did not cut the long message at %d bytes; the test's setting is not in force", listCut)
	}
}

// testAnchorsNeverSelected checks that the window of a run's auto thread
// neither selects nor counts the run anchor.
func testAnchorsNeverSelected(t *testing.T, env *moduletest.Env) {
	thread, anchor := anchorFixture(t, env)
	for _, tc := range []struct {
		name     string
		q        messaging.ContextQuery
		want     []int64
		hasOlder bool
	}{
		{"all", messaging.ContextQuery{BeforeSeq: 4, Limit: 10}, []int64{2, 3}, false},
		{"exactly the non-anchors", messaging.ContextQuery{BeforeSeq: 4, Limit: 2}, []int64{2, 3}, false},
		{"one fewer", messaging.ContextQuery{BeforeSeq: 4, Limit: 1}, []int64{3}, true},
		{"anchor only", messaging.ContextQuery{BeforeSeq: 2, Limit: 10}, []int64{}, false},
		{"Limit 0 over the anchor only", messaging.ContextQuery{BeforeSeq: 2, Limit: 0}, []int64{}, false},
		{"Limit 0 over the anchor and a message", messaging.ContextQuery{BeforeSeq: 3, Limit: 0}, []int64{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := tc.q
			q.ThreadID = thread
			page, err := env.Messaging.ContextWindow(t.Context(), q)
			if err != nil {
				t.Fatal(err)
			}
			if got := seqsOf(page.Items); fmt.Sprint(got) != fmt.Sprint(tc.want) || page.HasOlder != tc.hasOlder {
				t.Errorf("seqs %v HasOlder %v, want %v %v", got, page.HasOlder, tc.want, tc.hasOlder)
			}
			for _, it := range page.Items {
				if it.ID == anchor || it.Kind == "run" {
					t.Errorf("run anchor selected: %+v", it)
				}
			}
		})
	}
}

// testContextMessages checks that ContextMessages returns the messages
// asked by id as stored: tombstones included, content whole, unknown ids
// absent.
func testContextMessages(t *testing.T, env *moduletest.Env, f reportsFixture) {
	ctx := t.Context()
	unknown := ids.New()
	got, err := env.Messaging.ContextMessages(ctx, []string{f.ids[4], f.ids[7], f.ids[8], unknown})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("got %d messages, want 3 (the unknown id is absent): %v", len(got), got)
	}
	if _, ok := got[unknown]; ok {
		t.Errorf("unknown id in the result")
	}
	checkContextMessageItems(t, env, f, got)
	empty, err := env.Messaging.ContextMessages(ctx, nil)
	if err != nil || len(empty) != 0 {
		t.Errorf("no ids: %v, %v", empty, err)
	}
}

// checkContextMessageItems checks the items ContextMessages returned for
// the fixture's messages 4, 7 and 8 as stored: the tombstone of robin's
// message, the long message whole, and m8 with its reply.
func checkContextMessageItems(t *testing.T, env *moduletest.Env, f reportsFixture, got map[string]messaging.ContextItem) {
	t.Helper()
	tomb := got[f.ids[4]]
	if !tomb.Deleted || tomb.ContentMD != "" || tomb.ThreadSeq != 4 || tomb.AuthorID != env.World.ID("robin") || tomb.ThreadID != f.thread {
		t.Errorf("tombstone %+v", tomb)
	}
	if long := got[f.ids[7]]; long.Deleted || long.ContentMD != longContent || long.ThreadSeq != 7 {
		t.Errorf("long message %+v", long)
	}
	if m8 := got[f.ids[8]]; m8.ContentMD != "m8" || m8.ReplyToMessageID != f.ids[6] || m8.ID != f.ids[8] {
		t.Errorf("m8 %+v", m8)
	}
}

// testFilterMismatch checks that filter mode counts a denied item as
// filter_mismatch and an allowed-only check as nothing.
func testFilterMismatch(t *testing.T, env *moduletest.Env) {
	ctx := t.Context()
	agent := principal(t, env, "lotse")
	kt, kc, err := env.Chat.ThreadInfo(ctx, env.Main("Marketing/Kampagnen"))
	if err != nil {
		t.Fatal(err)
	}
	at, ac, err := env.Chat.ThreadInfo(ctx, env.Main("Support/Allgemein"))
	if err != nil {
		t.Fatal(err)
	}
	denied := chat.PathInThread(kc, kt, authz.KindMessage, ids.New())
	allowed := chat.PathInThread(ac, at, authz.KindMessage, ids.New())
	const series = `bothy_authz_errors_total{reason="filter_mismatch"}`
	before := metricValue(t, env, series)
	ok, err := env.Authz.Filter(ctx, agent, authz.MessageRead, []authz.Facts{authz.Known(denied, authz.None), authz.Known(allowed, authz.None)})
	if err != nil || fmt.Sprint(ok) != "[false true]" {
		t.Fatalf("Filter = %v, %v, want [false true]", ok, err)
	}
	if after := metricValue(t, env, series); after != before+1 {
		t.Fatalf("%s went from %v to %v, want one more", series, before, after)
	}
	// An allowed-only check counts nothing.
	if ok, err := env.Authz.Filter(ctx, agent, authz.MessageRead, []authz.Facts{authz.Known(allowed, authz.None)}); err != nil || fmt.Sprint(ok) != "[true]" {
		t.Fatalf("Filter = %v, %v, want [true]", ok, err)
	}
	if after := metricValue(t, env, series); after != before+1 {
		t.Fatalf("%s is %v after an allowed-only check, want %v", series, after, before+1)
	}
}
