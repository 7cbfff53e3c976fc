package server_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/apitest"
)

// adminCall is one administration request of the REST face.
type adminCall struct {
	name, method, path string
	body               any
	// seen: alex can read the target (a channel or space of Support, or an
	// instance-level target); false: the target is hidden from alex (a
	// Marketing channel or space), so alex gets the 404 of the table.
	seen bool
	// agentsSee: Lotse and Feed Bot can read the target too (they have no
	// grant on the space Support, only on channels of it).
	agentsSee bool
}

// adminCalls lists every administration action once; each body is valid,
// so an owner succeeds. Fresh objects are made for the destructive ones.
func adminCalls(t *testing.T, env *apitest.Env) []adminCall {
	t.Helper()
	robin := env.World.Token("robin")
	mk := func(path string, body any) map[string]any {
		return env.MustREST(t, http.MethodPost, path, robin, body, http.StatusCreated)
	}
	group := mk("/api/v1/groups", map[string]any{"name": "Night shift"})["id"].(string)
	group2 := mk("/api/v1/groups", map[string]any{"name": "Day shift"})["id"].(string)
	tok := mk("/api/v1/principals/"+env.World.ID("sam")+"/tokens", map[string]any{"label": "laptop"})["id"].(string)
	support, marketing := env.World.Spaces["Support"], env.World.Spaces["Marketing"]
	allg, kamp := env.World.Channel("Support/Allgemein").ID, env.World.Channel("Marketing/Kampagnen").ID
	return []adminCall{
		{"createPrincipal", http.MethodPost, "/api/v1/principals", map[string]any{"kind": "user", "handle": "casey", "display_name": "Casey", "email": "casey@example.com"}, true, true},
		{"listPrincipals", http.MethodGet, "/api/v1/principals", nil, true, true},
		{"updatePrincipal", http.MethodPatch, "/api/v1/principals/" + env.World.ID("writer"), map[string]any{"display_name": "Writer Two"}, true, true},
		{"createGroup", http.MethodPost, "/api/v1/groups", map[string]any{"name": "Weekend"}, true, true},
		{"getGroup", http.MethodGet, "/api/v1/groups/" + group, nil, true, true},
		{"updateGroup", http.MethodPatch, "/api/v1/groups/" + group, map[string]any{"name": "Night crew"}, true, true},
		{"addGroupMember", http.MethodPost, "/api/v1/groups/" + group + "/members", map[string]any{"principal_id": env.World.ID("writer")}, true, true},
		{"removeGroupMember", http.MethodDelete, "/api/v1/groups/" + group + "/members/" + env.World.ID("writer"), nil, true, true},
		{"deleteGroup", http.MethodDelete, "/api/v1/groups/" + group2, nil, true, true},
		{"createSpace", http.MethodPost, "/api/v1/spaces", map[string]any{"name": "Operations"}, true, true},
		{"updateSpace/seen", http.MethodPatch, "/api/v1/spaces/" + support, map[string]any{"name": "Support Desk"}, true, false},
		{"updateSpace/hidden", http.MethodPatch, "/api/v1/spaces/" + marketing, map[string]any{"name": "Marketing Team"}, false, false},
		{"unarchiveSpace/seen", http.MethodPost, "/api/v1/spaces/" + support + "/unarchive", nil, true, false},
		{"unarchiveSpace/hidden", http.MethodPost, "/api/v1/spaces/" + marketing + "/unarchive", nil, false, false},
		{"createChannel/seen", http.MethodPost, "/api/v1/spaces/" + support + "/channels", map[string]any{"name": "Billing", "kind": "text"}, true, false},
		{"createChannel/hidden", http.MethodPost, "/api/v1/spaces/" + marketing + "/channels", map[string]any{"name": "Launch", "kind": "forum"}, false, false},
		{"updateChannel/seen", http.MethodPatch, "/api/v1/channels/" + allg, map[string]any{"name": "General"}, true, true},
		{"updateChannel/hidden", http.MethodPatch, "/api/v1/channels/" + kamp, map[string]any{"name": "Campaigns"}, false, false},
		{"unarchiveChannel/seen", http.MethodPost, "/api/v1/channels/" + allg + "/unarchive", nil, true, true},
		{"unarchiveChannel/hidden", http.MethodPost, "/api/v1/channels/" + kamp + "/unarchive", nil, false, false},
		// Sam's token: another person's, so alex may not touch it (404:
		// alex cannot see it); the owner may.
		{"revokeToken", http.MethodDelete, "/api/v1/tokens/" + tok, nil, false, false},
		{"listTokens", http.MethodGet, "/api/v1/principals/" + env.World.ID("sam") + "/tokens", nil, true, true},
		{"createToken", http.MethodPost, "/api/v1/principals/" + env.World.ID("sam") + "/tokens", map[string]any{"label": "phone"}, true, true},
	}
}

