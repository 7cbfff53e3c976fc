package server_test

import (
	"strings"
	"testing"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/platform/config"
)

// testGraphQLFieldErrorPaths: field errors name the member by its argument
// path in the GraphQL request, and the message names it too; the REST
// pointer stays beside it.
func testGraphQLFieldErrorPaths(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	alex := env.World.Token("alex")
	cases := []struct {
		name, query       string
		vars              map[string]any
		field, pointer, c string
	}{
		{"createMessage input", `mutation($t: ID!) { createMessage(threadId: $t, input: {clientMsgId: "fe-1", contentMd: ""}) { replayed } }`,
			map[string]any{"t": env.Main("Support/Allgemein")}, "input.contentMd", "/content_md", "required"},
		{"createThread nested input", `mutation($c: ID!) { createThread(channelId: $c, input: {firstMessage: {clientMsgId: "fe-2", contentMd: ""}}) { replayed } }`,
			map[string]any{"c": env.World.Channel("Support/Allgemein").ID}, "input.firstMessage.contentMd", "/first_message/content_md", "required"},
	}
	for _, tc := range cases {
		res := env.GraphQL(alex, tc.query, tc.vars, nil)
		if len(res.Errors) != 1 || len(res.Errors[0].Extensions.FieldErrors) != 1 {
			t.Fatalf("%s: %+v", tc.name, res.Errors)
		}
		e := res.Errors[0]
		fe := e.Extensions.FieldErrors[0]
		if e.Extensions.Code != "validation_failed" || fe.Field != tc.field || fe.Pointer != tc.pointer || fe.Code != tc.c {
			t.Fatalf("%s: %+v", tc.name, e)
		}
		if !strings.Contains(e.Message, tc.field) || !strings.Contains(e.Message, tc.c) {
			t.Fatalf("%s: the message %q does not name %s", tc.name, e.Message, tc.field)
		}
	}
	// The REST face keeps its pointer and its plain title.
	r := env.Post("alex", env.Main("Support/Allgemein"), "fe-3", "")
	p := r.Problem(t)
	if r.Status != 400 || len(p.Errors) != 1 || p.Errors[0].Pointer != "/content_md" || p.Detail != "" {
		t.Fatalf("REST: %d %s", r.Status, r.Body)
	}
}

// testGraphQLRetryAfterIsANumber: retryAfterSeconds is an integer, like
// status beside it.
func testGraphQLRetryAfterIsANumber(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{Config: map[string]string{
		config.RateReadBurst:     "1",
		config.RateReadPerMinute: "1",
	}})
	alex := env.World.Token("alex")
	env.GraphQL(alex, `{ viewer { id } }`, nil, nil)
	res := env.GraphQL(alex, `{ viewer { id } }`, nil, nil)
	if len(res.Errors) != 1 || res.Errors[0].Extensions.Code != "rate_limited" || res.Errors[0].Extensions.RetryAfterSeconds < 1 {
		t.Fatalf("%+v", res.Errors)
	}
}

// testRunContextRefusedOnItsField: a reader of a run who may not read its
// context gets the run with context null and the refusal at run.context.
func testRunContextRefusedOnItsField(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	env.MustPost("alex", env.Main("Support/Allgemein"), "rc-1", "@lotse the printer is down")
	evs, _ := env.Poll(t, "lotse", "", 0)
	if len(evs) != 1 {
		t.Fatalf("events %+v", evs)
	}
	runID, _ := evs[0].Payload["run_id"].(string)
	var out struct {
		Run struct {
			ID      string          `json:"id"`
			State   string          `json:"state"`
			Context *map[string]any `json:"context"`
		} `json:"run"`
	}
	res := env.GraphQL(env.World.Token("alex"), `query($id: ID!) { run(id: $id) { id state context { runId } } }`, map[string]any{"id": runID}, &out)
	if out.Run.ID != runID || out.Run.State != "QUEUED" || out.Run.Context != nil {
		t.Fatalf("run %+v", out.Run)
	}
	if len(res.Errors) != 1 || res.Errors[0].Extensions.Code != "forbidden" && res.Errors[0].Extensions.Code != "not_found" ||
		len(res.Errors[0].Path) != 2 || res.Errors[0].Path[0] != "run" || res.Errors[0].Path[1] != "context" {
		t.Fatalf("errors %+v", res.Errors)
	}
	// The run's agent reads it.
	res = env.GraphQL(env.World.Token("lotse"), `query($id: ID!) { run(id: $id) { id state context { runId } } }`, map[string]any{"id": runID}, &out)
	if len(res.Errors) > 0 || out.Run.Context == nil || (*out.Run.Context)["runId"] != runID {
		t.Fatalf("agent: %+v %+v", res.Errors, out.Run)
	}
}

