package agent

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// Stream adds text to the live box of the run whose model ctx belongs to:
// every reader of the thread sees it at once, before the answer. Model
// backends call it with each piece of a streamed answer; a Handler calls
// Task.Stream. Without a live box (Config.Live off, or ctx not a run's)
// it does nothing. It never blocks on the server: pieces are sent at most
// every Config.LiveInterval, together.
func Stream(ctx context.Context, text string) {
	if w, ok := ctx.Value(liveKey{}).(*liveWriter); ok && text != "" {
		w.add(text, nil)
	}
}

// Status sets the status line of the run's live box (a short line such as
// "searching the wiki", at most 200 bytes; longer is cut), like Stream.
func Status(ctx context.Context, line string) {
	if w, ok := ctx.Value(liveKey{}).(*liveWriter); ok {
		line = cutBytes(line, 200)
		w.add("", &line)
	}
}

// Stream adds text to the run's live box (see the function Stream).
func (t *Task) Stream(ctx context.Context, text string) { Stream(ctx, text) }

// Status sets the status line of the run's live box (see the function
// Status).
func (t *Task) Status(ctx context.Context, line string) { Status(ctx, line) }

type liveKey struct{}

// StoppedStatus is the status a run's live box shows after a person
// stopped the run.
const StoppedStatus = "stopped"

// liveWriter writes one run's live box from what its model streams: pieces
// are gathered and sent as one update at most every interval, against the
// version the last update answered. When the box is at another version (a
// takeover wrote it, an update was lost) the writer reads it and replaces
// the text with its own. A refusal other than that stops the writer for
// the run: the box is a view, the answer is what counts.
type liveWriter struct {
	client   *Client
	runID    string
	holder   string
	interval time.Duration
	log      *slog.Logger

	mu      sync.Mutex
	version int
	text    string // what this writer has written to the box
	pending strings.Builder
	status  *string
	reset   bool // the next update replaces the text
	off     bool
	wake    chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

func newLiveWriter(c *Client, runID, holder string, interval time.Duration, log *slog.Logger) *liveWriter {
	if interval <= 0 {
		interval = 100 * time.Millisecond
	}
	return &liveWriter{client: c, runID: runID, holder: holder, interval: interval, log: log,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

// with returns ctx carrying w for Stream and Status.
func (w *liveWriter) with(ctx context.Context) context.Context {
	return context.WithValue(ctx, liveKey{}, w)
}

func (w *liveWriter) add(text string, status *string) {
	w.mu.Lock()
	if w.off {
		w.mu.Unlock()
		return
	}
	w.pending.WriteString(text)
	if status != nil {
		w.status = status
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// restart makes the next update replace the box's text: a new round of
// the model writes its answer from the start.
func (w *liveWriter) restart() {
	w.mu.Lock()
	w.pending.Reset()
	w.reset = true
	w.mu.Unlock()
}

// run sends the gathered pieces until close; ctx is the run's.
func (w *liveWriter) run(ctx context.Context) {
	defer close(w.done)
	tick := time.NewTicker(w.interval)
	defer tick.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-ctx.Done():
			return
		case <-w.wake:
		}
		w.send(ctx, false, nil)
		// At most one update per interval.
		select {
		case <-w.stop:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// send writes what was gathered (and, with final, marks the box done with
// status final) in one update.
func (w *liveWriter) send(ctx context.Context, final bool, status *string) {
	w.mu.Lock()
	if w.off {
		w.mu.Unlock()
		return
	}
	piece := w.pending.String()
	w.pending.Reset()
	st := w.status
	w.status = nil
	if status != nil {
		st = status
	}
	u := LiveUpdate{BaseVersion: w.version, Append: piece, Status: st, Done: final}
	if w.reset {
		empty := ""
		u.Replace, w.reset = &empty, false
		w.text = ""
	}
	w.mu.Unlock()
	if u.Append == "" && u.Status == nil && u.Replace == nil && !final {
		return
	}
	for attempt := 0; attempt < 2; attempt++ {
		box, err := w.client.UpdateRunLive(ctx, w.runID, w.holder, u)
		if err == nil {
			w.mu.Lock()
			w.version = box.Version
			if u.Replace != nil {
				w.text = *u.Replace
			}
			w.text += u.Append
			w.mu.Unlock()
			return
		}
		if ErrorReason(err) != "live_version" || attempt > 0 {
			w.mu.Lock()
			w.off = true
			w.mu.Unlock()
			if ctx.Err() == nil {
				w.log.Info("live box not written; the answer follows as usual", errAttrs(err)...)
			}
			return
		}
		// Another version: continue from the server's box with all of
		// this writer's text.
		cur, rerr := w.client.RunLive(ctx, w.runID)
		if rerr != nil {
			w.mu.Lock()
			w.off = true
			w.mu.Unlock()
			return
		}
		w.mu.Lock()
		whole := w.text + u.Append
		w.mu.Unlock()
		u.BaseVersion, u.Replace, u.Append = cur.Version, &whole, ""
	}
}

// close stops the writer; pending pieces are dropped (the answer holds
// the text).
func (w *liveWriter) close() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

// stopped stops the writer and marks the box done with StoppedStatus and
// what was gathered: a person stopped the run.
func (w *liveWriter) stopped(ctx context.Context) {
	w.close()
	st := StoppedStatus
	w.send(ctx, true, &st)
}

// cutBytes cuts s to at most n bytes at a rune boundary.
func cutBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8Start(s[n]) {
		n--
	}
	return s[:n]
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }
