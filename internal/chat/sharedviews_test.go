package chat_test

import (
	"reflect"
	"testing"

	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/messaging"
)

// TestSharedThreadViews: chat's shared views
// (migrations/00015_module_views.sql) hold a thread as chat wrote it.
// thread_info, which the runs module reads with a run (SELECT ti.*,
// scanned with chat.ThreadInfoDest, matched on ti_thread_id and joined to
// grants on ti_space_id and ti_cid), holds every column by its name, in
// the order ThreadInfoDest scans; thread_places, which the runs module
// joins to scope active runs (id, channel_id, space_id), holds the
// thread's place. The thread is one started from a message, with a title,
// an operator and a space default, so that no column is empty. A renamed,
// dropped or reordered column fails here.
func TestSharedThreadViews(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	robin, lotse := env.Principal("robin"), env.World.ID("lotse")
	space, err := env.Writers.Chat.CreateSpace(ctx, "Views", lotse)
	if err != nil {
		t.Fatal(err)
	}
	backfill, on, off := 7, true, false
	c, err := env.Writers.Chat.CreateChannel(ctx, chat.NewChannel{SpaceID: space.ID, Name: "facts", Kind: chat.ChannelText, OperatorMode: chat.OperatorAgent,
		OperatorAgentID: lotse, FreeResponse: &on, AllowMentionedAgents: &on, AutoThread: &off, HistoryBackfillLimit: &backfill, CreatedBy: robin.ID})
	if err != nil {
		t.Fatal(err)
	}
	if c.MainThreadID == "" {
		t.Fatalf("channel %+v has no main thread", c)
	}
	parent, _, err := env.Messaging.Create(ctx, robin, c.MainThreadID, messaging.Input{ClientMsgID: "views-parent", ContentMD: "start here"})
	if err != nil {
		t.Fatal(err)
	}
	th, err := env.Writers.Chat.CreateThread(ctx, chat.NewThread{Channel: c, ParentMessageID: parent.ID, Title: "A thread", CreatedBy: robin.ID})
	if err != nil {
		t.Fatal(err)
	}

	wantT := th
	wantT.CreatedAt = wantT.CreatedAt.UTC()
	wantC := chat.Channel{ID: c.ID, SpaceID: space.ID, Name: "facts", Kind: chat.ChannelText, OperatorMode: chat.OperatorAgent, OperatorAgentID: lotse,
		Switches:             chat.Switches{FreeResponse: true, AllowMentionedAgents: true, AutoThread: false, HistoryBackfillLimit: 7},
		SpaceDefaultOperator: lotse, MainThreadID: c.MainThreadID}
	if wantT.ParentMessageID != parent.ID || wantT.OperatorAgentID != lotse || wantT.Title == "" || wantT.TitleSource == "" {
		t.Fatalf("thread %+v leaves a column empty", wantT)
	}
	checkThreadInfo(t, env, th.ID, wantT, wantC)
	checkArchivedFlags(t, env, th.ID, c.ID, space.ID)
	checkThreadPlace(t, env, th.ID, c.ID, space.ID)
}

// checkThreadInfo checks that thread_info holds the thread threadID as
// want and its channel as wantC, read by every column's name and by
// SELECT ti.* (the order ThreadInfoDest scans).
func checkThreadInfo(t *testing.T, env *moduletest.Env, threadID string, wantT chat.Thread, wantC chat.Channel) {
	t.Helper()
	ctx := t.Context()
	for _, stmt := range []string{
		`SELECT ti.ti_thread_id, ti.ti_channel_id, ti.ti_kind, ti.ti_parent_message_id, ti.ti_thread_operator, ti.ti_title, ti.ti_title_source,
			ti.ti_created_by, ti.ti_state, ti.ti_last_seq, ti.ti_created_at, ti.ti_cid, ti.ti_space_id, ti.ti_channel_name, ti.ti_channel_kind,
			ti.ti_archived_at, ti.ti_operator_mode, ti.ti_channel_operator, ti.ti_free_response, ti.ti_allow_mentioned_agents, ti.ti_auto_thread,
			ti.ti_history_backfill_limit, ti.ti_space_default_operator, ti.ti_space_archived, ti.ti_main_thread_id
		FROM thread_info ti WHERE ti.ti_thread_id = $1`,
		`SELECT ti.* FROM thread_info ti WHERE ti.ti_thread_id = $1`,
	} {
		var gotT chat.Thread
		var gotC chat.Channel
		if err := env.Pool.QueryRow(ctx, stmt, threadID).Scan(chat.ThreadInfoDest(&gotT, &gotC)...); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
		gotT.CreatedAt = gotT.CreatedAt.UTC()
		if !reflect.DeepEqual(gotT, wantT) || !reflect.DeepEqual(gotC, wantC) {
			t.Fatalf("thread_info holds\n%+v\n%+v\nwant\n%+v\n%+v", gotT, gotC, wantT, wantC)
		}
	}
}

// checkArchivedFlags archives the channel and the space of the thread
// threadID and checks that thread_info reads both flags.
func checkArchivedFlags(t *testing.T, env *moduletest.Env, threadID, channelID, spaceID string) {
	t.Helper()
	ctx := t.Context()
	// Archived: both flags read.
	if _, err := env.Pool.Exec(ctx, `UPDATE channels SET archived_at = now() WHERE id = $1`, channelID); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Pool.Exec(ctx, `UPDATE spaces SET archived_at = now() WHERE id = $1`, spaceID); err != nil {
		t.Fatal(err)
	}
	var archivedAt any
	var spaceArchived bool
	if err := env.Pool.QueryRow(ctx, `SELECT ti.ti_archived_at, ti.ti_space_archived FROM thread_info ti WHERE ti.ti_thread_id = $1`, threadID).Scan(&archivedAt, &spaceArchived); err != nil || archivedAt == nil || !spaceArchived {
		t.Fatalf("archived channel and space read as %v, %v (%v)", archivedAt, spaceArchived, err)
	}
}

// checkThreadPlace checks that thread_places holds the thread threadID
// in its channel and space.
func checkThreadPlace(t *testing.T, env *moduletest.Env, threadID, wantChannel, wantSpace string) {
	t.Helper()
	ctx := t.Context()
	var id, channelID, spaceID string
	if err := env.Pool.QueryRow(ctx, `SELECT t.id::text, t.channel_id::text, t.space_id::text FROM thread_places t WHERE t.id = $1`, threadID).Scan(&id, &channelID, &spaceID); err != nil {
		t.Fatal(err)
	}
	if id != threadID || channelID != wantChannel || spaceID != wantSpace {
		t.Fatalf("thread_places holds (%s, %s, %s), want (%s, %s, %s)", id, channelID, spaceID, threadID, wantChannel, wantSpace)
	}
}
