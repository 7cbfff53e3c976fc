package graph_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"bothy.example.com/bothy/internal/devtools/apitest"
)

// pageInfo is PageInfo as a client decodes it.
type pageInfo struct {
	EndCursor   *string `json:"endCursor"`
	HasNextPage bool    `json:"hasNextPage"`
}

// connection is the common shape of every paged list: edges with cursors
// and the ids of their nodes, nodes, pageInfo.
type connection struct {
	Edges []struct {
		Cursor string `json:"cursor"`
		Node   struct {
			ID string `json:"id"`
		} `json:"node"`
	} `json:"edges"`
	Nodes []struct {
		ID string `json:"id"`
	} `json:"nodes"`
	PageInfo pageInfo `json:"pageInfo"`
}

// walk reads a list page by page through read (which takes the after
// argument, nil first) and returns the node ids in order, checking on
// every page that edges and nodes agree, that endCursor is the last edge's
// cursor (or the given after on an empty page) and that the walk ends.
// The page behind the last answers empty, ending where it began.
func walk(t *testing.T, what string, read func(after *string) connection) []string {
	t.Helper()
	var ids []string
	var after *string
	for pages := 0; ; pages++ {
		if pages > 200 {
			t.Fatalf("%s: no end after 200 pages", what)
		}
		c := read(after)
		ids = append(ids, pageIDs(t, what, c)...)
		if !c.PageInfo.HasNextPage {
			if c.PageInfo.EndCursor != nil {
				checkPageBehindLast(t, what, c, read)
			}
			return ids
		}
		if c.PageInfo.EndCursor == nil {
			t.Fatalf("%s: hasNextPage without endCursor", what)
		}
		after = c.PageInfo.EndCursor
	}
}

// pageIDs returns the node ids of one page of walk, checking that its
// edges and nodes agree and that endCursor is the last edge's cursor.
func pageIDs(t *testing.T, what string, c connection) []string {
	t.Helper()
	if len(c.Edges) != len(c.Nodes) {
		t.Fatalf("%s: %d edges, %d nodes", what, len(c.Edges), len(c.Nodes))
	}
	var ids []string
	for i, e := range c.Edges {
		if e.Node.ID != c.Nodes[i].ID || e.Cursor == "" {
			t.Fatalf("%s: edge %d %+v against node %s", what, i, e, c.Nodes[i].ID)
		}
		ids = append(ids, e.Node.ID)
	}
	if n := len(c.Edges); n > 0 && (c.PageInfo.EndCursor == nil || *c.PageInfo.EndCursor != c.Edges[n-1].Cursor) {
		t.Fatalf("%s: endCursor %v, last edge's cursor %s", what, c.PageInfo.EndCursor, c.Edges[n-1].Cursor)
	}
	return ids
}

// checkPageBehindLast checks that the page behind the last page c of walk
// answers empty, without a next page, ending where it began.
func checkPageBehindLast(t *testing.T, what string, c connection, read func(after *string) connection) {
	t.Helper()
	behind := read(c.PageInfo.EndCursor)
	if len(behind.Edges) != 0 || behind.PageInfo.HasNextPage || behind.PageInfo.EndCursor == nil || *behind.PageInfo.EndCursor != *c.PageInfo.EndCursor {
		t.Fatalf("%s: the page behind the last: %+v", what, behind)
	}
}

// afterArg renders after as a GraphQL argument.
func afterArg(after *string) string {
	if after == nil {
		return ""
	}
	return fmt.Sprintf(", after: %q", *after)
}

// TestListsPageAsConnections: every paged list (a thread's history, the
// client events, the agent stream, principals, tokens) answers edges,
// nodes and pageInfo and takes first and after; paging through it with a
// small first yields exactly what one read of the deprecated shape lists.
// Refusals name the argument the caller sent.
func TestListsPageAsConnections(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	f := pagingWorld{env: env, alex: env.World.Token("alex"), robin: env.World.Token("robin"), lotse: env.World.Token("lotse"),
		main: env.Main("Support/Allgemein")}
	for i := range 5 {
		env.MustPost("alex", f.main, fmt.Sprintf("page-%d", i), fmt.Sprintf("@lotse question %d", i))
	}
	for i := range 2 {
		env.GraphQL(f.alex, `mutation($p: ID!, $l: String!) { createToken(principalId: $p, input: {label: $l}) { token } }`,
			map[string]any{"p": env.World.ID("alex"), "l": fmt.Sprintf("extra %d", i)}, nil)
	}

	t.Run("history", f.history)
	t.Run("events", f.events)
	t.Run("agent stream", f.agentStream)
	t.Run("principals", f.principals)
	t.Run("tokens", f.tokens)
	t.Run("refusals name the argument", f.refusals)
}

