package messaging_test

import (
	"fmt"
	"strings"
	"testing"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/platform/problem"
)

// wantField fails the test unless err is a validation problem with the one
// field error "pointer code".
func wantField(t *testing.T, what string, err error, field string) {
	t.Helper()
	p := problem.From("messaging.wantField", err)
	if p == nil || p.Code != problem.ValidationFailed || len(p.Fields) != 1 || p.Fields[0].Pointer+" "+p.Fields[0].Code != field {
		t.Fatalf("%s: %v (%+v), want validation_failed %s", what, err, p, field)
	}
}

// handles returns the handles of refs, joined by commas.
func handles(refs []identity.Ref) string {
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = r.Handle
	}
	return strings.Join(out, ",")
}

// stored is a fingerprint of what a create or delete writes: messages,
// threads, events and the messages' content.
func stored(env *moduletest.Env) string {
	return fmt.Sprint(env.Count(`SELECT count(*) FROM messages`), env.Count(`SELECT count(*) FROM threads`),
		env.Count(`SELECT count(*) FROM event_log`), env.Count(`SELECT count(*) FROM messages WHERE deleted_at IS NOT NULL`))
}

// TestOriginAndMentions pins what Create sets from the server's side
// (docs/design/model.md#messages): the origin follows the author's kind
// (human, agent, app), the kind is text; mentions are the @handles of the
// content that name a principal, in order of first appearance, matched
// without regard to case and each once, never an address like
// a@lotse.example or an unknown handle; the mentions are the same in the
// answer, a single read, the history and the message.created event. The
// wire shapes are TestOriginCannotBeForged and TestPlaygroundScenario in
// internal/server.
func TestOriginAndMentions(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	main := env.Main("Support/Allgemein")
	checkOrigins(t, env, main)

	m := env.Post("writer", main, "mention", "Hello @Sam and @sam, mail a@lotse.example, ask @nobody, then @lotse (@alex)")
	if got := handles(m.Mentions); got != "sam,lotse,alex" {
		t.Fatalf("mentions %q, want sam,lotse,alex", got)
	}
	if m.Mentions[0].ID != env.World.ID("sam") || m.Mentions[1].Kind != identity.KindAgent {
		t.Fatalf("mention refs %+v", m.Mentions)
	}
	single, err := env.Messaging.Get(ctx, env.Principal("sam"), m.ID)
	if err != nil || handles(single.Mentions) != "sam,lotse,alex" {
		t.Fatalf("single read %+v %v", single.Mentions, err)
	}
	page, err := env.Messaging.History(ctx, env.Principal("sam"), main, m.ThreadSeq-1, 1)
	if err != nil || len(page.Messages) != 1 || page.Messages[0].ID != m.ID || handles(page.Messages[0].Mentions) != "sam,lotse,alex" {
		t.Fatalf("history %+v %v", page, err)
	}
	payload := textRows(t, env, `SELECT jsonb_array_elements(payload->'mentions')->>'handle' FROM event_log
		WHERE type = 'message.created' AND message_id = $1`, m.ID)
	if strings.Join(payload, ",") != "sam,lotse,alex" {
		t.Fatalf("event mentions %v", payload)
	}
	plain := env.Post("writer", main, "plain", "no one @ all, x@y")
	if len(plain.Mentions) != 0 {
		t.Fatalf("mentions without a handle: %+v", plain.Mentions)
	}
}

// checkOrigins posts into main as a person, an agent and an app and checks
// that each message's origin follows its author's kind, its kind is text
// and its author is the poster.
func checkOrigins(t *testing.T, env *moduletest.Env, main string) {
	t.Helper()
	for who, origin := range map[string]messaging.Origin{"alex": messaging.OriginHuman, "lotse": messaging.OriginAgent, "feedbot": messaging.OriginApp} {
		m := env.Post(who, main, "o-"+who, "origin of "+who)
		if m.Origin != origin || m.Kind != messaging.KindText || m.Author.Handle != who || m.Author.Kind != env.Principal(who).Kind {
			t.Fatalf("%s wrote %+v", who, m)
		}
	}
}

