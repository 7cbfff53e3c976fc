package messaging_test

import (
	"testing"

	"bothy.example.com/bothy/internal/devtools/moduletest"
)

// TestMessageFacts: messaging's shared view message_facts
// (migrations/00015_module_views.sql), which the runs module joins to
// order follow-ups by their place in the thread and scope them by author,
// holds every message with the columns the runs module reads (id,
// thread_id, thread_seq, author_principal_id), read by name for messages
// the service wrote. A renamed or dropped column fails here.
func TestMessageFacts(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	thread := env.Main("Support/Allgemein")
	for i, who := range []string{"sam", "alex"} {
		m, _, err := create(env, env.Principal(who), thread, "facts-"+who, "a message")
		if err != nil {
			t.Fatal(err)
		}
		var id, threadID, author string
		var seq int64
		if err := env.Pool.QueryRow(ctx, `SELECT m.id::text, m.thread_id::text, m.thread_seq, m.author_principal_id::text
			FROM message_facts m WHERE m.id = $1`, m.ID).Scan(&id, &threadID, &seq, &author); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if id != m.ID || threadID != thread || m.ThreadID != thread || seq != m.ThreadSeq || seq <= 0 || author != env.World.ID(who) || m.Author.ID != author {
			t.Fatalf("message_facts holds (%s, %s, %d, %s) for %+v", id, threadID, seq, author, m)
		}
	}
}
