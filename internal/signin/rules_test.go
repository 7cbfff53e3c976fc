package signin

import "testing"

// TestAllowed: only an address the provider verified, of the form
// local@domain, and of an allowed domain (any when none is listed, case
// ignored) may sign in.
func TestAllowed(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		email    string
		verified bool
		domains  []string
		want     bool
	}{
		{"alex@example.com", true, nil, true},
		{"alex@example.com", false, nil, false},
		{"alex@example.com", true, []string{"example.com"}, true},
		{"alex@EXAMPLE.com", true, []string{"example.com"}, true},
		{"alex@example.org", true, []string{"example.com"}, false},
		{"alex@sub.example.com", true, []string{"example.com"}, false},
		{"alex", true, nil, false},
		{"@example.com", true, nil, false},
		{"alex@", true, nil, false},
		{"alex@x@example.com", true, []string{"example.com"}, false},
		{"", true, nil, false},
	} {
		if got := allowed(c.email, c.verified, c.domains); got != c.want {
			t.Errorf("allowed(%q, verified %v, %v) = %v, want %v", c.email, c.verified, c.domains, got, c.want)
		}
	}
}
