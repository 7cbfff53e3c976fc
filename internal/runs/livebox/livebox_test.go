package livebox

import (
	"errors"
	"testing"
	"time"
)

func ptr(s string) *string { return &s }

func TestApply(t *testing.T) {
	at := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	cases := []struct {
		name    string
		box     Box
		op      Op
		want    Box
		changed bool
		err     error
	}{
		{"first append", Box{}, Op{Kind: Update, Base: 0, Append: "Hel", At: at},
			Box{Version: 1, Text: "Hel", UpdatedAt: at}, true, nil},
		{"append", Box{Version: 1, Text: "Hel"}, Op{Kind: Update, Base: 1, Append: "lo", Status: ptr("writing"), At: at},
			Box{Version: 2, Text: "Hello", Status: "writing", UpdatedAt: at}, true, nil},
		{"replace then append", Box{Version: 2, Text: "Hello"}, Op{Kind: Update, Base: 2, Replace: ptr("Hi"), Append: "!", At: at},
			Box{Version: 3, Text: "Hi!", UpdatedAt: at}, true, nil},
		{"status kept when absent", Box{Version: 1, Status: "s"}, Op{Kind: Update, Base: 1, At: at},
			Box{Version: 2, Status: "s", UpdatedAt: at}, true, nil},
		{"stale base", Box{Version: 3, Text: "x"}, Op{Kind: Update, Base: 2, Append: "y"},
			Box{Version: 3, Text: "x"}, false, ErrVersion},
		{"future base", Box{Version: 3, Text: "x"}, Op{Kind: Update, Base: 4, Append: "y"},
			Box{Version: 3, Text: "x"}, false, ErrVersion},
		{"too long", Box{Version: 1, Text: "12345678"}, Op{Kind: Update, Base: 1, Append: "90x"},
			Box{Version: 1, Text: "12345678"}, false, ErrTooLong},
		{"replace within bound", Box{Version: 1, Text: "12345678"}, Op{Kind: Update, Base: 1, Replace: ptr("1234567890"), At: at},
			Box{Version: 2, Text: "1234567890", UpdatedAt: at}, true, nil},
		{"ended refuses", Box{Version: 4, Ended: true, Done: true}, Op{Kind: Update, Base: 4, Append: "x"},
			Box{Version: 4, Ended: true, Done: true}, false, ErrEnded},
		{"done by holder", Box{Version: 1, Text: "a"}, Op{Kind: Update, Base: 1, Done: true, At: at},
			Box{Version: 2, Text: "a", Done: true, UpdatedAt: at}, true, nil},
		{"update opens a done box", Box{Version: 2, Done: true}, Op{Kind: Update, Base: 2, Append: "b", At: at},
			Box{Version: 3, Text: "b", UpdatedAt: at}, true, nil},
		{"answer empties, keeps status", Box{Version: 5, Text: "draft", Status: "writing"}, Op{Kind: Answered, At: at},
			Box{Version: 6, Status: "writing", Done: true, UpdatedAt: at}, true, nil},
		{"answer after end changes nothing", Box{Version: 5, Text: "t", Done: true, Ended: true}, Op{Kind: Answered, At: at},
			Box{Version: 5, Text: "t", Done: true, Ended: true}, false, nil},
		{"end keeps text", Box{Version: 5, Text: "partial"}, Op{Kind: Ended, At: at},
			Box{Version: 6, Text: "partial", Done: true, Ended: true, UpdatedAt: at}, true, nil},
		{"end of a done box shows nothing new", Box{Version: 6, Done: true}, Op{Kind: Ended, At: at},
			Box{Version: 6, Done: true, Ended: true}, false, nil},
		{"second end", Box{Version: 6, Done: true, Ended: true}, Op{Kind: Ended, At: at},
			Box{Version: 6, Done: true, Ended: true}, false, nil},
		{"takeover empties a lost attempt's box", Box{Version: 3, Text: "half an answ", Status: "writing"}, Op{Kind: Takeover, At: at},
			Box{Version: 4, UpdatedAt: at}, true, nil},
		{"takeover of an empty box shows nothing new", Box{Version: 0}, Op{Kind: Takeover, At: at},
			Box{Version: 0}, false, nil},
		{"takeover keeps a done box", Box{Version: 4, Status: "stopped", Done: true}, Op{Kind: Takeover, At: at},
			Box{Version: 4, Status: "stopped", Done: true}, false, nil},
		{"takeover after the end changes nothing", Box{Version: 6, Text: "t", Done: true, Ended: true}, Op{Kind: Takeover, At: at},
			Box{Version: 6, Text: "t", Done: true, Ended: true}, false, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, d, changed, err := Apply(c.box, c.op, 10)
			if !errors.Is(err, c.err) || (err == nil) != (c.err == nil) {
				t.Fatalf("err = %v, want %v", err, c.err)
			}
			if got != c.want {
				t.Fatalf("box = %+v, want %+v", got, c.want)
			}
			if changed != c.changed {
				t.Fatalf("changed = %v, want %v", changed, c.changed)
			}
			if changed && (d.Version != got.Version || d.Done != got.Done || d.Status != got.Status) {
				t.Fatalf("delta %+v does not match box %+v", d, got)
			}
		})
	}
}

// TestApplyDeltasRebuildText: a reader that applies every delta to the box
// it started from holds the writer's text byte for byte.
func TestApplyDeltasRebuildText(t *testing.T) {
	var b Box
	reader := ""
	ops := []Op{{Kind: Update, Append: "The printer "}, {Kind: Update, Append: "is "}, {Kind: Update, Replace: ptr("The printer on floor 2 is "), Append: "back"}, {Kind: Update, Append: " online."}}
	for _, op := range ops {
		op.Base = b.Version
		var d Delta
		var err error
		b, d, _, err = Apply(b, op, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if d.Replace != nil {
			reader = *d.Replace
		}
		reader += d.Append
	}
	if reader != b.Text || b.Text != "The printer on floor 2 is back online." {
		t.Fatalf("reader %q, box %q", reader, b.Text)
	}
}

func TestReplay(t *testing.T) {
	h := []Delta{{Version: 3}, {Version: 4}, {Version: 5}}
	cases := []struct {
		after, current int
		want           int // number of deltas
		ok             bool
	}{
		{5, 5, 0, true}, {6, 5, 0, true}, {4, 5, 1, true}, {2, 5, 3, true},
		{1, 5, 0, false}, {0, 5, 0, false}, {2, 6, 0, false}, {0, 0, 0, true},
	}
	for _, c := range cases {
		got, ok := Replay(h, c.after, c.current)
		if ok != c.ok || len(got) != c.want {
			t.Errorf("Replay(after %d, current %d) = %d deltas, %v; want %d, %v", c.after, c.current, len(got), ok, c.want, c.ok)
		}
	}
}
