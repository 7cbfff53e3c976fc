package server_test

import (
	"bytes"
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/platform/ids"
)

// TestNotFoundEquality checks that a resource the caller cannot read answers
// exactly like a resource that does not exist
// (docs/design/rights.md#not-found-or-forbidden): the same
// status, body (but for correlation_id and instance) and headers (but for
// Correlation-Id, Date, Content-Length and the remaining count of
// RateLimit) in REST, and the same errors, data, extensions and headers in
// GraphQL; a malformed id answers the same.
func TestNotFoundEquality(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	hiddenThread := env.Main("Marketing/Kampagnen")
	hiddenChannel := env.World.Channel("Marketing/Kampagnen").ID
	hiddenMessage, _ := env.MustPost("sam", hiddenThread, "nf-campaign", "Campaign plan for the spring")["id"].(string)
	if hiddenMessage == "" {
		t.Fatal("sam's message has no id")
	}
	postBody := map[string]any{"client_msg_id": "nf-probe", "content_md": "Can anybody read this?"}
	restCases := []struct {
		name, method, pattern, hidden string
		body                          any
	}{
		{"getThread", http.MethodGet, "/api/v1/threads/%s", hiddenThread, nil},
		{"getMessage", http.MethodGet, "/api/v1/messages/%s", hiddenMessage, nil},
		{"getChannel", http.MethodGet, "/api/v1/channels/%s", hiddenChannel, nil},
		{"listThreadMessages", http.MethodGet, "/api/v1/threads/%s/messages", hiddenThread, nil},
		{"createMessage", http.MethodPost, "/api/v1/threads/%s/messages", hiddenThread, postBody},
	}
	gqlCases := []struct {
		name, query, hidden string
	}{
		{"thread", `query($id: ID!) { thread(id: $id) { id kind } }`, hiddenThread},
		{"message", `query($id: ID!) { message(id: $id) { id contentMd } }`, hiddenMessage},
		{"channel", `query($id: ID!) { channel(id: $id) { id name } }`, hiddenChannel},
		{"createMessage", `mutation($id: ID!) { createMessage(threadId: $id, input: {clientMsgId: "nf-gql", contentMd: "Hello?"}) { replayed message { id } } }`, hiddenThread},
	}
	messagesBefore := env.Count(`SELECT count(*) FROM messages WHERE thread_id = $1`, hiddenThread)
	for _, who := range []string{"lotse", "writer"} {
		tok := env.World.Token(who)
		for _, c := range restCases {
			t.Run(who+"/rest/"+c.name, func(t *testing.T) {
				wantRESTNotFoundSame(t, env, tok, c.method, c.pattern, c.hidden, c.body)
			})
		}
		for _, c := range gqlCases {
			t.Run(who+"/graphql/"+c.name, func(t *testing.T) {
				wantGraphQLNotFoundSame(t, env, tok, c.query, c.hidden)
			})
		}
	}
	if n := env.Count(`SELECT count(*) FROM messages WHERE thread_id = $1`, hiddenThread); n != messagesBefore {
		t.Fatalf("the hidden thread has %d messages after the refused posts, want %d", n, messagesBefore)
	}
	// The hidden things exist and are readable for sam, so the 404s above
	// came from missing rights, not from missing data.
	for _, path := range []string{"/api/v1/threads/" + hiddenThread, "/api/v1/messages/" + hiddenMessage, "/api/v1/channels/" + hiddenChannel} {
		env.MustREST(t, http.MethodGet, path, env.World.Token("sam"), nil, http.StatusOK)
	}
}

