package runs_test

import (
	"bytes"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"bothy.example.com/bothy/internal/devtools/apitest"
)

// TestLargeAnswersKeepTheirBytes: large answers are written from pooled
// buffers (answerbuf, the REST shim's buffers), so concurrent reads of
// large, different answers over both faces must each get exactly the
// bytes a read alone gets: a buffer handed back while still in use would
// show here as one answer's bytes in another's.
func TestLargeAnswersKeepTheirBytes(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{Config: benchConfig})
	run := contextFixture(t, env, 200, 20)
	token := env.World.Token("lotse")
	type read struct {
		name string
		do   func() ([]byte, error)
	}
	gql := func(sel string) func() ([]byte, error) {
		q := `query($id: ID!) { run(id: $id) { context { threadContext { ` + sel + ` } } } }`
		return func() ([]byte, error) {
			res, err := env.GraphQLDo(token, q, map[string]any{"id": run}, nil)
			if err != nil {
				return nil, err
			}
			if res.Status != http.StatusOK || len(res.Errors) > 0 {
				return nil, fmt.Errorf("status %d errors %v", res.Status, res.Errors)
			}
			return res.Data, nil
		}
	}
	reads := []read{
		{"graphql id then content", gql("messageId contentMd")},
		{"graphql content then seq", gql("contentMd threadSeq trust")},
		{"graphql author and content", gql("author { id displayName } contentMd createdAt")},
		{"rest", func() ([]byte, error) {
			r, err := env.Do(http.MethodGet, "/api/v1/runs/"+run+"/context", token, nil)
			if err != nil {
				return nil, err
			}
			if r.Status != http.StatusOK {
				return nil, fmt.Errorf("status %d", r.Status)
			}
			return r.Body, nil
		}},
	}
	want := make([][]byte, len(reads))
	for i, rd := range reads {
		b, err := rd.do()
		if err != nil {
			t.Fatalf("%s: %v", rd.name, err)
		}
		if len(b) < 40<<10 {
			t.Fatalf("%s: answer of %d bytes is too small to come from the pool", rd.name, len(b))
		}
		want[i] = b
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < 25; n++ {
				i := (g + n) % len(reads)
				got, err := reads[i].do()
				if err == nil && !bytes.Equal(got, want[i]) {
					err = fmt.Errorf("answer differs from a read alone (%d against %d bytes)", len(got), len(want[i]))
				}
				if err != nil {
					errs <- fmt.Errorf("%s: %w", reads[i].name, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