// connectionFields selects the connection shape of a paged list.
const connectionFields = `edges { cursor node { id } } nodes { id } pageInfo { endCursor hasNextPage }`

// pagingWorld is the world of TestListsPageAsConnections: the tokens of
// alex (a member), robin (the owner) and lotse (an agent), and the main
// thread of Support/Allgemein with alex's five questions to lotse.
type pagingWorld struct {
	env                *apitest.Env
	alex, robin, lotse string
	main               string
}

// samePages fails t unless the ids paged are the ids listed, and at least
// least ids are listed.
func samePages(t *testing.T, got, want []string, least int) {
	t.Helper()
	if len(want) < least || !slices.Equal(got, want) {
		t.Fatalf("paged %v, listed %v", got, want)
	}
}

// history pages through the main thread's history.
func (f pagingWorld) history(t *testing.T) {
	var old struct {
		Thread struct {
			Messages struct {
				Messages []struct{ ID string } `json:"messages"`
			} `json:"messages"`
		} `json:"thread"`
	}
	f.env.GraphQL(f.alex, `query($t: ID!) { thread(id: $t) { messages(limit: 100) { messages { id } } } }`, map[string]any{"t": f.main}, &old)
	var want []string
	for _, m := range old.Thread.Messages.Messages {
		want = append(want, m.ID)
	}
	got := walk(t, "history", func(after *string) connection {
		var out struct {
			Thread struct {
				History connection `json:"history"`
			} `json:"thread"`
		}
		res := f.env.GraphQL(f.alex, `query($t: ID!) { thread(id: $t) { history(first: 2`+afterArg(after)+`) { `+connectionFields+` } } }`, map[string]any{"t": f.main}, &out)
		if len(res.Errors) != 0 {
			t.Fatalf("history: %+v", res.Errors)
		}
		return out.Thread.History
	})
	samePages(t, got, want, 5)
}

// events pages through alex's client events.
func (f pagingWorld) events(t *testing.T) {
	var old struct {
		Events struct {
			Events []struct{ ID string } `json:"events"`
		} `json:"events"`
	}
	f.env.GraphQL(f.alex, `{ events(limit: 100) { events { id } } }`, nil, &old)
	var want []string
	for _, e := range old.Events.Events {
		want = append(want, e.ID)
	}
	got := walk(t, "events", func(after *string) connection {
		var out struct {
			Events connection `json:"events"`
		}
		q := `{ events(first: 4` + afterArg(after) + `) { ` + connectionFields + ` } }`
		if res := f.env.GraphQL(f.alex, q, nil, &out); len(res.Errors) != 0 {
			t.Fatalf("events: %+v", res.Errors)
		}
		return out.Events
	})
	samePages(t, got, want, 5)
}

// agentStream pages through lotse's agent stream from its start.
func (f pagingWorld) agentStream(t *testing.T) {
	var old struct {
		AgentEvents struct {
			Events []struct{ ID string } `json:"events"`
		} `json:"agentEvents"`
	}
	f.env.GraphQL(f.lotse, `{ agentEvents(after: "0") { events { id } } }`, nil, &old)
	var want []string
	for _, e := range old.AgentEvents.Events {
		want = append(want, e.ID)
	}
	got := walk(t, "agentEvents", func(after *string) connection {
		if after == nil {
			zero := "0"
			after = &zero
		}
		var out struct {
			AgentEvents connection `json:"agentEvents"`
		}
		if res := f.env.GraphQL(f.lotse, `{ agentEvents(first: 2`+afterArg(after)+`) { `+connectionFields+` } }`, nil, &out); len(res.Errors) != 0 {
			t.Fatalf("agentEvents: %+v", res.Errors)
		}
		return out.AgentEvents
	})
	samePages(t, got, want, 2)
}

