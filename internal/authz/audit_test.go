package authz_test

import (
	"context"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/admin"
	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/platform/problem"
)

// wantRefusal fails the test unless err is a problem with status, code and
// reason.
func wantRefusal(t *testing.T, what string, err error, status int, code problem.Code, reason string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: allowed, want %d %s", what, status, code)
	}
	p := problem.From("authz.wantRefusal", err)
	if p.Code.Status() != status || p.Code != code || p.Reason != reason {
		t.Fatalf("%s: problem %v, want status %d code %q reason %q", what, err, status, code, reason)
	}
}

// post writes as who into thread through the messaging service and returns
// its error.
func post(env *moduletest.Env, who, thread, clientMsgID, content string) error {
	_, _, err := env.Messaging.Create(context.Background(), env.Principal(who), thread, messaging.Input{ClientMsgID: clientMsgID, ContentMD: content})
	return err
}

// TestForbiddenReasonsAndAudit checks the refusals level_insufficient and
// channel_archived, and the audit of decisions: denials aggregated per
// actor, action and reason within audit.deny_aggregate_window; allows
// audited only for audited actions (docs/design/rights.md#audit). That both faces
// answer and audit alike is TestForbiddenSameOnBothFaces in
// internal/server.
func TestForbiddenReasonsAndAudit(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	writerID, alexID, robinID := env.World.ID("writer"), env.World.ID("alex"), env.World.ID("robin")
	robin := env.Principal("robin")
	eskalation := env.Main("Support/Eskalation")
	allgemein := env.Main("Support/Allgemein")
	countIn := func(thread string) int {
		return env.Count(`SELECT count(*) FROM messages WHERE thread_id = $1`, thread)
	}
	for _, h := range []string{"robin", "writer", "alex"} {
		env.WantAudit(h, nil)
	}

	// An owner action is audited on allow.
	createGrant(t, env, admin.GrantInput{SubjectID: writerID, SubjectKind: "principal",
		TargetKind: authz.KindChannel, TargetID: env.World.Channel("Support/Eskalation").ID, Level: authz.Read})
	grantAllow := authz.AuditRow{ActorID: robinID, Action: "grant.create", Decision: "allow", ResourceKind: "channel", Count: 1}
	env.WantAudit("robin", []authz.AuditRow{grantAllow})

	levelRow, levelRow2 := checkLevelDenialsAggregate(t, env, eskalation, countIn)

	// An allowed message is not audited.
	if err := post(env, "writer", allgemein, "allowed-1", "Morning, everybody"); err != nil {
		t.Fatalf("writer posts into Allgemein: %v", err)
	}
	env.WantAudit("writer", []authz.AuditRow{levelRow, levelRow2})

	// A read without rights is a 404 and audited as no_grant.
	readKampagnen := func() error {
		_, err := env.Messaging.History(t.Context(), env.Principal("writer"), env.Main("Marketing/Kampagnen"), 0, 0)
		return err
	}
	wantRefusal(t, "writer reads Marketing", readKampagnen(), 404, problem.NotFound, "")
	noGrant := authz.AuditRow{ActorID: writerID, Action: "thread.read", Decision: "deny", Reason: "no_grant", ResourceKind: "thread", Count: 1}
	env.WantAudit("writer", []authz.AuditRow{levelRow, levelRow2, noGrant})
	wantRefusal(t, "writer reads Marketing again", readKampagnen(), 404, problem.NotFound, "")
	noGrant.Count = 2
	env.WantAudit("writer", []authz.AuditRow{levelRow, levelRow2, noGrant})

	// Archived channel: a level that would suffice gives channel_read_only.
	if ch, err := env.Admin.ArchiveChannel(t.Context(), robin, env.World.Channel("Support/Allgemein").ID); err != nil || ch.ArchivedAt == nil {
		t.Fatalf("archive answer %+v (%v)", ch, err)
	}
	archiveAllow := authz.AuditRow{ActorID: robinID, Action: "channel.archive", Decision: "allow", ResourceKind: "channel", Count: 1}
	env.WantAudit("robin", []authz.AuditRow{grantAllow, archiveAllow})
	before := countIn(allgemein)
	wantRefusal(t, "alex posts into archived Allgemein", post(env, "alex", allgemein, "arch-1", "Anyone here?"), 403, problem.ChannelReadOnly, "channel_archived")
	archivedRow := authz.AuditRow{ActorID: alexID, Action: "message.create", Decision: "deny", Reason: "channel_archived", ResourceKind: "thread", Count: 1}
	env.WantAudit("alex", []authz.AuditRow{archivedRow})
	wantRefusal(t, "writer posts into archived Allgemein", post(env, "writer", allgemein, "arch-2", "Anyone here?"), 403, problem.ChannelReadOnly, "channel_archived")
	if n := countIn(allgemein); n != before {
		t.Fatalf("posts into the archived channel stored messages: %d, want %d", n, before)
	}
	// Reading the archived channel still works.
	if _, err := env.Messaging.History(t.Context(), env.Principal("alex"), allgemein, 0, 0); err != nil {
		t.Fatalf("alex reads archived Allgemein: %v", err)
	}

	// In an archived channel a level that would not suffice anyway stays
	// level_insufficient.
	if _, err := env.Admin.ArchiveChannel(t.Context(), robin, env.World.Channel("Support/Eskalation").ID); err != nil {
		t.Fatalf("archive Eskalation: %v", err)
	}
	wantRefusal(t, "writer (read) posts into archived Eskalation", post(env, "writer", eskalation, "arch-3", "Let me in"), 403, problem.Forbidden, "level_insufficient")
	wantRefusal(t, "alex (trigger) posts into archived Eskalation", post(env, "alex", eskalation, "arch-4", "Anyone here?"), 403, problem.ChannelReadOnly, "channel_archived")
	archivedRow.Count = 2
	env.WantAudit("alex", []authz.AuditRow{archivedRow})
	writerArchived := authz.AuditRow{ActorID: writerID, Action: "message.create", Decision: "deny", Reason: "channel_archived", ResourceKind: "thread", Count: 1}
	levelRow2.Count = 2
	env.WantAudit("writer", []authz.AuditRow{levelRow, levelRow2, noGrant, writerArchived})
}