// wantRESTNotFoundSame checks that the REST call method pattern (its %s
// the id) answers the hidden resource with a bare 404 not_found, and an
// unknown and a malformed id exactly alike: status, comparable body and
// comparable headers.
func wantRESTNotFoundSame(t *testing.T, env *apitest.Env, tok, method, pattern, hidden string, body any) {
	t.Helper()
	hiddenRes := env.REST(method, strings.Replace(pattern, "%s", hidden, 1), tok, body)
	if hiddenRes.Status != http.StatusNotFound {
		t.Fatalf("hidden resource: %d %s, want 404", hiddenRes.Status, hiddenRes.Body)
	}
	p := hiddenRes.Problem(t)
	if p.Code != "not_found" || p.Status != 404 || p.Reason != "" {
		t.Fatalf("hidden resource problem %+v, want bare not_found", p)
	}
	for _, other := range []string{ids.New(), "not-a-uuid"} {
		r := env.REST(method, strings.Replace(pattern, "%s", other, 1), tok, body)
		if r.Status != hiddenRes.Status {
			t.Errorf("id %s: status %d, hidden %d", other, r.Status, hiddenRes.Status)
		}
		if got, want := apitest.ComparableProblem(t, r.Body), apitest.ComparableProblem(t, hiddenRes.Body); !reflect.DeepEqual(got, want) {
			t.Errorf("id %s: body %v, hidden %v", other, got, want)
		}
		if got, want := apitest.ComparableHeader(r.Header), apitest.ComparableHeader(hiddenRes.Header); !reflect.DeepEqual(got, want) {
			t.Errorf("id %s: headers %v, hidden %v", other, got, want)
		}
	}
}

// wantGraphQLNotFoundSame checks that query (with the id in $id) answers
// the hidden resource with one bare not_found, and an unknown and a
// malformed id exactly alike: status, errors, data, extensions and
// comparable headers.
func wantGraphQLNotFoundSame(t *testing.T, env *apitest.Env, tok, query, hidden string) {
	t.Helper()
	hiddenRes := env.GraphQL(tok, query, map[string]any{"id": hidden}, nil)
	if len(hiddenRes.Errors) != 1 || hiddenRes.Errors[0].Extensions.Code != "not_found" || hiddenRes.Errors[0].Extensions.Reason != "" {
		t.Fatalf("hidden resource: errors %+v, want one bare not_found", hiddenRes.Errors)
	}
	for _, other := range []string{ids.New(), "not-a-uuid"} {
		r := env.GraphQL(tok, query, map[string]any{"id": other}, nil)
		if r.Status != hiddenRes.Status {
			t.Errorf("id %s: status %d, hidden %d", other, r.Status, hiddenRes.Status)
		}
		if !reflect.DeepEqual(r.Errors, hiddenRes.Errors) {
			t.Errorf("id %s: errors %+v, hidden %+v", other, r.Errors, hiddenRes.Errors)
		}
		if !bytes.Equal(r.Data, hiddenRes.Data) {
			t.Errorf("id %s: data %s, hidden %s", other, r.Data, hiddenRes.Data)
		}
		if !reflect.DeepEqual(r.Extensions, hiddenRes.Extensions) {
			t.Errorf("id %s: extensions %+v, hidden %+v", other, r.Extensions, hiddenRes.Extensions)
		}
		if got, want := apitest.ComparableHeader(r.Header), apitest.ComparableHeader(hiddenRes.Header); !reflect.DeepEqual(got, want) {
			t.Errorf("id %s: headers %v, hidden %v", other, got, want)
		}
	}
}