// adminOptions give the tests room for many administration calls in one
// minute of the fake clock (rl.admin allows 20 at once by default).
func adminOptions() apitest.Options {
	return apitest.Options{Config: map[string]string{"ratelimit.rl.admin.burst": "1000"}}
}

// TestAdmin: who may administer (every action's decisions), principals,
// and spaces and channels, on both faces.
func TestAdmin(t *testing.T) {
	t.Parallel()
	t.Run("Decisions", testAdminDecisions)
	t.Run("Principals", testAdminPrincipals)
	t.Run("SpacesAndChannels", testAdminSpacesAndChannels)
}

// testAdminDecisions runs every administration action as a person who can
// see the target (403 level_insufficient), a person who cannot (404), an
// agent and an app (403 subject_kind_not_allowed) and the owner (allowed),
// and checks that denials change nothing and every decision is audited.
func testAdminDecisions(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, adminOptions())
	calls := adminCalls(t, env)
	count := func() string {
		return strings.Join([]string{
			strconv.Itoa(env.Count(`SELECT count(*) FROM principals`)), strconv.Itoa(env.Count(`SELECT count(*) FROM tokens WHERE revoked_at IS NULL`)),
			strconv.Itoa(env.Count(`SELECT count(*) FROM groups WHERE deleted_at IS NULL`)), strconv.Itoa(env.Count(`SELECT count(*) FROM group_members`)),
			strconv.Itoa(env.Count(`SELECT count(*) FROM spaces`)), strconv.Itoa(env.Count(`SELECT count(*) FROM channels`)),
			strconv.Itoa(env.Count(`SELECT count(*) FROM principals WHERE display_name = 'Writer'`)),
			strconv.Itoa(env.Count(`SELECT count(*) FROM groups WHERE name = 'Night shift'`)),
			strconv.Itoa(env.Count(`SELECT count(*) FROM spaces WHERE name IN ('Support', 'Marketing')`)),
			strconv.Itoa(env.Count(`SELECT count(*) FROM channels WHERE name IN ('Allgemein', 'Kampagnen')`)),
		}, ",")
	}
	before := count()
	for _, c := range calls {
		runDeniedAdminCall(t, env, c)
	}
	if after := count(); after != before {
		t.Fatalf("denied administration changed the database: %s -> %s", before, after)
	}
	// Every denial is audited (aggregated per actor, action and reason).
	for _, who := range []string{"alex", "lotse", "feedbot"} {
		wantDenialsAudited(t, env, who)
	}
	wantOwnerAllowedAndAudited(t, env, calls)
}

// auditedAdminActions are the audit actions of the calls of adminCalls.
var auditedAdminActions = []string{"principal.create", "principal.list", "principal.update", "group.create", "group.read", "group.update",
	"group.member.add", "group.member.remove", "group.delete", "space.create", "space.update", "space.unarchive",
	"channel.create", "channel.update", "channel.unarchive", "token.revoke", "token.list", "token.create"}

// runDeniedAdminCall runs the call c as alex (a person: 403 where he sees
// the target, else 404) and as lotse and feedbot (an agent and an app: 403
// subject_kind_not_allowed where they see the target, else 404), one
// subtest each.
func runDeniedAdminCall(t *testing.T, env *apitest.Env, c adminCall) {
	t.Helper()
	t.Run("alex/"+c.name, func(t *testing.T) {
		r := env.REST(c.method, c.path, env.World.Token("alex"), c.body)
		if c.seen {
			apitest.WantProblem(t, c.name, r, 403, "forbidden", "level_insufficient")
		} else {
			apitest.WantProblem(t, c.name, r, 404, "not_found", "")
		}
	})
	for _, who := range []string{"lotse", "feedbot"} {
		t.Run(who+"/"+c.name, func(t *testing.T) {
			r := env.REST(c.method, c.path, env.World.Token(who), c.body)
			if c.agentsSee {
				apitest.WantProblem(t, c.name, r, 403, "forbidden", "subject_kind_not_allowed")
			} else {
				// The table's first rows: a target the agent or app
				// cannot read is 404 before anything else.
				apitest.WantProblem(t, c.name, r, 404, "not_found", "")
			}
		})
	}
}