// checkLevelDenialsAggregate has writer, who reads but may not write in
// eskalation, post there: each refusal is level_insufficient, stores
// nothing, and counts into one audit row per aggregation window. It
// returns the rows of the first window and of the next.
func checkLevelDenialsAggregate(t *testing.T, env *moduletest.Env, eskalation string, countIn func(thread string) int) (first, second authz.AuditRow) {
	t.Helper()
	// Read but no write: level_insufficient, aggregated into one row.
	before := countIn(eskalation)
	wantRefusal(t, "writer posts with read", post(env, "writer", eskalation, "deny-1", "Let me in"), 403, problem.Forbidden, "level_insufficient")
	levelRow := authz.AuditRow{ActorID: env.World.ID("writer"), Action: "message.create", Decision: "deny", Reason: "level_insufficient", ResourceKind: "thread", Count: 1}
	env.WantAudit("writer", []authz.AuditRow{levelRow})
	for i, cid := range []string{"deny-2", "deny-3", "deny-gql"} {
		wantRefusal(t, "writer posts with read again", post(env, "writer", eskalation, cid, "Let me in"), 403, problem.Forbidden, "level_insufficient")
		levelRow.Count = i + 2
		env.WantAudit("writer", []authz.AuditRow{levelRow})
	}
	if n := countIn(eskalation); n != before {
		t.Fatalf("refused posts stored messages: %d, want %d", n, before)
	}

	// A new window starts a new row.
	env.Clock.Advance(61 * time.Second)
	wantRefusal(t, "writer posts with read in the next window", post(env, "writer", eskalation, "deny-4", "Let me in"), 403, problem.Forbidden, "level_insufficient")
	levelRow2 := levelRow
	levelRow2.Count = 1
	env.WantAudit("writer", []authz.AuditRow{levelRow, levelRow2})
	return levelRow, levelRow2
}
