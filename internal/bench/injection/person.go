package injection

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"
)

// person is Alex, the simulated triggering person. She follows her event
// feed on the Bothy server as any client would, answers every approval
// card in a thread of a case, approving exactly the calls whose tool and
// arguments her user task asked for and denying the rest, and tells each
// case when a run of its thread ended.
type person struct {
	chat chatClient
	// cases finds the case of a thread ("" when none).
	cases func(thread string) *caseRun
}

// feedQuery reads the events Alex may see after a cursor: new messages
// with their approvals (Alex reads the detail of hers) and run changes.
const feedQuery = `query Feed($a: String) { events(after: $a, first: 100) {
  nodes { kind
    ... on MessageEvent { threadId message { kind approval { id state title detail } } }
    ... on RunStateChangedEvent { runId threadId state } }
  pageInfo { endCursor hasNextPage } } }`

// feedEvent is one event of Alex's feed.
type feedEvent struct {
	Kind     string `json:"kind"`
	ThreadID string `json:"threadId"`
	RunID    string `json:"runId"`
	State    string `json:"state"`
	Message  *struct {
		Kind     string    `json:"kind"`
		Approval *approval `json:"approval"`
	} `json:"message"`
}

// approval is an approval as Alex reads it.
type approval struct {
	ID     string  `json:"id"`
	State  string  `json:"state"`
	Title  string  `json:"title"`
	Detail *string `json:"detail"`
}

// watch follows Alex's feed from its start until ctx ends.
//
// Errors: the feed cannot be read (ctx's end is no error).
func (p *person) watch(ctx context.Context) error {
	after := "0"
	for {
		var page struct {
			Events struct {
				Nodes    []feedEvent `json:"nodes"`
				PageInfo struct {
					EndCursor   string `json:"endCursor"`
					HasNextPage bool   `json:"hasNextPage"`
				} `json:"pageInfo"`
			} `json:"events"`
		}
		err := p.chat.srv.GQL(ctx, p.chat.world.Token("alex"), feedQuery, map[string]any{"a": after}, &page)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return fmt.Errorf("alex reads her events: %w", err)
		}
		for _, ev := range page.Events.Nodes {
			p.handle(ctx, ev)
		}
		after = page.Events.PageInfo.EndCursor
		if page.Events.PageInfo.HasNextPage {
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// handle acts on one event of a case's thread.
func (p *person) handle(ctx context.Context, ev feedEvent) {
	c := p.cases(ev.ThreadID)
	if c == nil {
		return
	}
	switch {
	case ev.Kind == "RUN_STATE_CHANGED" && (ev.State == "COMPLETED" || ev.State == "FAILED" || ev.State == "CANCELLED"):
		c.runEnded(ev.RunID)
	case ev.Kind == "MESSAGE_CREATED" && ev.Message != nil && ev.Message.Kind == "CARD" && ev.Message.Approval != nil:
		if ev.Message.Approval.State == "PENDING" {
			if err := p.answer(ctx, c, *ev.Message.Approval); err != nil {
				c.fail(err)
			}
		}
	}
}

// answer decides an approval of case c and sends the decision.
func (p *person) answer(ctx context.Context, c *caseRun, a approval) error {
	card := readCard(a)
	card.Approved = !card.Unreadable && c.asked(card.Call)
	c.addCard(card)
	option := "deny"
	if card.Approved {
		option = "approve"
	}
	_, err := p.chat.srv.REST(ctx, http.MethodPost, "/api/v1/approvals/"+a.ID+"/response", p.chat.world.Token("alex"),
		map[string]any{"option_id": option}, nil)
	if err != nil {
		return fmt.Errorf("alex answers an approval: %w", err)
	}
	return nil
}

// cardTitle is the title the SDK gives the card of a tool call.
var cardTitle = regexp.MustCompile(`^Run ([A-Za-z0-9_-]{1,64})\?$`)

// readCard reads the call an approval names, as a person reads a card: the
// tool from its title, the arguments from the JSON object in its detail.
// A card that names no call this way is Unreadable.
func readCard(a approval) Card {
	m := cardTitle.FindStringSubmatch(a.Title)
	if m == nil || a.Detail == nil {
		return Card{Unreadable: true}
	}
	i := strings.Index(*a.Detail, "{")
	if i < 0 {
		return Card{Unreadable: true}
	}
	var raw json.RawMessage
	if err := json.NewDecoder(strings.NewReader((*a.Detail)[i:])).Decode(&raw); err != nil {
		return Card{Unreadable: true}
	}
	c, ok := parseCall(m[1], string(raw))
	if !ok {
		return Card{Unreadable: true}
	}
	return Card{Call: c}
}
