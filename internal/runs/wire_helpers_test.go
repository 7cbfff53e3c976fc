package runs_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/rest"
)

// ctxMsg is a RunContextMessage in the REST shape.
type ctxMsg struct {
	MessageID        string         `json:"message_id"`
	ThreadSeq        int            `json:"thread_seq"`
	CreatedAt        string         `json:"created_at"`
	ChannelID        string         `json:"channel_id"`
	Author           map[string]any `json:"author"`
	Role             string         `json:"role"`
	Origin           string         `json:"origin"`
	Kind             string         `json:"kind"`
	ContentMD        string         `json:"content_md"`
	Truncated        bool           `json:"truncated"`
	Attachments      []any          `json:"attachments"`
	ReplyToMessageID string         `json:"reply_to_message_id"`
	Trust            string         `json:"trust"`
	Provenance       string         `json:"provenance"`
	AlreadyDelivered bool           `json:"already_delivered"`
}

// runCtx is a RunContext in the REST shape; Channel is nil when absent.
type runCtx struct {
	RunID              string    `json:"run_id"`
	ContextFloorSeq    int       `json:"context_floor_seq"`
	TriggerMessage     ctxMsg    `json:"trigger_message"`
	ThreadContext      []ctxMsg  `json:"thread_context"`
	ChannelContext     *[]ctxMsg `json:"channel_context"`
	TruncatedBeforeSeq *int      `json:"truncated_before_seq"`
	FollowUps          []ctxMsg  `json:"follow_ups"`
	TrustSummary       struct {
		Lowest string `json:"lowest"`
		Counts []struct {
			Trust string `json:"trust"`
			Count int    `json:"count"`
		} `json:"counts"`
	} `json:"trust_summary"`
	raw map[string]any
}

func (c runCtx) all() []ctxMsg {
	out := append([]ctxMsg{c.TriggerMessage}, c.ThreadContext...)
	if c.ChannelContext != nil {
		out = append(out, *c.ChannelContext...)
	}
	return out
}

// byContent returns the element whose content starts with prefix.
func (c runCtx) byContent(t *testing.T, prefix string) ctxMsg {
	t.Helper()
	for _, m := range c.all() {
		if strings.HasPrefix(m.ContentMD, prefix) {
			return m
		}
	}
	t.Fatalf("no element starts with %q", prefix)
	return ctxMsg{}
}

const ctxMsgSel = `messageId threadSeq createdAt channelId author { id kind handle displayName } role origin kind contentMd truncated attachments { fileId name mimeType size scanStatus transcript } replyToMessageId trust provenance alreadyDelivered`

const contextQuery = `query($id: ID!) { run(id: $id) { context { runId contextFloorSeq triggerMessage { ` + ctxMsgSel + ` } threadContext { ` + ctxMsgSel + ` } channelContext { ` + ctxMsgSel + ` } truncatedBeforeSeq followUps { ` + ctxMsgSel + ` } trustSummary { lowest counts { trust count } } } } }`

// readContext reads the context of run id as who through both faces,
// fails unless they agree, and returns it (ok false with the REST answer
// when the read was refused).
func readContext(t *testing.T, env *apitest.Env, who, id string) (runCtx, *apitest.Response) {
	t.Helper()
	r := env.REST(http.MethodGet, "/api/v1/runs/"+id+"/context", env.World.Token(who), nil)
	var gq struct {
		Run *struct {
			Context map[string]any `json:"context"`
		} `json:"run"`
	}
	g := env.GraphQL(env.World.Token(who), contextQuery, map[string]any{"id": id}, &gq)
	if r.Status != http.StatusOK {
		if len(g.Errors) == 0 || g.Errors[0].Extensions.Status != r.Status {
			t.Fatalf("REST %d but GraphQL %+v", r.Status, g.Errors)
		}
		// Run.context is nullable: the run may answer, its context not.
		if gq.Run != nil && gq.Run.Context != nil {
			t.Fatalf("a refused read returned a context: %+v", gq.Run)
		}
		return runCtx{}, r
	}
	if len(g.Errors) > 0 || gq.Run == nil {
		t.Fatalf("GraphQL refused what REST answered: %+v", g.Errors)
	}
	var restMap map[string]any
	r.JSON(t, &restMap)
	if got := toREST(gq.Run.Context); !reflect.DeepEqual(got, restMap) {
		a, _ := json.Marshal(got)
		t.Fatalf("GraphQL and REST differ:\nGraphQL %s\nREST    %s", a, r.Body)
	}
	var c runCtx
	r.JSON(t, &c)
	c.raw = restMap
	return c, r
}

var enumMembers = map[string]bool{"role": true, "origin": true, "kind": true, "trust": true, "lowest": true, "provenance": true}

// toREST renders a GraphQL context map in the REST conventions (the shim's
// rules), to compare the two faces.
func toREST(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, val := range x {
			if val == nil {
				continue
			}
			key := rest.Snake(k)
			if s, ok := val.(string); ok && enumMembers[key] {
				val = strings.ToLower(s)
			}
			out[key] = toREST(val)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = toREST(e)
		}
		return out
	default:
		return v
	}
}

// stream follows an agent's event stream in a test.
type stream struct {
	t      *testing.T
	env    *apitest.Env
	agent  string
	cursor string
}

func newStream(t *testing.T, env *apitest.Env, agent string) *stream {
	s := &stream{t: t, env: env, agent: agent}
	_, s.cursor = env.Poll(t, agent, "", 0)
	return s
}

// nextRun returns the run of the next agent.invocation in the stream.
func (s *stream) nextRun() string {
	s.t.Helper()
	evs, next := s.env.Poll(s.t, s.agent, s.cursor, 0)
	s.cursor = next
	for _, e := range evs {
		if e.Type == "agent.invocation" {
			return e.Payload["run_id"].(string)
		}
	}
	s.t.Fatalf("no invocation for %s in %+v", s.agent, evs)
	return ""
}

// openThread creates a thread in channel key as who with a first message and
// returns its id.
func openThread(t *testing.T, env *apitest.Env, who, channel, parent, first string) string {
	t.Helper()
	body := map[string]any{"title": "Thread " + first, "first_message": map[string]any{"client_msg_id": "first-" + first, "content_md": first}}
	if parent != "" {
		body["parent_message_id"] = parent
	}
	r := env.REST(http.MethodPost, "/api/v1/channels/"+env.World.Channel(channel).ID+"/threads", env.World.Token(who), body)
	if r.Status != http.StatusCreated {
		t.Fatalf("create thread: %d %s", r.Status, r.Body)
	}
	var c struct{ Thread map[string]any }
	r.JSON(t, &c)
	return c.Thread["id"].(string)
}

// postSeq numbers the messages of say; tests run in parallel.
var postSeq atomic.Int64

// say posts content as who into thread and returns the message.
func say(t *testing.T, env *apitest.Env, who, thread, content string) map[string]any {
	t.Helper()
	return env.MustPost(who, thread, fmt.Sprintf("say-%d", postSeq.Add(1)), content)
}
