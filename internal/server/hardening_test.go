package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/apitest"
)

// wantField fails unless r is a 400 validation_failed problem naming
// pointer with code.
func wantField(t *testing.T, what string, r *apitest.Response, pointer, code string) {
	t.Helper()
	if r.Status != http.StatusBadRequest {
		t.Fatalf("%s: %d %s, want 400", what, r.Status, r.Body)
	}
	p := r.Problem(t)
	if p.Code != "validation_failed" {
		t.Fatalf("%s: code %q", what, p.Code)
	}
	for _, f := range p.Errors {
		if f.Pointer == pointer && f.Code == code {
			return
		}
	}
	t.Fatalf("%s: errors %+v, want %s at %q", what, p.Errors, code, pointer)
}

// wantGQLField fails unless res carries one validation_failed error with
// a field error of code.
func wantGQLField(t *testing.T, what string, res *apitest.GQLResult, pointer, code string) {
	t.Helper()
	if len(res.Errors) != 1 || res.Errors[0].Extensions.Code != "validation_failed" {
		t.Fatalf("%s: errors %+v", what, res.Errors)
	}
	for _, f := range res.Errors[0].Extensions.FieldErrors {
		if f.Code == code && (pointer == "" || f.Pointer == pointer) {
			return
		}
	}
	t.Fatalf("%s: field errors %+v, want %s at %q", what, res.Errors[0].Extensions.FieldErrors, code, pointer)
}

func TestInvalidTimeIsValidationFailed(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	channel := env.World.Channel("Support/Eskalation").ID
	grants := env.Count(`SELECT count(*) FROM grants`)
	for _, bad := range []string{"yesterday", "2026-13-01T00:00:00Z", "0000-01-01T00:00:00Z", "", "2026-11-30"} {
		r := env.REST(http.MethodPost, "/api/v1/grants", env.World.Token("robin"), map[string]any{
			"subject_id": env.World.ID("writer"), "subject_kind": "principal", "target_kind": "channel",
			"target_id": channel, "level": "read", "expires_at": bad})
		wantField(t, "REST expires_at "+bad, r, "/expires_at", "invalid_time")

		res := env.GraphQL(env.World.Token("robin"), `mutation($in: GrantCreate!) { createGrant(input: $in) { id } }`,
			map[string]any{"in": map[string]any{"subjectId": env.World.ID("writer"), "subjectKind": "PRINCIPAL",
				"targetKind": "CHANNEL", "targetId": channel, "level": "READ", "expiresAt": bad}}, nil)
		wantGQLField(t, "GraphQL expiresAt "+bad, res, "", "invalid_time")

		lit := env.GraphQL(env.World.Token("robin"), fmt.Sprintf(`mutation { createGrant(input: {subjectId: %q, subjectKind: PRINCIPAL, targetKind: CHANNEL, targetId: %q, level: READ, expiresAt: %q}) { id } }`,
			env.World.ID("writer"), channel, bad), nil, nil)
		wantGQLField(t, "GraphQL literal expiresAt "+bad, lit, "", "invalid_time")
	}
	if got := env.Count(`SELECT count(*) FROM grants`); got != grants {
		t.Fatalf("grants changed: %d -> %d", grants, got)
	}
}

