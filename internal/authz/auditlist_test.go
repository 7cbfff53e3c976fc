package authz_test

import (
	"fmt"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/admin"
	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/platform/problem"
)

// TestAuditListAtTheService pins authz.AuditList
// (docs/design/rights.md#audit): an owner reads the audit log filtered by
// actor, action, decision and time, oldest first; the denials of one
// actor, action and reason within one aggregation window are one entry
// counting them, and a later window starts a new entry; since and until
// select by the entry's last and first decision; pages of limit entries
// continue behind their EndCursor with More telling whether entries
// follow, and an empty page keeps the cursor it was given; people are
// refused forbidden level_insufficient and agents and apps
// subject_kind_not_allowed, each refusal audited; malformed filters,
// limits and cursors are validation errors naming every broken field and
// are refused before the door (nothing audited); every read an owner makes
// is audited as an allow of audit.list. The wire shapes are
// TestAuditEntries_OwnersReadTheLog.
func TestAuditListAtTheService(t *testing.T) {
	t.Parallel()
	env := moduletest.Build(t, moduletest.Options{Config: map[string]string{"ratelimit.rl.admin.burst": "1000"}})
	ctx := t.Context()
	robin, sam := env.Principal("robin"), env.Principal("sam")
	robinID, samID := env.World.ID("robin"), env.World.ID("sam")
	grant := admin.GrantInput{SubjectID: env.World.ID("writer"), SubjectKind: authz.SubjectPrincipal,
		TargetKind: authz.KindChannel, TargetID: env.World.Channel("Support/Allgemein").ID, Level: authz.Read}
	createGrant(t, env, grant)
	for range 2 {
		_, err := env.Admin.CreateGrant(ctx, sam, grant)
		wantRefusal(t, "sam grants", err, 403, problem.Forbidden, authz.ReasonLevel)
	}
	reads := 0
	list := func(f authz.AuditFilter, after string, limit int) authz.AuditPage {
		t.Helper()
		page, err := env.Authz.AuditList(ctx, robin, f, after, limit)
		if err != nil {
			t.Fatalf("audit list %+v: %v", f, err)
		}
		reads++
		return page
	}

	first := checkAuditFilters(t, list, robinID, samID, grant.TargetID)
	// A refusal in the next window is a new entry; since and until pick
	// the windows.
	env.Clock.Advance(2 * time.Minute)
	_, err := env.Admin.CreateGrant(ctx, sam, grant)
	wantRefusal(t, "sam grants later", err, 403, problem.Forbidden, authz.ReasonLevel)
	future := checkAuditWindows(t, env, list, first)

	checkAuditPages(t, list)

	// Owners only, each refusal audited.
	for _, c := range []struct{ who, reason string }{{"alex", authz.ReasonLevel}, {"lotse", authz.ReasonSubjectKind}, {"feedbot", authz.ReasonSubjectKind}} {
		_, err := env.Authz.AuditList(ctx, env.Principal(c.who), authz.AuditFilter{}, "", 10)
		wantRefusal(t, c.who+" reads the audit log", err, 403, problem.Forbidden, c.reason)
		env.WantAudit(c.who, []authz.AuditRow{{ActorID: env.World.ID(c.who), Action: "audit.list", Decision: "deny", Reason: c.reason, ResourceKind: "instance", Count: 1}})
	}

	checkAuditListInputRefused(t, env, future)

	wantAuditedReads(t, env, reads)
}

// auditLister is how TestAuditListAtTheService's phases read the audit
// log as robin: each call is one read, counted for wantAuditedReads.
type auditLister func(f authz.AuditFilter, after string, limit int) authz.AuditPage

// checkAuditFilters checks the filters on what the test set up: sam's two
// refused grants on the channel target are one deny entry counting two,
// robin's grant is one allow entry, and sam has no allows. It returns
// sam's entry, the first window.
func checkAuditFilters(t *testing.T, list auditLister, robinID, samID, target string) authz.AuditEntry {
	t.Helper()
	denied := list(authz.AuditFilter{Action: "grant.create", Decision: "deny"}, "", 100).Entries
	if len(denied) != 1 || denied[0].Count != 2 || denied[0].Reason != authz.ReasonLevel || denied[0].ActorID != samID ||
		denied[0].Decision != "deny" || denied[0].ResourceKind != "channel" || denied[0].ResourceID != target {
		t.Fatalf("sam's refusals: %+v", denied)
	}
	allowed := list(authz.AuditFilter{Action: "grant.create", ActorID: robinID}, "", 100).Entries
	if len(allowed) != 1 || allowed[0].Decision != "allow" || allowed[0].Count != 1 || allowed[0].ActorID != robinID {
		t.Fatalf("robin's grant: %+v", allowed)
	}
	if got := list(authz.AuditFilter{ActorID: samID, Decision: "allow"}, "", 100).Entries; len(got) != 0 {
		t.Fatalf("sam's allows: %+v", got)
	}
	return denied[0]
}

