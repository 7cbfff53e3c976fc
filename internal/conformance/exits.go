package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Exit is one exit of a process of the adapter the kit started.
type Exit struct {
	// Scenario is the scenario that ran when the process exited; empty
	// before the first and at the kit's stop at the end.
	Scenario string `json:"scenario,omitempty"`
	// Status is how the process ended, as the operating system says it:
	// "exit status 127", "signal: killed".
	Status string `json:"status"`
	// Code is the exit status, -1 when a signal ended the process.
	Code int `json:"code"`
	// Signal names the signal that ended the process ("killed",
	// "terminated"); empty when it exited.
	Signal string `json:"signal,omitempty"`
	// ByKit is set when the kit ended the process itself (Cause says
	// how): such an exit is part of a scenario or of the end, no failure.
	ByKit bool   `json:"by_kit"`
	Cause string `json:"cause,omitempty"`
	// Tail is the last lines the process wrote on its stdout and stderr.
	Tail []string `json:"tail"`
}

// String says the exit in one line, for the progress lines.
func (e Exit) String() string {
	if e.ByKit {
		return e.Status + ", by " + e.Cause + " (not a failure)"
	}
	return e.Status + ", not caused by the kit"
}

// The tail the kit keeps of an adapter process's output: the last
// tailLines lines, each cut to tailWidth bytes. Enough to show a panic's
// first line or a shell's "not found", little enough for a report.
const (
	tailLines = 10
	tailWidth = 300
)

// tail is an io.Writer that keeps the last lines written to it.
type tail struct {
	mu      sync.Mutex
	lines   []string
	partial []byte
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			// A line longer than the width is cut anyway; keep no more.
			if room := tailWidth + 1 - len(t.partial); room > 0 {
				t.partial = append(t.partial, b[:min(room, len(b))]...)
			}
			break
		}
		t.push(string(t.partial) + string(b[:i]))
		t.partial = t.partial[:0]
		b = b[i+1:]
	}
	return n, nil
}

// push keeps line as the newest.
func (t *tail) push(line string) {
	line = strings.TrimRight(line, "\r")
	if len(line) > tailWidth {
		line = line[:tailWidth] + "…"
	}
	t.lines = append(t.lines, line)
	if len(t.lines) > tailLines {
		t.lines = t.lines[len(t.lines)-tailLines:]
	}
}

// last returns the lines kept, an unfinished last line included.
func (t *tail) last() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := append([]string{}, t.lines...)
	if len(t.partial) > 0 {
		line := strings.TrimRight(string(t.partial), "\r")
		if len(line) > tailWidth {
			line = line[:tailWidth] + "…"
		}
		out = append(out, line)
	}
	if len(out) > tailLines {
		out = out[len(out)-tailLines:]
	}
	return out
}

// adapterProc is what the kit knows of one process of the adapter while
// it runs: its output's tail and whether the kit is ending it.
type adapterProc struct {
	out   tail
	mu    sync.Mutex
	cause string
}

// blame notes that the kit ends the process (cause: "the kit's SIGKILL");
// the first cause stays.
func (p *adapterProc) blame(cause string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cause == "" {
		p.cause = cause
	}
}

// procs maps every adapter process the kit started and that has not
// exited yet to its record. It is the package's and not a kit's because
// end is a function of its own: scenarios end the extra instances they
// spawn with it, and it must still learn that the kit ended them.
var procs sync.Map // *exec.Cmd → *adapterProc

// blame notes that the kit ends cmd (see adapterProc.blame).
func blame(cmd *exec.Cmd, cause string) {
	if p, ok := procs.Load(cmd); ok {
		p.(*adapterProc).blame(cause)
	}
}

// addCause adds more to the cause the kit noted for ending cmd.
func addCause(cmd *exec.Cmd, more string) {
	if p, ok := procs.Load(cmd); ok {
		a := p.(*adapterProc)
		a.mu.Lock()
		a.cause += more
		a.mu.Unlock()
	}
}

// exitOf describes how cmd ended.
func exitOf(cmd *exec.Cmd, p *adapterProc) Exit {
	e := Exit{Status: "ended", Code: -1, Tail: p.out.last()}
	if st := cmd.ProcessState; st != nil {
		e.Status, e.Code = st.String(), st.ExitCode()
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			e.Signal = ws.Signal().String()
		}
	}
	p.mu.Lock()
	e.ByKit, e.Cause = p.cause != "", p.cause
	p.mu.Unlock()
	return e
}

// noteExit records an exit of the adapter, attributed to the scenario
// that runs, and tells Run's progress lines of it.
func (k *kit) noteExit(e Exit) {
	k.mu.Lock()
	defer k.mu.Unlock()
	e.Scenario = k.scenario
	k.exits = append(k.exits, e)
	line := fmt.Sprintf("adapter exit %d: %s", len(k.exits), e)
	if !e.ByKit && len(e.Tail) > 0 {
		line += "; its last lines:\n    | " + strings.Join(e.Tail, "\n    | ")
	}
	k.events = append(k.events, line)
}

// lastExit returns the newest exit recorded.
func (k *kit) lastExit() (Exit, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.exits) == 0 {
		return Exit{}, false
	}
	return k.exits[len(k.exits)-1], true
}

// event adds a line to what Run's progress lines tell next.
func (k *kit) event(format string, args ...any) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.events = append(k.events, fmt.Sprintf(format, args...))
}

// takeEvents returns the lines to tell and forgets them.
func (k *kit) takeEvents() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := k.events
	k.events = nil
	return out
}

