package runs_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/ids"
)

// contextFixture builds a thread of Allgemein with n earlier human messages
// by the given number of distinct authors (people with trigger or write),
// triggers a run by Alex and returns the run id.
func contextFixture(t testing.TB, env *apitest.Env, n, authors int) string {
	t.Helper()
	ctx := t.Context()
	people := make([]string, authors)
	for i := range people {
		p, err := env.Server.Modules().Writers.Identity.CreatePrincipal(ctx, identity.NewPrincipal{Kind: identity.KindUser,
			Handle: fmt.Sprintf("author%02d", i), DisplayName: fmt.Sprintf("Author %d", i), Email: fmt.Sprintf("author%02d@example.com", i)})
		if err != nil {
			t.Fatal(err)
		}
		people[i] = p.ID
		level := "write"
		if i%2 == 0 {
			level = "trigger"
		}
		env.Exec(`INSERT INTO grants (id, subject_principal_id, target_channel_id, level, created_by, created_at) VALUES ($1, $2, $3, $4, $5, now())`,
			ids.New(), p.ID, env.World.Channel("Support/Allgemein").ID, level, env.World.ID("robin"))
	}
	ch := env.World.Channel("Support/Allgemein").ID
	env.REST(http.MethodPatch, "/api/v1/channels/"+ch+"/switches", env.World.Token("robin"), map[string]any{"history_backfill_limit": 500})
	thread := newThreadT(t, env)
	body := fmt.Sprintf("%0400d", 0)
	for i := 0; i < n; i++ {
		env.Exec(`WITH s AS (UPDATE threads SET last_seq = last_seq + 1 WHERE id = $1 RETURNING last_seq)
			INSERT INTO messages (id, thread_id, thread_seq, author_principal_id, origin, kind, content_md, created_at)
			SELECT $2, $1, s.last_seq, $3, 'human', 'text', $4, now() FROM s`, thread, ids.New(), people[i%authors], body)
	}
	_, cursor := env.Poll(t, "lotse", "", 0)
	env.MustPost("alex", thread, "trigger", "@lotse summarise")
	evs, _ := env.Poll(t, "lotse", cursor, 0)
	return evs[len(evs)-1].Payload["run_id"].(string)
}

func newThreadT(t testing.TB, env *apitest.Env) string {
	r := env.REST(http.MethodPost, "/api/v1/channels/"+env.World.Channel("Support/Allgemein").ID+"/threads", env.World.Token("writer"),
		map[string]any{"title": "Load", "first_message": map[string]any{"client_msg_id": "load", "content_md": "load test"}})
	var c struct{ Thread map[string]any }
	r.JSON(t, &c)
	return c.Thread["id"].(string)
}

// cursor is the after argument for a cursor: none (null) at the start, since
// an empty string is refused like every empty optional input.
func cursor(after string) any {
	if after == "" {
		return nil
	}
	return after
}

// TestRunContext_ConstantQueries: one context read runs a fixed number of
// statements, whatever the number of messages and authors.
func TestRunContext_ConstantQueries(t *testing.T) {
	t.Parallel()
	counts := map[string]int64{}
	for _, tc := range []struct {
		name             string
		messages, people int
	}{{"10 messages 2 authors", 10, 2}, {"400 messages 2 authors", 400, 2}, {"400 messages 40 authors", 400, 40}} {
		counter := &apitest.StatementCounter{}
		env := apitest.Start(t, apitest.Options{Tracer: counter, Config: map[string]string{"run.sweep_interval": "1h", "agent.context_max_bytes": "1000000"}})
		run := contextFixture(t, env, tc.messages, tc.people)
		for _, face := range []string{"graphql", "rest"} {
			before := counter.Count()
			var elements int
			if face == "rest" {
				r := env.REST(http.MethodGet, "/api/v1/runs/"+run+"/context", env.World.Token("lotse"), nil)
				var c runCtx
				r.JSON(t, &c)
				elements = len(c.ThreadContext)
			} else {
				var out struct {
					Run struct {
						Context map[string]any `json:"context"`
					} `json:"run"`
				}
				res := env.GraphQL(env.World.Token("lotse"), contextQuery, map[string]any{"id": run}, &out)
				if len(res.Errors) > 0 {
					t.Fatal(res.Errors)
				}
				elements = len(out.Run.Context["threadContext"].([]any))
			}
			n := counter.Count() - before
			if elements != tc.messages+1 {
				t.Fatalf("%s %s: %d elements", tc.name, face, elements)
			}
			counts[tc.name+" "+face] = n
			if n > 10 {
				t.Errorf("%s %s: %d statements, want at most 10:\n%s", tc.name, face, n, strings.Join(counter.Since(before), "\n"))
			}
		}
	}
	var first int64 = -1
	for name, n := range counts {
		if first == -1 {
			first = n
		}
		if n != first {
			t.Fatalf("statement counts differ: %v (%s)", counts, name)
		}
	}
	t.Logf("statements per context read: %v", counts)
}

