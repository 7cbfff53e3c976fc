package authz_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/admin"
	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/identity"
)

// TestAuditEntries_OwnersReadTheLog: an owner reads the audit log on both
// faces, filtered by actor, action, decision and time, page by page; Sam's
// two refused grants are one entry counting two; people and agents are
// refused; bad filters and cursors are validation errors; the read is
// audited itself.
func TestAuditEntries_OwnersReadTheLog(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	robin := env.World.Token("robin")
	grant := map[string]any{"subject_id": env.World.ID("writer"), "subject_kind": "principal", "target_kind": "channel",
		"target_id": env.World.Channel("Support/Allgemein").ID, "level": "read"}
	env.MustREST(t, http.MethodPost, "/api/v1/grants", robin, grant, http.StatusCreated)
	for range 2 {
		apitest.WantProblem(t, "sam grants", env.REST(http.MethodPost, "/api/v1/grants", env.World.Token("sam"), grant), http.StatusForbidden, "forbidden", "level_insufficient")
	}
	list := func(query url.Values) []map[string]any {
		t.Helper()
		out := env.MustREST(t, http.MethodGet, "/api/v1/audit?"+query.Encode(), robin, nil, http.StatusOK)
		var entries []map[string]any
		for _, e := range out["nodes"].([]any) {
			entries = append(entries, e.(map[string]any))
		}
		return entries
	}
	checkWireAuditFilters(t, env, list)
	checkWireAuditPages(t, env, robin)
	// GraphQL answers the same entries.
	var gql struct {
		AuditEntries struct {
			Nodes []struct {
				Decision string
				Count    int
				Actor    struct{ Handle string }
			}
		} `json:"auditEntries"`
	}
	if res := env.GraphQL(robin, `{ auditEntries(filter: {action: "grant.create", decision: DENY}) { nodes { decision count actor { handle } } } }`, nil, &gql); len(res.Errors) > 0 ||
		len(gql.AuditEntries.Nodes) != 1 || gql.AuditEntries.Nodes[0].Count != 2 || gql.AuditEntries.Nodes[0].Actor.Handle != "sam" {
		t.Fatalf("over GraphQL: %+v %+v", res.Errors, gql)
	}
	// Owners only.
	apitest.WantProblem(t, "alex reads", env.REST(http.MethodGet, "/api/v1/audit", env.World.Token("alex"), nil), http.StatusForbidden, "forbidden", "level_insufficient")
	apitest.WantProblem(t, "lotse reads", env.REST(http.MethodGet, "/api/v1/audit", env.World.Token("lotse"), nil), http.StatusForbidden, "forbidden", "subject_kind_not_allowed")
	// Bad input.
	for _, q := range []string{"decision=maybe", "limit=0", "limit=1001", "after=nope", "action=no.such.action", "actor=alex",
		"since=2026-12-02T00:00:00Z&until=2026-12-01T00:00:00Z"} {
		apitest.WantProblem(t, q, env.REST(http.MethodGet, "/api/v1/audit?"+q, robin, nil), http.StatusBadRequest, "validation_failed", "")
	}
	// Reading the log is audited: robin's reads are there.
	if reads := list(url.Values{"action": {"audit.list"}}); len(reads) < 5 || reads[0]["decision"] != "allow" {
		t.Fatalf("audited reads: %d", len(reads))
	}
}

// auditQuery reads the audit log over REST with a query and answers its
// entries; TestAuditEntries_OwnersReadTheLog reads as robin.
type auditQuery func(query url.Values) []map[string]any

// checkWireAuditFilters checks the REST filters on what
// TestAuditEntries_OwnersReadTheLog set up: sam's two refused grants are
// one deny entry counting two, robin's grant one allow entry, and since
// an hour ahead or until an hour ago select nothing.
func checkWireAuditFilters(t *testing.T, env *apitest.Env, list auditQuery) {
	t.Helper()
	denied := list(url.Values{"action": {"grant.create"}, "decision": {"deny"}})
	if len(denied) != 1 || denied[0]["count"] != float64(2) || denied[0]["reason"] != "level_insufficient" ||
		denied[0]["actor"].(map[string]any)["handle"] != "sam" || denied[0]["resource_kind"] != "instance" && denied[0]["resource_kind"] != "channel" {
		t.Fatalf("sam's refusals: %+v", denied)
	}
	allowed := list(url.Values{"action": {"grant.create"}, "actor": {env.World.ID("robin")}})
	if len(allowed) != 1 || allowed[0]["decision"] != "allow" || allowed[0]["count"] != float64(1) {
		t.Fatalf("robin's grant: %+v", allowed)
	}
	if future := list(url.Values{"action": {"grant.create"}, "since": {env.Clock.Now().Add(time.Hour).UTC().Format(time.RFC3339)}}); len(future) != 0 {
		t.Fatalf("entries since an hour ahead: %+v", future)
	}
	if past := list(url.Values{"action": {"grant.create"}, "until": {env.Clock.Now().Add(-time.Hour).UTC().Format(time.RFC3339)}}); len(past) != 0 {
		t.Fatalf("entries until an hour ago: %+v", past)
	}
}

