package mcpface

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"bothy.example.com/bothy/internal/platform/httpx"
	"bothy.example.com/bothy/internal/platform/problem"
)

// The JSON-RPC error codes the guard answers with.
const (
	rpcInvalidRequest = -32600
	rpcMethodNotFound = -32601
)

// specMethods are the methods of the Model Context Protocol specification
// (2025-06-18, the version this face answers; docs/mcp.md). The SDK serves
// each of them, or answers it with a JSON-RPC error of its own; any other
// method the guard answers with -32601, since the SDK would refuse it with
// a plain-text HTTP 400 that no JSON-RPC client can read.
var specMethods = map[string]bool{
	"initialize": true, "ping": true,
	"tools/list": true, "tools/call": true,
	"prompts/list": true, "prompts/get": true,
	"resources/list": true, "resources/read": true, "resources/templates/list": true,
	"resources/subscribe": true, "resources/unsubscribe": true,
	"logging/setLevel": true, "completion/complete": true,
	"notifications/initialized": true, "notifications/cancelled": true, "notifications/progress": true,
	"notifications/roots/list_changed": true,
}

// guard stands before the MCP SDK (docs/mcp.md#protocol-revisions-and-clients): a JSON-RPC batch
// is refused whole with one error before anything of it runs (the
// specification dropped batches, and a batch fanned out into in-process
// API calls is work no single request should buy), and a method the
// specification does not define is answered -32601 with HTTP 200 (a
// notification of that kind is accepted and ignored, as JSON-RPC wants
// for notifications). Every other request goes on unchanged.
func guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				writeRPCError(w, http.StatusRequestEntityTooLarge, nil, rpcInvalidRequest, "the request is larger than http.max_body_bytes")
				return
			}
			writeRPCError(w, http.StatusBadRequest, nil, rpcInvalidRequest, "the request body could not be read")
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		trimmed := bytes.TrimLeft(body, " \t\r\n")
		if len(trimmed) > 0 && trimmed[0] == '[' {
			writeRPCError(w, http.StatusBadRequest, nil, rpcInvalidRequest, "JSON-RPC batches are not supported: send one message per request")
			return
		}
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(trimmed, &msg) == nil && msg.Method != "" && !specMethods[msg.Method] {
			if len(msg.ID) == 0 || string(msg.ID) == "null" {
				w.WriteHeader(http.StatusAccepted)
				return
			}
			writeRPCError(w, http.StatusOK, msg.ID, rpcMethodNotFound, "method not found")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// rpcServerError is the JSON-RPC code of a request the server refused
// before it ran (the implementation-defined range of JSON-RPC 2.0); what
// refused it is in the error's data.
const rpcServerError = -32000

// WriteProblem answers err, a refusal of the server's request chain (429
// rate_limited, too_many_concurrent, when the principal has
// http.max_concurrent_per_principal requests in flight), as one JSON-RPC
// error with id null (the body is not read yet) and the problem's HTTP
// status. Its data holds the API's code, reason and retryAfterSeconds as
// the extensions of a GraphQL error do, and Retry-After is set as on every
// face; the access log notes the code.
func WriteProblem(w http.ResponseWriter, r *http.Request, err error) {
	pe := problem.From("mcpface.refuse", err)
	httpx.NoteCode(r.Context(), pe.Code)
	msg, data := httpx.ProblemMessage(w, pe)
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": rpcServerError, "message": msg, "data": data}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(pe.Code.Status())
	_, _ = w.Write(b)
}

// writeRPCError answers one JSON-RPC error response with HTTP status; id
// is the request's id (nil: null, for a request that has none to echo).
func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, code int, message string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": message}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