// wantDenialsAudited checks that who has an audited denial of every
// administration action.
func wantDenialsAudited(t *testing.T, env *apitest.Env, who string) {
	t.Helper()
	rows := env.AuditRows(who)
	denied := map[string]bool{}
	for _, r := range rows {
		if r.Decision == "deny" {
			denied[r.Action] = true
		}
	}
	for _, a := range auditedAdminActions {
		if !denied[a] {
			t.Errorf("%s: no audited denial of %s (rows %+v)", who, a, rows)
		}
	}
}

// wantOwnerAllowedAndAudited runs every call as the owner robin, who
// succeeds with each, and checks that each allow is audited.
func wantOwnerAllowedAndAudited(t *testing.T, env *apitest.Env, calls []adminCall) {
	t.Helper()
	for _, c := range calls {
		r := env.REST(c.method, c.path, env.World.Token("robin"), c.body)
		if r.Status != http.StatusOK && r.Status != http.StatusCreated {
			t.Fatalf("robin %s: %d %s", c.name, r.Status, r.Body)
		}
	}
	allowed := map[string]int{}
	for _, r := range env.AuditRows("robin") {
		if r.Decision == "allow" {
			allowed[r.Action]++
		}
	}
	for _, a := range auditedAdminActions {
		if allowed[a] == 0 {
			t.Errorf("robin's %s is not audited (%v)", a, allowed)
		}
	}
}

// testAdminPrincipals covers createPrincipal (people, agents with their
// first token, handle rules), updatePrincipal (disable: 401 at once; the
// last owner's answer), and listPrincipals paging, on both faces.
func testAdminPrincipals(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, adminOptions())
	robin := env.World.Token("robin")

	agentID := wantPrincipalsCreated(t, env, robin)
	wantBadPrincipalsRefused(t, env, robin)
	wantDisableAndEnable(t, env, robin, agentID)

	// The last active owner can be neither demoted nor disabled, on either
	// face (the rule with stepping down is TestLastOwner in internal/admin).
	robinID := env.World.ID("robin")
	for _, body := range []map[string]any{{"is_owner": false}, {"status": "disabled"}} {
		apitest.WantProblem(t, "last owner", env.REST(http.MethodPatch, "/api/v1/principals/"+robinID, robin, body), 409, "conflict", "last_owner")
	}
	res := env.GraphQL(robin, `mutation($id: ID!) { updatePrincipal(id: $id, input: {status: DISABLED}) { id } }`, map[string]any{"id": robinID}, nil)
	if len(res.Errors) != 1 || res.Errors[0].Extensions.Code != "conflict" || res.Errors[0].Extensions.Reason != "last_owner" {
		t.Fatalf("GraphQL last owner: %+v", res.Errors)
	}

	wantPrincipalsPaged(t, env, robin)
}

// wantPrincipalsCreated creates a person (casey) and an agent (pilot) as
// robin and checks their answers: the agent's first token works and
// appears nowhere else. It returns the agent's id.
func wantPrincipalsCreated(t *testing.T, env *apitest.Env, robin string) string {
	t.Helper()
	// A person gets no token; an agent and an app get their first one.
	person := env.MustREST(t, http.MethodPost, "/api/v1/principals", robin,
		map[string]any{"kind": "user", "handle": "casey", "display_name": "Casey", "email": "casey@example.com"}, http.StatusCreated)
	if _, ok := person["token"]; ok {
		t.Fatalf("a person got a token: %v", person)
	}
	wantMembers(t, "person", person["principal"].(map[string]any),
		map[string]any{"handle": "casey", "kind": "user", "status": "active", "is_owner": false, "email": "casey@example.com"})
	agent := env.MustREST(t, http.MethodPost, "/api/v1/principals", robin,
		map[string]any{"kind": "agent", "handle": "pilot", "display_name": "Pilot"}, http.StatusCreated)
	agentTok, _ := agent["token"].(string)
	if !strings.HasPrefix(agentTok, "bothy_a_") {
		t.Fatalf("agent token %q", agentTok)
	}
	var viewer struct {
		Viewer struct{ Handle, Kind string }
	}
	if res := env.GraphQL(agentTok, `{ viewer { handle kind } }`, nil, &viewer); len(res.Errors) > 0 || viewer.Viewer.Handle != "pilot" || viewer.Viewer.Kind != "AGENT" {
		t.Fatalf("the agent's first token: %+v %+v", res.Errors, viewer)
	}
	// The secret appears once: never in lists, events, audit rows.
	if storedOutsideHash(env, agentTok) {
		t.Fatal("the agent's token is stored outside its hash")
	}
	agentID := agent["principal"].(map[string]any)["id"].(string)
	list := env.REST(http.MethodGet, "/api/v1/principals/"+agentID+"/tokens", robin, nil)
	if list.Status != 200 || bytes.Contains(list.Body, []byte(agentTok)) || bytes.Contains(list.Body, []byte("bothy_a_")) {
		t.Fatalf("listTokens: %d %s", list.Status, list.Body)
	}
	return agentID
}

