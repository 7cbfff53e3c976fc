package runs_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/admin"
	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/ids"
)

// benchClient talks to a test server over HTTP without the harness's
// OpenAPI validation, so that the benchmark times the server.
type benchClient struct {
	url    string
	client *http.Client
}

func (c *benchClient) do(method, path, token string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, c.url+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, data)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// gql runs a GraphQL operation and fails on any error in the answer.
func (c *benchClient) gql(token, query string, vars map[string]any, out any) error {
	var env struct {
		Data   json.RawMessage `json:"data"`
		Errors []any           `json:"errors"`
	}
	if err := c.do(http.MethodPost, "/graphql", token, map[string]any{"query": query, "variables": vars}, &env); err != nil {
		return err
	}
	if len(env.Errors) > 0 {
		return fmt.Errorf("graphql: %v", env.Errors)
	}
	if out != nil {
		return json.Unmarshal(env.Data, out)
	}
	return nil
}

// wholeRunSteps are the steps of one run, in order.
var wholeRunSteps = []string{"trigger", "delivered", "context", "start", "answer", "finish"}

// BenchmarkWholeRun drives whole runs with N concurrent agents, each in
// its own thread of Support/Allgemein: Alex mentions the agent (trigger),
// the agent's long poll hands out the invocation (delivered), the agent
// reads the run context (GraphQL), starts the run, answers with the run id
// (REST) and finishes the run. It reports runs per second and p50/p99 per
// step.
func BenchmarkWholeRun(b *testing.B) {
	env := apitest.Start(b, apitest.Options{Config: benchConfig})
	c := &benchClient{url: env.URL, client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}}
	agents := newRunners(b, env, c, 4)
	wr := &wholeRuns{c: c, alex: env.World.Token("alex")}
	for _, n := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("agents=%d", n), func(b *testing.B) {
			if _, err := wr.oneRun(agents[0]); err != nil { // warm up
				b.Fatal(err)
			}
			b.ResetTimer()
			start := time.Now()
			steps, failure := wr.drive(b.N, agents[:n])
			b.StopTimer()
			if failure != nil {
				b.Fatal(failure)
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "runs/s")
			for i, name := range wholeRunSteps {
				s := steps[i]
				sort.Slice(s, func(x, y int) bool { return s[x] < s[y] })
				b.ReportMetric(float64(s[len(s)/2].Microseconds())/1000, name+"_p50_ms")
				b.ReportMetric(float64(s[len(s)*99/100].Microseconds())/1000, name+"_p99_ms")
			}
		})
	}
}

// runner is one agent of BenchmarkWholeRun: its token, its thread and the
// cursor of its stream.
type runner struct {
	handle, token, thread, cursor string
}

// newRunners creates n guest agents runner0… with write on
// Support/Allgemein, a thread of its own for each (opened by Writer), and
// each one's stream cursor at its end.
func newRunners(b *testing.B, env *apitest.Env, c *benchClient, n int) []*runner {
	b.Helper()
	ctx := b.Context()
	robin, err := env.Server.Identity.Get(ctx, env.World.ID("robin"))
	if err != nil {
		b.Fatal(err)
	}
	var agents []*runner
	for i := 0; i < n; i++ {
		handle := fmt.Sprintf("runner%d", i)
		made, err := env.Server.Admin.CreatePrincipal(ctx, robin, admin.PrincipalInput{Kind: identity.KindAgent, Handle: handle, DisplayName: "Runner " + handle})
		if err != nil || made.Token == nil {
			b.Fatalf("agent %s: %v", handle, err)
		}
		a := &runner{handle: handle, token: made.Token.Token}
		// A guest agent needs read on the thread to be mentioned, write to answer.
		env.Exec(`INSERT INTO grants (id, subject_principal_id, target_channel_id, level, created_by, created_at) VALUES ($1, $2, $3, 'write', $4, now())`,
			ids.New(), made.Principal.ID, env.World.Channel("Support/Allgemein").ID, robin.ID)
		var made2 struct {
			Thread struct {
				ID string `json:"id"`
			} `json:"thread"`
		}
		if err := c.do(http.MethodPost, "/api/v1/channels/"+env.World.Channel("Support/Allgemein").ID+"/threads", env.World.Token("writer"),
			map[string]any{"title": "Runs of " + handle, "first_message": map[string]any{"client_msg_id": "runs-" + handle, "content_md": "work for " + handle}}, &made2); err != nil {
			b.Fatal(err)
		}
		a.thread = made2.Thread.ID
		var ev struct {
			AgentEvents struct {
				NextAfter string `json:"nextAfter"`
			} `json:"agentEvents"`
		}
		if err := c.gql(a.token, `{ agentEvents(waitSeconds: 0) { nextAfter } }`, nil, &ev); err != nil {
			b.Fatal(err)
		}
		a.cursor = ev.AgentEvents.NextAfter
		agents = append(agents, a)
	}
	return agents
}

