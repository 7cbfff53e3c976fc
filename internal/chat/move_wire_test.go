package chat_test

import (
	"net/http"
	"strings"
	"testing"

	"bothy.example.com/bothy/internal/devtools/apitest"
)

// TestMoveSpendsOneToken: moveThread decides on the thread and on the
// target channel but is one operation: it takes one rl.message token, on
// both faces.
func TestMoveSpendsOneToken(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	alex := env.World.Token("alex")
	left := func(h http.Header) string {
		t.Helper()
		v := h.Get("RateLimit")
		if !strings.HasPrefix(v, `"rl.message";`) {
			t.Fatalf("RateLimit %q, want the rl.message class", v)
		}
		return v
	}
	created := env.REST(http.MethodPost, "/api/v1/channels/"+env.World.Channel("Support/Allgemein").ID+"/threads", alex,
		map[string]any{"title": "Moving", "first_message": map[string]any{"client_msg_id": "mv-1", "content_md": "a thread to move"}})
	if created.Status != http.StatusCreated || !strings.Contains(left(created.Header), "r=19;") {
		t.Fatalf("create: %d %s %v", created.Status, created.Body, created.Header)
	}
	var c struct{ Thread map[string]any }
	created.JSON(t, &c)
	id := c.Thread["id"].(string)
	moved := env.REST(http.MethodPost, "/api/v1/threads/"+id+"/move", alex, map[string]any{"channel_id": env.World.Channel("Support/Eskalation").ID})
	if moved.Status != http.StatusOK || !strings.Contains(left(moved.Header), "r=18;") {
		t.Fatalf("REST move took other than one token: %d %v", moved.Status, moved.Header.Get("RateLimit"))
	}
	res := env.GraphQL(alex, `mutation($id: ID!, $c: ID!) { moveThread(id: $id, channelId: $c) { id } }`,
		map[string]any{"id": id, "c": env.World.Channel("Support/Allgemein").ID}, nil)
	if len(res.Errors) > 0 || !strings.Contains(left(res.Header), "r=17;") {
		t.Fatalf("GraphQL move took other than one token: %+v %v", res.Errors, res.Header.Get("RateLimit"))
	}
}