// wantBadPrincipalsRefused checks that createPrincipal refuses bad input
// and stores nothing of it.
func wantBadPrincipalsRefused(t *testing.T, env *apitest.Env, robin string) {
	t.Helper()
	// Bad input: handle rule, taken handle, e-mail of an agent, owner app.
	apitest.WantProblem(t, "taken handle", env.REST(http.MethodPost, "/api/v1/principals", robin,
		map[string]any{"kind": "user", "handle": "alex", "display_name": "Alex Two"}), 409, "conflict", "handle_taken")
	for _, body := range []map[string]any{
		{"kind": "user", "handle": "Casey!", "display_name": "C"},
		{"kind": "agent", "handle": "bot2", "display_name": "Bot", "email": "bot@example.com"},
		{"kind": "app", "handle": "app2", "display_name": "App", "is_owner": true},
		{"kind": "user", "handle": "dana", "display_name": " padded"},
		{"kind": "robot", "handle": "dana", "display_name": "Dana"},
	} {
		apitest.WantProblem(t, "bad principal", env.REST(http.MethodPost, "/api/v1/principals", robin, body), 400, "validation_failed", "")
	}
	if env.Count(`SELECT count(*) FROM principals WHERE handle IN ('bot2', 'app2', 'dana')`) != 0 {
		t.Fatal("a refused principal was stored")
	}
}

// wantDisableAndEnable checks updatePrincipal on alex and on the agent
// agentID: disabled and enabled at once, bad changes refused.
func wantDisableAndEnable(t *testing.T, env *apitest.Env, robin, agentID string) {
	t.Helper()
	// Disabling Alex: his token answers 401 at once; enabling restores it.
	alex := env.World.Token("alex")
	env.MustREST(t, http.MethodPatch, "/api/v1/principals/"+env.World.ID("alex"), robin, map[string]any{"status": "disabled"}, 200)
	if r := env.REST(http.MethodGet, "/api/v1/me", alex, nil); r.Status != 401 {
		t.Fatalf("a disabled person's token: %d", r.Status)
	}
	got := env.MustREST(t, http.MethodPatch, "/api/v1/principals/"+env.World.ID("alex"), robin, map[string]any{"status": "active", "display_name": "Alex A."}, 200)
	if got["status"] != "active" || got["display_name"] != "Alex A." {
		t.Fatalf("updatePrincipal %v", got)
	}
	if r := env.REST(http.MethodGet, "/api/v1/me", alex, nil); r.Status != 200 {
		t.Fatalf("an enabled person's token: %d", r.Status)
	}
	apitest.WantProblem(t, "status pending", env.REST(http.MethodPatch, "/api/v1/principals/"+env.World.ID("alex"), robin, map[string]any{"status": "pending"}),
		400, "validation_failed", "")
	apitest.WantProblem(t, "owner agent", env.REST(http.MethodPatch, "/api/v1/principals/"+agentID, robin, map[string]any{"is_owner": true}),
		400, "validation_failed", "")
}

// wantPrincipalsPaged checks that listPrincipals pages in creation order
// on both faces, and refuses a bad cursor or limit.
func wantPrincipalsPaged(t *testing.T, env *apitest.Env, robin string) {
	t.Helper()
	var all []string
	after := ""
	for i := 0; i < 10; i++ {
		path := "/api/v1/principals?limit=3"
		if after != "" {
			path += "&after=" + after
		}
		page := env.MustREST(t, http.MethodGet, path, robin, nil, 200)
		for _, p := range page["principals"].([]any) {
			all = append(all, p.(map[string]any)["handle"].(string))
		}
		next, ok := page["next_after"].(string)
		if !ok {
			break
		}
		after = next
	}
	want := "robin,alex,sam,writer,lotse,texter,feedbot,casey,pilot"
	if strings.Join(all, ",") != want {
		t.Fatalf("principals %v, want %s", all, want)
	}
	var gq struct {
		Principals struct {
			Principals []struct{ Handle string }
			NextAfter  *string
		}
	}
	if res := env.GraphQL(robin, `{ principals(limit: 200) { principals { handle } nextAfter } }`, nil, &gq); len(res.Errors) > 0 ||
		len(gq.Principals.Principals) != 9 || gq.Principals.NextAfter != nil {
		t.Fatalf("GraphQL principals: %+v %+v", res.Errors, gq)
	}
	apitest.WantProblem(t, "bad cursor", env.REST(http.MethodGet, "/api/v1/principals?after=yesterday", robin, nil), 400, "validation_failed", "")
	apitest.WantProblem(t, "bad limit", env.REST(http.MethodGet, "/api/v1/principals?limit=0", robin, nil), 400, "validation_failed", "")
}