// TestForbiddenSameOnBothFaces: a refusal answers the same problem on
// REST (status, code, reason in problem+json) and GraphQL (extensions), and
// both faces are decided and audited by the same function: their denials
// aggregate into one audit row. A read without rights is a 404; an archived
// channel answers channel_read_only. The rules and the audit themselves are
// tested in internal/authz (TestForbiddenReasonsAndAudit).
func TestForbiddenSameOnBothFaces(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	writerID := env.World.ID("writer")
	eskalation := env.Main("Support/Eskalation")
	allgemein := env.Main("Support/Allgemein")
	countIn := func(thread string) int {
		return env.Count(`SELECT count(*) FROM messages WHERE thread_id = $1`, thread)
	}
	env.CreateGrant(t, map[string]any{"subject_id": writerID, "subject_kind": "principal",
		"target_kind": "channel", "target_id": env.World.Channel("Support/Eskalation").ID, "level": "read"})

	before := countIn(eskalation)
	apitest.WantProblem(t, "writer posts with read", env.Post("writer", eskalation, "deny-1", "Let me in"), 403, "forbidden", "level_insufficient")
	levelRow := authz.AuditRow{ActorID: writerID, Action: "message.create", Decision: "deny", Reason: "level_insufficient", ResourceKind: "thread", Count: 1}
	env.WantAudit("writer", []authz.AuditRow{levelRow})
	g := env.GraphQL(env.World.Token("writer"), `mutation($id: ID!) { createMessage(threadId: $id, input: {clientMsgId: "deny-gql", contentMd: "Let me in"}) { replayed } }`,
		map[string]any{"id": eskalation}, nil)
	if len(g.Errors) != 1 || g.Errors[0].Extensions.Code != "forbidden" || g.Errors[0].Extensions.Reason != "level_insufficient" || g.Errors[0].Extensions.Status != 403 {
		t.Fatalf("GraphQL post with read: %+v", g.Errors)
	}
	levelRow.Count = 2
	env.WantAudit("writer", []authz.AuditRow{levelRow})
	if n := countIn(eskalation); n != before {
		t.Fatalf("refused posts stored messages: %d, want %d", n, before)
	}

	// A read without rights is a 404 and audited as no_grant.
	apitest.WantProblem(t, "writer reads Marketing", env.REST(http.MethodGet, "/api/v1/threads/"+env.Main("Marketing/Kampagnen"), env.World.Token("writer"), nil), 404, "not_found", "")
	noGrant := authz.AuditRow{ActorID: writerID, Action: "thread.read", Decision: "deny", Reason: "no_grant", ResourceKind: "thread", Count: 1}
	env.WantAudit("writer", []authz.AuditRow{levelRow, noGrant})

	// Archived channel: channel_read_only on the wire; reading still works.
	ch := env.MustREST(t, http.MethodPost, "/api/v1/channels/"+env.World.Channel("Support/Allgemein").ID+"/archive", env.World.Token("robin"), nil, http.StatusOK)
	if ch["archived"] != true {
		t.Fatalf("archive answer %v", ch)
	}
	before = countIn(allgemein)
	apitest.WantProblem(t, "alex posts into archived Allgemein", env.Post("alex", allgemein, "arch-1", "Anyone here?"), 403, "channel_read_only", "channel_archived")
	if n := countIn(allgemein); n != before {
		t.Fatalf("posts into the archived channel stored messages: %d, want %d", n, before)
	}
	env.MustREST(t, http.MethodGet, "/api/v1/threads/"+allgemein+"/messages", env.World.Token("alex"), nil, http.StatusOK)
}

