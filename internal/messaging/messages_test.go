package messaging_test

import (
	"fmt"
	"sync"
	"testing"

	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/platform/problem"
)

// create writes as actor into thread through the messaging service.
func create(env *moduletest.Env, actor identity.Principal, thread, clientMsgID, content string) (messaging.Message, bool, error) {
	return env.Messaging.Create(env.T().Context(), actor, thread, messaging.Input{ClientMsgID: clientMsgID, ContentMD: content})
}

// TestIdempotentCreate: a create repeated with the same client_msg_id and
// body answers the original message and stores and publishes nothing; the
// same client_msg_id with another body is a conflict; another author may
// reuse it; concurrent duplicates store exactly one message. That the
// replay is a 200 with Idempotent-Replay on the wire is
// TestIdempotentReplayOnTheWire in internal/server.
func TestIdempotentCreate(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	main := env.Main("Support/Allgemein")
	alex := env.Principal("alex")
	first := env.Post("alex", main, "c-1", "Hello from Alex")
	events := env.Count(`SELECT count(*) FROM event_log`)

	again, replayed, err := create(env, alex, main, "c-1", "Hello from Alex")
	if err != nil || !replayed {
		t.Fatalf("replay: replayed %v, %v", replayed, err)
	}
	if again.ID != first.ID || again.ThreadSeq != first.ThreadSeq || !again.CreatedAt.Equal(first.CreatedAt) {
		t.Fatalf("replay is not the original: %+v vs %+v", again, first)
	}
	if n := env.Count(`SELECT count(*) FROM event_log`); n != events {
		t.Fatalf("replay published %d events", n-events)
	}
	if n := env.Count(`SELECT count(*) FROM messages WHERE thread_id = $1`, main); n != 1 {
		t.Fatalf("%d messages stored", n)
	}

	_, _, err = create(env, alex, main, "c-1", "Something else")
	moduletest.WantProblem(t, "reuse with another body", err, problem.Conflict, "idempotency_key_reused")
	// Another author may use the same client_msg_id.
	env.Post("sam", main, "c-1", "Hello from Sam")

	// Concurrent duplicates store exactly one message.
	var wg sync.WaitGroup
	replays := make([]bool, 10)
	errs := make([]error, 10)
	for i := range replays {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, replays[i], errs[i] = create(env, alex, main, "dup", "Twice?")
		}(i)
	}
	wg.Wait()
	created := 0
	for i, err := range errs {
		if err != nil {
			t.Fatalf("concurrent duplicate refused: %v", err)
		}
		if !replays[i] {
			created++
		}
	}
	if n := env.Count(`SELECT count(*) FROM messages WHERE client_msg_id = 'dup'`); created != 1 || n != 1 {
		t.Fatalf("concurrent duplicates: %d created, %d stored", created, n)
	}
}

// wantTombstone fails the test unless m is a tombstone: no content, no
// mentions, deleted.
func wantTombstone(t *testing.T, where string, m messaging.Message) {
	t.Helper()
	if m.ContentMD != "" || !m.Deleted || len(m.Mentions) != 0 {
		t.Fatalf("%s: not a tombstone: %+v", where, m)
	}
}

