package paging_test

import (
	"slices"
	"testing"

	"bothy.example.com/bothy/internal/platform/paging"
	"bothy.example.com/bothy/internal/platform/problem"
)

// TestCheck: a page size from 1 to max and an after that is an id (or
// none) pass; anything else is a validation error naming the member.
func TestCheck(t *testing.T) {
	t.Parallel()
	id := "01a23b18-0000-7000-8000-000000000000"
	for _, c := range []struct {
		first       int
		after, want string
	}{
		{1, "", ""}, {100, id, ""}, {0, "", "first:out_of_range"}, {101, "", "first:out_of_range"},
		{50, "nope", "after:invalid_cursor"}, {-1, "x", "first:out_of_range after:invalid_cursor"},
	} {
		err := paging.Check(c.first, 100, c.after)
		got := ""
		if err != nil {
			for _, f := range problem.From("paging.testCheck", err).Fields {
				if got != "" {
					got += " "
				}
				got += f.Pointer + ":" + f.Code
			}
		}
		if got != c.want {
			t.Errorf("Check(%d, %q) = %q, want %q", c.first, c.after, got, c.want)
		}
	}
}

// TestCut: one row more than the page says that more follow.
func TestCut(t *testing.T) {
	t.Parallel()
	if page, more := paging.Cut([]int{1, 2, 3}, 2); !slices.Equal(page, []int{1, 2}) || !more {
		t.Fatalf("%v %v", page, more)
	}
	if page, more := paging.Cut([]int{1, 2}, 2); !slices.Equal(page, []int{1, 2}) || more {
		t.Fatalf("%v %v", page, more)
	}
}
