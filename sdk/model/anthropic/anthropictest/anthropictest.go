// Package anthropictest is a recorded-protocol fake of Anthropic's
// Messages API for tests of agents built on [bothy.example.com/bothy/sdk/model/anthropic]: it
// answers as the service does, plain or streamed, and records what it was
// asked.
package anthropictest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
)

// Server is a recorded-protocol stand-in of Anthropic's Messages API
// (POST /v1/messages): it answers as the service does, as one JSON
// message or as the server-sent events of a stream (message_start,
// content_block_start, content_block_delta per piece, content_block_stop,
// message_delta with the stop reason, message_stop), and records what it
// was asked. Scripted statuses come first.
type Server struct {
	// URL is the server's address: pass it as the model's base URL.
	URL string
	srv *httptest.Server
	mu  sync.Mutex
	// Requests are the bodies of the requests, in order; Headers their
	// headers.
	Requests []map[string]any
	Headers  []http.Header
	// Statuses are answered (with an error body and retry-after-ms 10)
	// before the reply, one per request.
	Statuses []int
	// Pieces are the text of the reply, one content_block_delta each when
	// streamed.
	Pieces []string
	// Stop is the stop reason (default end_turn).
	Stop string
	// Hang makes every request wait until its client gives up.
	Hang bool
}

// New starts a server that replies pieces, on 127.0.0.1 and a free
// port, closed when t ends.
func New(t T, pieces ...string) *Server {
	f := &Server{Pieces: pieces, Stop: "end_turn"}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	f.URL = f.srv.URL
	t.Cleanup(f.srv.Close)
	return f
}

func (f *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	var body map[string]any
	raw, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(raw, &body); err != nil {
		http.Error(w, "bad json", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.Requests = append(f.Requests, body)
	f.Headers = append(f.Headers, r.Header.Clone())
	var status int
	if len(f.Statuses) > 0 {
		status, f.Statuses = f.Statuses[0], f.Statuses[1:]
	}
	f.mu.Unlock()
	if f.Hang {
		<-r.Context().Done()
		return
	}
	if status != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("retry-after-ms", "10")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"type":"error","error":{"type":"overloaded_error","message":"try later"}}`)
		return
	}
	model, _ := body["model"].(string)
	WriteMessage(w, model, f.Pieces, f.Stop, body["stream"] == true)
}

// WriteMessage answers a Messages API request for model as the service
// does: one message whose text is the pieces joined, or with stream the
// server-sent events (message_start, content_block_start, a
// content_block_delta per piece, content_block_stop, message_delta with
// the stop reason, message_stop). stop is the stop reason (default
// end_turn). The conformance kit's fake model answers with it too.
func WriteMessage(w http.ResponseWriter, model string, pieces []string, stop string, stream bool) {
	if stop == "" {
		stop = "end_turn"
	}
	m, _ := json.Marshal(model)
	if !stream {
		text, _ := json.Marshal(strings.Join(pieces, ""))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"msg_1","type":"message","role":"assistant","model":%s,"content":[{"type":"text","text":%s}],"stop_reason":%q,"stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":7}}`, m, text, stop)
		return
	}
	s := StartStream(w, model)
	for _, p := range pieces {
		s.Piece(p)
	}
	s.End(stop)
}

// Stream is a streamed message being written: text deltas as they come
// (each flushed), then its end.
type Stream struct {
	w http.ResponseWriter
}

// StartStream begins a streamed message of model on w: the headers,
// message_start and content_block_start.
func StartStream(w http.ResponseWriter, model string) *Stream {
	m, _ := json.Marshal(model)
	w.Header().Set("Content-Type", "text/event-stream")
	s := &Stream{w: w}
	s.event("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":`+string(m)+`,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":1}}}`)
	s.event("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
	return s
}

// Piece writes one text delta and flushes it to the client.
func (s *Stream) Piece(text string) {
	d, _ := json.Marshal(text)
	s.event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`+string(d)+`}}`)
}

// End writes content_block_stop, message_delta with the stop reason
// (default end_turn) and message_stop.
func (s *Stream) End(stop string) {
	if stop == "" {
		stop = "end_turn"
	}
	s.event("content_block_stop", `{"type":"content_block_stop","index":0}`)
	s.event("message_delta", `{"type":"message_delta","delta":{"stop_reason":"`+stop+`","stop_sequence":null},"usage":{"output_tokens":7}}`)
	s.event("message_stop", `{"type":"message_stop"}`)
}

func (s *Stream) event(name, data string) {
	fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", name, data)
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}

// T is the part of *testing.T the fake uses; the package does not link the
// testing package, so that a command (bothy conformance) can use
// WriteMessage.
type T interface {
	Cleanup(func())
}

// Count returns how many requests came.
func (f *Server) Count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.Requests)
}