// checkWireAuditPages reads the two grant.create entries over REST a page
// of one at a time: the first page says more follow, the second, behind
// its end_cursor, is another entry and the last.
func checkWireAuditPages(t *testing.T, env *apitest.Env, robin string) {
	t.Helper()
	// Page by page: the two grant.create entries, one at a time.
	first := env.MustREST(t, http.MethodGet, "/api/v1/audit?action=grant.create&limit=1", robin, nil, http.StatusOK)
	info := first["page_info"].(map[string]any)
	if len(first["nodes"].([]any)) != 1 || info["has_next_page"] != true {
		t.Fatalf("first page: %+v", first)
	}
	second := env.MustREST(t, http.MethodGet, "/api/v1/audit?action=grant.create&limit=1&after="+url.QueryEscape(info["end_cursor"].(string)), robin, nil, http.StatusOK)
	if n := second["nodes"].([]any); len(n) != 1 || n[0].(map[string]any)["id"] == first["nodes"].([]any)[0].(map[string]any)["id"] ||
		second["page_info"].(map[string]any)["has_next_page"] != false {
		t.Fatalf("second page: %+v", second)
	}
}

// TestAuditEntries_LocalOperatorIsAnActor: what the command line does
// (bothy admin, the seed of bothy dev) is audited under the local
// operator, which is no stored principal; an unfiltered read of the log
// answers it on both faces as the actor "operator" instead of failing.
func TestAuditEntries_LocalOperatorIsAnActor(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	if _, err := env.Server.Admin.CreatePrincipal(t.Context(), admin.Operator, admin.PrincipalInput{Kind: identity.KindUser,
		Handle: "dana", DisplayName: "Dana", Email: "dana@example.com"}); err != nil {
		t.Fatal(err)
	}
	robin := env.World.Token("robin")
	var found bool
	eachAuditActor(t, env, robin, func(a map[string]any) {
		if a["id"] == admin.Operator.ID {
			found = found || (a["handle"] == "operator" && a["kind"] == "user" && a["display_name"] == "Operator")
		}
	})
	if !found {
		t.Fatal("the operator's entry is not in the unfiltered log")
	}
	var gq struct {
		AuditEntries struct {
			Edges []struct {
				Node struct {
					Actor struct{ ID, Handle string } `json:"actor"`
				} `json:"node"`
			} `json:"edges"`
		} `json:"auditEntries"`
	}
	res := env.GraphQL(robin, `{ auditEntries(limit: 1000, filter: {actor: "`+admin.Operator.ID+`"}) { edges { node { actor { id handle } } } } }`, nil, &gq)
	if len(res.Errors) > 0 || len(gq.AuditEntries.Edges) == 0 || gq.AuditEntries.Edges[0].Node.Actor.Handle != "operator" {
		t.Fatalf("GraphQL: %+v %+v", res.Errors, gq)
	}
}

// TestAuditEntries_RemovedActorsStillRead: an owner removes a principal
// at the database (only one that has no messages, runs or grants can go:
// its tokens and memberships go with it, its audit entries stay, since
// the audit log keeps what happened). Its entries still read on both
// faces, unfiltered and filtered by its id, with an actor that says it
// was deleted, instead of a 500 (graph.principalRef: identity: not
// found).
func TestAuditEntries_RemovedActorsStillRead(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	made, err := env.Server.Admin.CreatePrincipal(t.Context(), admin.Operator, admin.PrincipalInput{Kind: identity.KindAgent,
		Handle: "scout", DisplayName: "Scout"})
	if err != nil {
		t.Fatal(err)
	}
	scout := made.Principal.ID
	apitest.WantProblem(t, "scout reads the log", env.REST(http.MethodGet, "/api/v1/audit", made.Token.Token, nil),
		http.StatusForbidden, "forbidden", "subject_kind_not_allowed")
	apitest.WantProblem(t, "sam reads the log", env.REST(http.MethodGet, "/api/v1/audit", env.World.Token("sam"), nil),
		http.StatusForbidden, "forbidden", "level_insufficient")
	env.Exec(`DELETE FROM principals WHERE id = $1`, scout)
	// A row whose status says deleted still says who it was.
	env.Exec(`UPDATE principals SET status = 'deleted' WHERE id = $1`, env.World.ID("sam"))

	robin := env.World.Token("robin")
	var seen bool
	eachAuditActor(t, env, robin, func(a map[string]any) {
		if a["id"] == scout {
			wantDeletedActor(t, "unfiltered", scout, a)
			seen = true
		}
	})
	if !seen {
		t.Fatal("the removed actor's entry is not in the unfiltered log")
	}
	own := env.MustREST(t, http.MethodGet, "/api/v1/audit?actor="+scout, robin, nil, http.StatusOK)["nodes"].([]any)
	if len(own) != 1 || own[0].(map[string]any)["reason"] != "subject_kind_not_allowed" {
		t.Fatalf("filtered by the removed actor: %+v", own)
	}
	wantDeletedActor(t, "filtered", scout, own[0].(map[string]any)["actor"].(map[string]any))
	var gq struct {
		AuditEntries struct {
			Nodes []struct {
				Actor struct{ ID, Kind, Handle, DisplayName string }
			}
		} `json:"auditEntries"`
	}
	res := env.GraphQL(robin, `{ auditEntries(limit: 1000, filter: {actor: "`+scout+`"}) { nodes { actor { id kind handle displayName } } } }`, nil, &gq)
	if len(res.Errors) > 0 || len(gq.AuditEntries.Nodes) != 1 || gq.AuditEntries.Nodes[0].Actor.Handle != "deleted" ||
		gq.AuditEntries.Nodes[0].Actor.DisplayName != "Deleted principal" {
		t.Fatalf("GraphQL: %+v %+v", res.Errors, gq)
	}
	if res := env.GraphQL(robin, `{ auditEntries(limit: 1000) { nodes { actor { id handle } } } }`, nil, nil); len(res.Errors) > 0 {
		t.Fatalf("GraphQL unfiltered: %+v", res.Errors)
	}
	sam := env.MustREST(t, http.MethodGet, "/api/v1/audit?action=audit.list&actor="+env.World.ID("sam"), robin, nil, http.StatusOK)["nodes"].([]any)
	if len(sam) != 1 || sam[0].(map[string]any)["actor"].(map[string]any)["handle"] != "sam" {
		t.Fatalf("the deleted sam: %+v", sam)
	}
}

