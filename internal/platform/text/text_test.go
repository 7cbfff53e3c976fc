package text

import (
	"testing"
	"unicode/utf8"
)

func TestStorable(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want bool
	}{
		{"empty", "", true},
		{"ascii", "hello Alex", true},
		{"newline and tab", "line one\n\tline two", true},
		{"other controls", "bell\x07 escape\x1b", true},
		{"multibyte", "Grüße, Robin 👋", true},
		{"noncharacter", "\uffff\ufffe", true},
		{"replacement char itself", "\ufffd", true},
		{"NUL", "a\x00b", false},
		{"NUL only", "\x00", false},
		{"invalid byte", "a\xffb", false},
		{"truncated sequence", "\xe2\x82", false},
		{"surrogate encoded", "\xed\xa0\x80", false},
		{"overlong", "\xc0\xaf", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Storable(c.in); got != c.want {
				t.Fatalf("Storable(%q) = %v, want %v", c.in, got, c.want)
			}
			fe := Check(c.in, "/content_md")
			if (fe == nil) != c.want {
				t.Fatalf("Check(%q) = %v", c.in, fe)
			}
			if fe != nil && (fe.Pointer != "/content_md" || fe.Code != InvalidCharacters) {
				t.Fatalf("Check(%q) = %+v", c.in, fe)
			}
		})
	}
}

// FuzzStorable checks Storable against its definition: valid UTF-8 without
// U+0000.
func FuzzStorable(f *testing.F) {
	for _, s := range []string{"", "hello", "a\x00b", "\xff", "Grüße", "\xed\xa0\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := utf8.ValidString(s)
		for i := 0; i < len(s); i++ {
			if s[i] == 0 {
				want = false
			}
		}
		if got := Storable(s); got != want {
			t.Fatalf("Storable(%q) = %v, want %v", s, got, want)
		}
		if fe := Check(s, "/x"); (fe == nil) != want {
			t.Fatalf("Check(%q) = %v", s, fe)
		}
	})
}

func TestLine(t *testing.T) {
	for _, c := range []struct {
		s        string
		min, max int
		want     bool
	}{
		{"Support", 1, 80, true},
		{"", 1, 80, false},
		{"", 0, 100, true},
		{" padded", 1, 80, false},
		{"padded ", 1, 80, false},
		{"two\nlines", 1, 80, false},
		{"nul\x00", 1, 80, false},
		{"\xff", 1, 80, false},
		{"Café Zürich", 1, 11, true},
		{"Café Zürich!", 1, 11, false},
	} {
		if got := Line(c.s, c.min, c.max); got != c.want {
			t.Errorf("Line(%q, %d, %d) = %v, want %v", c.s, c.min, c.max, got, c.want)
		}
	}
}
