package authz_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/admin"
	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/platform/problem"
)

// worldHandles are all principals of the example world
// (docs/design/model.md#example-world).
var worldHandles = []string{"robin", "alex", "sam", "writer", "lotse", "texter", "feedbot"}

// worldChannels are all channels of the example world with their kind.
var worldChannels = []struct{ key, kind string }{
	{"Support/Allgemein", "text"},
	{"Support/Eskalation", "text"},
	{"Support/Reports", "forum"},
	{"Support/Bulletin", "forum"},
	{"Marketing/Kampagnen", "text"},
	{"Marketing/Ideas", "forum"},
}

// levelAt returns the effective (capped) level of the principal with handle
// on the resource at p, computed by the real authorization service: the
// level its door decided a read on (unmetered, so the probes spend no
// tokens).
func levelAt(t *testing.T, env *moduletest.Env, handle string, p authz.Path) authz.Level {
	t.Helper()
	ctx := context.Background()
	if !p.Exists {
		t.Fatalf("path %s %s does not exist", p.Kind, p.ID)
	}
	pr, err := env.Identity.Get(ctx, env.World.ID(handle))
	if err != nil {
		t.Fatalf("principal %s: %v", handle, err)
	}
	d, _, err := env.Authz.Authorize(authz.Unmetered(ctx), pr, authz.ChannelRead, authz.Facts{Path: p})
	if err != nil && d.Code != problem.NotFound {
		t.Fatalf("level of %s: %v", handle, err)
	}
	return d.Level
}

// threadLevel is levelAt on the path of thread id.
func threadLevel(t *testing.T, env *moduletest.Env, handle, threadID string) authz.Level {
	t.Helper()
	return levelAt(t, env, handle, env.ThreadPath(threadID))
}

// channelLevel is levelAt on the path of the channel with key "Space/Channel".
func channelLevel(t *testing.T, env *moduletest.Env, handle, key string) authz.Level {
	t.Helper()
	return levelAt(t, env, handle, env.ChannelPath(key))
}

// wantLevel fails the test when got is not want.
func wantLevel(t *testing.T, what string, got, want authz.Level) {
	t.Helper()
	if got != want {
		t.Errorf("%s: level %s, want %s", what, got, want)
	}
}

// newThread creates a thread (a post in a forum) with title as who in the
// channel with key through the messaging service and returns it.
func newThread(t *testing.T, env *moduletest.Env, who, key, title, clientMsgID, content string) (id, kind, operator string) {
	t.Helper()
	th, _, _, err := env.Messaging.CreateThread(t.Context(), env.Principal(who), env.World.Channel(key).ID,
		messaging.ThreadInput{Title: title, First: messaging.Input{ClientMsgID: clientMsgID, ContentMD: content}})
	if err != nil {
		t.Fatalf("create thread in %s as %s: %v", key, who, err)
	}
	return th.ID, string(th.Kind), th.OperatorAgentID
}

// createPost creates a thread (a post in a forum) as who in the channel with
// key and returns its id and kind.
func createPost(t *testing.T, env *moduletest.Env, who, key, clientMsgID string) (id, kind string) {
	t.Helper()
	id, kind, _ = newThread(t, env, who, key, "Level probe", clientMsgID, "Level probe")
	return id, kind
}

// createGrant creates a grant as robin through the admin service and
// returns it.
func createGrant(t *testing.T, env *moduletest.Env, in admin.GrantInput) authz.Grant {
	t.Helper()
	g, err := env.Admin.CreateGrant(t.Context(), env.Principal("robin"), in)
	if err != nil {
		t.Fatalf("create grant %+v: %v", in, err)
	}
	return g
}

const (
	lN = authz.None
	lR = authz.Read
	lW = authz.Write
	lT = authz.Trigger
)