func TestInvalidCharactersAreValidationFailed(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	main := env.Main("Support/Allgemein")
	alex := env.World.Token("alex")
	messages := env.Count(`SELECT count(*) FROM messages`)
	threads := env.Count(`SELECT count(*) FROM threads`)

	wantField(t, "content_md NUL", env.Post("alex", main, "nul-1", "a\x00b"), "/content_md", "invalid_characters")
	wantField(t, "client_msg_id NUL", env.Post("alex", main, "n\x00", "fine"), "/client_msg_id", "invalid_characters")
	wantField(t, "invalid UTF-8 by escape", env.REST(http.MethodPost, "/api/v1/threads/"+main+"/messages", alex,
		`{"client_msg_id":"nul-2","content_md":"x\u0000y"}`), "/content_md", "invalid_characters")
	wantField(t, "thread title NUL", env.REST(http.MethodPost, "/api/v1/channels/"+env.World.Channel("Support/Allgemein").ID+"/threads", alex,
		map[string]any{"title": "T\x00", "first_message": map[string]any{"client_msg_id": "t-1", "content_md": "hi"}}), "/title", "invalid_characters")
	wantField(t, "external_ref NUL", env.REST(http.MethodPost, "/api/v1/threads/"+main+"/agent-session/bind", env.World.Token("lotse"),
		map[string]any{"external_ref": "ref\x00"}), "/external_ref", "invalid_characters")
	wantField(t, "finish reason NUL", env.REST(http.MethodPost, "/api/v1/runs/0190a0a0-0000-7000-8000-000000000000/finish", env.World.Token("lotse"),
		map[string]any{"outcome": "failed", "reason": "r\x00"}), "/reason", "invalid_characters")
	wantField(t, "path parameter invalid UTF-8", env.REST(http.MethodGet, "/api/v1/threads/%FF%00", alex, nil), "path:thread_id", "invalid_characters")
	wantField(t, "query parameter NUL", env.REST(http.MethodGet, "/api/v1/events?after=%00", alex, nil), "query:after", "invalid_characters")

	res := env.GraphQL(alex, `mutation($t: ID!, $in: MessageCreate!) { createMessage(threadId: $t, input: $in) { replayed } }`,
		map[string]any{"t": main, "in": map[string]any{"clientMsgId": "g-1", "contentMd": "a\x00b"}}, nil)
	wantGQLField(t, "GraphQL variable", res, "/variables/in/contentMd", "invalid_characters")
	res = env.GraphQL(alex, `mutation { createMessage(threadId: "`+main+`", input: {clientMsgId: "g-2", contentMd: "a\u0000b"}) { replayed } }`, nil, nil)
	wantGQLField(t, "GraphQL literal", res, "/createMessage/input/contentMd", "invalid_characters")
	res = env.GraphQL(alex, `query { thread(id: "x\u0000") { id } }`, nil, nil)
	wantGQLField(t, "GraphQL id literal", res, "/thread/id", "invalid_characters")

	if m, th := env.Count(`SELECT count(*) FROM messages`), env.Count(`SELECT count(*) FROM threads`); m != messages || th != threads {
		t.Fatalf("state changed: messages %d -> %d, threads %d -> %d", messages, m, threads, th)
	}
}

func TestRESTRefusesJSONNull(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	r := env.REST(http.MethodPost, "/api/v1/channels/"+env.World.Channel("Support/Allgemein").ID+"/threads", env.World.Token("alex"),
		`{"title": null, "first_message": {"client_msg_id": "n-1", "content_md": "hi"}}`)
	wantField(t, "null title", r, "/title", "null_not_allowed")
	r = env.REST(http.MethodPost, "/api/v1/threads/"+env.Main("Support/Allgemein")+"/messages", env.World.Token("alex"),
		`{"client_msg_id": "n-2", "content_md": "hi", "reply_to_message_id": null}`)
	wantField(t, "null reply_to_message_id", r, "/reply_to_message_id", "null_not_allowed")
	r = env.REST(http.MethodPost, "/api/v1/threads/"+env.Main("Support/Allgemein")+"/messages", env.World.Token("alex"),
		`{"client_msg_id": "n-3", "content_md": "hi"} trailing`)
	wantField(t, "trailing data", r, "", "invalid_json")
	r = env.RESTWith(http.MethodPost, "/api/v1/threads/"+env.Main("Support/Allgemein")+"/messages", env.World.Token("alex"),
		`{"client_msg_id": "n-4", "content_md": "hi"}`, http.Header{"Content-Type": {"text/plain"}})
	apitest.WantProblem(t, "text/plain body", r, http.StatusUnsupportedMediaType, "unsupported_media_type", "content_type")
	if n := env.Count(`SELECT count(*) FROM messages WHERE content_md = 'hi'`); n != 0 {
		t.Fatalf("%d messages written", n)
	}
}

