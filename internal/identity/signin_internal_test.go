package identity

import "testing"

// TestCleanHandle: the local part of an address becomes a valid handle.
func TestCleanHandle(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"kim":          "kim",
		"Alex.Renamed": "alex-renamed",
		"sam+bothy":    "sam-bothy",
		"_robin":       "robin",
		"x":            "x0",
		"":             "00",
		"élodie":       "lodie",
		"a-very-long-local-part-of-an-address-indeed": "a-very-long-local-part-of-an-add",
	} {
		got := cleanHandle(in)
		if got != want || !ValidHandle(got) {
			t.Errorf("cleanHandle(%q) = %q (valid %v), want %q", in, got, ValidHandle(got), want)
		}
	}
}