// TestCreateRefusals pins the refusals of Create and CreateThread at the
// service, each of which stores nothing and publishes nothing: content
// over message.max_content_bytes (too_long); a reply to a message of
// another thread, or to no message id at all (invalid_reference); a thread
// the writer cannot read (the bare not_found of a missing one); a thread
// or channel that is archived (channel_read_only, reason
// channel_archived); a first message that replies, and a forum post with a
// parent (invalid_reference). A reply within the thread is stored with its
// reference.
func TestCreateRefusals(t *testing.T) {
	t.Parallel()
	env := moduletest.Build(t, moduletest.Options{Config: map[string]string{"message.max_content_bytes": "16"}})
	ctx := t.Context()
	alex := env.Principal("alex")
	main, esk := env.Main("Support/Allgemein"), env.Main("Support/Eskalation")
	other := env.Post("alex", esk, "e1", "in Eskalation")
	first := env.Post("alex", main, "a1", "in Allgemein")
	before := stored(env)

	_, _, err := create(env, alex, main, "long", strings.Repeat("x", 17))
	wantField(t, "content over the limit", err, "/content_md too_long")
	_, _, err = create(env, alex, main, "multi", "äääääääää") // 18 bytes, 9 characters
	wantField(t, "content over the limit in bytes", err, "/content_md too_long")
	for _, reply := range []string{other.ID, "not-an-id", "01a22de8-0000-7000-8000-000000000000"} {
		_, _, err := env.Messaging.Create(ctx, alex, main, messaging.Input{ClientMsgID: "r-" + reply, ContentMD: "reply", ReplyToMessageID: reply})
		wantField(t, "reply to "+reply, err, "/reply_to_message_id invalid_reference")
	}
	_, _, err = create(env, alex, env.Main("Marketing/Kampagnen"), "hidden", "let me in")
	moduletest.WantProblem(t, "a thread alex cannot read", err, problem.NotFound, "")
	_, _, _, err = env.Messaging.CreateThread(ctx, alex, env.World.Channel("Support/Bulletin").ID, messaging.ThreadInput{Title: "x",
		First: messaging.Input{ClientMsgID: "fr", ContentMD: "first", ReplyToMessageID: first.ID}})
	wantField(t, "a first message that replies", err, "/first_message/reply_to_message_id invalid_reference")
	_, _, _, err = env.Messaging.CreateThread(ctx, alex, env.World.Channel("Support/Bulletin").ID, messaging.ThreadInput{ParentMessageID: first.ID,
		First: messaging.Input{ClientMsgID: "fp", ContentMD: "post"}})
	wantField(t, "a forum post with a parent", err, "/parent_message_id invalid_reference")
	if after := stored(env); after != before {
		t.Fatalf("refused creates stored: %s -> %s", before, after)
	}

	reply, _, err := env.Messaging.Create(ctx, alex, main, messaging.Input{ClientMsgID: "r-ok", ContentMD: "reply", ReplyToMessageID: first.ID})
	if err != nil || reply.ReplyToMessageID != first.ID {
		t.Fatalf("a reply in the thread: %+v %v", reply, err)
	}
	if got, err := env.Messaging.Get(ctx, alex, reply.ID); err != nil || got.ReplyToMessageID != first.ID {
		t.Fatalf("reply read back %+v %v", got, err)
	}

	// Archived: read-only for everyone, owners included.
	allg := env.World.Channel("Support/Allgemein").ID
	if _, err := env.Modules.Admin.ArchiveChannel(ctx, env.Principal("robin"), allg); err != nil {
		t.Fatal(err)
	}
	before = stored(env)
	for _, who := range []string{"alex", "robin"} {
		_, _, err := create(env, env.Principal(who), main, "arch-"+who, "anyone here?")
		moduletest.WantProblem(t, who+" posts into an archived channel", err, problem.ChannelReadOnly, authz.ReasonChannelArchived)
		_, _, _, err = env.Messaging.CreateThread(ctx, env.Principal(who), allg, messaging.ThreadInput{ParentMessageID: first.ID,
			First: messaging.Input{ClientMsgID: "arch-t-" + who, ContentMD: "thread"}})
		moduletest.WantProblem(t, who+" opens a thread in an archived channel", err, problem.ChannelReadOnly, authz.ReasonChannelArchived)
	}
	if after := stored(env); after != before {
		t.Fatalf("creates in an archived channel stored: %s -> %s", before, after)
	}
	if page, err := env.Messaging.History(ctx, alex, main, 0, 0); err != nil || len(page.Messages) != 2 {
		t.Fatalf("reading an archived channel: %+v %v", page, err)
	}
}

