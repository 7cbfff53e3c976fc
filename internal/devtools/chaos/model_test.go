//go:build chaos

package chaos

import (
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"bothy.example.com/bothy/sdk/model/openai/openaitest"
)

// tagPattern matches the tag every request of the test carries (q0001,
// q0002, ...), so that the model and the report can tell requests apart by
// their text.
var tagPattern = regexp.MustCompile(`\bq\d{4}\b`)

// prompt is one request the fake model received.
type prompt struct {
	// Requests are the tags of the request blocks of the prompt: the
	// trigger and the follow-ups, not the thread's history.
	Requests []string
	Delay    time.Duration
	// Aborted says that the adapter went away (it was killed) before the
	// reply; Ended is when the model replied or saw it go.
	Aborted bool
	Ended   time.Time
	// Unparsed says that the prompt held no trigger block the model could
	// find (a change of the rendering would show here first).
	Unparsed bool
	// Proc is the name of the adapter process that asked (its API key,
	// modelKeyPrefix), "" when the key is not the test's.
	Proc string
}

// fakeModel is an OpenAI-compatible chat completions server: it answers
// every POST /v1/chat/completions after a random 0.3 to 3 s with a text
// that names the tags of the requests its prompt holds, and records every
// prompt. The delay of the n-th request comes from the seed and n alone,
// so that a seed replays the same sequence of delays.
type fakeModel struct {
	srv  *httptest.Server
	seed uint64
	n    atomic.Uint64
	mu   sync.Mutex
	log  []prompt
}

// newFakeModel starts the model for t.
func newFakeModel(t *testing.T, seed uint64) *fakeModel {
	m := &fakeModel{seed: seed}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.srv.Close)
	return m
}

// BaseURL is the API root an adapter is configured with.
func (m *fakeModel) BaseURL() string { return m.srv.URL + "/v1" }

// prompts returns what the model received so far.
func (m *fakeModel) prompts() []prompt {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]prompt(nil), m.log...)
}

func (m *fakeModel) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	var body struct {
		Model    string `json:"model"`
		Stream   bool   `json:"stream"`
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	data, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(data, &body); err != nil {
		http.Error(w, "no JSON", http.StatusBadRequest)
		return
	}
	user := ""
	for _, msg := range body.Messages {
		if msg.Role == "user" {
			user = msg.Content
		}
	}
	rng := rand.New(rand.NewPCG(m.seed, 1<<32+m.n.Add(1)))
	p := prompt{Delay: 300*time.Millisecond + time.Duration(rng.Int64N(int64(2700*time.Millisecond)))}
	var unparsed bool
	p.Requests, unparsed = requestTags(user)
	p.Unparsed = unparsed
	if name, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "+modelKeyPrefix); ok {
		p.Proc = name
	}
	select {
	case <-time.After(p.Delay):
	case <-r.Context().Done():
		p.Aborted = true
	}
	p.Ended = time.Now()
	m.mu.Lock()
	m.log = append(m.log, p)
	m.mu.Unlock()
	if p.Aborted {
		return
	}
	// The reference adapter streams by default (its live box): the answer
	// comes as server-sent events when the request asks for a stream, as a
	// real chat completions server sends it.
	openaitest.WriteCompletion(w, body.Model, "answer to "+strings.Join(p.Requests, " "), "stop", body.Stream)
}

// requestTags returns the tags in the request blocks of a rendered prompt:
// the blocks whose opening line says part=trigger or part=followup
// (agent.Render and agent.WithFollowUps in sdk/agent), in prompt order.
// unparsed is true when no trigger block was found.
func requestTags(user string) (tags []string, unparsed bool) {
	in, trigger := false, false
	for _, line := range strings.Split(user, "\n") {
		switch {
		case strings.HasPrefix(line, "<<<END "):
			in = false
		case strings.HasPrefix(line, "<<<"):
			in = strings.Contains(line, " part=trigger ") || strings.Contains(line, " part=followup ")
			trigger = trigger || strings.Contains(line, " part=trigger ")
		case in:
			tags = append(tags, tagPattern.FindAllString(line, -1)...)
		}
	}
	return tags, !trigger
}
