package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The scenarios of this file act at the exact moment of one of the
// adapter's calls, through the kit's proxy (proxy.on): a page of the
// stream handed out, an answer stored, a post about to be forwarded, the
// calls of a process that lost its claim.

// ackWindow is how long ack_after_handling gives the adapter, once it got
// the page that holds the follow-up, to acknowledge that page before it is
// killed. An adapter that acknowledges a page as it reads it does so at
// once; one that keeps the rule sends no acknowledgement past the
// follow-up at all, so there is no signal to wait for and the window is
// the bound.
const ackWindow = time.Second

// pages records the pages of the agent's stream the adapter was handed
// (polls and subscription events alike), from watchPages until off.
type pages struct {
	mu      sync.Mutex
	bodies  [][]byte
	changed chan struct{}
}

// watchPages starts recording the pages of the stream the adapter gets.
func (k *kit) watchPages() (*pages, func()) {
	p := &pages{changed: make(chan struct{})}
	off := k.proxy.on(hook{op: agentEventsOp, after: func(_ int, body []byte) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.bodies = append(p.bodies, body)
		close(p.changed)
		p.changed = make(chan struct{})
	}})
	return p, off
}

// wait waits until the adapter was handed a page that holds text.
func (p *pages) wait(ctx context.Context, text string) error {
	if err := p.waitFor(ctx, func(b []byte) bool { return bytes.Contains(b, []byte(text)) }); err != nil {
		return errors.New("timed out waiting for the adapter to read the page of the stream that holds the follow-up")
	}
	return nil
}