// TestDeleteRules pins who may delete and what a delete does not touch:
// an owner may delete anybody's message, another person is refused
// forbidden level_insufficient and a reader who cannot see the message
// gets the not_found of a missing one; system lines and run anchors are
// not deletable (conflict not_deletable); deleting a tombstone answers it
// unchanged, also to its author, and emits no second message.deleted; in an archived channel even the
// author is refused (channel_read_only). Every refusal leaves the message
// as it was. The tombstone itself is TestTombstones.
func TestDeleteRules(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	main := env.Main("Support/Allgemein")
	robin, sam, writer := env.Principal("robin"), env.Principal("sam"), env.Principal("writer")
	m := env.Post("writer", main, "d1", "a note for @sam")
	content := func(id string) string {
		t.Helper()
		return storedContent(t, env, id)
	}

	_, err := env.Messaging.Delete(ctx, sam, m.ID)
	moduletest.WantProblem(t, "sam deletes writer's message", err, problem.Forbidden, authz.ReasonLevel)
	_, err = env.Messaging.Delete(ctx, env.Principal("lotse"), env.Post("sam", env.Main("Marketing/Kampagnen"), "k1", "marketing").ID)
	moduletest.WantProblem(t, "lotse deletes a message it cannot see", err, problem.NotFound, "")
	_, err = env.Messaging.Delete(ctx, sam, "01a22de8-0000-7000-8000-000000000000")
	moduletest.WantProblem(t, "a missing message", err, problem.NotFound, "")
	if c := content(m.ID); c != "a note for @sam" {
		t.Fatalf("a refused delete changed the message: %q", c)
	}

	del, err := env.Messaging.Delete(ctx, robin, m.ID)
	if err != nil || !del.Deleted || del.ContentMD != "" || del.Author.Handle != "writer" {
		t.Fatalf("robin deletes writer's message: %+v %v", del, err)
	}
	if n := deletedEventCount(env, m.ID); n != 1 {
		t.Fatalf("%d message.deleted events after the delete, want 1", n)
	}
	checkDeleteTombstone(t, env, m.ID, del)

	checkNotDeletable(t, env)

	// Archived: the author may no longer delete.
	kept := env.Post("writer", main, "d2", "keep me")
	if _, err := env.Modules.Admin.ArchiveChannel(ctx, robin, env.World.Channel("Support/Allgemein").ID); err != nil {
		t.Fatal(err)
	}
	_, err = env.Messaging.Delete(ctx, writer, kept.ID)
	moduletest.WantProblem(t, "writer deletes in an archived channel", err, problem.ChannelReadOnly, authz.ReasonChannelArchived)
	if c := content(kept.ID); c != "keep me" {
		t.Fatalf("a refused delete changed the message: %q", c)
	}
}

// storedContent returns the stored content_md of the message id, to tell
// whether a refused delete left the message as it was.
func storedContent(t *testing.T, env *moduletest.Env, id string) string {
	t.Helper()
	var c string
	if err := env.Pool.QueryRow(t.Context(), `SELECT content_md FROM messages WHERE id = $1`, id).Scan(&c); err != nil {
		t.Fatal(err)
	}
	return c
}

// deletedEventCount counts the message.deleted events of the message id.
func deletedEventCount(env *moduletest.Env, id string) int {
	return env.Count(`SELECT count(*) FROM event_log WHERE type = 'message.deleted' AND message_id = $1`, id)
}

