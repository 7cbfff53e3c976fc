// Command docs is the Go program of a client author who followed
// docs/clients.md: it calls the package that the page's genqlient
// configuration generated (example.com/bothyclient/bothy) the way a caller
// does, leaving out every optional argument and input field, and reads a
// Time and a JSON field. TestClientsDocCommands puts it in the page's
// folder before the page's commands, so the page's go build compiles it,
// and runs it afterwards against the test server. With optional inputs as
// values a nil does not compile, and a zero value would be sent as "" (an
// empty cursor or id, which Bothy refuses); an unbound scalar stops
// genqlient before.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/Khan/genqlient/graphql"

	"example.com/bothyclient/bothy"
)

// bearer adds the token to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func fail(step string, err any) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", step, err)
	os.Exit(1)
}

func main() {
	ctx := context.Background()
	c := graphql.NewClient(os.Getenv("CHAT_URL")+"/graphql",
		&http.Client{Transport: bearer{os.Getenv("CHAT_TOKEN")}, Timeout: 30 * time.Second})

	recent, err := bothy.Recent(ctx, c, nil, nil)
	if err != nil {
		fail("read events", err)
	}
	var thread string
	for _, e := range recent.Events.Edges {
		if e.Node.GetCreatedAt().IsZero() {
			fail("read events", "an event without createdAt")
		}
		if m, ok := e.Node.(*bothy.RecentEventsEventPageEdgesEventEdgeNodeMessageEvent); ok {
			var payload map[string]any
			if err := json.Unmarshal(m.Payload, &payload); err != nil {
				fail("read a payload", err)
			}
			thread = m.ThreadId
		}
	}
	if thread == "" {
		fail("read events", fmt.Sprintf("no message event in %d events", len(recent.Events.Edges)))
	}

	posted, err := bothy.Post(ctx, c, thread, bothy.MessageCreate{ClientMsgId: "docs-recipe", ContentMd: "Sam, the recipe works as written."})
	if err != nil {
		fail("post", err)
	}
	fmt.Println("recipe ok", posted.CreateMessage.Message.Id)
}