// TestTombstones: only the author (with write) may delete a message; the
// tombstone has no content and no mentions wherever the message is read
// (single read, history, the events of its creation and deletion), and its
// content is gone from every stored event.
func TestTombstones(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	main := env.Main("Support/Allgemein")
	sam := env.Principal("sam")
	// Writer's message starts no run, so no auto thread takes its first line
	// as a title (auto titles stay with their thread; see DECISIONS).
	m := env.Post("writer", main, "d1", "secret plans for @sam")
	// Sam may not delete Writer's message; Writer may.
	_, err := env.Messaging.Delete(ctx, sam, m.ID)
	moduletest.WantProblem(t, "sam deletes writer's message", err, problem.Forbidden, "")
	del, err := env.Messaging.Delete(ctx, env.Principal("writer"), m.ID)
	if err != nil {
		t.Fatalf("delete: %v", err)
	}
	wantTombstone(t, "delete answer", del)
	got, err := env.Messaging.Get(ctx, sam, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantTombstone(t, "getMessage", got)
	page, err := env.Messaging.History(ctx, sam, main, 0, 0)
	if err != nil || len(page.Messages) == 0 {
		t.Fatalf("history: %+v %v", page, err)
	}
	wantTombstone(t, "history", page.Messages[0])
	evs, err := env.Feed.List(ctx, sam, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, e := range evs.Events {
		if p := e.Payload; p != nil && p["id"] == m.ID {
			mentions, _ := p["mentions"].([]any)
			if p["content_md"] != "" || p["deleted"] != true || len(mentions) != 0 {
				t.Fatalf("event %s: not a tombstone: %v", e.Type, p)
			}
			seen++
		}
	}
	if seen != 2 {
		t.Fatalf("saw %d events of the message, want created and deleted", seen)
	}
	if n := env.Count(`SELECT count(*) FROM event_log WHERE payload::text LIKE '%secret plans%'`); n != 0 {
		t.Fatalf("content left in %d events", n)
	}
}

// TestHistoryCutsListContent: a history read cuts content at
// message.list_content_max_bytes on a character boundary and marks it; a
// single read gives the whole message; history pages by thread_seq. That
// limit=0 is refused on the wire is TestHistoryPagingOnTheWire in
// internal/server.
func TestHistoryCutsListContent(t *testing.T) {
	t.Parallel()
	env := moduletest.Build(t, moduletest.Options{Config: map[string]string{"message.list_content_max_bytes": "10"}})
	ctx := t.Context()
	main := env.Main("Support/Allgemein")
	sam := env.Principal("sam")
	long := "Grüße aus dem Support, Alex"
	m := env.Post("alex", main, "l1", long)
	page, err := env.Messaging.History(ctx, sam, main, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := page.Messages[0]; got.ContentMD != "Grüße au" || !got.ContentTruncated {
		t.Fatalf("history content %q truncated=%v", got.ContentMD, got.ContentTruncated)
	}
	single, err := env.Messaging.Get(ctx, sam, m.ID)
	if err != nil || single.ContentMD != long || single.ContentTruncated {
		t.Fatalf("single read cut: %+v %v", single, err)
	}
	checkHistoryPaging(t, env, main)
}

// checkHistoryPaging posts four more messages after the one in main and
// checks that sam's history pages by thread_seq: a first page of 2 with
// the cursor 2, then the remaining 3 from thread_seq 3 without a cursor.
func checkHistoryPaging(t *testing.T, env *moduletest.Env, main string) {
	t.Helper()
	ctx, sam := t.Context(), env.Principal("sam")
	// Paging by thread_seq.
	for i := 0; i < 4; i++ {
		env.Post("alex", main, fmt.Sprintf("p%d", i), fmt.Sprintf("page %d", i))
	}
	p1, err := env.Messaging.History(ctx, sam, main, 0, 2)
	if err != nil || len(p1.Messages) != 2 || p1.NextAfter == nil || *p1.NextAfter != 2 {
		t.Fatalf("first page %+v %v", p1, err)
	}
	p2, err := env.Messaging.History(ctx, sam, main, *p1.NextAfter, 10)
	if err != nil || len(p2.Messages) != 3 || p2.NextAfter != nil || p2.Messages[0].ThreadSeq != 3 {
		t.Fatalf("second page %+v %v", p2, err)
	}
}

// TestReopenOrder: a message into a done thread first reopens it: the
// events are thread.reopened, the system line thread.reopened (by the
// poster), then the message, which takes the next thread_seq after the
// system line.
func TestReopenOrder(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	alex := env.Principal("alex")
	// Reports has no operator, so nothing here starts a run.
	ch := env.World.Channel("Support/Reports").ID
	th, first, _, err := env.Messaging.CreateThread(ctx, alex, ch, messaging.ThreadInput{Title: "Printer",
		First: messaging.Input{ClientMsgID: "t1", ContentMD: "The printer is down"}})
	if err != nil {
		t.Fatalf("create thread: %v", err)
	}
	if th.TitleSource != chat.TitleByUser || first.ThreadSeq != 1 {
		t.Fatalf("created %+v %+v", th, first)
	}
	if _, err := chat.NewUseCases(env.Chat, env.Authz, env.Events, env.DB).Close(ctx, alex, th.ID); err != nil {
		t.Fatalf("close: %v", err)
	}
	before := env.Count(`SELECT coalesce(max(seq), 0)::int FROM event_log`)
	m := env.Post("alex", th.ID, "s1", "Still broken")
	if m.ThreadSeq != 3 {
		t.Fatalf("message after reopen has thread_seq %v, want 3", m.ThreadSeq)
	}
	got := textRows(t, env, `SELECT type, coalesce(payload->>'system_code', ''), coalesce(payload->>'kind', '') FROM event_log WHERE seq > $1 ORDER BY seq`, before)
	want := []string{"thread.reopened post", "message.created thread.reopened system", "message.created text"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	after, err := env.Chat.GetThread(ctx, th.ID)
	if err != nil || after.State != chat.ThreadOpen || after.LastSeq != 3 {
		t.Fatalf("thread after reopen %+v %v", after, err)
	}
	page, err := env.Messaging.History(ctx, alex, th.ID, 0, 0)
	if err != nil || len(page.Messages) != 3 || page.Messages[1].Origin != messaging.OriginSystem || page.Messages[1].Author.Handle != "alex" {
		t.Fatalf("history %+v %v", page.Messages, err)
	}
}

// TestCreateThreadKinds: a forum post has no parent, takes its title from
// the first line and the channel's fixed operator; a thread of a text
// channel starts from a main-thread message of that channel, once; the
// first message's client_msg_id makes the whole create idempotent; an
// agent's thread has an automatic title; thread.created comes before the
// first message's message.created.
func TestCreateThreadKinds(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	create, first := threadCreator(t, env), firstMessage
	// A post in a forum: no parent, title from the first line, fixed
	// operator of the channel (Bulletin inherits Lotse).
	post, _, _, err := create("alex", "Support/Bulletin", messaging.ThreadInput{First: first("p1", "Weekly report\nAll good.")})
	if err != nil || post.Kind != chat.ThreadPost || post.Title != "Weekly report" || post.OperatorAgentID != env.World.ID("lotse") {
		t.Fatalf("forum post: %+v %v", post, err)
	}
	// Reports has no operator.
	rep, _, _, err := create("alex", "Support/Reports", messaging.ThreadInput{Title: "Q3", First: first("p2", "numbers")})
	if err != nil || rep.OperatorAgentID != "" {
		t.Fatalf("Reports thread has an operator: %+v %v", rep, err)
	}
	checkThreadsFromParent(t, env)
	// Replay of the whole create.
	again, _, replayed, err := create("alex", "Support/Bulletin", messaging.ThreadInput{First: first("p1", "Weekly report\nAll good.")})
	if err != nil || !replayed || again.ID != post.ID {
		t.Fatalf("thread replay: replayed %v %+v %v", replayed, again, err)
	}
	// An agent's thread has title_source auto.
	byAgent, msg, _, err := create("lotse", "Support/Reports", messaging.ThreadInput{Title: "Nightly", First: first("n1", "report")})
	if err != nil || byAgent.TitleSource != chat.TitleAuto || msg.Origin != messaging.OriginAgent {
		t.Fatalf("agent thread: %+v %+v %v", byAgent, msg, err)
	}
	wantThreadCreatedFirst(t, env)
}

// wantThreadCreatedFirst checks that robin's feed begins with
// thread.created and then the first message's message.created.
func wantThreadCreatedFirst(t *testing.T, env *moduletest.Env) {
	t.Helper()
	// Events: thread.created then message.created.
	evs, err := env.Feed.List(t.Context(), env.Principal("robin"), "", 0)
	if err != nil || len(evs.Events) < 2 {
		t.Fatalf("events %+v %v", evs, err)
	}
	if evs.Events[0].Type != "thread.created" || evs.Events[1].Type != "message.created" {
		t.Fatalf("events %v %v", evs.Events[0].Type, evs.Events[1].Type)
	}
}

// threadCreator returns a function that creates a thread as the principal
// with handle who in the channel with key channel, for the thread tests.
func threadCreator(t *testing.T, env *moduletest.Env) func(who, channel string, in messaging.ThreadInput) (chat.Thread, messaging.Message, bool, error) {
	return func(who, channel string, in messaging.ThreadInput) (chat.Thread, messaging.Message, bool, error) {
		return env.Messaging.CreateThread(t.Context(), env.Principal(who), env.World.Channel(channel).ID, in)
	}
}

// firstMessage is the first message of a new thread with client_msg_id
// cid and content.
func firstMessage(cid, content string) messaging.Input {
	return messaging.Input{ClientMsgID: cid, ContentMD: content}
}

// checkThreadsFromParent checks the threads of a text channel: one starts
// from a main-thread message of the channel, a second from the same
// parent is a conflict, and a parent outside the channel's main thread is
// invalid.
func checkThreadsFromParent(t *testing.T, env *moduletest.Env) {
	t.Helper()
	create, first := threadCreator(t, env), firstMessage
	// A thread from a main-thread message of a text channel.
	parent := env.Post("writer", env.Main("Support/Allgemein"), "m1", "Can someone help?")
	th, _, _, err := create("sam", "Support/Allgemein", messaging.ThreadInput{ParentMessageID: parent.ID, First: first("t1", "Sure")})
	if err != nil || th.Kind != chat.ThreadThread || th.ParentMessageID != parent.ID {
		t.Fatalf("thread from parent: %+v %v", th, err)
	}
	// A second thread from the same parent is a conflict; a parent outside
	// the channel's main thread is invalid.
	_, _, _, err = create("sam", "Support/Allgemein", messaging.ThreadInput{ParentMessageID: parent.ID, First: first("t2", "Again")})
	moduletest.WantProblem(t, "second thread from one parent", err, problem.Conflict, "")
	_, _, _, err = create("alex", "Support/Eskalation", messaging.ThreadInput{ParentMessageID: parent.ID, First: first("t3", "x")})
	moduletest.WantProblem(t, "parent in another channel", err, problem.ValidationFailed, "")
}

// TestAgentMessage_ReopensDoneThread: an agent's message into a done
// thread reopens it like a person's (thread.reopened, the system line by
// the agent, then its message) and starts no run.
func TestAgentMessage_ReopensDoneThread(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	lotse := env.Principal("lotse")
	th, _, _, err := env.Messaging.CreateThread(ctx, lotse, env.World.Channel("Support/Reports").ID,
		messaging.ThreadInput{Title: "Thread status", First: messaging.Input{ClientMsgID: "first-status", ContentMD: "status"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chat.NewUseCases(env.Chat, env.Authz, env.Events, env.DB).Close(ctx, lotse, th.ID); err != nil {
		t.Fatalf("close: %v", err)
	}
	before := env.Count(`SELECT coalesce(max(seq), 0)::int FROM event_log`)
	env.Post("lotse", th.ID, "again", "status update")
	got := textRows(t, env, `SELECT type, coalesce(payload->>'origin', ''), coalesce(payload->>'system_code', ''), coalesce(payload->'author'->>'handle', '')
		FROM event_log WHERE seq > $1 ORDER BY seq`, before)
	want := "[thread.reopened message.created system thread.reopened lotse message.created agent lotse]"
	if fmt.Sprint(got) != want || env.Count(`SELECT count(*) FROM runs`) != 0 {
		t.Fatalf("events %v, want %s", got, want)
	}
}

// TestAnswer_FirstMessageRunIDRejected: the first message of a new thread
// may not name a run (run_mismatch at /first_message/run_id), and no thread
// is created.
func TestAnswer_FirstMessageRunIDRejected(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	esk := env.Main("Support/Eskalation")
	trigger := env.Post("alex", esk, "go", "@lotse go")
	var run string
	if err := env.Pool.QueryRow(t.Context(), `SELECT id::text FROM runs WHERE triggering_message_id = $1`, trigger.ID).Scan(&run); err != nil {
		t.Fatal(err)
	}
	threads := env.Count(`SELECT count(*) FROM threads`)
	_, _, _, err := env.Messaging.CreateThread(t.Context(), env.Principal("lotse"), env.World.Channel("Support/Reports").ID,
		messaging.ThreadInput{Title: "x", First: messaging.Input{ClientMsgID: "f", ContentMD: "report", RunID: run}})
	p := problem.From("messaging.testAnswer_FirstMessageRunIDRejected", err)
	if err == nil || p.Code != problem.ValidationFailed || len(p.Fields) != 1 || p.Fields[0].Pointer != "/first_message/run_id" || p.Fields[0].Code != "run_mismatch" {
		t.Fatalf("first message naming a run: %v (%+v)", err, p)
	}
	if env.Count(`SELECT count(*) FROM threads`) != threads {
		t.Fatal("a thread was created")
	}
}
