package feed_test

import (
	"slices"
	"strconv"
	"testing"

	"bothy.example.com/bothy/internal/admin"
	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/feed"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/platform/problem"
)

// seqs returns the sequence numbers of evs.
func seqs(evs []events.Event) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	return out
}

// wantInvalid fails the test unless err is validation_failed with the one
// field error pointer and code.
func wantInvalid(t *testing.T, what string, err error, pointer, code string) {
	t.Helper()
	p := problem.From("feed.wantInvalid", err)
	if p == nil || p.Code != problem.ValidationFailed || len(p.Fields) != 1 || p.Fields[0].Pointer != pointer || p.Fields[0].Code != code {
		t.Fatalf("%s: %+v, want validation_failed %s %s", what, p, pointer, code)
	}
}

// TestListEventsPagesAndCursors pins feed.Service.List's paging
// (docs/design/model.md#events): a page holds at most limit events in
// log order, More says that events follow, NextAfter is the last seq
// handed out (the cursor given, or 0 for none, when nothing came), and the
// pages read one after the other are the whole list; limit 0 takes
// events.list_limit_default, and a limit below 1 or above
// events.list_limit_max is validation_failed (limit out_of_range).
// Start, the cursor of a subscription, starts at the end of the log for ""
// and "now", keeps a numeric cursor as given and refuses any other
// (after invalid_cursor).
func TestListEventsPagesAndCursors(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	for i, who := range []string{"writer", "alex", "writer", "sam", "writer"} {
		env.Post(who, env.Main("Support/Allgemein"), "pc-"+strconv.Itoa(i), "message "+strconv.Itoa(i))
	}
	robin := env.Principal("robin")
	all, err := env.Feed.List(ctx, robin, "", 0)
	if err != nil || all.More || len(all.Events) < 5 {
		t.Fatalf("the whole log: %d events, more %v, %v", len(all.Events), all.More, err)
	}
	last := all.Events[len(all.Events)-1].Seq
	if all.NextAfter != strconv.FormatInt(last, 10) {
		t.Fatalf("NextAfter %s, want the last seq %d", all.NextAfter, last)
	}
	if env.Config.Int(config.EventsListLimitDefault) < len(all.Events) {
		t.Fatalf("the default page %d is smaller than this test's log", env.Config.Int(config.EventsListLimitDefault))
	}

	pageThroughTheLog(t, env, robin, all.Events)

	limitMax := env.Config.Int(config.EventsListLimitMax)
	for _, limit := range []int{-1, limitMax + 1} {
		_, err := env.Feed.List(ctx, robin, "", limit)
		wantInvalid(t, "limit "+strconv.Itoa(limit), err, "limit", "out_of_range")
	}
	if page, err := env.Feed.List(ctx, robin, "", limitMax); err != nil || len(page.Events) != len(all.Events) {
		t.Fatalf("limit events.list_limit_max: %d events, %v", len(page.Events), err)
	}

	checkStartCursors(t, env, robin, last)
}

// pageThroughTheLog reads the log as robin, two events a page, and checks
// every page (at most 2 events, More while events follow, NextAfter the
// last seq handed out), that the pages together are all, and that the page
// after the end is empty and keeps the cursor.
func pageThroughTheLog(t *testing.T, env *moduletest.Env, robin identity.Principal, all []events.Event) {
	t.Helper()
	var paged []events.Event
	after := ""
	for range len(all) {
		page, err := env.Feed.List(t.Context(), robin, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Events) > 2 || len(page.Events) == 0 {
			t.Fatalf("a page of limit 2 after %q holds %d events", after, len(page.Events))
		}
		paged = append(paged, page.Events...)
		if want := len(paged) < len(all); page.More != want {
			t.Fatalf("after %q: more %v with %d of %d events read", after, page.More, len(paged), len(all))
		}
		if page.NextAfter != strconv.FormatInt(page.Events[len(page.Events)-1].Seq, 10) {
			t.Fatalf("after %q: NextAfter %s, last event %d", after, page.NextAfter, page.Events[len(page.Events)-1].Seq)
		}
		after = page.NextAfter
		if !page.More {
			break
		}
	}
	if !slices.Equal(seqs(paged), seqs(all)) {
		t.Fatalf("pages %v, one page %v", seqs(paged), seqs(all))
	}
	end, err := env.Feed.List(t.Context(), robin, after, 2)
	if err != nil || len(end.Events) != 0 || end.More || end.NextAfter != after {
		t.Fatalf("after the end: %+v %v", end, err)
	}
}

