package answerbuf

import (
	"bytes"
	"strings"
	"testing"
)

// TestGrow: the buffer keeps what it held and has room for n more bytes,
// from a released array when one is large enough.
func TestGrow(t *testing.T) {
	for _, tc := range []struct {
		name   string
		prefix string
		n      int
	}{
		{"small answer grows as usual", `{"run":`, 100},
		{"large answer", `{"run":{"context":`, 200 << 10},
		{"empty buffer", "", 64 << 10},
		{"too large to pool", "x", 2 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w bytes.Buffer
			w.WriteString(tc.prefix)
			Grow(&w, tc.n)
			if w.String() != tc.prefix {
				t.Fatalf("buffer holds %q, want %q", w.String(), tc.prefix)
			}
			if w.Cap()-w.Len() < tc.n {
				t.Fatalf("room %d, want at least %d", w.Cap()-w.Len(), tc.n)
			}
			w.WriteString(strings.Repeat("a", tc.n))
			if w.Len() != len(tc.prefix)+tc.n || !strings.HasPrefix(w.String(), tc.prefix) {
				t.Fatalf("written %d bytes", w.Len())
			}
		})
	}
}

// TestReleaseReuse: a released array comes back for the next large answer
// (the pool may drop it, so the test asks until it does or gives up), and
// the next answer starts empty whatever the array held.
func TestReleaseReuse(t *testing.T) {
	for i := 0; i < 100; i++ {
		old := make([]byte, 100<<10)
		for j := range old {
			old[j] = 'z'
		}
		Release(old)
		var w bytes.Buffer
		w.WriteString("{")
		Grow(&w, 64<<10)
		if w.String() != "{" {
			t.Fatalf("a reused array shows %q", w.String()[:10])
		}
		if w.Cap() == cap(old) {
			return
		}
	}
	t.Fatal("a released array never came back")
}

// TestReleaseSizes: arrays outside the pooled sizes are not kept.
func TestReleaseSizes(t *testing.T) {
	Release(make([]byte, 10))
	Release(make([]byte, 0, MaxPooled+1))
	for i := 0; i < 20; i++ {
		if p, ok := pool.Get().(*[]byte); ok && (cap(*p) < MinPooled || cap(*p) > MaxPooled) {
			t.Fatalf("pool holds an array of %d bytes", cap(*p))
		}
	}
}
