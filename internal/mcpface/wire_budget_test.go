package mcpface_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/platform/config"
)

// mcpAnswer is one answer of /mcp as the wire carries it.
type mcpAnswer struct {
	status int
	header http.Header
	body   []byte
}

// postMCP posts one JSON-RPC message to /mcp with token, under ctx.
func postMCP(ctx context.Context, env *apitest.Env, token string, msg map[string]any) (mcpAnswer, error) {
	b, _ := json.Marshal(msg)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, env.URL+"/mcp", strings.NewReader(string(b)))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return mcpAnswer{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return mcpAnswer{status: resp.StatusCode, header: resp.Header, body: body}, err
}

// mustPostMCP posts one JSON-RPC message to /mcp with token under the
// test's context and fails the test if the request does not get through.
func mustPostMCP(t *testing.T, env *apitest.Env, token string, msg map[string]any) mcpAnswer {
	t.Helper()
	a, err := postMCP(t.Context(), env, token, msg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// toolCall is the JSON-RPC message that calls tool with args.
func toolCall(id int, tool string, args map[string]any) map[string]any {
	return map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": map[string]any{"name": tool, "arguments": args}}
}

// toolResult decodes the result of a tools/call answer: its text and
// whether it is a tool error.
func toolResult(t *testing.T, a mcpAnswer) (string, bool) {
	t.Helper()
	var out struct {
		Result *struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
			IsError bool `json:"isError"`
		} `json:"result"`
	}
	if err := json.Unmarshal(a.body, &out); err != nil || a.status != http.StatusOK || out.Result == nil {
		t.Fatalf("no tool result: %d %s (%v)", a.status, a.body, err)
	}
	text := ""
	for _, c := range out.Result.Content {
		text += c.Text
	}
	return text, out.Result.IsError
}

// TestMCPToolCallsSpendTheCallersTokens: a tool's API calls spend the
// caller's tokens of the operation's class from the same bucket as the
// same query over GraphQL, one per call. With a burst of three in
// rl.read, Alex's ListChannels over GraphQL leaves two, two list_channels
// tool calls leave one and none (each MCP answer carries the RateLimit
// fields of the bucket its call spent from), the next tool call is a tool
// error that says rate_limited and when to retry, and the next GraphQL
// query is refused rate_limited as well. post_message spends from rl.message, untouched.
func TestMCPToolCallsSpendTheCallersTokens(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{Config: map[string]string{config.RateReadBurst: "3", config.RateReadPerMinute: "1"}})
	alex := env.World.Token("alex")
	const listChannels = `query ListChannels($first: Int, $after: String) { channels(first: $first, after: $after) { nodes { id } pageInfo { endCursor hasNextPage } } }`
	if res := env.GraphQL(alex, listChannels, map[string]any{"first": 5}, nil); len(res.Errors) != 0 ||
		!strings.HasPrefix(res.Header.Get("RateLimit"), `"rl.read";r=2;t=`) || res.Header.Get("RateLimit-Policy") != `"rl.read";q=3;w=180` {
		t.Fatalf("GraphQL ListChannels: %d %+v RateLimit %q, policy %q", res.Status, res.Errors, res.Header.Get("RateLimit"), res.Header.Get("RateLimit-Policy"))
	}
	for i, want := range []string{`"rl.read";r=1;t=`, `"rl.read";r=0;t=`} {
		a := mustPostMCP(t, env, alex, toolCall(i+1, "list_channels", map[string]any{"first": 5}))
		if text, isErr := toolResult(t, a); isErr || !strings.HasPrefix(a.header.Get("RateLimit"), want) || a.header.Get("RateLimit-Policy") != `"rl.read";q=3;w=180` {
			t.Fatalf("list_channels %d: %s, RateLimit %q (want %q), policy %q", i+1, text, a.header.Get("RateLimit"), want, a.header.Get("RateLimit-Policy"))
		}
	}
	wantToolRateLimited(t, env, alex)
	if res := env.GraphQL(alex, listChannels, map[string]any{"first": 5}, nil); len(res.Errors) != 1 ||
		res.Errors[0].Extensions.Code != "rate_limited" || !strings.HasPrefix(res.Header.Get("RateLimit"), `"rl.read";r=0;t=`) {
		t.Fatalf("GraphQL after the tool calls: %d %+v", res.Status, res.Errors)
	}
	a := mustPostMCP(t, env, alex, toolCall(4, "post_message", map[string]any{"thread_id": env.Main("Support/Allgemein"), "text": "still allowed"}))
	if text, isErr := toolResult(t, a); isErr || !strings.HasPrefix(a.header.Get("RateLimit"), `"rl.message";r=19;`) {
		t.Fatalf("post_message: %s, RateLimit %q", text, a.header.Get("RateLimit"))
	}
}