// expectedWorldLevels is the effective level of every principal on every
// channel of the untouched world, derived from
// docs/design/model.md#example-world
// and docs/design/rights.md#effective-level.
var expectedWorldLevels = map[string]map[string]authz.Level{
	// robin is the owner: trigger everywhere, without grants.
	"robin": {"Support/Allgemein": lT, "Support/Eskalation": lT, "Support/Reports": lT, "Support/Bulletin": lT, "Marketing/Kampagnen": lT, "Marketing/Ideas": lT},
	// alex: trigger on space Support.
	"alex": {"Support/Allgemein": lT, "Support/Eskalation": lT, "Support/Reports": lT, "Support/Bulletin": lT, "Marketing/Kampagnen": lN, "Marketing/Ideas": lN},
	// sam: trigger on Support/Allgemein and on space Marketing.
	"sam": {"Support/Allgemein": lT, "Support/Eskalation": lN, "Support/Reports": lN, "Support/Bulletin": lN, "Marketing/Kampagnen": lT, "Marketing/Ideas": lT},
	// writer: write on Support/Allgemein only.
	"writer": {"Support/Allgemein": lW, "Support/Eskalation": lN, "Support/Reports": lN, "Support/Bulletin": lN, "Marketing/Kampagnen": lN, "Marketing/Ideas": lN},
	// lotse: operator (inherited) of Allgemein, Eskalation, Bulletin; grant on
	// Reports (mode none); nothing on Marketing.
	"lotse": {"Support/Allgemein": lW, "Support/Eskalation": lW, "Support/Reports": lW, "Support/Bulletin": lW, "Marketing/Kampagnen": lN, "Marketing/Ideas": lN},
	// texter: grant on Allgemein; operator (inherited) of the Marketing channels.
	"texter": {"Support/Allgemein": lW, "Support/Eskalation": lN, "Support/Reports": lN, "Support/Bulletin": lN, "Marketing/Kampagnen": lW, "Marketing/Ideas": lW},
	// feedbot: grant on Allgemein only.
	"feedbot": {"Support/Allgemein": lW, "Support/Eskalation": lN, "Support/Reports": lN, "Support/Bulletin": lN, "Marketing/Kampagnen": lN, "Marketing/Ideas": lN},
}

// TestEffectiveLevelTable checks the effective level of every principal of
// the world on every channel of the world
// (docs/design/rights.md#effective-level), and how
// grants, expiry, revocation, groups, operator changes and archiving change
// it.
func TestEffectiveLevelTable(t *testing.T) {
	t.Parallel()
	t.Run("world", levelsOfTheWorld)
	t.Run("expired grant", levelsWithAnExpiredGrant)
	t.Run("revoked grant", levelsWithARevokedGrant)
	t.Run("group grant", levelsWithAGroupGrant)
	t.Run("owner without grants", levelsOfTheOwner)
	t.Run("agents and apps never exceed write", levelsOfAgentsAndApps)
	t.Run("operator change", levelsAfterAnOperatorChange)
	t.Run("archived channel", levelsInAnArchivedChannel)
	t.Run("archived space", levelsInAnArchivedSpace)
}

// levelsOfTheWorld checks the level of every principal of the untouched world
// on a thread and on the channel itself of every channel (expectedWorldLevels).
func levelsOfTheWorld(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	// The thread each level is asked on: the main thread of a text
	// channel, a post made for the test in a forum.
	threads := map[string]string{}
	for _, c := range worldChannels {
		if c.kind == "text" {
			if env.Main(c.key) == "" {
				t.Fatalf("text channel %s has no main thread", c.key)
			}
			threads[c.key] = env.Main(c.key)
			continue
		}
		if env.Main(c.key) != "" {
			t.Fatalf("forum %s has a main thread", c.key)
		}
		post, kind := createPost(t, env, "robin", c.key, "probe-"+c.key)
		if kind != "post" {
			t.Fatalf("thread in forum %s has kind %v, want post", c.key, kind)
		}
		threads[c.key] = post
	}
	for _, h := range worldHandles {
		for _, c := range worldChannels {
			want := expectedWorldLevels[h][c.key]
			wantLevel(t, h+" on thread of "+c.key, threadLevel(t, env, h, threads[c.key]), want)
			wantLevel(t, h+" on channel "+c.key, channelLevel(t, env, h, c.key), want)
		}
	}
}

// levelsWithAnExpiredGrant checks that a grant lifts the level until it
// expires, and no longer.
func levelsWithAnExpiredGrant(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	main := env.Main("Support/Eskalation")
	wantLevel(t, "writer on Eskalation before the grant", threadLevel(t, env, "writer", main), lN)
	expires := env.Clock.Now().Add(time.Hour).UTC()
	g := createGrant(t, env, admin.GrantInput{SubjectID: env.World.ID("writer"), SubjectKind: "principal",
		TargetKind: authz.KindChannel, TargetID: env.World.Channel("Support/Eskalation").ID, Level: authz.Write, ExpiresAt: &expires})
	if g.ExpiresAt == nil {
		t.Fatalf("grant answer has no expires_at: %+v", g)
	}
	wantLevel(t, "writer on Eskalation with the grant", threadLevel(t, env, "writer", main), lW)
	env.Clock.Advance(30 * time.Minute)
	wantLevel(t, "writer on Eskalation before expiry", threadLevel(t, env, "writer", main), lW)
	env.Clock.Advance(90 * time.Minute)
	wantLevel(t, "writer on Eskalation after expiry", threadLevel(t, env, "writer", main), lN)
	wantLevel(t, "writer on Allgemein (unrelated grant)", threadLevel(t, env, "writer", env.Main("Support/Allgemein")), lW)
}

