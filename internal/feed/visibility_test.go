package feed_test

import (
	"testing"

	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/platform/problem"
)

// TestListEventsVisibility: listEvents hands each principal the events of
// what it may read (owners everything, people and agents their channels);
// after the last event nothing comes and the cursor stays; a cursor that is
// not a number is refused. That both faces give the same page is
// TestListEventsSameOnBothFaces in internal/server.
func TestListEventsVisibility(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	env.Post("writer", env.Main("Support/Allgemein"), "a", "support")
	env.Post("sam", env.Main("Marketing/Kampagnen"), "b", "marketing")
	env.Post("alex", env.Main("Support/Eskalation"), "c", "escalation")
	cases := map[string]int{"robin": 3, "alex": 2, "sam": 2, "lotse": 2, "texter": 2, "writer": 1, "feedbot": 1}
	for who, want := range cases {
		page, err := env.Feed.List(ctx, env.Principal(who), "", 0)
		if err != nil {
			t.Fatalf("%s: %v", who, err)
		}
		if got := len(page.Events); got != want {
			t.Errorf("%s sees %d events, want %d", who, got, want)
		}
	}
	// The cursor: after the last seq nothing comes and the cursor stays.
	robin := env.Principal("robin")
	first, err := env.Feed.List(ctx, robin, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	page, err := env.Feed.List(ctx, robin, first.NextAfter, 0)
	if err != nil || len(page.Events) != 0 || page.NextAfter != first.NextAfter {
		t.Fatalf("after the end: %+v %v", page, err)
	}
	_, err = env.Feed.List(ctx, robin, "abc", 0)
	if p := problem.From("feed.testListEventsVisibility", err); err == nil || p.Code != problem.ValidationFailed {
		t.Fatalf("bad cursor: %v", err)
	}
}
