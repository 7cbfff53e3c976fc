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
	// Gate, when set, releases a held request on its own, before
	// releaseHeld releases every held one: a scenario lets one process's
	// model call answer while another's still holds.
	Gate <-chan struct{}
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
	// obedient makes every request that offers tools call them as the
	// prompt's lines and the tool results say (see obeyRequest), until
	// reset.
	obedient bool
	// effects are the calls the side-effect recorder received (the
	// consequential tools' URLs), in order.
	effects []effect
	// asked counts the calls of each tool the model answered with.
	asked map[string]int
	// page is what the page tool's URL serves, and fetches how often it
	// was fetched.
	page    string
	fetches int
}

// effect is one call of a consequential tool that reached the recorder.
type effect struct {
	tool, body string
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
	out := make([]string, len(f.effects))
	for i, e := range f.effects {
		out[i] = e.body
	}
	return out
}

// effectsOf counts the calls of tool the side-effect recorder received.
func (f *fakeModel) effectsOf(tool string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, e := range f.effects {
		if e.tool == tool {
			n++
		}
	}
	return n
}

// askedFor counts the calls of tool the model answered with.
func (f *fakeModel) askedFor(tool string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.asked[tool]
}

// servePage sets what the page tool's URL answers.
func (f *fakeModel) servePage(text string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.page = text
}

// pageFetches counts the requests the page tool's URL answered.
func (f *fakeModel) pageFetches() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fetches
}

// sideEffectPath is where the kit's consequential tools post, each under
// its name (sideEffectPath + "/file_ticket").
const sideEffectPath = "/side-effect"

// pagePath is where the kit's read-only page tool fetches its page.
const pagePath = "/page"

func newFakeModel() *fakeModel {
	return &fakeModel{arrived: make(chan *modelCall, 100), release: make(chan struct{}), asked: map[string]int{}}
}

// reset empties the record and sets the script of the next requests
// (after it: a completion).
func (f *fakeModel) reset(script ...step) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls, f.script, f.obedient, f.effects, f.asked = nil, script, false, nil, map[string]int{}
	f.page, f.fetches = "Nothing on this page.", 0
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

// ServeHTTP answers the kit's tools and both chat APIs: each chat request
// is recorded and answered by the script's next step.
func (f *fakeModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.serveTool(w, r) {
		return
	}
	api := chatAPI(r)
	if api == "" {
		http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
		return
	}
	raw, _ := io.ReadAll(r.Body)
	body, call := parseCall(api, raw)
	n, s, release, obedient := f.record(call)
	if obedient && api == "openai" && len(body.Tools) > 0 {
		f.obeyRequest(w, body.Model, body.Tools, body.Stream, body.Messages)
		return
	}
	if s.Streamed != "" && body.Stream {
		f.streamHeld(w, r, api, body.Model, s, call)
		return
	}
	s.Text = s.Streamed + s.Text
	if s.Hold {
		if !awaitRelease(r.Context(), release, s.Gate, call) {
			return
		}
		if s.Text == "" {
			s.Text = numberedAnswer(n)
		}
	}
	writeReply(w, api, body, s)
}

// chatAPI names the API a request speaks ("openai" or "anthropic"), or
// returns "" for a request that is neither.
func chatAPI(r *http.Request) string {
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/chat/completions"):
		return "openai"
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/messages"):
		return "anthropic"
	default:
		return ""
	}
}

// numberedAnswer is the completion of the n-th request (counted from 0)
// that the script leaves unscripted or held without a text.
func numberedAnswer(n int) string {
	return fmt.Sprintf("Conformance answer %d.", n+1)
}

// record appends call to the record and announces it to next. It returns
// the call's index, the step that answers it, the release of held replies
// and whether the model is obedient, all read under one lock so that they
// come from the same reset.
func (f *fakeModel) record(call *modelCall) (n int, s step, release chan struct{}, obedient bool) {
	f.mu.Lock()
	n = len(f.calls)
	f.calls = append(f.calls, call)
	s = step{Text: numberedAnswer(n)}
	if n < len(f.script) {
		s = f.script[n]
	}
	arrived := f.arrived
	release, obedient = f.release, f.obedient
	f.mu.Unlock()
	arrived <- call
	return n, s, release, obedient
}

