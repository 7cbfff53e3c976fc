// Package openaitest is a recorded-protocol fake of the OpenAI chat
// completions API (POST /v1/chat/completions) for tests of agents built on
// [bothy.example.com/bothy/sdk/model/openai]: it answers from a script (a completion, a status with
// headers and a body, or nothing until the client gives up) and records
// every request.
package openaitest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Request is one request the fake received.
type Request struct {
	Method        string
	Path          string
	Authorization string
	Body          struct {
		Model    string `json:"model"`
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
		Stream    *bool             `json:"stream"`
		MaxTokens int               `json:"max_tokens"`
		Tools     []json.RawMessage `json:"tools"`
	}
	Raw map[string]json.RawMessage
	// Aborted is closed when the client went away before the reply.
	Aborted chan struct{}
}

// Reply is what the fake answers to one request: a completion with
// Content, a status with headers and a body, or, with Hang, nothing until
// the client gives up.
type Reply struct {
	Status  int
	Header  map[string]string
	Body    string
	Hang    bool
	Content string // shorthand for a chat completion with this content
	Finish  string // finish_reason of Content (default stop)
}

// Server is an OpenAI-compatible chat completions server that records
// every request and answers from a script; after the script it repeats the
// last reply (without a script: a completion "ok").
type Server struct {
	t      T
	srv    *httptest.Server
	mu     sync.Mutex
	reqs   []*Request
	script []Reply
	got    chan *Request
}

// New starts the fake on 127.0.0.1 and a free port, closed when t ends.
func New(t T, script ...Reply) *Server {
	f := &Server{t: t, script: script, got: make(chan *Request, 100)}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// BaseURL is the API root to configure, ending in /v1 like real servers.
func (f *Server) BaseURL() string { return f.srv.URL + "/v1" }

// Requests returns the requests received so far.
func (f *Server) Requests() []*Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*Request(nil), f.reqs...)
}

// Next waits up to d for the next request.
func (f *Server) Next(d time.Duration) *Request {
	f.t.Helper()
	select {
	case r := <-f.got:
		return r
	case <-time.After(d):
		f.t.Fatalf("the fake model server got no request within %s", d)
		return nil
	}
}

func (f *Server) serve(w http.ResponseWriter, r *http.Request) {
	data, _ := io.ReadAll(r.Body)
	rec := &Request{Method: r.Method, Path: r.URL.Path, Authorization: r.Header.Get("Authorization"), Aborted: make(chan struct{})}
	if err := json.Unmarshal(data, &rec.Body); err != nil {
		f.t.Errorf("the model request is no JSON: %v", err)
	}
	_ = json.Unmarshal(data, &rec.Raw)
	f.mu.Lock()
	n := len(f.reqs)
	f.reqs = append(f.reqs, rec)
	reply := Reply{Content: "ok"}
	if len(f.script) > 0 {
		reply = f.script[min(n, len(f.script)-1)]
	}
	f.mu.Unlock()
	f.got <- rec
	if reply.Hang {
		<-r.Context().Done()
		close(rec.Aborted)
		return
	}
	// Like real servers, the answer is JSON unless the script says so.
	w.Header().Set("Content-Type", "application/json")
	for k, v := range reply.Header {
		w.Header().Set(k, v)
	}
	if reply.Content != "" {
		WriteCompletion(w, rec.Body.Model, reply.Content, reply.Finish, rec.Body.Stream != nil && *rec.Body.Stream)
		return
	}
	body := reply.Body
	status := reply.Status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// WriteCompletion answers a chat completions request for model with
// content as the API does: one chat.completion, or with stream the
// server-sent events of chat.completion.chunk objects (the content in
// pieces of a word, a chunk with the finish reason, one with the usage,
// and [DONE]). finish is the finish reason (default stop). The
// conformance kit's fake model answers with it too.
func WriteCompletion(w http.ResponseWriter, model, content, finish string, stream bool) {
	if finish == "" {
		finish = "stop"
	}
	usage := map[string]any{"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		b, _ := json.Marshal(map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": model,
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": content}, "finish_reason": finish}},
			"usage":   usage})
		_, _ = w.Write(b)
		return
	}
	s := StartStream(w, model)
	for _, piece := range strings.SplitAfter(content, " ") {
		s.Piece(piece)
	}
	s.End(finish)
}

// Stream is a streamed chat completion being written: pieces of content
// as they come (each flushed), then its end.
type Stream struct {
	w     http.ResponseWriter
	model string
}

// StartStream begins a streamed chat completion for model on w: the
// headers and the first chunk (the assistant's role).
func StartStream(w http.ResponseWriter, model string) *Stream {
	w.Header().Set("Content-Type", "text/event-stream")
	s := &Stream{w: w, model: model}
	s.event(s.chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	return s
}

// Piece writes one chunk of content and flushes it to the client.
func (s *Stream) Piece(text string) { s.event(s.chunk(map[string]any{"content": text}, nil)) }

// ToolCall writes one chunk that calls tool name with args (a JSON object
// text) as call index i with id; end the stream with End("tool_calls").
func (s *Stream) ToolCall(i int, id, name, args string) {
	s.event(s.chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": id, "type": "function",
		"function": map[string]any{"name": name, "arguments": args}}}}, nil))
}

// WriteToolCalls answers a chat completions request for model with calls
// of tools (name and arguments, in order, ids call_1, call_2, ...): one
// chat.completion with finish_reason tool_calls, or its stream.
func WriteToolCalls(w http.ResponseWriter, model string, calls [][2]string, stream bool) {
	if stream {
		s := StartStream(w, model)
		for i, c := range calls {
			s.ToolCall(i, fmt.Sprintf("call_%d", i+1), c[0], c[1])
		}
		s.End("tool_calls")
		return
	}
	tc := make([]any, len(calls))
	for i, c := range calls {
		tc[i] = map[string]any{"id": fmt.Sprintf("call_%d", i+1), "type": "function", "function": map[string]any{"name": c[0], "arguments": c[1]}}
	}
	w.Header().Set("Content-Type", "application/json")
	b, _ := json.Marshal(map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": model,
		"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": nil, "tool_calls": tc}, "finish_reason": "tool_calls"}},
		"usage":   map[string]any{"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}})
	_, _ = w.Write(b)
}

// End writes the chunk with the finish reason (default stop), the usage
// and [DONE].
func (s *Stream) End(finish string) {
	if finish == "" {
		finish = "stop"
	}
	s.event(s.chunk(map[string]any{}, finish))
	s.event(map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": s.model, "choices": []any{},
		"usage": map[string]any{"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}})
	fmt.Fprint(s.w, "data: [DONE]\n\n")
	s.flush()
}

func (s *Stream) chunk(delta map[string]any, finish any) map[string]any {
	return map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": s.model,
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
}

func (s *Stream) event(v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintf(s.w, "data: %s\n\n", b)
	s.flush()
}

func (s *Stream) flush() {
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}

// T is the part of *testing.T the fake uses; the package does not link the
// testing package, so that a command (bothy conformance) can use
// WriteCompletion.
type T interface {
	Helper()
	Cleanup(func())
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// ContentTexts reads the content of a message of a request (a chat
// completions message, or an Anthropic message or system prompt): a
// string, or a list of parts whose texts it returns in order.
func ContentTexts(raw json.RawMessage) []string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []string{s}
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	out := make([]string, 0, len(parts))
	for _, p := range parts {
		out = append(out, p.Text)
	}
	return out
}
