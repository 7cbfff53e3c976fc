package messaging_test

import (
	"context"
	"net/http"
	"testing"

	"bothy.example.com/bothy/internal/devtools/apitest"
)

// TestStartedThreadOnREST: a REST client finds the thread a trigger's
// answer lands in: the created message names started_thread_id, the run's
// thread, when the trigger opened one (Support/Allgemein has auto threads),
// names none once that thread moved where the reader may not read, and
// none when the run works in the same thread (Eskalation).
func TestStartedThreadOnREST(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	m := env.MustPost("alex", env.Main("Support/Allgemein"), "st-1", "@lotse where is the printer?")
	var runThread string
	if err := env.Pool.QueryRow(context.Background(), `SELECT thread_id::text FROM runs WHERE triggering_message_id = $1`, m["id"]).Scan(&runThread); err != nil {
		t.Fatal(err)
	}
	if m["started_thread_id"] != runThread || runThread == env.Main("Support/Allgemein") {
		t.Fatalf("started_thread_id %v, the run works in %s", m["started_thread_id"], runThread)
	}
	again := env.MustREST(t, http.MethodGet, "/api/v1/messages/"+m["id"].(string), env.World.Token("alex"), nil, http.StatusOK)
	if again["started_thread_id"] != runThread {
		t.Fatalf("read back: %v", again["started_thread_id"])
	}
	// Moved where Alex may not read: her message no longer names it (like
	// a missing thread); Robin, an owner, still sees it.
	env.MustREST(t, http.MethodPost, "/api/v1/threads/"+runThread+"/move", env.World.Token("robin"),
		map[string]any{"channel_id": env.World.Channel("Marketing/Kampagnen").ID}, http.StatusOK)
	if hidden := env.MustREST(t, http.MethodGet, "/api/v1/messages/"+m["id"].(string), env.World.Token("alex"), nil, http.StatusOK); hidden["started_thread_id"] != nil {
		t.Fatalf("a thread Alex may not read: %v", hidden["started_thread_id"])
	}
	if seen := env.MustREST(t, http.MethodGet, "/api/v1/messages/"+m["id"].(string), env.World.Token("robin"), nil, http.StatusOK); seen["started_thread_id"] != runThread {
		t.Fatalf("robin reads %v", seen["started_thread_id"])
	}
	same := env.MustPost("alex", env.Main("Support/Eskalation"), "st-2", "@lotse and the toner?")
	if _, has := same["started_thread_id"]; has {
		t.Fatalf("a trigger answered in its own thread names %v", same["started_thread_id"])
	}
}
