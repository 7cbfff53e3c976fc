//go:build chaos

package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// posted is one message a person of the test wrote to lotse.
type posted struct {
	ID, Tag, Thread, Author string
	// State is the message's triggerState as the server answered it:
	// ACCEPTED (a run), FOLLOWUP (a follow-up of the thread's active run)
	// or FAILED.
	State, Reason string
	// During says that the test wrote it while the thread's run was
	// running (a follow-up written while a run is active).
	During bool
}

// people write requests to lotse through the GraphQL API, as alex and
// sam, into threads of Support/Allgemein and Support/Eskalation.
type people struct {
	b     *bothy
	http  *http.Client
	tags  atomic.Int64
	mu    sync.Mutex
	posts []posted
}

func newPeople(b *bothy) *people {
	return &people{b: b, http: &http.Client{Timeout: 30 * time.Second}}
}

// all returns the messages written so far.
func (p *people) all() []posted {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]posted(nil), p.posts...)
}

// phrases make the requests read like requests; the tag is what counts.
var phrases = []string{"the printer on floor 2 is down", "my VPN drops every few minutes", "please reset the build cache",
	"the wiki search finds nothing", "can you check the backup of last night", "the invoice export is empty",
	"which laptop model do we order now", "the meeting room display stays black"}

// write posts one request of who into thread (a new thread from a
// main-thread message in Allgemein, where auto_thread is on). It returns
// the message and the thread the conversation continues in.
func (p *people) write(ctx context.Context, rng *rand.Rand, who, thread string, during bool) (posted, string, error) {
	tag := fmt.Sprintf("q%04d", p.tags.Add(1))
	content := fmt.Sprintf("@lotse %s: %s", tag, phrases[rng.IntN(len(phrases))])
	var out struct {
		CreateMessage struct {
			Message struct {
				ID            string  `json:"id"`
				TriggerState  *string `json:"triggerState"`
				TriggerReason *string `json:"triggerReason"`
				StartedThread *struct {
					ID string `json:"id"`
				} `json:"startedThread"`
			} `json:"message"`
		} `json:"createMessage"`
	}
	err := p.graphQL(ctx, who, `mutation($t: ID!, $in: MessageCreate!) { createMessage(threadId: $t, input: $in) {
		message { id triggerState triggerReason startedThread { id } } } }`,
		map[string]any{"t": thread, "in": map[string]any{"clientMsgId": "chaos-" + tag, "contentMd": content}}, &out)
	if err != nil {
		return posted{}, "", err
	}
	msg := out.CreateMessage.Message
	m := posted{ID: msg.ID, Tag: tag, Thread: thread, Author: who, State: deref(msg.TriggerState), Reason: deref(msg.TriggerReason), During: during}
	next := thread
	if msg.StartedThread != nil {
		next = msg.StartedThread.ID
	}
	p.record(m)
	return m, next, nil
}

// startThread creates a thread in channel whose first message is a
// request of who (Eskalation, where auto_thread is off).
func (p *people) startThread(ctx context.Context, rng *rand.Rand, who, channel string) (posted, string, error) {
	tag := fmt.Sprintf("q%04d", p.tags.Add(1))
	content := fmt.Sprintf("@lotse %s: %s", tag, phrases[rng.IntN(len(phrases))])
	var out struct {
		CreateThread struct {
			Thread struct {
				ID string `json:"id"`
			} `json:"thread"`
			FirstMessage struct {
				ID            string  `json:"id"`
				TriggerState  *string `json:"triggerState"`
				TriggerReason *string `json:"triggerReason"`
			} `json:"firstMessage"`
		} `json:"createThread"`
	}
	err := p.graphQL(ctx, who, `mutation($c: ID!, $in: ThreadCreate!) { createThread(channelId: $c, input: $in) {
		thread { id } firstMessage { id triggerState triggerReason } } }`,
		map[string]any{"c": channel, "in": map[string]any{"title": "chaos " + tag, "firstMessage": map[string]any{"clientMsgId": "chaos-" + tag, "contentMd": content}}}, &out)
	if err != nil {
		return posted{}, "", err
	}
	ct := out.CreateThread
	m := posted{ID: ct.FirstMessage.ID, Tag: tag, Thread: ct.Thread.ID, Author: who, State: deref(ct.FirstMessage.TriggerState), Reason: deref(ct.FirstMessage.TriggerReason)}
	p.record(m)
	return m, ct.Thread.ID, nil
}