// aliasQuery is 200 aliases of events(limit: 500): 100,000 events if run.
func aliasQuery() string {
	var b strings.Builder
	b.WriteString("{")
	for i := range 200 {
		fmt.Fprintf(&b, " a%d: events(limit: 500) { events { seq type createdAt channelId payload } nextAfter }", i)
	}
	b.WriteString(" }")
	return b.String()
}

// duplicateQuery is { viewer { id id ... } } with 7,000 duplicates.
func duplicateQuery() string {
	return "{ viewer {" + strings.Repeat(" id", 7000) + " } }"
}

func TestAmplificationRefused(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	tok := env.World.Token("alex")

	// The 200 aliases are too many selections already; 50 aliases of one
	// field pass that count and meet the cost of their limit.
	res := env.GraphQL(tok, aliasQuery(), nil, nil)
	if len(res.Errors) != 1 || res.Errors[0].Extensions.Reason != "selection_limit_exceeded" || len(res.Data) > 0 && string(res.Data) != "null" {
		t.Fatalf("alias query: %+v %s", res.Errors, res.Data)
	}
	var b strings.Builder
	b.WriteString("{")
	for i := range 50 {
		fmt.Fprintf(&b, " a%d: events(limit: 500) { events { seq } }", i)
	}
	b.WriteString(" }")
	res = env.GraphQL(tok, b.String(), nil, nil)
	if len(res.Errors) != 1 || res.Errors[0].Extensions.Reason != "complexity_limit_exceeded" || len(res.Data) > 0 && string(res.Data) != "null" {
		t.Fatalf("50 alias query: %+v %s", res.Errors, res.Data)
	}
	// The refusal's reason is the proof that validation never ran: only
	// SelectionLimit, which gqlgen calls on the raw parameters before it
	// parses and validates, answers selection_limit_exceeded, and a refused
	// operation goes no further. How fast that is belongs to
	// BenchmarkCountSelections, not to a timed assertion.
	res = env.GraphQL(tok, duplicateQuery(), nil, nil)
	if len(res.Errors) != 1 || res.Errors[0].Extensions.Reason != "selection_limit_exceeded" || res.Errors[0].Extensions.Code != "validation_failed" {
		t.Fatalf("duplicate query: %+v", res.Errors)
	}
	if !strings.Contains(res.Errors[0].Message, "graphql.max_selections") {
		t.Fatalf("duplicate query message %q does not name the limit", res.Errors[0].Message)
	}
	// Two aliases of the largest page are fine: the limit counts work,
	// not fields.
	var two struct {
		A struct {
			NextAfter string `json:"nextAfter"`
		} `json:"a"`
		B struct {
			NextAfter string `json:"nextAfter"`
		} `json:"b"`
	}
	if res := env.GraphQL(tok, `{ a: events(limit: 500) { nextAfter } b: events(limit: 500) { nextAfter } }`, nil, &two); len(res.Errors) > 0 {
		t.Fatalf("two pages: %+v", res.Errors)
	}
}

func TestResponseSizeBound(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{Config: map[string]string{"graphql.max_response_bytes": "65536", "message.max_content_bytes": "200000"}})
	main := env.Main("Support/Allgemein")
	var made struct {
		CreateMessage struct {
			Message struct {
				ID string `json:"id"`
			} `json:"message"`
		} `json:"createMessage"`
	}
	if res := env.GraphQL(env.World.Token("alex"), `mutation($t: ID!, $in: MessageCreate!) { createMessage(threadId: $t, input: $in) { message { id } } }`,
		map[string]any{"t": main, "in": map[string]any{"clientMsgId": "big-1", "contentMd": strings.Repeat("x", 100000)}}, &made); len(res.Errors) > 0 {
		t.Fatalf("post: %+v", res.Errors)
	}
	id := made.CreateMessage.Message.ID
	res := env.GraphQL(env.World.Token("alex"), `query($m: ID!) { message(id: $m) { contentMd } }`, map[string]any{"m": id}, nil)
	if len(res.Errors) != 1 || res.Errors[0].Extensions.Reason != "response_too_large" || !strings.Contains(res.Errors[0].Message, "graphql.max_response_bytes") {
		t.Fatalf("big answer: %+v", res.Errors)
	}
	r := env.REST(http.MethodGet, "/api/v1/messages/"+id, env.World.Token("alex"), nil)
	apitest.WantProblem(t, "REST big answer", r, http.StatusBadRequest, "validation_failed", "response_too_large")
}