// principals pages through the principals as the owner sees them.
func (f pagingWorld) principals(t *testing.T) {
	var old struct {
		Principals struct {
			Principals []struct{ ID string } `json:"principals"`
		} `json:"principals"`
	}
	f.env.GraphQL(f.robin, `{ principals(limit: 100) { principals { id } } }`, nil, &old)
	var want []string
	for _, p := range old.Principals.Principals {
		want = append(want, p.ID)
	}
	got := walk(t, "principals", func(after *string) connection {
		var out struct {
			Principals connection `json:"principals"`
		}
		if res := f.env.GraphQL(f.robin, `{ principals(first: 2`+afterArg(after)+`) { `+connectionFields+` } }`, nil, &out); len(res.Errors) != 0 {
			t.Fatalf("principals: %+v", res.Errors)
		}
		return out.Principals
	})
	samePages(t, got, want, 4)
}

// tokens pages through alex's tokens, one a page.
func (f pagingWorld) tokens(t *testing.T) {
	var old struct {
		Tokens struct {
			Tokens []struct{ ID string } `json:"tokens"`
		} `json:"tokens"`
	}
	vars := map[string]any{"p": f.env.World.ID("alex")}
	f.env.GraphQL(f.alex, `query($p: ID!) { tokens(principalId: $p) { tokens { id } } }`, vars, &old)
	var want []string
	for _, x := range old.Tokens.Tokens {
		want = append(want, x.ID)
	}
	got := walk(t, "tokens", func(after *string) connection {
		var out struct {
			Tokens connection `json:"tokens"`
		}
		if res := f.env.GraphQL(f.alex, `query($p: ID!) { tokens(principalId: $p, first: 1`+afterArg(after)+`) { `+connectionFields+` } }`, vars, &out); len(res.Errors) != 0 {
			t.Fatalf("tokens: %+v", res.Errors)
		}
		return out.Tokens
	})
	samePages(t, got, want, 3)
}

// refusals sends paging arguments out of range, exclusive or malformed to
// every list: each refusal names the argument the caller sent.
func (f pagingWorld) refusals(t *testing.T) {
	alex, robin, lotse, main, env := f.alex, f.robin, f.lotse, f.main, f.env
	cases := []struct {
		token, query, field, code string
	}{
		{alex, `{ events(first: 0) { nodes { id } } }`, "first", "out_of_range"},
		{alex, `{ events(limit: 0) { nodes { id } } }`, "limit", "out_of_range"},
		{alex, `{ events(first: 2, limit: 2) { nodes { id } } }`, "first", "exclusive"},
		{robin, `{ principals(first: 2, limit: 2) { nodes { id } } }`, "first", "exclusive"},
		{robin, `{ principals(first: 0) { nodes { id } } }`, "first", "out_of_range"},
		{lotse, `{ agentEvents(first: 101) { nodes { id } } }`, "first", "out_of_range"},
		{alex, `query { thread(id: "` + main + `") { history(after: "seven") { nodes { id } } } }`, "after", "invalid_cursor"},
		{alex, `query { thread(id: "` + main + `") { history(first: 0) { nodes { id } } } }`, "first", "out_of_range"},
		{alex, `query { tokens(principalId: "` + env.World.ID("alex") + `", after: "` + main + `") { nodes { id } } }`, "after", "invalid_cursor"},
		{alex, `query { tokens(principalId: "` + env.World.ID("alex") + `", first: 101) { nodes { id } } }`, "first", "out_of_range"},
	}
	for _, c := range cases {
		res := env.GraphQL(c.token, c.query, nil, nil)
		if len(res.Errors) != 1 || res.Errors[0].Extensions.Code != "validation_failed" || len(res.Errors[0].Extensions.FieldErrors) != 1 ||
			res.Errors[0].Extensions.FieldErrors[0].Field != c.field || res.Errors[0].Extensions.FieldErrors[0].Code != c.code {
			t.Errorf("%s: errors %+v, want %s at %s", strings.TrimSpace(c.query), res.Errors, c.code, c.field)
		}
	}
}
