package admin_test

import (
	"errors"
	"fmt"
	"testing"

	"bothy.example.com/bothy/internal/admin"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/problem"
)

// TestPageTokens: pages are cut from the list behind the cursor's token;
// a cursor naming no token of the list and a size outside 1 to 100 are
// refused with their argument.
func TestPageTokens(t *testing.T) {
	t.Parallel()
	list := make([]identity.TokenInfo, 5)
	for i := range list {
		list[i].ID = fmt.Sprintf("t%d", i)
	}
	ids := func(ts []identity.TokenInfo) string {
		s := ""
		for _, x := range ts {
			s += x.ID
		}
		return s
	}
	cases := []struct {
		after   string
		first   int
		want    string
		more    bool
		pointer string
	}{
		{"", 0, "t0t1t2t3t4", false, ""},
		{"", 2, "t0t1", true, ""},
		{"t1", 2, "t2t3", true, ""},
		{"t2", 2, "t3t4", false, ""},
		{"t4", 2, "", false, ""},
		{"", 5, "t0t1t2t3t4", false, ""},
		{"t9", 2, "", false, "after"},
		{"", -1, "", false, "first"},
		{"", admin.TokenPageMax + 1, "", false, "first"},
	}
	for _, c := range cases {
		page, more, err := admin.PageTokens(list, c.after, c.first)
		var p *problem.Error
		if c.pointer != "" {
			if !errors.As(err, &p) || len(p.Fields) != 1 || p.Fields[0].Pointer != c.pointer {
				t.Errorf("after %q first %d: err %v, want a refusal at %s", c.after, c.first, err, c.pointer)
			}
			continue
		}
		if err != nil || ids(page) != c.want || more != c.more {
			t.Errorf("after %q first %d: %s more %v err %v, want %s more %v", c.after, c.first, ids(page), more, err, c.want, c.more)
		}
	}
}