// checkAuditWindows checks, after sam's refusal in a later window, that
// it is a new entry behind first, and that since and until select by an
// entry's last and first decision. It returns the time an hour ahead it
// read with, for the later phases.
func checkAuditWindows(t *testing.T, env *moduletest.Env, list auditLister, first authz.AuditEntry) time.Time {
	t.Helper()
	both := list(authz.AuditFilter{Action: "grant.create", Decision: "deny"}, "", 100).Entries
	if len(both) != 2 || both[0].ID != first.ID || both[0].Count != 2 || both[1].Count != 1 || !both[1].FirstAt.After(both[0].LastAt) {
		t.Fatalf("two windows: %+v", both)
	}
	mid := first.LastAt.Add(time.Minute)
	if got := list(authz.AuditFilter{Action: "grant.create", Decision: "deny", Since: &mid}, "", 100).Entries; len(got) != 1 || got[0].ID != both[1].ID {
		t.Fatalf("since between the windows: %+v", got)
	}
	if got := list(authz.AuditFilter{Action: "grant.create", Decision: "deny", Until: &mid}, "", 100).Entries; len(got) != 1 || got[0].ID != first.ID {
		t.Fatalf("until between the windows: %+v", got)
	}
	future := env.Clock.Now().Add(time.Hour)
	if got := list(authz.AuditFilter{Action: "grant.create", Since: &future}, "", 100).Entries; len(got) != 0 {
		t.Fatalf("entries since an hour ahead: %+v", got)
	}
	return future
}

// checkAuditPages reads the three grant.create entries through list a
// page of one at a time, oldest first: each page's EndCursor continues
// behind it, More tells whether entries follow, the pages together are
// the whole list, and the empty page behind the last entry keeps the
// cursor it was given.
func checkAuditPages(t *testing.T, list auditLister) {
	t.Helper()
	var ids []string
	after := ""
	for i := 0; ; i++ {
		page := list(authz.AuditFilter{Action: "grant.create"}, after, 1)
		if len(page.Entries) != 1 || page.EndCursor != authz.AuditCursor(page.Entries[0]) || page.More != (i < 2) {
			t.Fatalf("page %d: %+v", i, page)
		}
		ids = append(ids, page.Entries[0].ID)
		after = page.EndCursor
		if !page.More {
			break
		}
	}
	whole := list(authz.AuditFilter{Action: "grant.create"}, "", 3)
	if whole.More || len(whole.Entries) != 3 || fmt.Sprint(ids) != fmt.Sprint([]string{whole.Entries[0].ID, whole.Entries[1].ID, whole.Entries[2].ID}) {
		t.Fatalf("pages %v, whole %+v", ids, whole)
	}
	if end := list(authz.AuditFilter{Action: "grant.create"}, after, 10); len(end.Entries) != 0 || end.More || end.EndCursor != after {
		t.Fatalf("behind the last entry: %+v", end)
	}
}

// checkAuditListInputRefused has robin read the audit log with malformed
// filters, limits and cursors (future an hour ahead): each is refused
// validation_failed naming every broken field, before the door.
func checkAuditListInputRefused(t *testing.T, env *moduletest.Env, future time.Time) {
	t.Helper()
	ctx, robin := t.Context(), env.Principal("robin")
	// Bad input, refused before the door.
	until := moduletest.Start.Add(-time.Hour)
	for _, c := range []struct {
		f     authz.AuditFilter
		after string
		limit int
		want  string
	}{
		{authz.AuditFilter{Decision: "maybe"}, "", 10, "[filter/decision invalid]"},
		{authz.AuditFilter{}, "", 0, "[limit out_of_range]"},
		{authz.AuditFilter{}, "", 1001, "[limit out_of_range]"},
		{authz.AuditFilter{}, "nope", 10, "[after invalid_cursor]"},
		{authz.AuditFilter{}, "bm9wZXxub3Bl", 10, "[after invalid_cursor]"},
		{authz.AuditFilter{Action: "no.such.action"}, "", 10, "[filter/action invalid]"},
		{authz.AuditFilter{ActorID: "alex"}, "", 10, "[filter/actor invalid_format]"},
		{authz.AuditFilter{Since: &future, Until: &until}, "", 10, "[filter/until out_of_range]"},
		{authz.AuditFilter{ActorID: "alex", Decision: "maybe"}, "nope", 0, "[limit out_of_range filter/actor invalid_format filter/decision invalid after invalid_cursor]"},
	} {
		_, err := env.Authz.AuditList(ctx, robin, c.f, c.after, c.limit)
		p := problem.From("authz.testAuditList", err)
		if p == nil || p.Code != problem.ValidationFailed {
			t.Fatalf("%+v %q %d: %v, want validation_failed", c.f, c.after, c.limit, err)
		}
		var got []string
		for _, f := range p.Fields {
			got = append(got, f.Pointer+" "+f.Code)
		}
		if fmt.Sprint(got) != c.want {
			t.Fatalf("%+v %q %d: fields %v, want %s", c.f, c.after, c.limit, got, c.want)
		}
	}
}

// wantAuditedReads checks that robin's audited allows of audit.list count
// reads, the reads robin made.
func wantAuditedReads(t *testing.T, env *moduletest.Env, reads int) {
	t.Helper()
	// Every read robin made is an audited allow of audit.list (and only
	// those: the refused input never reached the door).
	n := 0
	for _, r := range env.AuditRows("robin") {
		if r.Action == "audit.list" {
			if r.Decision != "allow" || r.ResourceKind != "instance" {
				t.Fatalf("robin's audit.list row %+v", r)
			}
			n += r.Count
		}
	}
	if n != reads {
		t.Fatalf("robin's audited reads: %d, want %d", n, reads)
	}
}
