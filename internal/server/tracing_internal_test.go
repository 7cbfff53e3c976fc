package server

import (
	"strings"
	"testing"
	"unsafe"
)

// TestSpanOperationNameIsABoundedCopy: a span carries a copy of the
// operation's name, cut at maxSpanOperationNameBytes, never the parsed
// substring that would keep the whole document alive in the exporter's
// queue.
func TestSpanOperationNameIsABoundedCopy(t *testing.T) {
	doc := "query " + strings.Repeat("N", 1<<20) + " { viewer { id } }"
	start := uintptr(unsafe.Pointer(unsafe.StringData(doc)))
	for _, name := range []string{doc[6:11], doc[6 : 6+1<<20]} {
		got := spanOperationName(name)
		if p := uintptr(unsafe.Pointer(unsafe.StringData(got))); p >= start && p < start+uintptr(len(doc)) {
			t.Fatalf("the span's name of %d bytes shares the document's text", len(name))
		}
		if want := name[:min(len(name), maxSpanOperationNameBytes)]; got != want {
			t.Fatalf("span name %q, want %q", got, want)
		}
	}
}