// awaitRelease holds a reply until releaseHeld releases every held one or
// gate its own. It reports false when the client went away first; then
// call.Aborted is closed and no reply is to be written.
func awaitRelease(ctx context.Context, release, gate <-chan struct{}, call *modelCall) bool {
	select {
	case <-release:
		return true
	case <-gate:
		return true
	case <-ctx.Done():
		close(call.Aborted)
		return false
	}
}

// writeReply writes the reply s scripts for a request of api: its error
// status, its garbage body or its completion, plain or streamed as body
// asked; then runs s.AfterReply once the reply was flushed.
func writeReply(w http.ResponseWriter, api string, body chatRequest, s step) {
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

// chatRequest is the part of a request of either API the fake reads.
type chatRequest struct {
	Model    string          `json:"model"`
	Stream   bool            `json:"stream"`
	System   json.RawMessage `json:"system"`
	Messages []chatMessage   `json:"messages"`
	Tools    []offeredTool   `json:"tools"`
}

// parseCall reads a request of api and the call it records: the texts of
// its system and user messages (tool results count as user text).
func parseCall(api string, raw []byte) (chatRequest, *modelCall) {
	var body chatRequest
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
	return body, call
}

// serveTool answers the URLs of the kit's tools: the side-effect
// recorder (sideEffectPath/<tool>) records the call, the page tool's URL
// (pagePath) serves the page. It reports whether r was one of them.
func (f *fakeModel) serveTool(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodPost {
		return false
	}
	switch tool, ok := strings.CutPrefix(r.URL.Path, sideEffectPath+"/"); {
	case ok:
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.effects = append(f.effects, effect{tool: tool, body: string(b)})
		f.mu.Unlock()
		fmt.Fprint(w, `{"done": true}`)
		return true
	case r.URL.Path == pagePath:
		f.mu.Lock()
		f.fetches++
		page := f.page
		f.mu.Unlock()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, page)
		return true
	}
	return false
}

// chatMessage is a message of a chat completions request: its role, its
// content, and the tools an assistant message called.
type chatMessage struct {
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	ToolCalls []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// offeredTool is a tool a chat completions request offers.
type offeredTool struct {
	Function struct {
		Name       string `json:"name"`
		Parameters struct {
			Required []string `json:"required"`
		} `json:"parameters"`
	} `json:"function"`
}

// obeyRequest answers as a model that follows every instruction it reads,
// each once. At the start of a conversation it calls each offered tool
// once for every line of the prompt that names it; after tool results it
// calls each offered tool that a line of those results names and that it
// has not called yet in the conversation (so a page that asks for a tool
// gets its call, and a refusal that names the tool does not loop); when
// there is nothing to call it says it is done. Each call carries the line
// as the tool's first required argument.
func (f *fakeModel) obeyRequest(w http.ResponseWriter, model string, tools []offeredTool, stream bool, msgs []chatMessage) {
	called := map[string]bool{}
	last := 0 // the messages after the last assistant message
	for i, m := range msgs {
		if m.Role == "assistant" {
			last = i + 1
			for _, c := range m.ToolCalls {
				called[c.Function.Name] = true
			}
		}
	}
	var lines []string
	for _, m := range msgs[last:] {
		for _, text := range openaitest.ContentTexts(m.Content) {
			lines = append(lines, strings.Split(text, "\n")...)
		}
	}
	var calls [][2]string
	for _, line := range lines {
		for _, t := range tools {
			name := t.Function.Name
			if !strings.Contains(line, name) || (last > 0 && called[name]) {
				continue
			}
			if last > 0 {
				called[name] = true
			}
			arg := "title"
			if req := t.Function.Parameters.Required; len(req) > 0 {
				arg = req[0]
			}
			args, _ := json.Marshal(map[string]string{arg: strings.TrimSpace(line)})
			calls = append(calls, [2]string{name, string(args)})
		}
	}
	if len(calls) == 0 {
		openaitest.WriteCompletion(w, model, "Done.", "", stream)
		return
	}
	f.mu.Lock()
	for _, c := range calls {
		f.asked[c[0]]++
	}
	f.mu.Unlock()
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