// wholeRuns drives the runs of BenchmarkWholeRun: Alex (token alex)
// triggers them, each with a number of its own.
type wholeRuns struct {
	c    *benchClient
	alex string
	mu   sync.Mutex
	seq  int
}

// nextID returns the next number of a run's messages.
func (wr *wholeRuns) nextID() int {
	wr.mu.Lock()
	defer wr.mu.Unlock()
	wr.seq++
	return wr.seq
}

// drive runs total whole runs with agents concurrently, each agent one
// run at a time, and returns the times of each step (by step, in
// wholeRunSteps' order), or the first failure.
func (wr *wholeRuns) drive(total int, agents []*runner) ([][]time.Duration, error) {
	var mu sync.Mutex
	var failure error
	steps := make([][]time.Duration, len(wholeRunSteps))
	var wg sync.WaitGroup
	var next int
	for _, a := range agents {
		wg.Add(1)
		go func(a *runner) {
			defer wg.Done()
			for {
				mu.Lock()
				if next >= total || failure != nil {
					mu.Unlock()
					return
				}
				next++
				mu.Unlock()
				d, err := wr.oneRun(a)
				mu.Lock()
				if err != nil {
					failure = err
				} else {
					for i, x := range d {
						steps[i] = append(steps[i], x)
					}
				}
				mu.Unlock()
			}
		}(a)
	}
	wg.Wait()
	return steps, failure
}

// oneRun drives one whole run of a and returns the time of each step.
func (wr *wholeRuns) oneRun(a *runner) ([]time.Duration, error) {
	c := wr.c
	d := make([]time.Duration, len(wholeRunSteps))
	n := wr.nextID()
	t0 := time.Now()
	if err := c.do(http.MethodPost, "/api/v1/threads/"+a.thread+"/messages", wr.alex,
		map[string]any{"client_msg_id": fmt.Sprintf("wr-%d", n), "content_md": "@" + a.handle + " task " + fmt.Sprint(n)}, nil); err != nil {
		return nil, err
	}
	d[0] = time.Since(t0)
	t0 = time.Now()
	run, err := wr.awaitInvocation(a, n)
	if err != nil {
		return nil, err
	}
	d[1] = time.Since(t0)
	t0 = time.Now()
	if err := c.gql(a.token, contextQuery, map[string]any{"id": run}, nil); err != nil {
		return nil, err
	}
	d[2] = time.Since(t0)
	t0 = time.Now()
	if err := c.gql(a.token, `mutation($id: ID!) { startRun(id: $id) { id state } }`, map[string]any{"id": run}, nil); err != nil {
		return nil, err
	}
	d[3] = time.Since(t0)
	t0 = time.Now()
	if err := c.do(http.MethodPost, "/api/v1/threads/"+a.thread+"/messages", a.token,
		map[string]any{"client_msg_id": fmt.Sprintf("wa-%d", n), "content_md": "done " + fmt.Sprint(n), "run_id": run}, nil); err != nil {
		return nil, err
	}
	d[4] = time.Since(t0)
	t0 = time.Now()
	if err := c.gql(a.token, `mutation($id: ID!) { finishRun(id: $id, input: {outcome: COMPLETED}) { id state } }`, map[string]any{"id": run}, nil); err != nil {
		return nil, err
	}
	d[5] = time.Since(t0)
	return d, nil
}

// awaitInvocation long-polls a's stream until the invocation of the run
// message n triggered is there, and returns the run. A long poll may come
// back empty (woken by another agent's event): it polls again until 20 s
// have passed.
func (wr *wholeRuns) awaitInvocation(a *runner, n int) (string, error) {
	t0 := time.Now()
	run := ""
	for run == "" {
		if time.Since(t0) > 20*time.Second {
			return "", fmt.Errorf("%s: no invocation for message %d", a.handle, n)
		}
		var ev struct {
			AgentEvents struct {
				Events []struct {
					Type    string         `json:"type"`
					Payload map[string]any `json:"payload"`
				} `json:"events"`
				NextAfter string `json:"nextAfter"`
			} `json:"agentEvents"`
		}
		if err := wr.c.gql(a.token, `query($a: String) { agentEvents(after: $a, waitSeconds: 10) { events { type payload } nextAfter } }`,
			map[string]any{"a": a.cursor}, &ev); err != nil {
			return "", err
		}
		a.cursor = ev.AgentEvents.NextAfter
		for _, e := range ev.AgentEvents.Events {
			if e.Type == "agent.invocation" {
				run, _ = e.Payload["run_id"].(string)
			}
		}
	}
	return run, nil
}
