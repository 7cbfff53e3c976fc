package chat_test

import (
	"net/http"
	"slices"
	"sort"
	"testing"

	"bothy.example.com/bothy/internal/devtools/apitest"
)

// TestListChannels_WhatEachMayRead: GET /api/v1/channels and the channels
// query list exactly the channels each principal of the example world may
// read (by grant on the space or the channel, as an operator, everything
// for an owner), each of which answers its own read; a page ends where
// first says and continues after its end_cursor.
func TestListChannels_WhatEachMayRead(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	want := map[string][]string{
		"robin":   {"Marketing/Ideas", "Marketing/Kampagnen", "Support/Allgemein", "Support/Bulletin", "Support/Eskalation", "Support/Reports"},
		"alex":    {"Support/Allgemein", "Support/Bulletin", "Support/Eskalation", "Support/Reports"},
		"sam":     {"Marketing/Ideas", "Marketing/Kampagnen", "Support/Allgemein"},
		"writer":  {"Support/Allgemein"},
		"lotse":   {"Support/Allgemein", "Support/Bulletin", "Support/Eskalation", "Support/Reports"},
		"texter":  {"Marketing/Ideas", "Marketing/Kampagnen", "Support/Allgemein"},
		"feedbot": {"Support/Allgemein"},
	}
	keyOf := map[string]string{}
	for k, c := range env.World.Channels {
		keyOf[c.ID] = k
	}
	for who, names := range want {
		var page struct {
			Channels []struct {
				ID           string `json:"id"`
				MainThreadID string `json:"main_thread_id"`
			} `json:"nodes"`
			PageInfo struct {
				HasNextPage bool `json:"has_next_page"`
			} `json:"page_info"`
		}
		env.REST(http.MethodGet, "/api/v1/channels", env.World.Token(who), nil).JSON(t, &page)
		var got []string
		for _, c := range page.Channels {
			got = append(got, keyOf[c.ID])
			env.MustREST(t, http.MethodGet, "/api/v1/channels/"+c.ID, env.World.Token(who), nil, http.StatusOK)
		}
		sort.Strings(got)
		if !slices.Equal(got, names) || page.PageInfo.HasNextPage {
			t.Errorf("%s lists %v (more %v), want %v", who, got, page.PageInfo.HasNextPage, names)
		}
		var gql struct {
			Channels struct{ Nodes []struct{ ID string } } `json:"channels"`
		}
		env.GraphQL(env.World.Token(who), `{ channels { nodes { id } } }`, nil, &gql)
		if len(gql.Channels.Nodes) != len(names) {
			t.Errorf("%s: %d channels over GraphQL, want %d", who, len(gql.Channels.Nodes), len(names))
		}
	}
	// Pages: four, then the other two.
	first := env.MustREST(t, http.MethodGet, "/api/v1/channels?first=4", env.World.Token("robin"), nil, http.StatusOK)
	info := first["page_info"].(map[string]any)
	if len(first["nodes"].([]any)) != 4 || info["has_next_page"] != true {
		t.Fatalf("first page: %+v", first)
	}
	rest := env.MustREST(t, http.MethodGet, "/api/v1/channels?first=4&after="+info["end_cursor"].(string), env.World.Token("robin"), nil, http.StatusOK)
	if len(rest["nodes"].([]any)) != 2 || rest["page_info"].(map[string]any)["has_next_page"] != false {
		t.Fatalf("second page: %+v", rest)
	}
	apitest.WantProblem(t, "first=0", env.REST(http.MethodGet, "/api/v1/channels?first=0", env.World.Token("robin"), nil), http.StatusBadRequest, "validation_failed", "")
	if p := apitest.WantProblem(t, "a bad cursor", env.REST(http.MethodGet, "/api/v1/channels?after=nope", env.World.Token("robin"), nil),
		http.StatusBadRequest, "validation_failed", ""); len(p.Errors) != 1 || p.Errors[0].Code != "invalid_cursor" {
		t.Fatalf("a bad cursor: %+v", p)
	}
}