// waitFor waits until the adapter was handed a page for which match holds;
// the error is ctx's end.
func (p *pages) waitFor(ctx context.Context, match func(body []byte) bool) error {
	for {
		p.mu.Lock()
		changed := p.changed
		for _, b := range p.bodies {
			if match(b) {
				p.mu.Unlock()
				return nil
			}
		}
		p.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// nextRunOf returns a run of thread other than not, "" when there is none;
// the error is the event log's read.
func (k *kit) nextRunOf(ctx context.Context, thread, not string) (string, error) {
	evs, err := k.runEvents(ctx)
	if err != nil {
		return "", fmt.Errorf("reading the runs of the thread: %w", err)
	}
	for _, e := range evs {
		if e.ThreadID == thread && e.RunID != not {
			return e.RunID, nil
		}
	}
	return "", nil
}

// ackAfterHandling: an agent.followup is acknowledged only once the
// run's answer covers it (docs/adapter.md, the API flow, step 7). The
// follow-up comes while the model writes, after the adapter's last read
// of the context; the adapter gets the page that holds its event and is
// killed before its model call returns; Alex then cancels the stuck
// request. The server promotes a follow-up still pending when its run ends
// to a run of its own, and drops one that was delivered: the restarted
// adapter answers the follow-up only if the dead one had not acknowledged
// it.
func ackAfterHandling(ctx context.Context, k *kit) error {
	k.model.reset(step{Hold: true})
	a, err := k.ask(ctx, "alex", "Support/Eskalation", "@lotse check last night's backup of the file server")
	if err != nil {
		return err
	}
	if _, err := k.model.next(ctx); err != nil {
		return err
	}
	pg, off := k.watchPages()
	defer off()
	acked := make(chan struct{}, 100)
	offAck := k.proxy.on(hook{op: "ackAgentEvents", answered: func(call) { acked <- struct{}{} }})
	defer offAck()

	mark := fmt.Sprintf("and-the-mail-server-%d-too", seq.Add(1))
	followUp, err := k.post(ctx, "alex", a.thread, "@lotse "+mark)
	if err != nil {
		return err
	}
	if err := pg.wait(ctx, followUp); err != nil {
		return err
	}
	// The page is the adapter's; an acknowledgement it sends for it now
	// reaches the server before the kill.
	select {
	case <-acked:
	case <-time.After(ackWindow):
	case <-ctx.Done():
		return ctx.Err()
	}
	k.signal(syscall.SIGKILL)
	if err := k.waitExit(ctx); err != nil {
		return err
	}
	if _, err := k.rest(ctx, http.MethodPost, "/api/v1/runs/"+a.run+"/cancel", "alex", nil, nil); err != nil {
		return err
	}
	if err := k.ensureRunning(); err != nil {
		return err
	}
	if state, reason, err := k.ended(ctx, a.run); err != nil {
		return err
	} else if state != "cancelled" {
		return fmt.Errorf("the first run ended %s (%s); want cancelled", state, reason)
	}
	return followUpRunAnswered(ctx, k, a, mark)
}

// followUpRunAnswered is the verdict of ack_after_handling, once the first
// run was cancelled: the follow-up (whose text holds mark) must have been
// promoted to a run of its own, answered once by the restarted adapter
// from a prompt that held it. A follow-up that never gets a run was
// acknowledged by the killed adapter before its model saw it.
func followUpRunAnswered(ctx context.Context, k *kit, a asked, mark string) error {
	// The server settles a run's follow-ups in the commit that ends it
	// (internal/runs, Service.end), the start of the follow-up's own run
	// and its events included: once the first run's end is read, a run
	// that is not in the event log never comes, and there is nothing to
	// wait for (a wait would last the scenario's whole timeout).
	next, err := k.nextRunOf(ctx, a.thread, a.run)
	if err != nil {
		return err
	}
	if next == "" {
		return errors.New("no run ever answered the follow-up: the server dropped it as delivered when the first run ended, so the killed adapter had acknowledged its agent.followup before its model saw it")
	}
	if err := k.answeredOnce(ctx, asked{thread: a.thread, run: next}); err != nil {
		return fmt.Errorf("the run of the follow-up: %w", err)
	}
	if !k.sawText(mark) {
		return errors.New("the follow-up's run was answered, but no prompt of the model held the follow-up")
	}
	return nil
}

// triggerLossAtPost: the asking person's loss of trigger is first seen by
// the answer's post (the kit revokes the grant just before the post is
// forwarded, after every renewal and context read). The server refuses
// the post (trigger_revoked) and stores nothing; the adapter must post
// nothing else, neither with the run nor as a plain message.
func triggerLossAtPost(ctx context.Context, k *kit) error {
	// Sam may trigger in Eskalation only through this grant.
	var grant struct{ ID string }
	if _, err := k.rest(ctx, http.MethodPost, "/api/v1/grants", "robin", map[string]any{"subject_id": k.world.ID("sam"),
		"subject_kind": "principal", "target_kind": "channel", "target_id": k.world.Channel("Support/Eskalation").ID, "level": "trigger"}, &grant); err != nil {
		return err
	}
	// The count of posts is the kit's, since its start.
	before := k.proxy.calls("createMessage")
	var (
		mu        sync.Mutex
		once      sync.Once
		revokeErr error
		revoked   bool
		stored    int
		answered  int
	)
	off := k.proxy.on(hook{op: "createMessage",
		before: func() {
			once.Do(func() {
				_, err := k.rest(context.WithoutCancel(ctx), http.MethodDelete, "/api/v1/grants/"+grant.ID, "robin", nil, nil)
				mu.Lock()
				revokeErr, revoked = err, true
				mu.Unlock()
			})
		},
		answered: func(c call) {
			mu.Lock()
			defer mu.Unlock()
			answered++
			if !c.refused() {
				stored++
			}
		}})
	defer off()
	k.model.reset(step{Text: "Here are the minutes you asked for."})
	a, err := k.ask(ctx, "sam", "Support/Eskalation", "@lotse draft the minutes of this morning's meeting")
	if err != nil {
		return err
	}
	state, reason, err := k.ended(ctx, a.run)
	if err != nil {
		return err
	}
	// Every post the adapter sent by now has its answer.
	if err := until(ctx, "the adapter's posts to be answered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return answered >= k.proxy.calls("createMessage")-before
	}); err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	switch {
	case revokeErr != nil:
		return fmt.Errorf("revoke Sam's grant: %w", revokeErr)
	case !revoked:
		return fmt.Errorf("the run ended %s (%s) without a post of the adapter: the loss of trigger at the post was never put to it", state, reason)
	case stored > 0 || len(k.answers(ctx, a.thread)) > 0:
		return fmt.Errorf("%d posts stored after the server refused the answer for the loss of trigger (the thread holds %d answers); want none", stored, len(k.answers(ctx, a.thread)))
	case state != "cancelled":
		return fmt.Errorf("the run ended %s (%s); want cancelled", state, reason)
	}
	return nil
}

// crashAfterPost: the adapter is killed once its answer is stored and
// before it reads the server's reply, so before finishRun. The run goes
// back to queued when the lease lapses; the restarted adapter must see
// that the request has its answer (the answer's key names the run and the
// request, and startRun lists the run's answers) and finish the run
// without answering again.
func crashAfterPost(ctx context.Context, k *kit) error {
	var once sync.Once
	killed := make(chan struct{})
	off := k.proxy.on(hook{op: "createMessage", answered: func(c call) {
		if c.refused() {
			return
		}
		once.Do(func() {
			// Before the answer goes back: the adapter never learns that
			// its answer was stored.
			k.signal(syscall.SIGKILL)
			close(killed)
		})
	}})
	defer off()
	a, err := k.ask(ctx, "alex", "Support/Eskalation", "@lotse when is the next maintenance window?")
	if err != nil {
		return err
	}
	select {
	case <-killed:
	case <-ctx.Done():
		return errors.New("the adapter posted no answer")
	}
	if err := k.waitExit(ctx); err != nil {
		return err
	}
	if err := k.ensureRunning(); err != nil {
		return err
	}
	return k.endedOnce(ctx, a)
}

// fencedOps are the calls that act on a run as its holder
// (docs/design/runs.md#fencing).
var fencedOps = []string{"renewRun", "createMessage", "finishRun", "updateRunLive", "awaitRunInput"}

// heldCall is an answered call of the adapter on a run, and whether it
// came late: after the kit let the run's second holder answer (its answer
// then holds the request's key, and a stale post under that key is
// refused idempotency_key_reused before its holder is looked at) or after
// the second holder finished the run.
type heldCall struct {
	op string
	call
	late bool
}

// stallIsFenced: the adapter is stopped (SIGSTOP) past its lease while
// its model call holds; a second process takes the run over and asks the
// model, which holds too, so the run is the second holder's when the
// stale process resumes with its model's answer. Every call of the stale
// holder on the run is refused (run_claimed while the second one holds
// it), the second holder answers, and the thread holds that one answer.
func stallIsFenced(ctx context.Context, k *kit) error {
	stale := make(chan struct{})
	fw := &fenceWatch{changed: make(chan struct{})}
	k.model.reset(step{Hold: true, Gate: stale, Text: "The stale answer.", AfterReply: fw.staleModelDone},
		step{Hold: true, Text: "The answer of the second holder."})
	defer fw.install(k)()

	a, err := k.ask(ctx, "alex", "Support/Eskalation", "@lotse survive a stall")
	if err != nil {
		return err
	}
	staleCall, err := k.model.next(ctx)
	if err != nil {
		return err
	}
	go func() {
		select {
		case <-staleCall.Aborted:
			fw.staleModelDone()
		case <-ctx.Done():
		}
	}()
	k.signal(syscall.SIGSTOP)
	// Whatever happens, the stale process runs again for the next
	// scenario.
	defer k.signal(syscall.SIGCONT)
	second, exit, err := k.spawn()
	if err != nil {
		return err
	}
	defer end(second, exit)
	// The lease lapses, the second process takes the run over and asks
	// the model, which holds: the run stays the second holder's.
	if _, err := k.model.next(ctx); err != nil {
		return errors.New("the second process never took the run over and asked the model")
	}
	hs, mark := fw.snapshot()
	if len(hs) != 2 {
		return fmt.Errorf("%d starts of the run answered; want the stale process's and the second one's", len(hs))
	}
	staleHolder := hs[0]
	if hs[0] == hs[1] {
		return fmt.Errorf("both processes started the run as the holder %q: the server cannot tell the stale one from the new one", hs[0])
	}
	// The stale process wakes with its model's answer.
	k.signal(syscall.SIGCONT)
	close(stale)
	fw.awaitStale(ctx, staleHolder, mark)
	fw.release()
	k.model.releaseHeld()
	state, reason, err := k.ended(ctx, a.run)
	if err != nil {
		return err
	}
	got := k.answers(ctx, a.thread)
	if state != "completed" || len(got) != 1 || strings.Contains(got[0], "stale") {
		return fmt.Errorf("the run ended %s (%s) with the answers %q; want completed with the second holder's answer", state, reason, got)
	}
	return fw.verdict(staleHolder, mark)
}

// fenceWatch records, through the kit's proxy, the holders that started
// the run of stall_is_fenced and every answered call on it.
type fenceWatch struct {
	mu       sync.Mutex
	holders  []string // the holders of the answered startRun calls, in order
	calls    []heldCall
	finished bool // a finishRun of the second holder was answered
	released bool // the second holder's model call was let go
	// staleDone is set once the stale process's model call ended,
	// answered or aborted by the process.
	staleDone bool
	changed   chan struct{}
}

// staleModelDone notes that the stale process's model call ended.
func (fw *fenceWatch) staleModelDone() {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	fw.staleDone = true
	fw.note()
}

// awaitStale waits, once the stale process resumed, until it showed what
// it does with the run while the second holder still holds it (the
// second holder's model call holds until then): it posted or finished,
// both refused if it is fenced; or, its model call over, one of its calls
// was refused. The SDK drops the run at a refused renewal and sends
// nothing more, so waiting on would wait for nothing; a post that an
// adapter still sends after that comes once the second holder was let go,
// and the verdict holds it to a refusal all the same. An adapter that
// shows neither is let be after three leases.
func (fw *fenceWatch) awaitStale(ctx context.Context, staleHolder string, mark int) {
	wctx, cancel := context.WithTimeout(ctx, 3*leaseTimeout)
	defer cancel()
	_ = fw.wait(wctx, func() bool {
		for _, c := range fw.calls[mark:] {
			if c.holder != staleHolder {
				continue
			}
			if c.op == "createMessage" || c.op == "finishRun" || (fw.staleDone && c.refused()) {
				return true
			}
		}
		return false
	})
}

// release notes that the second holder may answer from now on.
func (fw *fenceWatch) release() {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	fw.released = true
}

// note wakes the waiters (under mu).
func (fw *fenceWatch) note() { close(fw.changed); fw.changed = make(chan struct{}) }

// install adds the proxy's hooks and returns the function that removes
// them.
func (fw *fenceWatch) install(k *kit) (off func()) {
	offs := []func(){k.proxy.on(hook{op: "startRun", answered: func(c call) {
		if c.refused() {
			return
		}
		fw.mu.Lock()
		defer fw.mu.Unlock()
		fw.holders = append(fw.holders, c.holder)
		fw.note()
	}})}
	for _, op := range fencedOps {
		offs = append(offs, k.proxy.on(hook{op: op, answered: func(c call) {
			fw.mu.Lock()
			defer fw.mu.Unlock()
			fw.calls = append(fw.calls, heldCall{op: op, call: c, late: fw.finished || fw.released})
			if op == "finishRun" && len(fw.holders) > 1 && c.holder == fw.holders[1] && !c.refused() {
				fw.finished = true
			}
			fw.note()
		}}))
	}
	return func() {
		for _, off := range offs {
			off()
		}
	}
}

// snapshot returns the holders that started the run so far and the number
// of calls recorded.
func (fw *fenceWatch) snapshot() ([]string, int) {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return append([]string(nil), fw.holders...), len(fw.calls)
}

// wait waits until cond holds, checked under mu whenever a call was
// answered.
func (fw *fenceWatch) wait(ctx context.Context, cond func() bool) error {
	for {
		fw.mu.Lock()
		ok, ch := cond(), fw.changed
		fw.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// verdict checks every call of the stale holder after mark: refused, and
// refused run_claimed while the second holder held the run and had not
// been let answer yet.
func (fw *fenceWatch) verdict(staleHolder string, mark int) error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	for _, c := range fw.calls[mark:] {
		if c.holder != staleHolder {
			continue
		}
		switch {
		case !c.refused():
			return fmt.Errorf("the stale holder's %s was accepted after the takeover", c.op)
		case !c.late && c.reason() != "run_claimed":
			return fmt.Errorf("the stale holder's %s was refused %q while the second holder held the run; want run_claimed", c.op, c.reason())
		}
	}
	return nil
}