// checkStartCursors checks Start, the cursor of a subscription, as robin:
// "" and "now" start at last, the end of the log; a numeric cursor is kept
// as given; any other is after invalid_cursor.
func checkStartCursors(t *testing.T, env *moduletest.Env, robin identity.Principal, last int64) {
	t.Helper()
	ctx := t.Context()
	for _, cursor := range []string{"", "now"} {
		got, err := env.Feed.Start(ctx, robin, cursor)
		if err != nil || got != strconv.FormatInt(last, 10) {
			t.Fatalf("Start(%q) = %q %v, want the end %d", cursor, got, err, last)
		}
	}
	if got, err := env.Feed.Start(ctx, robin, "2"); err != nil || got != "2" {
		t.Fatalf("Start(2) = %q %v", got, err)
	}
	_, err := env.Feed.Start(ctx, robin, "two")
	wantInvalid(t, "Start(two)", err, "after", "invalid_cursor")
}

// TestListEventsScopes pins who sees which event
// (docs/design/model.md#events, docs/design/rights.md#filter-mode) beyond
// the counts of TestListEventsVisibility:
//   - an agent that is a thread's fixed operator sees the events of that
//     thread after the channel's operator changed to another agent, and no
//     longer those of the channel's main thread
//     (docs/design/rights.md#operator-rule); Visible, the check a
//     subscription makes before it delivers, agrees;
//   - an event about a space as a whole (space.updated) reaches those who
//     read the space and nobody else;
//   - Next, a subscription's page, decides again now: after Sam's grant on
//     Marketing is revoked it holds none of Marketing's events, which
//     Visible then refuses too.
func TestListEventsScopes(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	sc := newScopeEvents(t, env)
	for _, c := range []struct {
		who                             string
		thread, main, marketing, spaced bool
	}{
		{"robin", true, true, true, true},
		{"lotse", true, false, false, false},
		{"texter", true, true, true, false},
		{"alex", true, true, false, true},
		{"sam", true, true, true, false},
		{"writer", true, true, false, false},
	} {
		got := sc.list(c.who)
		if got[sc.thread.Seq] != c.thread || got[sc.main.Seq] != c.main || got[sc.marketing.Seq] != c.marketing || got[sc.spaceUpdated.Seq] != c.spaced {
			t.Errorf("%s sees thread %v, main %v, marketing %v, space %v; want %+v", c.who,
				got[sc.thread.Seq], got[sc.main.Seq], got[sc.marketing.Seq], got[sc.spaceUpdated.Seq], c)
		}
	}
	lotse := env.Principal("lotse")
	for _, c := range []struct {
		e    events.Event
		want bool
	}{{sc.thread, true}, {sc.main, false}, {sc.marketing, false}} {
		if ok, err := env.Feed.Visible(t.Context(), lotse, c.e); err != nil || ok != c.want {
			t.Errorf("Visible(lotse, %s of thread %s) = %v %v, want %v", c.e.Type, c.e.ThreadID, ok, err, c.want)
		}
	}
	sc.checkRevoke()
}

// scopeEvents is the fixture of TestListEventsScopes: the cursor before
// its events and the four events whose readers it checks.
type scopeEvents struct {
	t    *testing.T
	env  *moduletest.Env
	from string
	// thread is posted in a thread whose fixed operator is lotse, main in
	// Support/Allgemein's main thread (operated by texter), marketing in
	// Marketing/Kampagnen; spaceUpdated is the rename of Support.
	thread, main, marketing, spaceUpdated events.Event
}

