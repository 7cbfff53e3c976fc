package authz

import (
	"slices"
	"testing"
)

// TestUUIDArray: canonical ids go out as one array literal; a list with
// any other id goes out as it is, so the statement refuses it as before.
func TestUUIDArray(t *testing.T) {
	a, b := "01a22f15-66c5-7d35-8dc6-1e991ea5bc89", "00000000-0000-0000-0000-000000000000"
	for _, tc := range []struct {
		name string
		in   []string
		want any
	}{
		{"none", nil, "{}"},
		{"canonical", []string{a, b}, "{" + a + "," + b + "}"},
		{"not canonical", []string{a, "A-B"}, []string{a, "A-B"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			switch got := uuidArray(tc.in).(type) {
			case string:
				if got != tc.want {
					t.Errorf("got %q, want %v", got, tc.want)
				}
			case []string:
				if w, ok := tc.want.([]string); !ok || !slices.Equal(got, w) {
					t.Errorf("got %q, want %v", got, tc.want)
				}
			default:
				t.Errorf("got %T", got)
			}
		})
	}
}