// TestAdminTokens covers the answers of createToken, listTokens and
// revokeToken on the wire: the secret once, never in lists or logs, the
// same 404 for somebody else's token and a missing one, no expires_at for
// ttl 0, 401 at once after revocation, the typed GraphQL answer. The token
// rules themselves are TestTokenRules in internal/admin.
func TestAdminTokens(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	opts := adminOptions()
	opts.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	env := apitest.Start(t, opts)
	alex, robin := env.World.Token("alex"), env.World.Token("robin")
	alexID := env.World.ID("alex")

	made := env.MustREST(t, http.MethodPost, "/api/v1/principals/"+alexID+"/tokens", alex, map[string]any{"label": "laptop", "ttl": 3600}, 201)
	secret, _ := made["token"].(string)
	if !strings.HasPrefix(secret, "bothy_s_") {
		t.Fatalf("createToken %v", made)
	}
	wantMembers(t, "createToken", made, map[string]any{"kind": "session", "label": "laptop", "principal_id": alexID}, "expires_at")
	tokID := made["id"].(string)
	if r := env.REST(http.MethodGet, "/api/v1/me", secret, nil); r.Status != 200 {
		t.Fatalf("the new token: %d", r.Status)
	}
	wantTokensListed(t, env, alex, alexID, secret, tokID)
	// Somebody else's token is 404 like a missing one.
	samID := env.World.ID("sam")
	samTok := env.MustREST(t, http.MethodPost, "/api/v1/principals/"+samID+"/tokens", robin, map[string]any{"label": "by robin"}, 201)
	hidden := env.REST(http.MethodDelete, "/api/v1/tokens/"+samTok["id"].(string), alex, nil)
	missing := env.REST(http.MethodDelete, "/api/v1/tokens/01a22de8-0000-7000-8000-000000000000", alex, nil)
	apitest.WantProblem(t, "alex revokes sam's", hidden, 404, "not_found", "")
	if !apitest.SameAnswer(t, hidden, missing) {
		t.Fatalf("another's token and a missing one answer differently:\n%s\n%s", hidden.Body, missing.Body)
	}
	// ttl 0 never expires: no expires_at member.
	forever := env.MustREST(t, http.MethodPost, "/api/v1/principals/"+alexID+"/tokens", alex, map[string]any{"ttl": 0}, 201)
	if _, ok := forever["expires_at"]; ok {
		t.Fatalf("ttl 0 expires: %v", forever)
	}

	// Revoked: 401 at once.
	rev := env.MustREST(t, http.MethodDelete, "/api/v1/tokens/"+tokID, alex, nil, 200)
	wantMembers(t, "revokeToken", rev, map[string]any{"id": tokID}, "revoked_at")
	if r := env.REST(http.MethodGet, "/api/v1/me", secret, nil); r.Status != 401 {
		t.Fatalf("a revoked token: %d", r.Status)
	}
	// GraphQL: the same token answer, typed.
	var gq struct {
		CreateToken struct {
			ID, Token, PrincipalID, Kind, Label string
			CreatedAt                           string
			ExpiresAt                           *string
		}
	}
	if res := env.GraphQL(alex, `mutation($p: ID!) { createToken(principalId: $p, input: {label: "cli"}) { id token principalId kind label createdAt expiresAt } }`,
		map[string]any{"p": alexID}, &gq); len(res.Errors) > 0 || gq.CreateToken.Kind != "SESSION" || !strings.HasPrefix(gq.CreateToken.Token, "bothy_s_") {
		t.Fatalf("GraphQL createToken %+v %+v", res.Errors, gq)
	}
	// No secret ever reaches the logs, the event log or the audit log.
	for _, s := range []string{secret, samTok["token"].(string), gq.CreateToken.Token} {
		if strings.Contains(logs.String(), s) {
			t.Fatal("a token secret was logged")
		}
		if storedOutsideHash(env, s) {
			t.Fatal("a token secret was stored outside its hash")
		}
	}
}