// TestAdminActionsOwnerOnly checks that only owners administer
// (docs/design/model.md#owners, docs/design/rights.md#decision-order): a
// non-owner gets 403 level_insufficient where it can
// read and 404 where it cannot; the owner's changes take effect and are
// validated.
func TestAdminActionsOwnerOnly(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	allg := env.World.Channel("Support/Allgemein").ID
	kamp := env.World.Channel("Marketing/Kampagnen").ID
	var samMarketingGrant, writerAllgGrant string
	if err := env.Pool.QueryRow(context.Background(), `SELECT id::text FROM grants WHERE subject_principal_id = $1 AND target_space_id = $2`,
		env.World.ID("sam"), env.World.Spaces["Marketing"]).Scan(&samMarketingGrant); err != nil {
		t.Fatalf("sam's Marketing grant: %v", err)
	}
	if err := env.Pool.QueryRow(context.Background(), `SELECT id::text FROM grants WHERE subject_principal_id = $1 AND target_channel_id = $2`,
		env.World.ID("writer"), allg).Scan(&writerAllgGrant); err != nil {
		t.Fatalf("writer's Allgemein grant: %v", err)
	}
	grantOn := func(channel string) map[string]any {
		return map[string]any{"subject_id": env.World.ID("sam"), "subject_kind": "principal", "target_kind": "channel", "target_id": channel, "level": "read"}
	}
	type call struct {
		name, method, path string
		body               any
	}
	calls := func(channel, space, grant string) []call {
		return []call{
			{"createGrant", http.MethodPost, "/api/v1/grants", grantOn(channel)},
			{"revokeGrant", http.MethodDelete, "/api/v1/grants/" + grant, nil},
			{"setChannelOperator", http.MethodPut, "/api/v1/channels/" + channel + "/operator", map[string]any{"mode": "agent", "agent_id": env.World.ID("texter")}},
			{"updateChannelSwitches", http.MethodPatch, "/api/v1/channels/" + channel + "/switches", map[string]any{"free_response": false}},
			{"archiveChannel", http.MethodPost, "/api/v1/channels/" + channel + "/archive", nil},
			{"archiveSpace", http.MethodPost, "/api/v1/spaces/" + space + "/archive", nil},
		}
	}
	grantsBefore := env.Count(`SELECT count(*) FROM grants`)
	alex := env.World.Token("alex")
	for _, c := range calls(allg, env.World.Spaces["Support"], writerAllgGrant) {
		t.Run("alex readable/"+c.name, func(t *testing.T) {
			apitest.WantProblem(t, c.name, env.REST(c.method, c.path, alex, c.body), 403, "forbidden", "level_insufficient")
		})
	}
	for _, c := range calls(kamp, env.World.Spaces["Marketing"], samMarketingGrant) {
		t.Run("alex hidden/"+c.name, func(t *testing.T) {
			apitest.WantProblem(t, c.name, env.REST(c.method, c.path, alex, c.body), 404, "not_found", "")
		})
	}
	gq := env.GraphQL(alex, `mutation($id: ID!) { archiveChannel(id: $id) { id archived } }`, map[string]any{"id": allg}, nil)
	if len(gq.Errors) != 1 || gq.Errors[0].Extensions.Code != "forbidden" || gq.Errors[0].Extensions.Reason != "level_insufficient" {
		t.Fatalf("GraphQL archiveChannel by alex: %+v", gq.Errors)
	}
	gq = env.GraphQL(alex, `mutation($id: ID!) { archiveChannel(id: $id) { id archived } }`, map[string]any{"id": kamp}, nil)
	if len(gq.Errors) != 1 || gq.Errors[0].Extensions.Code != "not_found" || gq.Errors[0].Extensions.Reason != "" {
		t.Fatalf("GraphQL archiveChannel of a hidden channel by alex: %+v", gq.Errors)
	}
	wantNothingChangedByNonOwner(t, env, grantsBefore)
	wantOwnerAdministers(t, env, grantOn(env.World.Channel("Support/Eskalation").ID))
}

// wantNothingChangedByNonOwner checks that the refused administration of
// TestAdminActionsOwnerOnly changed nothing: no grant added or revoked, no
// channel's archive, operator or switches, no space archived.
func wantNothingChangedByNonOwner(t *testing.T, env *apitest.Env, grantsBefore int) {
	t.Helper()
	if n := env.Count(`SELECT count(*) FROM grants`); n != grantsBefore {
		t.Fatalf("grants: %d, want %d", n, grantsBefore)
	}
	if n := env.Count(`SELECT count(*) FROM grants WHERE revoked_at IS NOT NULL`); n != 0 {
		t.Fatalf("%d grants revoked by a non-owner", n)
	}
	for _, key := range []string{"Support/Allgemein", "Marketing/Kampagnen"} {
		got := env.MustREST(t, http.MethodGet, "/api/v1/channels/"+env.World.Channel(key).ID, env.World.Token("robin"), nil, http.StatusOK)
		if got["archived"] != false || got["operator_mode"] != "inherit" {
			t.Fatalf("%s changed by a non-owner: %v", key, got)
		}
		if key == "Support/Allgemein" {
			if sw, _ := got["switches"].(map[string]any); sw["free_response"] != true {
				t.Fatalf("switches of %s changed by a non-owner: %v", key, got["switches"])
			}
		}
	}
	if n := env.Count(`SELECT count(*) FROM spaces WHERE archived_at IS NOT NULL`); n != 0 {
		t.Fatalf("%d spaces archived by a non-owner", n)
	}
}

