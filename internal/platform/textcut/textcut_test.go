package textcut_test

import (
	"testing"
	"unicode/utf8"

	"bothy.example.com/bothy/internal/platform/textcut"
)

func TestCut(t *testing.T) {
	tests := []struct {
		in      string
		max     int
		want    string
		wantCut bool
	}{
		{"hello", 10, "hello", false},
		{"hello", 5, "hello", false},
		{"hello", 4, "hell", true},
		{"grüße", 3, "gr", true},  // ü is two bytes: not split
		{"grüße", 4, "grü", true}, // ü fits
		{"€uro", 2, "", true},     // € is three bytes
		{"€uro", 3, "€", true},
		{"a😀b", 4, "a", true}, // 😀 is four bytes
		{"a😀b", 5, "a😀", true},
		{"", 0, "", false},
		{"x", 0, "", true},
		{"x", -1, "", true},
	}
	for _, tc := range tests {
		got, cut := textcut.Cut(tc.in, tc.max)
		if got != tc.want || cut != tc.wantCut {
			t.Errorf("Cut(%q, %d) = %q, %v; want %q, %v", tc.in, tc.max, got, cut, tc.want, tc.wantCut)
		}
		if !utf8.ValidString(got) {
			t.Errorf("Cut(%q, %d) is not valid UTF-8", tc.in, tc.max)
		}
	}
}

func FuzzCut(f *testing.F) {
	f.Add("grüße😀", 5)
	f.Add("\xff\xfe€", 2)
	f.Fuzz(func(t *testing.T, s string, max int) {
		got, cut := textcut.Cut(s, max)
		limit := max
		if limit < 0 {
			limit = 0
		}
		if len(got) > limit {
			t.Fatalf("Cut(%q, %d) = %q exceeds the limit", s, max, got)
		}
		if cut != (len(got) < len(s)) {
			t.Fatalf("Cut(%q, %d) cut flag %v for %q", s, max, cut, got)
		}
		if got != s[:len(got)] {
			t.Fatalf("not a prefix")
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("Cut(%q, %d) = %q is not valid UTF-8", s, max, got)
		}
	})
}
