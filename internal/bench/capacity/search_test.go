package capacity

import (
	"slices"
	"testing"
)

// TestSearch: the levels tried for a machine whose ceiling is a given
// level (every level up to it passes, every level above fails).
func TestSearch(t *testing.T) {
	for _, tc := range []struct {
		name     string
		max      int
		ceiling  int
		tried    []int
		best     int
		firstBad int
	}{
		{"nothing passes", 16, 0, []int{1}, 0, 1},
		{"only the first", 16, 1, []int{1, 2}, 1, 2},
		{"between doublings", 64, 5, []int{1, 2, 4, 8, 6, 5}, 5, 6},
		{"on a doubling", 64, 8, []int{1, 2, 4, 8, 16, 12, 10, 9}, 8, 9},
		{"everything up to max", 8, 100, []int{1, 2, 4, 8}, 8, 0},
		{"max not a power of two", 6, 100, []int{1, 2, 4, 6}, 6, 0},
		{"fails at max", 6, 5, []int{1, 2, 4, 6, 5}, 5, 6},
		{"max zero means one", 0, 100, []int{1}, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Search{Max: tc.max}
			var tried []int
			for {
				k, ok := s.Next()
				if !ok {
					break
				}
				if len(tried) > 20 {
					t.Fatalf("no end: %v", tried)
				}
				tried = append(tried, k)
				s.Record(k, k <= tc.ceiling)
			}
			if !slices.Equal(tried, tc.tried) || s.Best() != tc.best || s.FirstFailure() != tc.firstBad {
				t.Errorf("tried %v, best %d, first failure %d; want %v, %d, %d", tried, s.Best(), s.FirstFailure(), tc.tried, tc.best, tc.firstBad)
			}
		})
	}
}
