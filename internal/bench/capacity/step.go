package capacity

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/google/pprof/profile"
)

// stepProfile is the server's CPU profile of a step, if one was taken.
type stepProfile struct {
	p    *profile.Profile
	path string
	err  error
}

// resize opens or closes listeners until n are open; the people take
// turns, so each has about n/4 connections.
func (b *bench) resize(ctx context.Context, n int) error {
	open := b.conns[:0]
	for _, c := range b.conns { // a connection a failed step lost is replaced
		if c.alive() {
			open = append(open, c)
		} else {
			c.close()
		}
	}
	b.conns = open
	for len(b.conns) > n {
		last := b.conns[len(b.conns)-1]
		b.conns = b.conns[:len(b.conns)-1]
		last.close()
	}
	for len(b.conns) < n {
		who := listenerPeople[len(b.conns)%len(listenerPeople)]
		c, err := dial(ctx, b.opts.Server, b.opts.World.Token(who), b.opts.SubsPerConn, b.arr, b.fail)
		if err != nil {
			return err
		}
		b.conns = append(b.conns, c)
	}
	return nil
}

// post has the poster write one message and returns its id; a refusal
// is a failure.
func (b *bench) post(ctx context.Context, text string) (string, bool) {
	var out struct {
		CreateMessage struct {
			Message struct {
				ID string `json:"id"`
			} `json:"message"`
		} `json:"createMessage"`
	}
	err := b.poster.Do(ctx, "createMessage", `mutation createMessage($t: ID!, $in: MessageCreate!) { createMessage(threadId: $t, input: $in) { message { id } } }`,
		map[string]any{"t": b.thread, "in": map[string]any{"clientMsgId": fmt.Sprintf("capacity-%d-%d", time.Now().UnixNano(), b.seq.Add(1)), "contentMd": text}}, &out, 0)
	if err != nil {
		b.fail("post: " + err.Error())
		return "", false
	}
	return out.CreateMessage.Message.ID, true
}

// ask has the asker address the agent; each question is a run.
func (b *bench) ask(ctx context.Context) {
	var out struct {
		CreateMessage struct {
			Message struct {
				ID string `json:"id"`
			} `json:"message"`
		} `json:"createMessage"`
	}
	n := b.seq.Add(1)
	err := b.asker.Do(ctx, "createMessage", `mutation createMessage($t: ID!, $in: MessageCreate!) { createMessage(threadId: $t, input: $in) { message { id } } }`,
		map[string]any{"t": b.thread, "in": map[string]any{"clientMsgId": fmt.Sprintf("capacity-q-%d-%d", time.Now().UnixNano(), n), "contentMd": fmt.Sprintf("@%s capacity question %d", agentH, n)}}, &out, 0)
	if err != nil {
		b.fail("question: " + err.Error())
		return
	}
	b.asked.Add(1)
}

// warm posts messages until one reaches every subscription: the
// listeners of a step are all live before it starts (a subscription from
// "now" misses what was committed before the server registered it).
func (b *bench) warm(ctx context.Context) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		id, ok := b.post(ctx, "warm-up")
		if !ok {
			_, first := b.takeFailures()
			return fmt.Errorf("the warm-up message: %s", first)
		}
		if b.arr.wait([]string{id}, len(b.conns)*b.opts.SubsPerConn, time.Now().Add(5*time.Second)) == 0 {
			return nil
		}
	}
	return fmt.Errorf("no warm-up message reached all %d listeners within 60 s", len(b.conns))
}

// ticking calls f at rate per second until stop, each call in its own
// goroutine (a slow answer does not slow the rate), and waits for them.
func ticking(rate float64, stop <-chan struct{}, f func()) {
	if rate <= 0 {
		return
	}
	var wg sync.WaitGroup
	t := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer t.Stop()
	for {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
		select {
		case <-stop:
			wg.Wait()
			return
		case <-t.C:
		}
	}
}