// testEmptyOptionalInputsRefused: one rule for every optional input:
// omitted or null is none, "" is refused with code empty and changes
// nothing, on GraphQL (argument path) and REST (pointer) alike.
func testEmptyOptionalInputsRefused(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	alex := env.World.Token("alex")
	main := env.Main("Support/Allgemein")

	cases := []struct {
		query string
		vars  map[string]any
		field string
	}{
		{`mutation($t: ID!) { createMessage(threadId: $t, input: {clientMsgId: "e-1", contentMd: "x", replyToMessageId: ""}) { replayed } }`, map[string]any{"t": main}, "input.replyToMessageId"},
		{`mutation($t: ID!) { createMessage(threadId: $t, input: {clientMsgId: "e-2", contentMd: "x", runId: ""}) { replayed } }`, map[string]any{"t": main}, "input.runId"},
		{`mutation($c: ID!) { createThread(channelId: $c, input: {title: "", firstMessage: {clientMsgId: "e-3", contentMd: "x"}}) { replayed } }`, map[string]any{"c": env.World.Channel("Support/Allgemein").ID}, "input.title"},
		{`mutation($c: ID!) { createThread(channelId: $c, input: {firstMessage: {clientMsgId: "e-4", contentMd: "x", replyToMessageId: ""}}) { replayed } }`, map[string]any{"c": env.World.Channel("Support/Allgemein").ID}, "input.firstMessage.replyToMessageId"},
		{`{ events(after: "") { nextAfter } }`, nil, "after"},
	}
	for _, tc := range cases {
		res := env.GraphQL(alex, tc.query, tc.vars, nil)
		if len(res.Errors) != 1 || len(res.Errors[0].Extensions.FieldErrors) != 1 || res.Errors[0].Extensions.FieldErrors[0].Field != tc.field ||
			res.Errors[0].Extensions.FieldErrors[0].Code != "empty" {
			t.Fatalf("%s: %+v", tc.field, res.Errors)
		}
	}
	// Omitted and null are none.
	var ok struct {
		CreateMessage struct {
			Replayed bool `json:"replayed"`
		} `json:"createMessage"`
	}
	if res := env.GraphQL(alex, `mutation($t: ID!) { createMessage(threadId: $t, input: {clientMsgId: "e-5", contentMd: "x", replyToMessageId: null}) { replayed } }`, map[string]any{"t": main}, &ok); len(res.Errors) > 0 {
		t.Fatalf("null: %+v", res.Errors)
	}
	r := env.Post("alex", main, "e-6", "x")
	if r.Status != 201 && r.Status != 200 {
		t.Fatalf("omitted on REST: %d %s", r.Status, r.Body)
	}
	r = env.REST("POST", "/api/v1/threads/"+main+"/messages", alex, map[string]any{"client_msg_id": "e-7", "content_md": "x", "reply_to_message_id": ""})
	if p := r.Problem(t); r.Status != 400 || len(p.Errors) != 1 || p.Errors[0].Pointer != "/reply_to_message_id" || p.Errors[0].Code != "empty" {
		t.Fatalf("REST empty: %d %s", r.Status, r.Body)
	}
	if n := env.Count(`SELECT count(*) FROM messages WHERE client_msg_id LIKE 'e-%'`); n != 2 {
		t.Fatalf("%d messages e-*, want the 2 valid ones", n)
	}
}

// TestGraphQLShapes runs the tests of the shapes of GraphQL answers and refusals as subtests: one
// top-level test per area keeps internal/server's list short enough to
// read (fewer than 80 top-level tests, issue 48).
func TestGraphQLShapes(t *testing.T) {
	t.Run("GraphQLFieldErrorPaths", testGraphQLFieldErrorPaths)
	t.Run("GraphQLRetryAfterIsANumber", testGraphQLRetryAfterIsANumber)
	t.Run("RunContextRefusedOnItsField", testRunContextRefusedOnItsField)
	t.Run("EmptyOptionalInputsRefused", testEmptyOptionalInputsRefused)
}