// ExitedError is Run's error when the adapter exited before its first
// read of the event stream: it could not start, and no scenario can pass.
type ExitedError struct {
	// Command is the adapter's command (Options.Adapter).
	Command string
	// Exit is the adapter's exit.
	Exit Exit
}

func (e *ExitedError) Error() string {
	msg := fmt.Sprintf("conformance: the adapter (sh -c %q) exited before its first read of the event stream: %s", e.Command, e.Exit.Status)
	if len(e.Exit.Tail) == 0 {
		return msg + "; it wrote nothing on stdout or stderr"
	}
	return msg + "; the last lines of its output:\n    " + strings.Join(e.Exit.Tail, "\n    ")
}

// FirstReadWait bounds the kit's wait for the adapter's first read of its
// event stream after a start (scaled by Options.TimeoutScale): generous for an adapter that starts a runtime
// (a JVM, npx), short of the scenarios' own timeouts.
const FirstReadWait = 20 * time.Second

// placeWait bounds the wait, after the proxy saw the first read, until the
// server placed it (resolved its cursor): the proxy counts a read when it
// arrives, the server places it a moment later, and an adapter reading
// from "now" would miss a mention posted in between (on a loaded machine
// that moment was longer than 250 ms). A read the server refuses is never
// placed: the kit goes on after placeWait (scaled like the scenarios'
// deadlines), and the scenarios show the fault.
const placeWait = 5 * time.Second

// readGrace is the pause instead of that wait for a kit without a server
// of its own (the kit's own tests).
const readGrace = 250 * time.Millisecond

// firstRead is what the kit counted before a start of the adapter: the
// reads of its event stream the proxy saw and those the server placed.
type firstRead struct {
	reads  int
	placed int64
}

// streamOps are the operations that read the agent's event stream: the
// poll or subscription (agentEvents) and MCP's wait_for_run.
var streamOps = []string{agentEventsOp, mcpWaitOp}

// streamReads counts the adapter's reads of its event stream so far.
func (k *kit) streamReads() int {
	n := 0
	for _, op := range streamOps {
		n += k.proxy.calls(op)
	}
	return n
}

// awaitFirstRead waits until the adapter process of exit read its event
// stream (more than reads reads in all), at most k.readWait, so that
// no scenario's mention comes before the adapter listens. An exit first
// is an ExitedError. After the first start an adapter that made no read
// in time is let be with a note (it may reach its runs another way) and
// not waited for again; after a restart of one that read before, it is
// an error.
func (k *kit) awaitFirstRead(exit chan struct{}, before firstRead, first bool) error {
	reads := before.reads
	started := time.Now()
	wait := k.readWait
	if wait == 0 {
		// A start is slower on a loaded machine like the scenarios
		// (Options.TimeoutScale): an interpreter's imports take seconds.
		wait = k.scaled(FirstReadWait)
	}
	ctx, cancel := context.WithTimeout(k.ctx, wait)
	defer cancel()
	go func() {
		select {
		case <-exit:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := k.proxy.waitTotal(ctx, reads, streamOps...)
	// A read counted just before an exit is still a read: the exit is
	// reported as one then, the start did not fail.
	if err == nil || k.streamReads() > reads {
		k.mu.Lock()
		k.readsStream = true
		starts := k.starts
		k.mu.Unlock()
		k.event("adapter start %d: its first read of the event stream came %s after the start", starts, time.Since(started).Round(10*time.Millisecond))
		return k.awaitPlaced(before.placed)
	}
	select {
	case <-exit:
		e, _ := k.lastExit()
		return &ExitedError{Command: k.cmd, Exit: e}
	default:
	}
	if err := k.ctx.Err(); err != nil {
		return err
	}
	if first {
		k.note(fmt.Sprintf("the adapter made no read of its event stream (agentEvents by poll, REST or subscription, or MCP's wait_for_run) within %s of its start; "+
			"the kit went on without one and does not wait for one after restarts", wait))
		return nil
	}
	return noReadError{wait}
}

// awaitPlaced waits until the server placed a read of an agent stream
// after the start (more than placed in all), at most placeWait scaled;
// without a server it pauses readGrace. Only the kit's ctx ending is an
// error: a read never placed was refused, which the scenarios show.
func (k *kit) awaitPlaced(placed int64) error {
	if k.placer == nil {
		select {
		case <-time.After(k.scaled(readGrace)):
			return nil
		case <-k.ctx.Done():
			return k.ctx.Err()
		}
	}
	ctx, cancel := context.WithTimeout(k.ctx, k.scaled(placeWait))
	defer cancel()
	if err := k.placer.AwaitPlaced(ctx, placed); err != nil && k.ctx.Err() == nil {
		k.event("the server placed no read of the event stream within %s of the adapter's first read (refused?)", k.scaled(placeWait))
	}
	return k.ctx.Err()
}

// noReadError is the failure of an adapter that read its event stream
// after its first start and made no read within wait of a restart: the
// scenario that restarted it fails, the next one may pass.
type noReadError struct{ wait time.Duration }

func (e noReadError) Error() string {
	return fmt.Sprintf("the adapter, started again, made no read of its event stream within %s (it did after its first start)", e.wait)
}

// note records a remark on the run as a whole, for the report and the
// progress lines.
func (k *kit) note(text string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.notes = append(k.notes, text)
	k.events = append(k.events, "note: "+text)
}

// noRead tells a noReadError apart.
func noRead(err error) bool {
	var e noReadError
	return errors.As(err, &e)
}
