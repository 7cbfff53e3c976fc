package messaging_test

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/modules"
)

// TestFilterModeDropsLeak: a history read checks every message its query
// returned in filter mode; a message of a thread the reader cannot see
// (injected through the test hook) is dropped and counted as
// filter_mismatch.
func TestFilterModeDropsLeak(t *testing.T) {
	t.Parallel()
	hook := &moduletest.Leak[messaging.Message]{}
	env := moduletest.Build(t, moduletest.Options{Hooks: modules.Hooks{History: hook}})
	kampagnen := env.Main("Marketing/Kampagnen")
	secret := env.Post("sam", kampagnen, "m1", "marketing only")
	main := env.Main("Support/Allgemein")
	env.Post("alex", main, "a1", "support talk")
	leak, err := env.Messaging.Get(t.Context(), env.Principal("sam"), secret.ID)
	if err != nil {
		t.Fatal(err)
	}
	// The hook stands for a faulty query that returns a message of a thread
	// the reader cannot see.
	hook.Add(leak)
	before := env.Metric(`bothy_authz_errors_total{reason="filter_mismatch"}`)
	page, err := env.Messaging.History(t.Context(), env.Principal("lotse"), main, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Messages) != 1 {
		t.Fatalf("filter mode let the leak through: %+v", page.Messages)
	}
	for _, m := range page.Messages {
		if m.ID == leak.ID || strings.Contains(m.ContentMD, "marketing only") {
			t.Fatalf("filter mode let the leak through: %+v", m)
		}
	}
	if after := env.Metric(`bothy_authz_errors_total{reason="filter_mismatch"}`); after != before+1 {
		t.Fatalf("filter_mismatch went from %v to %v", before, after)
	}
}

// TestThreadSeqGapFree: concurrent posts into one thread get the sequence
// numbers 1..n without a gap, and the thread's last_seq is n.
func TestThreadSeqGapFree(t *testing.T) {
	t.Parallel()
	env := moduletest.Build(t, moduletest.Options{Config: map[string]string{"ratelimit.rl.message.burst": "1000"}})
	main := env.Main("Support/Allgemein")
	// The principals are read here: nothing in the goroutines may end the
	// test.
	handles := []string{"alex", "sam", "writer", "robin", "lotse"}
	actors := map[string]identity.Principal{}
	for _, h := range handles {
		actors[h] = env.Principal(h)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 50)
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			who := handles[i%5]
			if _, _, err := env.Messaging.Create(t.Context(), actors[who], main, messaging.Input{ClientMsgID: fmt.Sprintf("w-%d", i), ContentMD: fmt.Sprintf("message %d", i)}); err != nil {
				errs <- fmt.Sprintf("%s: %v", who, err)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	rows, _ := env.Pool.Query(t.Context(), `SELECT thread_seq FROM messages WHERE thread_id = $1 ORDER BY thread_seq`, main)
	var seqs []int
	for rows.Next() {
		var s int
		rows.Scan(&s)
		seqs = append(seqs, s)
	}
	sort.Ints(seqs)
	for i, s := range seqs {
		if s != i+1 {
			t.Fatalf("thread_seq not gap-free: %v", seqs)
		}
	}
	if len(seqs) != 50 || env.Count(`SELECT last_seq FROM threads WHERE id = $1`, main) != 50 {
		t.Fatalf("%d messages, last_seq %d", len(seqs), env.Count(`SELECT last_seq FROM threads WHERE id = $1`, main))
	}
}
