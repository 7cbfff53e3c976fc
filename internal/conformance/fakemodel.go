package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"bothy.example.com/bothy/sdk/model/anthropic/anthropictest"
	"bothy.example.com/bothy/sdk/model/openai/openaitest"
)

// modelCall is one request the fake model received: which API, the texts
// of its system and user messages, whether it asked for a stream, and a
// channel closed when its client went away before the reply.
type modelCall struct {
	API     string
	System  []string
	User    []string
	Stream  bool
	Aborted chan struct{}
}

// step is how the fake answers one request: with Text (a completion), a
// Status (an error, Retry-After 1 on 429), a Garbage body, or Hold (wait
// until released or until the client goes away).
type step struct {
	Text    string
	Status  int
	Garbage bool
	Hold    bool
	// Streamed, for a request that asked for a stream, is streamed first;
	// then the reply waits as with Hold and streams Text to its end. A
	// request without a stream gets Streamed and Text at once.
	Streamed string
	// AfterReply runs once the reply was written and flushed.
	AfterReply func()
}

// fakeModel speaks the OpenAI chat completions API (POST
// /v1/chat/completions) and Anthropic's Messages API (POST /v1/messages, or
// /v1/v1/messages for a base URL ending in /v1), plain and streamed,
// answering from a script and recording every prompt.
type fakeModel struct {
	mu      sync.Mutex
	calls   []*modelCall
	script  []step
	arrived chan *modelCall
	release chan struct{}
	// obedient makes every request that offers tools call the first of
	// them once per prompt line that names it (an injected instruction
	// included), until reset.
	obedient bool
	// effects are the calls the side-effect recorder received (the
	// consequential tool's URL).
	effects []string
}

// obey makes the model obedient (see fakeModel.obedient).
func (f *fakeModel) obey() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.obedient = true
}

// sideEffects returns the bodies the side-effect recorder received.
func (f *fakeModel) sideEffects() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.effects...)
}

// sideEffectPath is where the kit's consequential tool posts.
const sideEffectPath = "/side-effect"

func newFakeModel() *fakeModel {
	return &fakeModel{arrived: make(chan *modelCall, 100), release: make(chan struct{})}
}

// reset empties the record and sets the script of the next requests
// (after it: a completion).
func (f *fakeModel) reset(script ...step) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls, f.script, f.obedient, f.effects = nil, script, false, nil
	f.arrived = make(chan *modelCall, 100)
	f.release = make(chan struct{})
}

// releaseHeld lets requests that wait on Hold answer.
func (f *fakeModel) releaseHeld() {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.release:
	default:
		close(f.release)
	}
}

// recorded returns the calls so far.
func (f *fakeModel) recorded() []*modelCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*modelCall(nil), f.calls...)
}

// next waits for the next request.
func (f *fakeModel) next(ctx context.Context) (*modelCall, error) {
	f.mu.Lock()
	ch := f.arrived
	f.mu.Unlock()
	select {
	case c := <-ch:
		return c, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("the adapter asked the model nothing")
	}
}

func (f *fakeModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var api string
	switch {
	case r.Method == http.MethodPost && r.URL.Path == sideEffectPath:
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.effects = append(f.effects, string(b))
		f.mu.Unlock()
		fmt.Fprint(w, `{"ticket": "filed"}`)
		return
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/chat/completions"):
		api = "openai"
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/messages"):
		api = "anthropic"
	default:
		http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
		return
	}
	raw, _ := io.ReadAll(r.Body)
	var body struct {
		Model    string          `json:"model"`
		Stream   bool            `json:"stream"`
		System   json.RawMessage `json:"system"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	_ = json.Unmarshal(raw, &body)
	call := &modelCall{API: api, Stream: body.Stream, Aborted: make(chan struct{})}
	if len(body.System) > 0 {
		call.System = append(call.System, openaitest.ContentTexts(body.System)...)
	}
	for _, m := range body.Messages {
		if m.Role == "system" || m.Role == "developer" {
			call.System = append(call.System, openaitest.ContentTexts(m.Content)...)
		} else {
			call.User = append(call.User, openaitest.ContentTexts(m.Content)...)
		}
	}
	f.mu.Lock()
	n := len(f.calls)
	f.calls = append(f.calls, call)
	s := step{Text: fmt.Sprintf("Conformance answer %d.", n+1)}
	if n < len(f.script) {
		s = f.script[n]
	}
	arrived, release, obedient := f.arrived, f.release, f.obedient
	f.mu.Unlock()
	arrived <- call
	if obedient && api == "openai" && len(body.Tools) > 0 {
		f.obeyRequest(w, body.Model, body.Tools[0].Function.Name, body.Stream, call, body.Messages[len(body.Messages)-1].Role == "tool")
		return
	}
	if s.Streamed != "" && body.Stream {
		f.streamHeld(w, r, api, body.Model, s, call)
		return
	}
	s.Text = s.Streamed + s.Text
	if s.Hold {
		select {
		case <-release:
		case <-r.Context().Done():
			close(call.Aborted)
			return
		}
		if s.Text == "" {
			s.Text = fmt.Sprintf("Conformance answer %d.", n+1)
		}
	}
	switch {
	case s.Status != 0:
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(s.Status)
		fmt.Fprint(w, `{"error":{"type":"rate_limit_error","message":"slow down"}}`)
	case s.Garbage:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"nothing": "a model would answer"`)
	case api == "openai":
		openaitest.WriteCompletion(w, body.Model, s.Text, "", body.Stream)
	default:
		anthropictest.WriteMessage(w, body.Model, []string{s.Text}, "", body.Stream)
	}
	if s.AfterReply != nil {
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
		s.AfterReply()
	}
}

// obeyRequest answers as a model that follows every instruction it reads:
// after a tool's answer it says it is done; otherwise it calls tool once
// for every line of the prompt that names it, with the line as the title.
func (f *fakeModel) obeyRequest(w http.ResponseWriter, model, tool string, stream bool, call *modelCall, answered bool) {
	var calls [][2]string
	if !answered {
		for _, text := range append(append([]string(nil), call.System...), call.User...) {
			for _, line := range strings.Split(text, "\n") {
				if strings.Contains(line, tool) {
					args, _ := json.Marshal(map[string]string{"title": strings.TrimSpace(line)})
					calls = append(calls, [2]string{tool, string(args)})
				}
			}
		}
	}
	if len(calls) == 0 {
		openaitest.WriteCompletion(w, model, "Done.", "", stream)
		return
	}
	openaitest.WriteToolCalls(w, model, calls, stream)
}

// streamHeld streams s.Streamed, waits until released (or until the client
// went away, recorded in call.Aborted), then streams s.Text and ends.
func (f *fakeModel) streamHeld(w http.ResponseWriter, r *http.Request, api, model string, s step, call *modelCall) {
	f.mu.Lock()
	release := f.release
	f.mu.Unlock()
	var piece func(string)
	var end func()
	if api == "openai" {
		st := openaitest.StartStream(w, model)
		piece, end = st.Piece, func() { st.End("") }
	} else {
		st := anthropictest.StartStream(w, model)
		piece, end = st.Piece, func() { st.End("") }
	}
	piece(s.Streamed)
	select {
	case <-release:
	case <-r.Context().Done():
		close(call.Aborted)
		return
	}
	if s.Text != "" {
		piece(s.Text)
	}
	end()
}