// TestRunContext_FollowUpFactsOnlyOnRecord: a context read reads the
// follow-up facts only when the run or its session has a follow-up on
// record; without one it answers no follow-ups and nothing delivered with
// one statement fewer, and once a follow-up exists it reads and shows it.
func TestRunContext_FollowUpFactsOnlyOnRecord(t *testing.T) {
	t.Parallel()
	counter := &apitest.StatementCounter{}
	env := apitest.Start(t, apitest.Options{Tracer: counter})
	s := newStream(t, env, "lotse")
	thread := openThread(t, env, "writer", "Support/Allgemein", "", "writer opens")
	say(t, env, "alex", thread, "@lotse first question")
	run := s.nextRun()
	mustRunOp(t, env, "lotse", "startRun", run)
	factsReads := func(from int64) int {
		n := 0
		for _, q := range counter.Since(from) {
			if strings.HasPrefix(q, "WITH fu AS") { // runs' FollowUpFacts
				n++
			}
		}
		return n
	}
	before := counter.Count()
	c, _ := readContext(t, env, "lotse", run)
	if n := factsReads(before); n != 0 || len(c.FollowUps) != 0 || c.TriggerMessage.AlreadyDelivered {
		t.Fatalf("without follow-ups: %d follow-up statements, follow-ups %+v", n, c.FollowUps)
	}
	f := say(t, env, "alex", thread, "a follow-up while running")
	before = counter.Count()
	c, _ = readContext(t, env, "lotse", run)
	// readContext reads through both faces: one facts statement each.
	if n := factsReads(before); n != 2 || len(c.FollowUps) != 1 || c.FollowUps[0].MessageID != f["id"] {
		t.Fatalf("with a follow-up: %d follow-up statements, follow-ups %+v", n, c.FollowUps)
	}
}

// TestRunContext_PeopleBesideWindow: the authors of a context and their
// trigger right are read once, beside the window (authz's
// PeopleWithTriggerIn over messaging's ContextAuthors), and nothing asks
// for people after it; the answers are those the trust rule needs: half
// of the fixture's authors hold trigger (their elements are authorized),
// the others do not (unverified).
func TestRunContext_PeopleBesideWindow(t *testing.T) {
	t.Parallel()
	counter := &apitest.StatementCounter{}
	env := apitest.Start(t, apitest.Options{Tracer: counter, Config: map[string]string{"run.sweep_interval": "1h", "agent.context_max_bytes": "1000000"}})
	run := contextFixture(t, env, 40, 8)
	before := counter.Count()
	c, _ := readContext(t, env, "lotse", run)
	var beside, after int
	for _, q := range counter.Since(before) {
		switch {
		case strings.HasPrefix(q, "WITH named (id) AS"):
			beside++
		// authz's people statement after the window, or identity's read
		// of principals by id (the Principals loader's).
		case strings.HasPrefix(q, "SELECT p.*, g.space"), strings.HasPrefix(q, "SELECT id, kind, handle"):
			after++
		}
	}
	// readContext reads through both faces.
	if beside != 2 || after != 0 {
		t.Fatalf("people read beside the window %d times, after it %d times; want 2 and 0:\n%s", beside, after, strings.Join(counter.Since(before), "\n"))
	}
	trust := map[string]map[string]bool{}
	for _, e := range c.ThreadContext {
		h := e.Author["handle"].(string)
		if trust[h] == nil {
			trust[h] = map[string]bool{}
		}
		trust[h][e.Trust] = true
	}
	for i := range 8 {
		h := fmt.Sprintf("author%02d", i)
		want := map[bool]string{true: "authorized", false: "unverified"}[i%2 == 0]
		if len(trust[h]) != 1 || !trust[h][want] {
			t.Errorf("%s: trust %v, want only %s", h, trust[h], want)
		}
	}
}