// wantTokensListed checks alex's listTokens (alex is the token, alexID
// the id): no secret (secret is the new token's) and no hash in the
// answer, two tokens with the new one (tokID), just used, first.
func wantTokensListed(t *testing.T, env *apitest.Env, alex, alexID, secret, tokID string) {
	t.Helper()
	list := env.REST(http.MethodGet, "/api/v1/principals/"+alexID+"/tokens", alex, nil)
	if list.Status != 200 || bytes.Contains(list.Body, []byte(secret)) || bytes.Contains(list.Body, []byte("hash")) {
		t.Fatalf("listTokens %d %s", list.Status, list.Body)
	}
	var tl struct {
		Tokens []map[string]any `json:"tokens"`
	}
	list.JSON(t, &tl)
	if len(tl.Tokens) != 2 || tl.Tokens[0]["id"] != tokID || tl.Tokens[0]["last_used_at"] == nil {
		t.Fatalf("tokens %v", tl.Tokens)
	}
}

// testAdminSpacesAndChannels covers spaces and channels: creation with its
// events and main thread, rules on names, switches and operators, rename
// and unarchive, on both faces.
func testAdminSpacesAndChannels(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, adminOptions())
	robin := env.World.Token("robin")
	spID, textID, forumID, mainID := wantSpaceAndChannelsCreated(t, env, robin)
	wantNewSpaceEvents(t, env, spID, textID, forumID)
	wantSpaceAndChannelChanges(t, env, spID, textID, mainID)

	// GraphQL creates the same way.
	var gq struct {
		CreateChannel struct {
			ID, Name, Kind string
			MainThreadID   *string
		}
	}
	if res := env.GraphQL(robin, `mutation($s: ID!) { createChannel(spaceId: $s, input: {name: "Chat", kind: TEXT}) { id name kind mainThreadId } }`,
		map[string]any{"s": spID}, &gq); len(res.Errors) > 0 || gq.CreateChannel.Kind != "TEXT" || gq.CreateChannel.MainThreadID == nil {
		t.Fatalf("GraphQL createChannel %+v %+v", res.Errors, gq)
	}
}

// wantSpaceAndChannelsCreated creates the space Operations with lotse as
// its default operator, a text channel Incidents and a forum Postmortems
// in it as robin, and checks the answers, the main thread and the refusals
// of bad names, switches and operators. It returns the ids of the space,
// the two channels and the text channel's main thread.
func wantSpaceAndChannelsCreated(t *testing.T, env *apitest.Env, robin string) (string, string, string, string) {
	t.Helper()
	sp := env.MustREST(t, http.MethodPost, "/api/v1/spaces", robin, map[string]any{"name": "Operations", "default_operator_agent_id": env.World.ID("lotse")}, 201)
	spID := sp["id"].(string)
	wantMembers(t, "createSpace", sp, map[string]any{"name": "Operations", "default_operator_agent_id": env.World.ID("lotse"), "archived": false})
	apitest.WantProblem(t, "taken space", env.REST(http.MethodPost, "/api/v1/spaces", robin, map[string]any{"name": "Support"}), 409, "conflict", "name_taken")
	apitest.WantProblem(t, "person as operator", env.REST(http.MethodPost, "/api/v1/spaces", robin, map[string]any{"name": "Ops 2", "default_operator_agent_id": env.World.ID("alex")}),
		400, "validation_failed", "")
	apitest.WantProblem(t, "NUL in a name", env.REST(http.MethodPost, "/api/v1/spaces", robin, map[string]any{"name": "Ops\u0000"}), 400, "validation_failed", "")

	text := env.MustREST(t, http.MethodPost, "/api/v1/spaces/"+spID+"/channels", robin,
		map[string]any{"name": "Incidents", "kind": "text", "switches": map[string]any{"free_response": true}}, 201)
	mainID, _ := text["main_thread_id"].(string)
	if mainID == "" || text["effective_operator_id"] != env.World.ID("lotse") || text["operator_mode"] != "inherit" {
		t.Fatalf("createChannel text %v", text)
	}
	wantMembers(t, "switches", text["switches"].(map[string]any), map[string]any{"free_response": true, "auto_thread": true})
	main := env.MustREST(t, http.MethodGet, "/api/v1/threads/"+mainID, robin, nil, 200)
	wantMembers(t, "main thread", main, map[string]any{"kind": "main", "channel_id": text["id"]})
	forum := env.MustREST(t, http.MethodPost, "/api/v1/spaces/"+spID+"/channels", robin,
		map[string]any{"name": "Postmortems", "kind": "forum", "operator": map[string]any{"mode": "agent", "agent_id": env.World.ID("texter")}}, 201)
	if _, ok := forum["main_thread_id"]; ok || forum["effective_operator_id"] != env.World.ID("texter") {
		t.Fatalf("createChannel forum %v", forum)
	}
	for _, body := range []map[string]any{
		{"name": "Incidents", "kind": "text"},
	} {
		apitest.WantProblem(t, "taken channel", env.REST(http.MethodPost, "/api/v1/spaces/"+spID+"/channels", robin, body), 409, "conflict", "name_taken")
	}
	for _, body := range []map[string]any{
		{"name": "", "kind": "text"},
		{"name": "X", "kind": "voice"},
		{"name": "X", "kind": "text", "switches": map[string]any{"history_backfill_limit": -1}},
		{"name": "X", "kind": "text", "operator": map[string]any{"mode": "agent"}},
		{"name": "X", "kind": "text", "operator": map[string]any{"mode": "none", "agent_id": env.World.ID("lotse")}},
		{"name": "X", "kind": "text", "unknown": true},
	} {
		apitest.WantProblem(t, "bad channel", env.REST(http.MethodPost, "/api/v1/spaces/"+spID+"/channels", robin, body), 400, "validation_failed", "")
	}
	if n := env.Count(`SELECT count(*) FROM channels WHERE space_id = $1`, spID); n != 2 {
		t.Fatalf("%d channels in the new space", n)
	}
	return spID, text["id"].(string), forum["id"].(string), mainID
}

