package runs_test

import (
	"context"
	"net/http"
	"slices"
	"testing"

	"bothy.example.com/bothy/internal/devtools/apitest"
)

// TestTriggeredRuns_OwnAndReadable: GET /api/v1/me/runs and triggeredRuns
// list the runs the caller started, newest first, and no one else's; an
// agent lists none; once Sam may no longer read the channel of his run, it
// is gone from his list; pages continue after end_cursor.
func TestTriggeredRuns_OwnAndReadable(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	s := newStream(t, env, "lotse")
	env.MustPost("alex", env.Main("Support/Eskalation"), "tr-1", "@lotse first")
	first := s.nextRun()
	env.MustPost("sam", env.Main("Support/Allgemein"), "tr-2", "@lotse from Sam")
	samRun := s.nextRun()
	openThread(t, env, "alex", "Support/Allgemein", "", "@lotse second")
	second := s.nextRun()
	list := func(who, query string) ([]string, map[string]any) {
		t.Helper()
		out := env.MustREST(t, http.MethodGet, "/api/v1/me/runs"+query, env.World.Token(who), nil, http.StatusOK)
		var ids []string
		for _, r := range out["nodes"].([]any) {
			ids = append(ids, r.(map[string]any)["id"].(string))
		}
		return ids, out["page_info"].(map[string]any)
	}
	if got, _ := list("alex", ""); !slices.Equal(got, []string{second, first}) {
		t.Fatalf("alex lists %v, want %v", got, []string{second, first})
	}
	if got, _ := list("sam", ""); !slices.Equal(got, []string{samRun}) {
		t.Fatalf("sam lists %v", got)
	}
	if got, _ := list("lotse", ""); len(got) != 0 {
		t.Fatalf("lotse lists %v", got)
	}
	page, info := list("alex", "?first=1")
	if !slices.Equal(page, []string{second}) || info["has_next_page"] != true {
		t.Fatalf("first page %v %+v", page, info)
	}
	if rest, info := list("alex", "?first=1&after="+info["end_cursor"].(string)); !slices.Equal(rest, []string{first}) || info["has_next_page"] != false {
		t.Fatalf("second page %v %+v", rest, info)
	}
	var gql struct {
		TriggeredRuns struct {
			Nodes []struct {
				ID    string
				State string
			}
		} `json:"triggeredRuns"`
	}
	env.GraphQL(env.World.Token("alex"), `{ triggeredRuns { nodes { id state } } }`, nil, &gql)
	if len(gql.TriggeredRuns.Nodes) != 2 || gql.TriggeredRuns.Nodes[0].ID != second || gql.TriggeredRuns.Nodes[0].State != "QUEUED" {
		t.Fatalf("over GraphQL: %+v", gql)
	}
	// Sam loses his grant on Support/Allgemein: his run is out of his sight.
	var grant string
	if err := env.Pool.QueryRow(context.Background(), `SELECT id::text FROM grants WHERE subject_principal_id = $1 AND target_channel_id = $2`,
		env.World.ID("sam"), env.World.Channel("Support/Allgemein").ID).Scan(&grant); err != nil {
		t.Fatal(err)
	}
	env.MustREST(t, http.MethodDelete, "/api/v1/grants/"+grant, env.World.Token("robin"), nil, http.StatusOK)
	if got, _ := list("sam", ""); len(got) != 0 {
		t.Fatalf("sam still lists %v", got)
	}
}
