package mcpface_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/platform/config"
)

// rawMCP posts body to /mcp with token and an X-Forwarded-For client, and
// returns the status, the content type and the body.
func rawMCP(t *testing.T, env *apitest.Env, token, body string) (int, string, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, env.URL+"/mcp", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("X-Forwarded-For", "203.0.113.7")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

// rpcError decodes a JSON-RPC error response.
func rpcError(t *testing.T, b []byte) (id any, code int, message string) {
	t.Helper()
	var out struct {
		JSONRPC string `json:"jsonrpc"`
		ID      any    `json:"id"`
		Error   *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &out); err != nil || out.JSONRPC != "2.0" || out.Error == nil {
		t.Fatalf("no JSON-RPC error: %s (%v)", b, err)
	}
	return out.ID, out.Error.Code, out.Error.Message
}

// TestMCPBoundedAndHonest: a JSON-RPC batch is refused whole with one
// JSON-RPC error before anything of it runs (a batch of posts stores no
// message); a method the specification does not define answers -32601
// with HTTP 200 and the request's id, an unknown notification 202; a
// known method still works. The access log names the face mcp, the
// principal and the client (behind a trusted proxy), for the request and
// for the API calls its tools make in-process.
func TestMCPBoundedAndHonest(t *testing.T) {
	t.Parallel()
	var logs apitest.Buffer
	env := apitest.Start(t, apitest.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
		Config: map[string]string{config.HTTPTrustedProxies: "127.0.0.1/32"}})
	alex := env.World.Token("alex")
	checkBatchRefused(t, env, alex)
	checkUnknownMethods(t, env, alex)

	// One tool call: its request and the API call it makes are logged as
	// Alex's, from the client behind the proxy.
	status, _, body := rawMCP(t, env, alex, postMessageRPC(env, 9, "one post"))
	if status != http.StatusOK || strings.Contains(string(body), `"isError":true`) {
		t.Fatalf("post_message: %d %s", status, body)
	}
	wantAccessLogged(t, env, &logs)
}

// postMessageRPC is the JSON-RPC request id that calls post_message with
// text in Support/Allgemein.
func postMessageRPC(env *apitest.Env, id int, text string) string {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call",
		"params": map[string]any{"name": "post_message", "arguments": map[string]any{"thread_id": env.Main("Support/Allgemein"), "text": text}}})
	return string(b)
}

// checkBatchRefused posts a JSON-RPC batch of 50 post_message calls as
// alex: it is refused whole with one JSON-RPC error (-32600, no id) and
// HTTP 400, and stores no message.
func checkBatchRefused(t *testing.T, env *apitest.Env, alex string) {
	t.Helper()
	before := env.Count(`SELECT count(*) FROM messages`)
	var batch bytes.Buffer
	batch.WriteString("[")
	for i := 0; i < 50; i++ {
		if i > 0 {
			batch.WriteString(",")
		}
		batch.WriteString(postMessageRPC(env, i, "batched"))
	}
	batch.WriteString("]")
	status, ctype, body := rawMCP(t, env, alex, " \n"+batch.String())
	if status != http.StatusBadRequest || !strings.HasPrefix(ctype, "application/json") {
		t.Fatalf("a batch: %d %s %s", status, ctype, body)
	}
	if id, code, _ := rpcError(t, body); id != nil || code != -32600 {
		t.Fatalf("a batch: id %v code %d", id, code)
	}
	if n := env.Count(`SELECT count(*) FROM messages`); n != before {
		t.Fatalf("a refused batch stored %d messages", n-before)
	}
}

// checkUnknownMethods checks the answers to what the specification does
// not define: an unknown method is -32601 with HTTP 200 and the
// request's id, an unknown notification 202 with no body; a known method
// (ping) still works.
func checkUnknownMethods(t *testing.T, env *apitest.Env, alex string) {
	t.Helper()
	status, _, body := rawMCP(t, env, alex, `{"jsonrpc":"2.0","id":7,"method":"bogus/method"}`)
	if id, code, _ := rpcError(t, body); status != http.StatusOK || id != float64(7) || code != -32601 {
		t.Fatalf("an unknown method: %d, id %v, code %d", status, id, code)
	}
	if status, _, body = rawMCP(t, env, alex, `{"jsonrpc":"2.0","method":"notifications/bogus"}`); status != http.StatusAccepted || len(body) != 0 {
		t.Fatalf("an unknown notification: %d %s", status, body)
	}
	status, _, body = rawMCP(t, env, alex, `{"jsonrpc":"2.0","id":8,"method":"ping"}`)
	if status != http.StatusOK || !strings.Contains(string(body), `"result"`) {
		t.Fatalf("ping: %d %s", status, body)
	}
}