// record keeps a message the server stored, whatever its trigger state.
func (p *people) record(m posted) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.posts = append(p.posts, m)
}

// deref returns the string s points at, "" for nil (a null in GraphQL).
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// graphQL sends one operation as who and decodes data into out. Network
// errors, 429 and 503 are tried again (a person's message is idempotent
// by its clientMsgId), up to five times.
func (p *people) graphQL(ctx context.Context, who, query string, vars map[string]any, out any) error {
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	var last error
	for attempt := 0; attempt < 5; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(attempt) * 500 * time.Millisecond):
			}
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.b.URL+"/graphql", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+p.b.World.Token(who))
		resp, err := p.http.Do(req)
		if err != nil {
			last = err
			continue
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
			last = fmt.Errorf("graphql: %d %s", resp.StatusCode, data)
			continue
		}
		var env struct {
			Data   json.RawMessage `json:"data"`
			Errors []struct {
				Message    string         `json:"message"`
				Extensions map[string]any `json:"extensions"`
			} `json:"errors"`
		}
		if err := json.Unmarshal(data, &env); err != nil {
			return fmt.Errorf("graphql answer %d is no JSON: %s", resp.StatusCode, data)
		}
		if len(env.Errors) > 0 {
			return fmt.Errorf("graphql: %s %v", env.Errors[0].Message, env.Errors[0].Extensions)
		}
		return json.Unmarshal(env.Data, out)
	}
	return last
}

// rest sends a GET as who to path and decodes the answer into out.
func (p *people) rest(ctx context.Context, who, path string, out any) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.b.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+p.b.World.Token(who))
	resp, err := p.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, data)
	}
	return json.Unmarshal(data, out)
}

// activeRun returns the state of the active run of thread ("" for none).
func (p *people) activeRun(ctx context.Context, thread string) string {
	var state string
	err := p.b.Pool.QueryRow(ctx, `SELECT state FROM runs WHERE thread_id = $1 AND state IN ('queued', 'running', 'waiting_input')`, thread).Scan(&state)
	if err != nil {
		return ""
	}
	return state
}