// levelsWithARevokedGrant checks that a revoked grant gives nothing, and
// that the revoke leaves other principals' grants alone.
func levelsWithARevokedGrant(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	main := env.Main("Support/Allgemein")
	var grantID string
	if err := env.Pool.QueryRow(context.Background(), `SELECT id::text FROM grants WHERE subject_principal_id = $1 AND target_channel_id = $2`,
		env.World.ID("writer"), env.World.Channel("Support/Allgemein").ID).Scan(&grantID); err != nil {
		t.Fatalf("writer's grant: %v", err)
	}
	wantLevel(t, "writer on Allgemein before the revoke", threadLevel(t, env, "writer", main), lW)
	g, err := env.Admin.RevokeGrant(t.Context(), env.Principal("robin"), grantID)
	if err != nil || g.ID != grantID || g.RevokedAt == nil {
		t.Fatalf("revoke answer %+v (%v)", g, err)
	}
	wantLevel(t, "writer on Allgemein after the revoke", threadLevel(t, env, "writer", main), lN)
	wantLevel(t, "writer on channel Allgemein after the revoke", channelLevel(t, env, "writer", "Support/Allgemein"), lN)
	wantLevel(t, "sam on Allgemein (own grant)", threadLevel(t, env, "sam", main), lT)
}

// levelsWithAGroupGrant checks that a group's grant gives its members, and
// only them, the level on its target.
func levelsWithAGroupGrant(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	main := env.Main("Support/Eskalation")
	group := ids.New()
	env.Exec(`INSERT INTO groups (id, name, created_at) VALUES ($1, 'escalation team', now())`, group)
	env.Exec(`INSERT INTO group_members (group_id, principal_id) VALUES ($1, $2)`, group, env.World.ID("writer"))
	wantLevel(t, "writer on Eskalation before the group grant", threadLevel(t, env, "writer", main), lN)
	g := createGrant(t, env, admin.GrantInput{SubjectID: group, SubjectKind: "group",
		TargetKind: authz.KindChannel, TargetID: env.World.Channel("Support/Eskalation").ID, Level: authz.Trigger})
	if g.SubjectKind != "group" || g.SubjectID != group || g.Level != authz.Trigger {
		t.Fatalf("group grant answer %+v", g)
	}
	wantLevel(t, "writer (member) on Eskalation", threadLevel(t, env, "writer", main), lT)
	wantLevel(t, "sam (not a member) on Eskalation", threadLevel(t, env, "sam", main), lN)
	wantLevel(t, "writer (member) on Reports (other channel)", channelLevel(t, env, "writer", "Support/Reports"), lN)
}

// levelsOfTheOwner checks that the owner triggers everywhere without a
// grant, and has nothing once disabled.
func levelsOfTheOwner(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	if n := env.Count(`SELECT count(*) FROM grants WHERE subject_principal_id = $1`, env.World.ID("robin")); n != 0 {
		t.Fatalf("robin holds %d grants; the case needs none", n)
	}
	for _, c := range worldChannels {
		wantLevel(t, "robin on "+c.key, channelLevel(t, env, "robin", c.key), lT)
	}
	// An owner that is no longer active has nothing
	// (docs/design/rights.md#effective-level, step 1).
	env.Exec(`UPDATE principals SET status = 'disabled' WHERE id = $1`, env.World.ID("robin"))
	wantLevel(t, "disabled robin on Allgemein", threadLevel(t, env, "robin", env.Main("Support/Allgemein")), lN)
}

// levelsOfAgentsAndApps checks that a stored trigger grant of an agent or
// an app gives it no more than write.
func levelsOfAgentsAndApps(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	// createGrant refuses trigger for agents and apps; a stored row (for
	// example from before that rule) must still not lift them (only
	// people trigger: docs/design/rights.md#effective-level, step 6).
	for _, h := range []string{"lotse", "feedbot"} {
		env.Exec(`INSERT INTO grants (id, subject_principal_id, target_space_id, level, created_by, created_at)
			VALUES ($1, $2, $3, 'trigger', $4, now())`, ids.New(), env.World.ID(h), env.World.Spaces["Marketing"], env.World.ID("robin"))
		wantLevel(t, h+" with a trigger grant on Kampagnen", threadLevel(t, env, h, env.Main("Marketing/Kampagnen")), lW)
		wantLevel(t, h+" with a trigger grant on Ideas", channelLevel(t, env, h, "Marketing/Ideas"), lW)
	}
}