// eachAuditActor reads the whole unfiltered audit log over REST as token,
// page by page of 1000, and gives visit the actor of every entry: the
// tests of actors that are no stored principal look for theirs in it.
func eachAuditActor(t *testing.T, env *apitest.Env, token string, visit func(actor map[string]any)) {
	t.Helper()
	for after := ""; ; {
		q := url.Values{"limit": {"1000"}}
		if after != "" {
			q.Set("after", after)
		}
		out := env.MustREST(t, http.MethodGet, "/api/v1/audit?"+q.Encode(), token, nil, http.StatusOK)
		for _, e := range out["nodes"].([]any) {
			visit(e.(map[string]any)["actor"].(map[string]any))
		}
		info := out["page_info"].(map[string]any)
		if info["has_next_page"] != true {
			break
		}
		after = info["end_cursor"].(string)
	}
}

// wantDeletedActor checks that actor, an entry's actor, is the removed
// principal scout answered as deleted, not a failure to find it.
func wantDeletedActor(t *testing.T, what, scout string, actor map[string]any) {
	t.Helper()
	if actor["id"] != scout || actor["handle"] != "deleted" || actor["display_name"] != "Deleted principal" {
		t.Fatalf("%s: the removed actor answers %+v", what, actor)
	}
}

// TestAuditEntries_RunTokenActsAsItsAgent: a run token's refused call is
// audited under the run's agent, which the log answers as itself.
func TestAuditEntries_RunTokenActsAsItsAgent(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	lotse := env.World.Token("lotse")
	msg := env.MustPost("alex", env.Main("Support/Allgemein"), "audit-rt", "@lotse is the printer back?")["id"]
	var run string
	if err := env.Pool.QueryRow(t.Context(), `SELECT id::text FROM runs WHERE triggering_message_id = $1`, msg).Scan(&run); err != nil {
		t.Fatalf("the mention started no run: %v", err)
	}
	env.MustREST(t, http.MethodPost, "/api/v1/runs/"+run+"/start", lotse, map[string]any{"holder": "proc-a"}, http.StatusOK)
	tok := env.MustREST(t, http.MethodPost, "/api/v1/runs/"+run+"/tokens", lotse, map[string]any{"holder": "proc-a"}, http.StatusCreated)["token"].(string)
	apitest.WantProblem(t, "the run token reads the log", env.REST(http.MethodGet, "/api/v1/audit", tok, nil),
		http.StatusForbidden, "forbidden", "run_token_scope")
	got := env.MustREST(t, http.MethodGet, "/api/v1/audit?action=audit.list&decision=deny", env.World.Token("robin"), nil, http.StatusOK)["nodes"].([]any)
	if len(got) != 1 || got[0].(map[string]any)["actor"].(map[string]any)["handle"] != "lotse" || got[0].(map[string]any)["reason"] != "run_token_scope" {
		t.Fatalf("the run token's refusal: %+v", got)
	}
}

// TestAuditEntries_ActorHandlesAreReserved: the handles the audit log
// answers for actors that are no stored principal (the local operator,
// a removed principal) cannot be taken, so an actor "operator" or
// "deleted" in the log is never a person, agent or app of that name.
func TestAuditEntries_ActorHandlesAreReserved(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	for _, h := range []string{"operator", "deleted"} {
		apitest.WantProblem(t, h, env.REST(http.MethodPost, "/api/v1/principals", env.World.Token("robin"),
			map[string]any{"kind": "user", "handle": h, "display_name": "Sam", "email": h + "@example.com"}), http.StatusConflict, "conflict", "handle_taken")
	}
}