// waitRunning waits until thread has a running run, at most d; it reports
// whether it has.
func (p *people) waitRunning(ctx context.Context, thread string, d time.Duration) bool {
	end := time.Now().Add(d)
	for time.Now().Before(end) && ctx.Err() == nil {
		if p.activeRun(ctx, thread) == "running" {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// waitIdle waits until thread has no active run, at most d.
func (p *people) waitIdle(ctx context.Context, thread string, d time.Duration) {
	end := time.Now().Add(d)
	for time.Now().Before(end) && ctx.Err() == nil && p.activeRun(ctx, thread) != "" {
		time.Sleep(100 * time.Millisecond)
	}
}

// converse is one writer: until stop says so, it opens conversations with
// lotse and continues each for zero to three more messages, written while
// the run works (follow-ups, one or two at once), at a random later
// moment, or after the run ended (a next run in the same thread). ctx
// ends only the waits: a message once sent is always read back, so that
// the test knows every request the server may have stored. The first
// conversation opens even when stop says so already: a run whose budget
// (CHAOS_BUDGET) went on a slow start still has a request of each writer
// to account for.
//
// Every choice is drawn from rng in a fixed order (open, the count of
// turns, then per turn its writer and turn), so that a seed replays the
// same conversations.
func (p *people) converse(ctx context.Context, rng *rand.Rand, stop func() bool) error {
	send := context.WithoutCancel(ctx)
	for first := true; first || !stop(); first = false {
		if !first {
			// A pause between conversations spreads the runs over the
			// phase, so that each meets more kills.
			sleepCtx(ctx, 500*time.Millisecond+time.Duration(rng.Int64N(int64(2500*time.Millisecond))))
			if stop() {
				return nil
			}
		}
		c, err := p.open(send, rng)
		if err != nil {
			return err
		}
		turns := []int{0, 1, 1, 2, 2, 3}[rng.IntN(6)]
		for i := 0; i < turns && !stop(); i++ {
			if c.inAllgemein {
				c.who = []string{"alex", "sam"}[rng.IntN(2)]
			}
			done, err := p.turn(ctx, send, rng, c, stop)
			if err != nil {
				return err
			}
			if done {
				return nil
			}
		}
	}
	return nil
}

// conversation is a conversation of converse: the thread it continues in
// and who writes its next message.
type conversation struct {
	thread, who string
	// inAllgemein says that the writer of each message is drawn anew:
	// alex and sam both hold trigger in Allgemein.
	inAllgemein bool
}

// open opens a conversation with its first request, sent with send (a
// context that does not end): in Allgemein's main thread, which starts a
// new thread (auto_thread), in a new thread of Eskalation, or in
// Eskalation's main thread.
func (p *people) open(send context.Context, rng *rand.Rand) (conversation, error) {
	allgemein, eskalation := p.b.World.Channel("Support/Allgemein"), p.b.World.Channel("Support/Eskalation")
	var c conversation
	var err error
	switch r := rng.Float64(); {
	case r < 0.6:
		// alex and sam both hold trigger in Allgemein.
		c.inAllgemein = true
		c.who = []string{"alex", "sam"}[rng.IntN(2)]
		_, c.thread, err = p.write(send, rng, c.who, allgemein.MainThreadID, false)
	case r < 0.9:
		// sam may not write in Eskalation; alex may trigger there.
		c.who = "alex"
		_, c.thread, err = p.startThread(send, rng, c.who, eskalation.ID)
	default:
		// Eskalation's main thread: runs there take turns, so more
		// requests meet an active run.
		c.who = "alex"
		c.thread = eskalation.MainThreadID
		_, _, err = p.write(send, rng, c.who, c.thread, false)
	}
	return c, err
}

// turn writes the next message of conversation c: while the run works, at
// a random later moment, or after the run ended. ctx ends its waits, send
// (which does not end) sends. It reports done, having written nothing,
// when stop says so after its wait: the writer ends then.
func (p *people) turn(ctx, send context.Context, rng *rand.Rand, c conversation, stop func() bool) (done bool, err error) {
	switch r := rng.Float64(); {
	case r < 0.6:
		// While the run works: the follow-up reaches the model in
		// another round or is promoted to the next run.
		during := p.waitRunning(ctx, c.thread, 6*time.Second)
		if during {
			sleepCtx(ctx, time.Duration(rng.Int64N(int64(700*time.Millisecond))))
		}
		if stop() {
			return true, nil
		}
		if _, _, err = p.write(send, rng, c.who, c.thread, during); err == nil && rng.IntN(4) == 0 {
			sleepCtx(ctx, 100*time.Millisecond+time.Duration(rng.Int64N(int64(300*time.Millisecond))))
			_, _, err = p.write(send, rng, c.who, c.thread, during)
		}
	case r < 0.8:
		sleepCtx(ctx, 500*time.Millisecond+time.Duration(rng.Int64N(int64(3500*time.Millisecond))))
		if stop() {
			return true, nil
		}
		_, _, err = p.write(send, rng, c.who, c.thread, false)
	default:
		p.waitIdle(ctx, c.thread, 12*time.Second)
		if stop() {
			return true, nil
		}
		_, _, err = p.write(send, rng, c.who, c.thread, false)
	}
	return false, err
}

// sleepCtx waits for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
