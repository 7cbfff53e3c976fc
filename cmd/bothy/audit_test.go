package main

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/admin"
	"bothy.example.com/bothy/internal/devtools/apitest"
)

// TestAuditReadsOfFreshInstallations reads the audit log of the two
// installations an operator starts from, with every filter the API offers,
// on both faces (REST answers validated against docs/api/openapi.yaml):
// the world bothy seed writes (the seed of bothy dev) and an installation
// made as the README says (create-owner, then principals through the API).
// Their first entries are the local operator's; in the README installation
// an owner also removes a principal at the database, whose entries still
// read. The export finds the operator by its handle.
func TestAuditReadsOfFreshInstallations(t *testing.T) {
	// Not parallel: startAdminEnv sets BOTHY_DATABASE_URL, which the
	// in-process command line reads.
	t.Run("bothy dev world", func(t *testing.T) {
		env := startAdminEnv(t, true)
		var w struct {
			Principals map[string]struct{ ID, Token string }
		}
		decode(t, mustBothy(t, "seed", "--json"), &w)
		owner := w.Principals["robin"]
		apitest.WantProblem(t, "sam reads the log", env.REST(http.MethodGet, "/api/v1/audit", w.Principals["sam"].Token, nil),
			http.StatusForbidden, "forbidden", "level_insufficient")
		readAuditWithEveryFilter(t, env, owner.Token, owner.ID, w.Principals["sam"].ID)
		// The command line names actors by handle; the operator's is
		// operator.
		out := strings.TrimSpace(mustBothy(t, "admin", "audit", "export", "--since", "2000-01-01T00:00:00Z", "--actor", "operator"))
		for _, l := range strings.Split(out, "\n") {
			var e struct {
				ActorID string `json:"actor_id"`
			}
			if decode(t, l, &e); e.ActorID != admin.Operator.ID {
				t.Fatalf("the operator's export: %s", out)
			}
		}
	})
	t.Run("README installation", func(t *testing.T) {
		env := startAdminEnv(t, true)
		var owner struct{ ID, Token string }
		decode(t, mustBothy(t, "admin", "create-owner", "--handle", "robin", "--display-name", "Robin", "--email", "robin@example.com", "--json"), &owner)
		alex := env.MustREST(t, http.MethodPost, "/api/v1/principals", owner.Token,
			map[string]any{"kind": "user", "handle": "alex", "display_name": "Alex", "email": "alex@example.com"}, 201)["principal"].(map[string]any)
		alexTok := env.MustREST(t, http.MethodPost, "/api/v1/principals/"+alex["id"].(string)+"/tokens", owner.Token, map[string]any{"label": "laptop"}, 201)["token"].(string)
		apitest.WantProblem(t, "alex reads the log", env.REST(http.MethodGet, "/api/v1/audit", alexTok, nil),
			http.StatusForbidden, "forbidden", "level_insufficient")
		readAuditWithEveryFilter(t, env, owner.Token, owner.ID, alex["id"].(string))
		// Alex made no message, run or grant, so an owner can remove the
		// row at the database; the audit log keeps Alex's refusal.
		env.Exec(`DELETE FROM principals WHERE id = $1`, alex["id"])
		got := readAuditWithEveryFilter(t, env, owner.Token, owner.ID, alex["id"].(string))
		if a := got[0]["actor"].(map[string]any); a["handle"] != "deleted" {
			t.Fatalf("the removed actor answers %+v", a)
		}
	})
}

// readAuditWithEveryFilter reads the log as owner unfiltered (page by
// page), by each filter alone and by all at once, on both faces; each
// read must answer and the faces must agree on the entries; every filter
// but the last (all at once) must find some. It returns the refusals of
// audit.list by refused.
func readAuditWithEveryFilter(t *testing.T, env *apitest.Env, token, ownerID, refused string) []map[string]any {
	t.Helper()
	since := env.Clock.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	until := env.Clock.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	filters := []url.Values{
		{},
		{"actor": {admin.Operator.ID}, "decision": {"allow"}},
		{"actor": {ownerID}},
		{"actor": {refused}, "decision": {"deny"}, "action": {"audit.list"}},
		{"action": {"principal.create"}},
		{"decision": {"deny"}},
		{"since": {since}},
		{"until": {until}},
		{"actor": {admin.Operator.ID}, "action": {"principal.create"}, "decision": {"allow"}, "since": {since}, "until": {until}},
	}
	var mine []map[string]any
	for i, f := range filters {
		rest := auditREST(t, env, token, f)
		gql := auditGraphQL(t, env, token, f)
		if len(rest) == 0 && i < len(filters)-1 {
			t.Fatalf("filter %v: no entries", f)
		}
		// Every read is audited itself (audit.list): the faces agree on
		// the entries but the owner's reads.
		if r, g := besidesReads(rest, ownerID), besidesReads(gql, ownerID); strings.Join(r, " ") != strings.Join(g, " ") {
			t.Fatalf("filter %v: over REST %v, over GraphQL %v", f, r, g)
		}
		if f.Get("actor") == refused {
			mine = rest
		}
	}
	return mine
}

// auditREST reads every entry of filter f over REST, ten per page, so
// that paging is read as well.
func auditREST(t *testing.T, env *apitest.Env, token string, f url.Values) []map[string]any {
	t.Helper()
	var all []map[string]any
	for after := ""; ; {
		q := url.Values{"limit": {"10"}}
		for k, v := range f {
			q[k] = v
		}
		if after != "" {
			q.Set("after", after)
		}
		out := env.MustREST(t, http.MethodGet, "/api/v1/audit?"+q.Encode(), token, nil, http.StatusOK)
		for _, e := range out["nodes"].([]any) {
			all = append(all, e.(map[string]any))
		}
		info := out["page_info"].(map[string]any)
		if info["has_next_page"] != true {
			return all
		}
		after = info["end_cursor"].(string)
	}
}

// besidesReads returns the ids of the entries that are not owner's reads
// of the log.
func besidesReads(entries []map[string]any, owner string) []string {
	var out []string
	for _, e := range entries {
		if e["action"] != "audit.list" || e["actor"].(map[string]any)["id"] != owner {
			out = append(out, e["id"].(string))
		}
	}
	return out
}

// auditGraphQL reads every entry of filter f over GraphQL,
// selecting every field of the entry and its actor.
func auditGraphQL(t *testing.T, env *apitest.Env, token string, f url.Values) []map[string]any {
	t.Helper()
	filter := map[string]any{}
	for k := range f {
		v := f.Get(k)
		if k == "decision" {
			v = strings.ToUpper(v)
		}
		filter[k] = v
	}
	var out struct {
		AuditEntries struct {
			Nodes    []map[string]any `json:"nodes"`
			PageInfo map[string]any   `json:"pageInfo"`
		} `json:"auditEntries"`
	}
	res := env.GraphQL(token, `query($f: AuditFilter) { auditEntries(filter: $f, limit: 1000) { nodes { id actor { id kind handle displayName }
		action decision reason resourceKind resourceId count firstAt lastAt } pageInfo { hasNextPage } } }`, map[string]any{"f": filter}, &out)
	if len(res.Errors) > 0 {
		t.Fatalf("GraphQL filter %v: %+v", f, res.Errors)
	}
	return out.AuditEntries.Nodes
}