// levelsAfterAnOperatorChange checks that the operator rule follows the
// operator: the new operator writes on the channel, the old one only in the
// threads it is the fixed operator of.
func levelsAfterAnOperatorChange(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	key := "Support/Eskalation"
	chID := env.World.Channel(key).ID
	main := env.Main(key)
	// A thread created before the change has lotse as its fixed operator.
	oldID, _, oldOperator := newThread(t, env, "alex", key, "Before the change", "op-before", "Printer on fire")
	if oldOperator != env.World.ID("lotse") {
		t.Fatalf("thread created before the change: operator %q, want operator_agent_id lotse", oldOperator)
	}
	wantLevel(t, "lotse on Eskalation main before", threadLevel(t, env, "lotse", main), lW)
	wantLevel(t, "texter on Eskalation main before", threadLevel(t, env, "texter", main), lN)

	ch, err := env.Admin.SetOperator(t.Context(), env.Principal("robin"), chID, "agent", env.World.ID("texter"))
	if err != nil || ch.OperatorMode != "agent" || ch.EffectiveOperator() != env.World.ID("texter") {
		t.Fatalf("operator change answer %+v (%v)", ch, err)
	}
	wantLevel(t, "lotse on Eskalation main after", threadLevel(t, env, "lotse", main), lN)
	wantLevel(t, "lotse on channel Eskalation after", channelLevel(t, env, "lotse", key), lN)
	wantLevel(t, "texter on Eskalation main after", threadLevel(t, env, "texter", main), lW)
	wantLevel(t, "lotse on the thread created before (fixed operator)", threadLevel(t, env, "lotse", oldID), lW)
	wantLevel(t, "texter on the thread created before (channel operator)", threadLevel(t, env, "texter", oldID), lW)
	// The other channels of the space still inherit lotse.
	wantLevel(t, "lotse on Allgemein main after", threadLevel(t, env, "lotse", env.Main("Support/Allgemein")), lW)
	// A thread created after the change gets texter as its fixed operator.
	if afterID, _, operator := newThread(t, env, "alex", key, "", "op-after", "Second fire"); operator != env.World.ID("texter") {
		t.Fatalf("thread created after the change: operator %q, want operator_agent_id texter", operator)
	} else {
		wantLevel(t, "lotse on a thread created after", threadLevel(t, env, "lotse", afterID), lN)
	}
}

// levelsInAnArchivedChannel checks the archive cap of a channel: nobody
// exceeds read in it, other channels keep their levels.
func levelsInAnArchivedChannel(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	key := "Support/Allgemein"
	main := env.Main(key)
	wantLevel(t, "alex on Allgemein before the archive", threadLevel(t, env, "alex", main), lT)
	ch, err := env.Admin.ArchiveChannel(t.Context(), env.Principal("robin"), env.World.Channel(key).ID)
	if err != nil || ch.ArchivedAt == nil {
		t.Fatalf("archive answer %+v (%v)", ch, err)
	}
	for _, h := range worldHandles {
		// Everybody on Allgemein had at least write; now read.
		wantLevel(t, h+" on archived Allgemein main", threadLevel(t, env, h, main), lR)
		wantLevel(t, h+" on archived channel Allgemein", channelLevel(t, env, h, key), lR)
	}
	// Other channels keep their levels.
	wantLevel(t, "alex on Eskalation", threadLevel(t, env, "alex", env.Main("Support/Eskalation")), lT)
	wantLevel(t, "sam on Kampagnen", threadLevel(t, env, "sam", env.Main("Marketing/Kampagnen")), lT)
}

// levelsInAnArchivedSpace checks the archive cap of a space: nobody exceeds
// read in its channels, the other space keeps its levels.
func levelsInAnArchivedSpace(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	sp, err := env.Admin.ArchiveSpace(t.Context(), env.Principal("robin"), env.World.Spaces["Support"])
	if err != nil || sp.ArchivedAt == nil {
		t.Fatalf("space archive answer %+v (%v)", sp, err)
	}
	for _, h := range worldHandles {
		for _, c := range worldChannels {
			want := expectedWorldLevels[h][c.key]
			if strings.HasPrefix(c.key, "Support/") && want > lR {
				want = lR
			}
			wantLevel(t, h+" on "+c.key+" after the space archive", channelLevel(t, env, h, c.key), want)
			if c.kind == "text" {
				wantLevel(t, h+" on main of "+c.key+" after the space archive", threadLevel(t, env, h, env.Main(c.key)), want)
			}
		}
	}
}
