// Package text is the one place that decides whether a string from a client
// can be stored: every string input of both API faces passes Check before it
// reaches a module, so no module meets a value PostgreSQL refuses (SQLSTATE
// 22021, which would otherwise surface as a 500).
package text

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"bothy.example.com/bothy/internal/platform/problem"
)

// InvalidCharacters is the field error code of a string PostgreSQL cannot
// store.
const InvalidCharacters = "invalid_characters"

// Storable reports whether PostgreSQL can store s in a text column of a
// UTF8 database: it must be valid UTF-8 and hold no U+0000 (text values are
// NUL-terminated inside the server). Every other code point, including
// noncharacters such as U+FFFF, is stored as given.
func Storable(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c == 0 {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			return false
		}
		i += size
	}
	return true
}

// Check returns the field error for s at pointer, or nil when s is
// storable. The detail never quotes the value.
func Check(s, pointer string) *problem.FieldError {
	if Storable(s) {
		return nil
	}
	return &problem.FieldError{Pointer: pointer, Code: InvalidCharacters,
		Detail: "must be valid UTF-8 without U+0000"}
}

// Line reports whether s is a one-line name or label: valid UTF-8, no
// control characters (U+0000 included), no surrounding white space, and
// min to max characters. Display names, space, channel and group names and
// token labels follow it.
func Line(s string, min, max int) bool {
	if !utf8.ValidString(s) || strings.TrimSpace(s) != s {
		return false
	}
	if n := utf8.RuneCountInString(s); n < min || n > max {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}
