package feed_test

import (
	"encoding/json"
	"strings"
	"testing"

	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/modules"
)

// TestListEventsFilterModeDropsLeak: listEvents checks every event its
// query returned in filter mode; an event of a channel the reader cannot
// see (injected through the test hook, standing for a faulty predicate) is
// dropped and counted as filter_mismatch.
func TestListEventsFilterModeDropsLeak(t *testing.T) {
	t.Parallel()
	hook := &moduletest.Leak[events.Event]{}
	env := moduletest.Build(t, moduletest.Options{Hooks: modules.Hooks{Feed: hook}})
	env.Post("sam", env.Main("Marketing/Kampagnen"), "m", "marketing secret")
	env.Post("writer", env.Main("Support/Allgemein"), "s", "support talk")
	all, err := env.Feed.List(t.Context(), env.Principal("robin"), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var leak events.Event
	for _, e := range all.Events {
		if e.ChannelID == env.World.Channel("Marketing/Kampagnen").ID {
			leak = e
		}
	}
	if leak.Seq == 0 {
		t.Fatal("no Marketing event to leak")
	}
	hook.Add(leak)
	before := env.Metric(`bothy_authz_errors_total{reason="filter_mismatch"}`)
	page, err := env.Feed.List(t.Context(), env.Principal("writer"), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(page.Events)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != 1 || strings.Contains(string(body), "marketing secret") {
		t.Fatalf("filter mode let the leak through: %s", body)
	}
	if after := env.Metric(`bothy_authz_errors_total{reason="filter_mismatch"}`); after != before+1 {
		t.Fatalf("filter_mismatch went from %v to %v", before, after)
	}
}
