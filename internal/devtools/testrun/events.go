package main

import (
	"bytes"
	"encoding/json"
	"io"
	"sync"
	"time"
)

// event is one event of go test -json (cmd/test2json's TestEvent).
type event struct {
	Time        *time.Time `json:",omitempty"`
	Action      string
	Package     string   `json:",omitempty"`
	Test        string   `json:",omitempty"`
	Elapsed     *float64 `json:",omitempty"`
	Output      string   `json:",omitempty"`
	FailedBuild string   `json:",omitempty"`
}

// eventWriter writes whole lines of events to w, one writer at a time, so
// that the packages running side by side never cut into each other's lines.
type eventWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// writeLine writes one line (ending in a newline).
func (e *eventWriter) writeLine(line []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, _ = e.w.Write(line)
}

// emit writes ev as one line, stamped with the time now.
func (e *eventWriter) emit(ev event) {
	now := time.Now()
	ev.Time = &now
	b, err := json.Marshal(ev)
	if err != nil {
		// An event of strings and numbers always marshals.
		panic(err)
	}
	e.writeLine(append(b, '\n'))
}

// lines returns a writer that hands each whole line written to it to e.
func (e *eventWriter) lines() *lineWriter {
	return &lineWriter{line: e.writeLine}
}

// lineWriter cuts what is written to it into lines and hands each to line;
// flush hands on a last line without its newline.
type lineWriter struct {
	buf  []byte
	line func([]byte)
}

// Write implements io.Writer.
func (l *lineWriter) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		l.line(bytes.Clone(l.buf[:i+1]))
		l.buf = l.buf[i+1:]
	}
}

// flush hands on what is left, ending it with a newline.
func (l *lineWriter) flush() {
	if len(l.buf) > 0 {
		l.line(append(bytes.Clone(l.buf), '\n'))
		l.buf = nil
	}
}

// packageEnd reports whether line is the event that ends a package (its
// pass, fail or skip, no test named), and decodes it.
func packageEnd(line []byte) (event, bool) {
	if !bytes.Contains(line, []byte(`"Action":"pass"`)) && !bytes.Contains(line, []byte(`"Action":"fail"`)) &&
		!bytes.Contains(line, []byte(`"Action":"skip"`)) {
		return event{}, false
	}
	var ev event
	if err := json.Unmarshal(line, &ev); err != nil || ev.Test != "" {
		return event{}, false
	}
	return ev, true
}

// finalEvents are the events that end a package whose binary exited with
// exitErr, given the end event test2json wrote (nil: none). A binary that
// failed after its tests passed (its TestMain, a crash, the time limit)
// fails the package, as go test fails it.
func finalEvents(pkg string, end *event, exitErr error, elapsed float64) []event {
	if end != nil && (exitErr == nil || end.Action == "fail") {
		return []event{*end}
	}
	if end == nil && exitErr == nil {
		return []event{{Action: "pass", Package: pkg, Elapsed: &elapsed}}
	}
	say := "FAIL\t" + pkg + "\t" + exitErr.Error() + "\n"
	if end != nil && end.Elapsed != nil {
		elapsed = *end.Elapsed
	}
	return []event{
		{Action: "output", Package: pkg, Output: say},
		{Action: "fail", Package: pkg, Elapsed: &elapsed},
	}
}