// TestAmplificationHeapBound sends the refused documents from several
// clients at once and checks that the heap stays below a stated bound
// (the test process holds the server and the clients).
func TestAmplificationHeapBound(t *testing.T) {
	// Not parallel: it measures the heap of the whole test process, which
	// the other tests of the package would grow while it runs.
	env := apitest.Start(t, apitest.Options{})
	tok := env.World.Token("alex")
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var peak uint64
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		var m runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				runtime.ReadMemStats(&m)
				peak = max(peak, m.HeapAlloc)
			}
		}
	}()
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				for _, q := range []string{aliasQuery(), duplicateQuery()} {
					if _, err := env.GraphQLDo(tok, q, nil, nil); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	sampler.Wait()
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	const bound = 64 << 20
	t.Logf("heap before %d MiB, peak %d MiB, after %d MiB", before.HeapAlloc>>20, peak>>20, after.HeapAlloc>>20)
	if peak > before.HeapAlloc+bound {
		t.Fatalf("peak heap grew by %d MiB, bound %d MiB", (peak-before.HeapAlloc)>>20, bound>>20)
	}
	if after.HeapAlloc > before.HeapAlloc+16<<20 {
		t.Fatalf("heap after the attempts grew by %d MiB", (after.HeapAlloc-before.HeapAlloc)>>20)
	}
}

// rawDo sends a request and returns status, headers and body.
func rawDo(t *testing.T, req *http.Request) (int, http.Header, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, body
}

func TestGraphQLRefusalsAreProblems(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	tok := env.World.Token("alex")
	problemOf := func(what string, status int, h http.Header, body []byte, wantStatus int, wantCode string) {
		t.Helper()
		if status != wantStatus || !strings.HasPrefix(h.Get("Content-Type"), "application/problem+json") {
			t.Fatalf("%s: %d %s %s", what, status, h.Get("Content-Type"), body)
		}
		var p apitest.Problem
		if err := json.Unmarshal(body, &p); err != nil || p.Code != wantCode || p.Status != wantStatus {
			t.Fatalf("%s: %s", what, body)
		}
	}
	for _, ct := range []string{"text/plain", "", "application/x-www-form-urlencoded", "application/graphql"} {
		req, _ := http.NewRequest(http.MethodPost, env.URL+"/graphql", strings.NewReader(`{"query":"{ viewer { id } }"}`))
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		st, h, body := rawDo(t, req)
		problemOf("content type "+ct, st, h, body, http.StatusUnsupportedMediaType, "unsupported_media_type")
	}
	for _, m := range []string{http.MethodPut, http.MethodDelete, http.MethodPatch} {
		req, _ := http.NewRequest(m, env.URL+"/graphql", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		st, h, body := rawDo(t, req)
		problemOf("method "+m, st, h, body, http.StatusMethodNotAllowed, "method_not_allowed")
		if h.Get("Allow") != "GET, POST, OPTIONS" {
			t.Fatalf("method %s: Allow %q", m, h.Get("Allow"))
		}
	}
	req, _ := http.NewRequest(http.MethodPost, env.URL+"/graphql", strings.NewReader(`{"query":"{ viewer { id } }"} garbage`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok)
	st, _, body := rawDo(t, req)
	if st != http.StatusBadRequest || !strings.Contains(string(body), `"reason":"invalid_json"`) || strings.Contains(string(body), `"data"`) {
		t.Fatalf("trailing data: %d %s", st, body)
	}
}