// wantAccessLogged checks that the access log in logs names the face mcp
// for Alex's tool call and graphql for the API call it made in-process,
// both with Alex's principal and the client behind the trusted proxy,
// and that the requests of face mcp are counted.
func wantAccessLogged(t *testing.T, env *apitest.Env, logs *apitest.Buffer) {
	t.Helper()
	var mcpLine, innerLine bool
	for _, l := range logs.Lines(t) {
		if l["msg"] != "request" || l["principal_id"] != env.World.ID("alex") || l["client"] != "203.0.113.7" {
			continue
		}
		switch l["face"] {
		case "mcp":
			mcpLine = true
		case "graphql":
			innerLine = true
		}
	}
	if !mcpLine || !innerLine {
		t.Fatalf("access log: mcp line %v, in-process API line %v:\n%s", mcpLine, innerLine, logs.String())
	}
	if v := env.Metric(`bothy_http_requests_total{face="mcp",status="200"}`); v < 1 {
		t.Fatalf("requests of face mcp counted %v", v)
	}
}

// TestMCPWaitHandsOutActiveRunsOnly: wait_for_run skips the invocation of a
// run that ended before it was handed out (Alex cancelled it while it was
// queued) and hands out the next one; claim_run answers the holder of the
// claim, with which the runtime mints a run token for its own claim, and a
// token for a run still queued is refused run_not_started.
func TestMCPWaitHandsOutActiveRunsOnly(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	s := connect(t, env, "lotse")
	first := env.MustPost("alex", env.Main("Support/Eskalation"), "mcp-c1", "@lotse never mind this one")
	var cancelled string
	if err := env.Pool.QueryRow(t.Context(), `SELECT id::text FROM runs WHERE triggering_message_id = $1`, first["id"]).Scan(&cancelled); err != nil {
		t.Fatal(err)
	}
	apitest.WantProblem(t, "a token for a queued run", env.REST(http.MethodPost, "/api/v1/runs/"+cancelled+"/tokens", env.World.Token("lotse"),
		map[string]any{"holder": "proc-q"}), http.StatusConflict, "conflict", "run_not_started")
	env.MustREST(t, http.MethodPost, "/api/v1/runs/"+cancelled+"/cancel", env.World.Token("alex"), nil, http.StatusOK)
	env.MustPost("alex", env.Main("Support/Eskalation"), "mcp-c2", "@lotse is the printer back?")
	got, _, isErr := call(t, s, "wait_for_run", map[string]any{"wait_seconds": 5})
	run, _ := got["run"].(map[string]any)
	if isErr || run == nil || run["run_id"] == cancelled || run["run_id"] == "" {
		t.Fatalf("wait_for_run handed out %+v (the cancelled run is %s)", got, cancelled)
	}
	id := run["run_id"].(string)
	out, text, isErr := call(t, s, "claim_run", map[string]any{"run_id": id})
	holder, _ := out["holder"].(string)
	if isErr || out["state"] != "running" || !strings.HasPrefix(holder, "mcp-") {
		t.Fatalf("claim_run: %s", text)
	}
	env.MustREST(t, http.MethodPost, "/api/v1/runs/"+id+"/tokens", env.World.Token("lotse"), map[string]any{"holder": holder}, http.StatusCreated)
}

// TestMCPMetadataNeverEchoesTheHost: the protected resource metadata and
// the WWW-Authenticate of a 401 name http.public_url, or without it the
// listen address, never the Host a client sent (a forged one would point
// clients elsewhere for their tokens).
func TestMCPMetadataNeverEchoesTheHost(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ public, want string }{
		{"", ""}, // the listen address: env.URL
		{"https://chat.example.com/", "https://chat.example.com"},
	} {
		cfg := map[string]string{}
		if c.public != "" {
			cfg[config.HTTPPublicURL] = c.public
		}
		env := apitest.Start(t, apitest.Options{Config: cfg})
		want := c.want
		if want == "" {
			want = env.URL
		}
		req, _ := http.NewRequest(http.MethodGet, env.URL+"/.well-known/oauth-protected-resource", nil)
		req.Host = "evil.example.com"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var m map[string]any
		if json.Unmarshal(b, &m) != nil || m["resource"] != want+"/mcp" || strings.Contains(string(b), "evil") {
			t.Fatalf("public_url %q: metadata %s", c.public, b)
		}
		req, _ = http.NewRequest(http.MethodPost, env.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Host = "evil.example.com"
		req.Header.Set("Content-Type", "application/json")
		resp, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if h := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(h, `resource_metadata="`+want+`/.well-known/oauth-protected-resource"`) {
			t.Fatalf("public_url %q: 401 %d %q", c.public, resp.StatusCode, h)
		}
	}
}