// checkDeleteTombstone deletes the tombstone of the message id (del, as
// the first delete answered it) as its author writer: the answer is the
// tombstone unchanged, and no second message.deleted is emitted.
func checkDeleteTombstone(t *testing.T, env *moduletest.Env, id string, del messaging.Message) {
	t.Helper()
	again, err := env.Messaging.Delete(t.Context(), env.Principal("writer"), id)
	if err != nil || !again.Deleted || again.ContentMD != "" || again.ID != id || !again.CreatedAt.Equal(del.CreatedAt) || len(again.Mentions) != 0 {
		t.Fatalf("deleting a tombstone: %+v %v", again, err)
	}
	if n := deletedEventCount(env, id); n != 1 {
		t.Fatalf("%d message.deleted events after deleting the tombstone, want still 1", n)
	}
}

// checkNotDeletable makes a system line (the reopen of a done thread) and
// a run anchor and checks that not even the owner robin may delete either
// (conflict not_deletable) and that both stay.
func checkNotDeletable(t *testing.T, env *moduletest.Env) {
	t.Helper()
	ctx, robin := t.Context(), env.Principal("robin")
	// A system line (the reopen of a done thread) and a run anchor.
	th, _, _, err := env.Messaging.CreateThread(ctx, env.Principal("alex"), env.World.Channel("Support/Reports").ID,
		messaging.ThreadInput{Title: "Printer", First: messaging.Input{ClientMsgID: "t1", ContentMD: "down"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chat.NewUseCases(env.Chat, env.Authz, env.Events, env.DB).Close(ctx, env.Principal("alex"), th.ID); err != nil {
		t.Fatal(err)
	}
	env.Post("alex", th.ID, "t2", "still down")
	var system, anchor string
	if err := env.Pool.QueryRow(ctx, `SELECT id::text FROM messages WHERE thread_id = $1 AND kind = 'system'`, th.ID).Scan(&system); err != nil {
		t.Fatal(err)
	}
	env.Post("alex", env.Main("Support/Eskalation"), "q1", "@lotse please look")
	if err := env.Pool.QueryRow(ctx, `SELECT id::text FROM messages WHERE kind = 'run' LIMIT 1`).Scan(&anchor); err != nil {
		t.Fatal(err)
	}
	for what, id := range map[string]string{"system line": system, "run anchor": anchor} {
		_, err := env.Messaging.Delete(ctx, robin, id)
		moduletest.WantProblem(t, "robin deletes a "+what, err, problem.Conflict, "not_deletable")
		if n := env.Count(`SELECT count(*) FROM messages WHERE id = $1 AND deleted_at IS NULL`, id); n != 1 {
			t.Fatalf("the %s was deleted", what)
		}
	}
}

// TestAutoTitleGoesWithItsMessage pins the titles of threads
// (docs/design/model.md#threads): a trigger in a channel with auto threads
// opens a thread whose parent is the triggering message, titled
// automatically by its first line; an agent's forum post without a title
// takes its first line as an automatic title; deleting the message a title came from drops that title
// (title and source empty), and a title the person gave stays when the
// first message is deleted. The wire is TestAutoTitleStaysWithItsMessage
// in internal/server.
func TestAutoTitleGoesWithItsMessage(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	alex := env.Principal("alex")
	trigger := env.Post("alex", env.Main("Support/Allgemein"), "at-1", "@lotse the printer is down\nsince Monday")
	var auto string
	if err := env.Pool.QueryRow(ctx, `SELECT id::text FROM threads WHERE parent_message_id = $1`, trigger.ID).Scan(&auto); err != nil {
		t.Fatalf("no auto thread: %v", err)
	}
	th, err := env.Chat.GetThread(ctx, auto)
	if err != nil || th.TitleSource != chat.TitleAuto || th.Title != "@lotse the printer is down" || th.Kind != chat.ThreadThread {
		t.Fatalf("auto thread %+v %v", th, err)
	}
	lotse := env.Principal("lotse")
	post, firstPost, _, err := env.Messaging.CreateThread(ctx, lotse, env.World.Channel("Support/Reports").ID,
		messaging.ThreadInput{First: messaging.Input{ClientMsgID: "p1", ContentMD: "Weekly report\nAll good."}})
	if err != nil || post.Title != "Weekly report" || post.TitleSource != chat.TitleAuto {
		t.Fatalf("an agent's untitled post %+v %v", post, err)
	}
	own, firstOwn, _, err := env.Messaging.CreateThread(ctx, alex, env.World.Channel("Support/Reports").ID,
		messaging.ThreadInput{Title: "My title", First: messaging.Input{ClientMsgID: "p2", ContentMD: "Something"}})
	if err != nil || own.TitleSource != chat.TitleByUser {
		t.Fatalf("titled post %+v %v", own, err)
	}
	for _, d := range []struct {
		who identity.Principal
		id  string
	}{{alex, trigger.ID}, {lotse, firstPost.ID}, {alex, firstOwn.ID}} {
		if _, err := env.Messaging.Delete(ctx, d.who, d.id); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ id, title, source string }{{auto, "", ""}, {post.ID, "", ""}, {own.ID, "My title", string(chat.TitleByUser)}} {
		wantThreadTitle(t, env, c.id, c.title, c.source)
	}
}

// wantThreadTitle checks the stored title and title_source of the thread
// id (NULL read as empty) after the delete of a first message.
func wantThreadTitle(t *testing.T, env *moduletest.Env, id, wantTitle, wantSource string) {
	t.Helper()
	var title, source *string
	if err := env.Pool.QueryRow(t.Context(), `SELECT title, title_source FROM threads WHERE id = $1`, id).Scan(&title, &source); err != nil {
		t.Fatal(err)
	}
	got := func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	}
	if got(title) != wantTitle || got(source) != wantSource {
		t.Fatalf("thread %s after the delete: %q (%s), want %q (%s)", id, got(title), got(source), wantTitle, wantSource)
	}
}

// TestHistoryAndGetRules pins the reads of messaging: History takes
// message.list_limit_default when no limit is asked, refuses a limit
// outside 1 to message.list_limit_max and a negative after (out_of_range),
// and a thread the reader cannot read, like a missing one, is not_found;
// Get of a message the reader cannot read is the same bare not_found as a
// missing message.
func TestHistoryAndGetRules(t *testing.T) {
	t.Parallel()
	env := moduletest.Build(t, moduletest.Options{Config: map[string]string{"message.list_limit_default": "2", "message.list_limit_max": "3"}})
	ctx := t.Context()
	main := env.Main("Support/Allgemein")
	alex := env.Principal("alex")
	for i := range 4 {
		env.Post("alex", main, fmt.Sprint("h", i), fmt.Sprint("message ", i))
	}
	def, err := env.Messaging.History(ctx, alex, main, 0, 0)
	if err != nil || len(def.Messages) != 2 || def.NextAfter == nil || *def.NextAfter != 2 {
		t.Fatalf("default page %+v %v", def, err)
	}
	if most, err := env.Messaging.History(ctx, alex, main, 0, 3); err != nil || len(most.Messages) != 3 {
		t.Fatalf("page of the most %+v %v", most, err)
	}
	for _, c := range []struct {
		after int64
		limit int
		want  string
	}{{0, 4, "limit out_of_range"}, {0, -1, "limit out_of_range"}, {-1, 2, "after out_of_range"}} {
		_, err := env.Messaging.History(ctx, alex, main, c.after, c.limit)
		wantField(t, fmt.Sprint("after ", c.after, " limit ", c.limit), err, c.want)
	}
	secret := env.Post("sam", env.Main("Marketing/Kampagnen"), "k1", "marketing only")
	for what, err := range map[string]error{
		"history of a hidden thread": func() error {
			_, err := env.Messaging.History(ctx, alex, env.Main("Marketing/Kampagnen"), 0, 0)
			return err
		}(),
		"history of a missing thread": func() error {
			_, err := env.Messaging.History(ctx, alex, "01a22de8-0000-7000-8000-000000000000", 0, 0)
			return err
		}(),
		"a hidden message": func() error { _, err := env.Messaging.Get(ctx, alex, secret.ID); return err }(),
		"a missing message": func() error {
			_, err := env.Messaging.Get(ctx, alex, "01a22de8-0000-7000-8000-000000000000")
			return err
		}(),
	} {
		moduletest.WantProblem(t, what, err, problem.NotFound, "")
		if p := problem.From("messaging.test", err); p.Reason != "" || p.Detail != problem.From("messaging.test", problem.New(problem.NotFound, "")).Detail {
			t.Fatalf("%s tells more than a missing one: %+v", what, p)
		}
	}
}
