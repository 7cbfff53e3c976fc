package runs_test

import (
	"testing"

	"bothy.example.com/bothy/internal/devtools/apitest"
)

// TestRunContext_SelectionHonoured: the one-pass writer of context
// elements honours the selection like gqlgen's own executor: aliases,
// fragment spreads, inline fragments, @include/@skip, __typename, nested
// author selection, and no field that was not asked for.
func TestRunContext_SelectionHonoured(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{Config: map[string]string{"run.sweep_interval": "1h"}})
	run := contextFixture(t, env, 3, 2)
	const q = `query($id: ID!, $no: Boolean!) { run(id: $id) { context {
		triggerMessage { messageId ... on RunContextMessage { role } }
		threadContext { __typename seq: threadSeq ...F author { __typename h: handle } contentMd @include(if: $no) trust @skip(if: $no) }
		channelContext { messageId } } } }
		fragment F on RunContextMessage { messageId alreadyDelivered }`
	type elem struct {
		Typename         string `json:"__typename"`
		Seq              int    `json:"seq"`
		MessageID        string `json:"messageId"`
		AlreadyDelivered *bool  `json:"alreadyDelivered"`
		Author           struct {
			Typename string `json:"__typename"`
			H        string `json:"h"`
		} `json:"author"`
		Trust string `json:"trust"`
	}
	var out struct {
		Run struct {
			Context struct {
				TriggerMessage struct {
					MessageID string `json:"messageId"`
					Role      string `json:"role"`
				} `json:"triggerMessage"`
				ThreadContext  []elem `json:"threadContext"`
				ChannelContext []struct {
					MessageID string `json:"messageId"`
				} `json:"channelContext"`
			} `json:"context"`
		} `json:"run"`
	}
	// The harness decodes with DisallowUnknownFields: a field that was not
	// selected (contentMd under @include(if: false)) fails the decode.
	res := env.GraphQL(env.World.Token("lotse"), q, map[string]any{"id": run, "no": false}, &out)
	if len(res.Errors) > 0 {
		t.Fatal(res.Errors)
	}
	c := out.Run.Context
	if c.TriggerMessage.MessageID == "" || c.TriggerMessage.Role != "USER" {
		t.Fatalf("trigger %+v", c.TriggerMessage)
	}
	if len(c.ThreadContext) != 4 {
		t.Fatalf("%d thread elements", len(c.ThreadContext))
	}
	for i, e := range c.ThreadContext {
		if e.Typename != "RunContextMessage" || e.Author.Typename != "PrincipalRef" || e.MessageID == "" || e.Seq != i+1 ||
			e.Author.H == "" || e.Trust == "" || e.AlreadyDelivered != nil {
			t.Fatalf("element %d: %+v", i, e)
		}
	}
	if c.ChannelContext != nil {
		t.Fatalf("a thread without parent has channel context %+v", c.ChannelContext)
	}
}