// wantToolRateLimited has alex call list_channels once more with rl.read
// spent: the call must be a tool error that says rate_limited and when to
// retry, the time the RateLimit field gives.
func wantToolRateLimited(t *testing.T, env *apitest.Env, alex string) {
	t.Helper()
	a := mustPostMCP(t, env, alex, toolCall(3, "list_channels", map[string]any{"first": 5}))
	text, isErr := toolResult(t, a)
	retry := strings.TrimPrefix(a.header.Get("RateLimit"), `"rl.read";r=0;t=`)
	if !isErr || retry == a.header.Get("RateLimit") || text != "rate_limited; retry after "+retry+"s" {
		t.Fatalf("list_channels over the burst: error %v %q, RateLimit %q", isErr, text, a.header.Get("RateLimit"))
	}
}

// TestMCPRequestIsOneInFlight: at http.max_concurrent_per_principal 1, a
// tool call holds the principal's one slot for the whole request, and its
// API calls (a long poll among them) take none of their own: while
// lotse's wait_for_run waits, another request of lotse is refused 429
// rate_limited (too_many_concurrent), on /mcp as a JSON-RPC error with
// Retry-After, on REST as the problem it always was; Alex is not
// affected. Alex's mention_agent (two API calls) succeeds at the cap of
// one, and the waiting tool call answers the run it started (three API
// calls under lotse's one slot).
func TestMCPRequestIsOneInFlight(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{Config: map[string]string{config.HTTPMaxConcurrentPerPrincipal: "1",
		config.HTTPMaxConcurrentWait: "2s"}})
	lotse, alex := env.World.Token("lotse"), env.World.Token("alex")
	var (
		wg      sync.WaitGroup
		waited  mcpAnswer
		waitErr error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		waited, waitErr = postMCP(t.Context(), env, lotse, toolCall(1, "wait_for_run", map[string]any{"wait_seconds": 25}))
	}()
	env.AwaitPolls(t, 1)

	wantConcurrencyRefusal(t, mustPostMCP(t, env, lotse, map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
	apitest.WantProblem(t, "a REST request over the cap", env.REST(http.MethodGet, "/api/v1/me", lotse, nil),
		http.StatusTooManyRequests, "rate_limited", "too_many_concurrent")
	if r := env.REST(http.MethodGet, "/api/v1/me", alex, nil); r.Status != http.StatusOK {
		t.Fatalf("alex while lotse is at the cap: %d", r.Status)
	}
	// Alex's mention_agent (a post and a read of the run it started, two
	// API calls under Alex's one slot) ends the wait: the waiting tool
	// call, which held lotse's only slot all along, reads the invocation,
	// acknowledges it and reads the run (three API calls) and answers the
	// run.
	a := mustPostMCP(t, env, alex, toolCall(3, "mention_agent", map[string]any{"thread_id": env.Main("Support/Eskalation"), "text": "@lotse is the printer back?"}))
	text, isErr := toolResult(t, a)
	var mention struct {
		RunID string `json:"run_id"`
	}
	if isErr || json.Unmarshal([]byte(text), &mention) != nil || mention.RunID == "" {
		t.Fatalf("mention_agent at a cap of one: %s", text)
	}
	wg.Wait()
	if waitErr != nil {
		t.Fatal(waitErr)
	}
	if text, isErr := toolResult(t, waited); isErr || !strings.Contains(text, `"run_id": "`+mention.RunID+`"`) {
		t.Fatalf("wait_for_run at a cap of one: %s (Alex started %s)", text, mention.RunID)
	}
}

// wantConcurrencyRefusal checks a, the answer of /mcp to a request over
// the principal's cap of concurrent requests: 429 with Retry-After and a
// JSON-RPC error without id whose data says rate_limited
// (too_many_concurrent) and when to retry.
func wantConcurrencyRefusal(t *testing.T, a mcpAnswer) {
	t.Helper()
	var refusal struct {
		ID    any `json:"id"`
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Data    struct {
				Code              string `json:"code"`
				Reason            string `json:"reason"`
				RetryAfterSeconds int    `json:"retryAfterSeconds"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(a.body, &refusal); err != nil || a.status != http.StatusTooManyRequests || refusal.Error == nil ||
		refusal.Error.Data.Code != "rate_limited" || refusal.Error.Data.Reason != "too_many_concurrent" ||
		refusal.Error.Data.RetryAfterSeconds != 1 || a.header.Get("Retry-After") != "1" || refusal.ID != nil {
		t.Fatalf("a second MCP request over the cap: %d %v %s", a.status, a.header, a.body)
	}
}