// wantNewSpaceEvents checks who sees the events of the new space spID
// and its channels textID and forumID.
func wantNewSpaceEvents(t *testing.T, env *apitest.Env, spID, textID, forumID string) {
	t.Helper()
	robin, alex := env.World.Token("robin"), env.World.Token("alex")
	// Events: the owner sees space.created and channel.created; Alex, with
	// no grant on the new space, sees none of them until granted.
	types := func(token string) []string {
		var page struct {
			Events []struct {
				Type      string `json:"type"`
				SpaceID   string `json:"space_id"`
				ChannelID string `json:"channel_id"`
			} `json:"events"`
		}
		r := env.REST(http.MethodGet, "/api/v1/events?limit=500", token, nil)
		r.JSON(t, &page)
		var out []string
		for _, e := range page.Events {
			if e.SpaceID == spID || e.ChannelID == textID || e.ChannelID == forumID {
				out = append(out, e.Type)
			}
		}
		return out
	}
	if got := strings.Join(types(robin), ","); got != "space.created,channel.created,channel.created" {
		t.Fatalf("robin's events of the new space: %s", got)
	}
	if got := types(alex); len(got) != 0 {
		t.Fatalf("alex sees events of a space he cannot read: %v", got)
	}
	env.CreateGrant(t, map[string]any{"subject_id": env.World.ID("alex"), "subject_kind": "principal", "target_kind": "space", "target_id": spID, "level": "trigger"})
	if got := strings.Join(types(alex), ","); got != "space.created,channel.created,channel.created,access.changed,access.changed" {
		t.Fatalf("alex's events after the grant: %s", got)
	}
}