// wantOwnerAdministers checks that the owner's administration takes effect
// and is validated: grant (the body of sam's read grant on
// Support/Eskalation) and its revocation,
// the operator and switches of Support/Allgemein, a refused patch and a
// refused agent grant, archiving a channel and a space.
func wantOwnerAdministers(t *testing.T, env *apitest.Env, grant map[string]any) {
	t.Helper()
	allg := env.World.Channel("Support/Allgemein").ID
	g := env.CreateGrant(t, grant)
	wantMembers(t, "grant answer", g, map[string]any{"subject_id": env.World.ID("sam"), "subject_kind": "principal", "target_kind": "channel",
		"target_id": env.World.Channel("Support/Eskalation").ID, "level": "read"}, "id", "created_at")
	if _, ok := g["revoked_at"]; ok {
		t.Fatalf("a new grant has revoked_at: %v", g)
	}
	rv := env.MustREST(t, http.MethodDelete, "/api/v1/grants/"+g["id"].(string), env.World.Token("robin"), nil, http.StatusOK)
	wantMembers(t, "revoke answer", rv, map[string]any{"id": g["id"]}, "revoked_at")
	op := env.MustREST(t, http.MethodPut, "/api/v1/channels/"+allg+"/operator", env.World.Token("robin"),
		map[string]any{"mode": "agent", "agent_id": env.World.ID("texter")}, http.StatusOK)
	wantMembers(t, "operator answer", op, map[string]any{"operator_mode": "agent", "operator_agent_id": env.World.ID("texter"),
		"effective_operator_id": env.World.ID("texter")})
	sw := env.MustREST(t, http.MethodPatch, "/api/v1/channels/"+allg+"/switches", env.World.Token("robin"),
		map[string]any{"free_response": false, "history_backfill_limit": 500}, http.StatusOK)
	wantSwitches := map[string]any{"free_response": false, "allow_mentioned_agents": true, "auto_thread": true, "history_backfill_limit": float64(500)}
	if !reflect.DeepEqual(sw["switches"], wantSwitches) {
		t.Fatalf("switches after the patch: %v, want %v", sw["switches"], wantSwitches)
	}
	p := apitest.WantProblem(t, "history_backfill_limit above the maximum",
		env.REST(http.MethodPatch, "/api/v1/channels/"+allg+"/switches", env.World.Token("robin"), map[string]any{"history_backfill_limit": 501}),
		400, "validation_failed", "")
	if len(p.Errors) != 1 || p.Errors[0].Pointer != "/history_backfill_limit" {
		t.Fatalf("field errors %+v, want one at /history_backfill_limit", p.Errors)
	}
	after := env.MustREST(t, http.MethodGet, "/api/v1/channels/"+allg, env.World.Token("robin"), nil, http.StatusOK)
	if !reflect.DeepEqual(after["switches"], wantSwitches) {
		t.Fatalf("a refused patch changed the switches: %v", after["switches"])
	}
	agentGrants := env.Count(`SELECT count(*) FROM grants WHERE subject_principal_id = $1`, env.World.ID("lotse"))
	p = apitest.WantProblem(t, "agent grant with trigger",
		env.REST(http.MethodPost, "/api/v1/grants", env.World.Token("robin"), map[string]any{"subject_id": env.World.ID("lotse"),
			"subject_kind": "principal", "target_kind": "channel", "target_id": allg, "level": "trigger"}),
		400, "validation_failed", "")
	if len(p.Errors) != 1 || p.Errors[0].Pointer != "/level" {
		t.Fatalf("field errors %+v, want one at /level", p.Errors)
	}
	if n := env.Count(`SELECT count(*) FROM grants WHERE subject_principal_id = $1`, env.World.ID("lotse")); n != agentGrants {
		t.Fatalf("a refused agent grant was stored: %d grants, want %d", n, agentGrants)
	}
	ar := env.MustREST(t, http.MethodPost, "/api/v1/channels/"+env.World.Channel("Support/Reports").ID+"/archive", env.World.Token("robin"), nil, http.StatusOK)
	wantMembers(t, "archive answer", ar, map[string]any{"archived": true})
	sp := env.MustREST(t, http.MethodPost, "/api/v1/spaces/"+env.World.Spaces["Marketing"]+"/archive", env.World.Token("robin"), nil, http.StatusOK)
	wantMembers(t, "space archive answer", sp, map[string]any{"archived": true})
}

