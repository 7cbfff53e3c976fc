// Package textcut cuts text to a byte budget without splitting a UTF-8
// character.
package textcut

import "unicode/utf8"

// Cut returns the longest prefix of s that has at most max bytes and ends on
// a UTF-8 character boundary, and whether anything was cut. Invalid bytes in
// s count as one-byte characters, so the result is valid UTF-8 whenever the
// kept prefix was. A negative max is treated as zero.
func Cut(s string, max int) (string, bool) {
	if max < 0 {
		max = 0
	}
	if len(s) <= max {
		return s, false
	}
	end := max
	// Step back over continuation bytes until end starts a character.
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	// A character that starts before end but is longer than the room left is
	// dropped as a whole.
	if end > 0 {
		r, size := utf8.DecodeLastRuneInString(s[:end])
		if r == utf8.RuneError && size == 1 && !utf8.FullRuneInString(s[:end]) {
			end -= size
		}
	}
	return s[:end], true
}