// wantSpaceAndChannelChanges renames the new space spID and its text
// channel textID, changes the space's operator, and archives and
// unarchives both: posting into the main thread mainID follows.
func wantSpaceAndChannelChanges(t *testing.T, env *apitest.Env, spID, textID, mainID string) {
	t.Helper()
	robin, alex := env.World.Token("robin"), env.World.Token("alex")
	// Rename and operator changes; archive and unarchive.
	upd := env.MustREST(t, http.MethodPatch, "/api/v1/spaces/"+spID, robin, map[string]any{"name": "Ops", "clear_default_operator": true}, 200)
	if upd["name"] != "Ops" {
		t.Fatalf("updateSpace %v", upd)
	}
	if _, ok := upd["default_operator_agent_id"]; ok {
		t.Fatalf("default operator not cleared: %v", upd)
	}
	if c := env.MustREST(t, http.MethodGet, "/api/v1/channels/"+textID, robin, nil, 200); c["effective_operator_id"] != nil {
		t.Fatalf("the channel kept its inherited operator: %v", c)
	}
	apitest.WantProblem(t, "set and clear", env.REST(http.MethodPatch, "/api/v1/spaces/"+spID, robin,
		map[string]any{"default_operator_agent_id": env.World.ID("lotse"), "clear_default_operator": true}), 400, "validation_failed", "")
	ren := env.MustREST(t, http.MethodPatch, "/api/v1/channels/"+textID, robin, map[string]any{"name": "Outages"}, 200)
	if ren["name"] != "Outages" {
		t.Fatalf("updateChannel %v", ren)
	}
	apitest.WantProblem(t, "taken rename", env.REST(http.MethodPatch, "/api/v1/channels/"+textID, robin, map[string]any{"name": "Postmortems"}), 409, "conflict", "name_taken")
	env.MustREST(t, http.MethodPost, "/api/v1/channels/"+textID+"/archive", robin, nil, 200)
	apitest.WantProblem(t, "archived", env.REST(http.MethodPost, "/api/v1/threads/"+mainID+"/messages", alex, map[string]any{"client_msg_id": "a1", "content_md": "hello"}),
		403, "channel_read_only", "channel_archived")
	un := env.MustREST(t, http.MethodPost, "/api/v1/channels/"+textID+"/unarchive", robin, nil, 200)
	if un["archived"] != false {
		t.Fatalf("unarchiveChannel %v", un)
	}
	if r := env.REST(http.MethodPost, "/api/v1/threads/"+mainID+"/messages", alex, map[string]any{"client_msg_id": "a1", "content_md": "hello"}); r.Status != 201 {
		t.Fatalf("writing after unarchive: %d %s", r.Status, r.Body)
	}
	env.MustREST(t, http.MethodPost, "/api/v1/spaces/"+spID+"/archive", robin, nil, 200)
	if s := env.MustREST(t, http.MethodPost, "/api/v1/spaces/"+spID+"/unarchive", robin, nil, 200); s["archived"] != false {
		t.Fatalf("unarchiveSpace %v", s)
	}
}

// TestAdminDisableEndsPollsAndRuns: disabling a principal (or revoking its
// token through the API) ends its waiting long polls with 401 at once, and
// a disabled person's queued runs are cancelled by the loss-of-trigger rule.
func TestAdminDisableEndsPollsAndRuns(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, adminOptions())
	robin := env.World.Token("robin")

	// Alex's queued run ends when Alex is disabled.
	m := env.MustPost("alex", env.Main("Support/Eskalation"), "q1", "@lotse please look at the printer")
	if m["trigger_state"] != "accepted" {
		t.Fatalf("alex's question %v", m)
	}
	var runID string
	if err := env.Pool.QueryRow(t.Context(), `SELECT id::text FROM runs WHERE triggering_message_id = $1`, m["id"]).Scan(&runID); err != nil {
		t.Fatal(err)
	}
	env.MustREST(t, http.MethodPatch, "/api/v1/principals/"+env.World.ID("alex"), robin, map[string]any{"status": "disabled"}, 200)
	run := env.MustREST(t, http.MethodGet, "/api/v1/runs/"+runID, robin, nil, 200)
	if run["state"] != "cancelled" {
		t.Fatalf("a disabled person's queued run: %v", run)
	}

	// A waiting long poll of an agent answers 401 when the agent is
	// disabled, without any event to wake it.
	waiting := func(token string) <-chan *apitest.Response {
		done := make(chan *apitest.Response, 1)
		go func() {
			r, err := env.Do(http.MethodGet, "/api/v1/agent/events?wait=25&after=now", token, nil)
			if err != nil {
				t.Error(err)
				r = &apitest.Response{}
			}
			done <- r
		}()
		return done
	}
	waitAnswer := func(what string, done <-chan *apitest.Response) {
		t.Helper()
		select {
		case r := <-done:
			if r.Status != 401 {
				t.Fatalf("%s: waiting poll answered %d %s", what, r.Status, r.Body)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: the waiting poll was not ended", what)
		}
	}
	// The poll waits up to 25 s and the test up to 20 s, so a 401 in time
	// proves that the change woke it (awaitPolls knows it waits).
	lotse := env.World.Token("lotse")
	done := waiting(lotse)
	env.AwaitPolls(t, 1)
	env.MustREST(t, http.MethodPatch, "/api/v1/principals/"+env.World.ID("lotse"), robin, map[string]any{"status": "disabled"}, 200)
	waitAnswer("disabled agent", done)

	// Revoking an agent's token through the API does the same.
	texter := env.World.Token("texter")
	list := env.MustREST(t, http.MethodGet, "/api/v1/principals/"+env.World.ID("texter")+"/tokens", robin, nil, 200)
	tokID := list["tokens"].([]any)[0].(map[string]any)["id"].(string)
	done = waiting(texter)
	env.AwaitPolls(t, 1)
	env.MustREST(t, http.MethodDelete, "/api/v1/tokens/"+tokID, robin, nil, 200)
	waitAnswer("revoked token", done)
}