// TestUnknownMemberAndEnum checks that a body with an unknown member or a
// bad enum value is refused with 400 validation_failed naming the member,
// and that nothing is stored.
func TestUnknownMemberAndEnum(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	main := env.Main("Support/Allgemein")
	chID := env.World.Channel("Support/Allgemein").ID
	count := func() int { return env.Count(`SELECT count(*) FROM messages WHERE thread_id = $1`, main) }
	threads := func() int { return env.Count(`SELECT count(*) FROM threads WHERE channel_id = $1`, chID) }
	before, threadsBefore := count(), threads()
	cases := []struct {
		name, path    string
		body          map[string]any
		pointer, code string
	}{
		{"unknown member", "/api/v1/threads/" + main + "/messages",
			map[string]any{"client_msg_id": "x", "content_md": "hi", "colour": "red"}, "/colour", "unknown_member"},
		{"bad enum", "/api/v1/threads/" + main + "/messages",
			map[string]any{"client_msg_id": "y", "content_md": "hi", "kind": "shout"}, "/kind", "invalid_enum"},
		{"enum in upper case", "/api/v1/threads/" + main + "/messages",
			map[string]any{"client_msg_id": "z", "content_md": "hi", "kind": "TEXT"}, "/kind", "invalid_enum"},
		{"nested unknown member", "/api/v1/channels/" + chID + "/threads",
			map[string]any{"first_message": map[string]any{"client_msg_id": "w", "content_md": "hi", "colour": "red"}}, "/first_message/colour", "unknown_member"},
		{"unknown member of a move", "/api/v1/threads/" + main + "/move",
			map[string]any{"channel_id": env.World.Channel("Support/Eskalation").ID, "extra": 1}, "/extra", "unknown_member"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := env.REST(http.MethodPost, c.path, env.World.Token("alex"), c.body)
			p := apitest.WantProblem(t, c.name, r, 400, "validation_failed", "")
			found := false
			for _, fe := range p.Errors {
				if fe.Pointer == c.pointer && fe.Code == c.code {
					found = true
				}
			}
			if !found {
				t.Fatalf("errors %+v lack {pointer %s, code %s}", p.Errors, c.pointer, c.code)
			}
		})
	}
	if n := count(); n != before {
		t.Fatalf("refused bodies stored messages: %d, want %d", n, before)
	}
	if n := threads(); n != threadsBefore {
		t.Fatalf("refused bodies stored threads: %d, want %d", n, threadsBefore)
	}
	// A parameter is named by its place and name (docs/clients.md#problems),
	// whether the shim or a module found the fault; a body member by its
	// JSON pointer, also when a module names it by its bare name.
	params := []struct {
		name, method, path string
		header             http.Header
		body               map[string]any
		pointer, code      string
	}{
		{"query integer", http.MethodGet, "/api/v1/threads/" + main + "/messages?limit=many", nil, nil, "query:limit", "invalid_type"},
		{"query range", http.MethodGet, "/api/v1/threads/" + main + "/messages?limit=0", nil, nil, "query:limit", "out_of_range"},
		{"query cursor", http.MethodGet, "/api/v1/events?after=yesterday", nil, nil, "query:after", "invalid_cursor"},
		{"header", http.MethodPost, "/api/v1/threads/" + main + "/messages", http.Header{"Bothy-Run-Holder": {"no spaces"}},
			map[string]any{"client_msg_id": "h", "content_md": "hi"}, "header:Bothy-Run-Holder", "invalid_format"},
	}
	for _, c := range params {
		t.Run(c.name, func(t *testing.T) {
			r := env.RESTWith(c.method, c.path, env.World.Token("alex"), c.body, c.header)
			p := apitest.WantProblem(t, c.name, r, 400, "validation_failed", "")
			if len(p.Errors) != 1 || p.Errors[0].Pointer != c.pointer || p.Errors[0].Code != c.code {
				t.Fatalf("errors %+v, want {pointer %s, code %s}", p.Errors, c.pointer, c.code)
			}
		})
	}
	// The same body without the faults is accepted (the refusals were about
	// the faults).
	env.MustPost("alex", main, "x", "hi")
}