// newScopeEvents opens a thread in Support/Allgemein (operated by lotse,
// the space's default), hands the channel to texter, then posts in the
// thread, in the channel's main thread and in Marketing and renames
// Support, and finds the four events in robin's list.
func newScopeEvents(t *testing.T, env *moduletest.Env) *scopeEvents {
	t.Helper()
	ctx := t.Context()
	robin := env.Principal("robin")
	allgemein := env.World.Channel("Support/Allgemein")
	lotseID := env.World.ID("lotse")
	th, _, _, err := env.Messaging.CreateThread(ctx, env.Principal("writer"), allgemein.ID,
		messaging.ThreadInput{Title: "Printer", First: messaging.Input{ClientMsgID: "sc-first", ContentMD: "It jams"}})
	if err != nil {
		t.Fatal(err)
	}
	if th.OperatorAgentID != lotseID {
		t.Fatalf("thread operator %q, want lotse (the space's default)", th.OperatorAgentID)
	}
	if _, err := env.Admin.SetOperator(ctx, robin, allgemein.ID, chat.OperatorAgent, env.World.ID("texter")); err != nil {
		t.Fatal(err)
	}
	from, err := env.Feed.Start(ctx, robin, "")
	if err != nil {
		t.Fatal(err)
	}
	inThread := env.Post("writer", th.ID, "sc-thread", "still jams")
	inMain := env.Post("writer", allgemein.MainThreadID, "sc-main", "coffee is out")
	kampagne := env.Post("sam", env.Main("Marketing/Kampagnen"), "sc-marketing", "spring plan")
	name := "Support desk"
	if _, err := env.Admin.UpdateSpace(ctx, robin, env.World.Spaces["Support"], admin.SpacePatch{Name: &name}); err != nil {
		t.Fatal(err)
	}
	all, err := env.Feed.List(ctx, robin, from, 0)
	if err != nil {
		t.Fatal(err)
	}
	sc := &scopeEvents{t: t, env: env, from: from}
	for _, e := range all.Events {
		if e.Type == events.SpaceUpdated {
			sc.spaceUpdated = e
		}
	}
	if sc.spaceUpdated.Seq == 0 || sc.spaceUpdated.SpaceID != env.World.Spaces["Support"] {
		t.Fatalf("no space.updated of Support in %+v", all.Events)
	}
	sc.thread = messageCreated(t, all, inThread.ID)
	sc.main = messageCreated(t, all, inMain.ID)
	sc.marketing = messageCreated(t, all, kampagne.ID)
	return sc
}

// messageCreated returns the message.created event of message id in page,
// and fails the test if there is none.
func messageCreated(t *testing.T, page feed.Page, id string) events.Event {
	t.Helper()
	for _, e := range page.Events {
		if e.Type == events.MessageCreated && e.MessageID == id {
			return e
		}
	}
	t.Fatalf("no message.created of %s in %+v", id, page.Events)
	return events.Event{}
}

// sees returns the set of sequence numbers in page.
func sees(page feed.Page) map[int64]bool {
	got := map[int64]bool{}
	for _, e := range page.Events {
		got[e.Seq] = true
	}
	return got
}

// list returns the set of events who lists from the fixture's cursor.
func (sc *scopeEvents) list(who string) map[int64]bool {
	sc.t.Helper()
	page, err := sc.env.Feed.List(sc.t.Context(), sc.env.Principal(who), sc.from, 0)
	if err != nil {
		sc.t.Fatalf("%s lists: %v", who, err)
	}
	return sees(page)
}

// checkRevoke revokes sam's grant on Marketing and checks that Next, a
// subscription's page, and Visible decide again: Marketing's event is
// gone, the main thread's stays.
func (sc *scopeEvents) checkRevoke() {
	t, env, ctx := sc.t, sc.env, sc.t.Context()
	t.Helper()
	var grant string
	if err := env.Pool.QueryRow(ctx, `SELECT id::text FROM grants WHERE subject_principal_id = $1 AND target_space_id = $2`,
		env.World.ID("sam"), env.World.Spaces["Marketing"]).Scan(&grant); err != nil {
		t.Fatalf("sam's Marketing grant: %v", err)
	}
	if _, err := env.Admin.RevokeGrant(ctx, env.Principal("robin"), grant); err != nil {
		t.Fatal(err)
	}
	sam := env.Principal("sam")
	next, err := env.Feed.Next(ctx, sam, sc.from, env.Feed.LimitMax())
	if err != nil {
		t.Fatal(err)
	}
	if got := sees(next); got[sc.marketing.Seq] || !got[sc.main.Seq] {
		t.Fatalf("Next after the revoke: marketing %v, main %v", got[sc.marketing.Seq], got[sc.main.Seq])
	}
	if ok, err := env.Feed.Visible(ctx, sam, sc.marketing); err != nil || ok {
		t.Fatalf("Visible(sam, marketing) after the revoke = %v %v", ok, err)
	}
}
