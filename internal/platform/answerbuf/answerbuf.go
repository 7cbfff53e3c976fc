// Package answerbuf keeps the large buffers that GraphQL answers are
// written into, so that the next large answer reuses one instead of
// allocating (and later collecting) about 160 kB per run-context read.
//
// The contract is narrow on purpose: a writer that knows an answer will
// be large asks Grow for room in the executor's answer buffer, and only
// the places that finish an answer for the client hand the array back
// with Release, after its last byte is used: the POST transport's splice
// in internal/server once written, and the REST shim (internal/rest) once
// rendered. Nothing else may call Release:
// an array released while still referenced would let the next answer
// overwrite it.
package answerbuf

import (
	"bytes"
	"sync"
)

// MinPooled is the size from which Grow takes room from the pool; smaller
// answers grow the buffer as usual.
const MinPooled = 32 << 10

// MaxPooled is the largest array Release keeps: a rare huge answer is
// left to the collector instead of being held.
const MaxPooled = 1 << 20

var pool sync.Pool

// Grow makes room in w for n more bytes, like w.Grow(n), taking the array
// from the pool when the result is at least MinPooled: the bytes already
// in w are copied into it and w continues on it.
func Grow(w *bytes.Buffer, n int) {
	need := w.Len() + n
	if need < MinPooled || need > MaxPooled || w.Cap()-w.Len() >= n {
		w.Grow(n)
		return
	}
	var b []byte
	if p, ok := pool.Get().(*[]byte); ok && cap(*p) >= need {
		b = (*p)[:0]
	} else {
		b = make([]byte, 0, need+need/8)
	}
	b = append(b, w.Bytes()...)
	*w = *bytes.NewBuffer(b)
}

// Release hands back the array of an answer that has been written in full
// and is referenced nowhere else. Arrays outside the pooled sizes are left
// to the collector.
func Release(b []byte) {
	if cap(b) < MinPooled || cap(b) > MaxPooled {
		return
	}
	b = b[:0]
	pool.Put(&b)
}
