package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/sdk/agent"
)

// bothy runs the command line in process and returns its standard output.
func bothy(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(t.Context(), args, &out, &errOut)
	if err != nil {
		t.Logf("bothy %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), err
}

func mustBothy(t *testing.T, args ...string) string {
	t.Helper()
	out, err := bothy(t, args...)
	if err != nil {
		t.Fatalf("bothy %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func decode(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
}

func startAdminEnv(t *testing.T, noWorld bool) *apitest.Env {
	env := apitest.Start(t, apitest.Options{NoWorld: noWorld, Config: map[string]string{"ratelimit.rl.admin.burst": "1000"}})
	t.Setenv("BOTHY_DATABASE_URL", env.DBURL)
	return env
}

// serveBriefly runs bothy serve in process on BOTHY_DATABASE_URL until it
// logs that it serves, stops it, and returns its log.
func serveBriefly(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var stdout, stderr apitest.Buffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0"}, &stdout, &stderr) }()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(stderr.String(), `"msg":"serving"`) {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("serve did not start:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond) // the pace of reading a log, not a wait that decides
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	return stderr.String()
}

// TestInstallationFromEmptyDatabase follows an owner from an empty database
// to an agent's answer: serve says that no owner exists, create-owner makes
// one, and through the API the owner creates a person, an agent, a space, a
// channel and a grant; the person mentions the agent and the reference
// adapter answers with the agent's token.
func TestInstallationFromEmptyDatabase(t *testing.T) {
	// Not parallel: startAdminEnv sets BOTHY_DATABASE_URL, which the
	// in-process command line reads.
	env := startAdminEnv(t, true)
	ownerToken := createFirstOwner(t, env)

	alex := env.MustREST(t, http.MethodPost, "/api/v1/principals", ownerToken,
		map[string]any{"kind": "user", "handle": "alex", "display_name": "Alex", "email": "alex@example.com"}, 201)["principal"].(map[string]any)
	alexTok := env.MustREST(t, http.MethodPost, "/api/v1/principals/"+alex["id"].(string)+"/tokens", ownerToken, map[string]any{"label": "laptop"}, 201)["token"].(string)
	agentP := env.MustREST(t, http.MethodPost, "/api/v1/principals", ownerToken,
		map[string]any{"kind": "agent", "handle": "lotse", "display_name": "Lotse"}, 201)
	agentTok := agentP["token"].(string)
	agentID := agentP["principal"].(map[string]any)["id"].(string)
	space := env.MustREST(t, http.MethodPost, "/api/v1/spaces", ownerToken, map[string]any{"name": "Support", "default_operator_agent_id": agentID}, 201)
	channel := env.MustREST(t, http.MethodPost, "/api/v1/spaces/"+space["id"].(string)+"/channels", ownerToken,
		map[string]any{"name": "General", "kind": "text"}, 201)
	mainID := channel["main_thread_id"].(string)
	if th := env.MustREST(t, http.MethodGet, "/api/v1/threads/"+mainID, ownerToken, nil, 200); th["kind"] != "main" {
		t.Fatalf("main thread %v", th)
	}
	env.MustREST(t, http.MethodPost, "/api/v1/grants", ownerToken, map[string]any{"subject_id": alex["id"], "subject_kind": "principal",
		"target_kind": "channel", "target_id": channel["id"], "level": "trigger"}, 201)

	m := env.MustREST(t, http.MethodPost, "/api/v1/threads/"+mainID+"/messages", alexTok,
		map[string]any{"client_msg_id": "first-question", "content_md": "@lotse the printer is down"}, 201)
	if m["trigger_state"] != "accepted" {
		t.Fatalf("alex's question: %v", m)
	}
	reports := runEchoAdapterOnce(t, env, agentTok)
	if len(reports) != 1 || reports[0].Outcome != agent.OutcomeCompleted {
		t.Fatalf("adapter reports %+v", reports)
	}
	ans := env.MustREST(t, http.MethodGet, "/api/v1/messages/"+reports[0].AnswerMessageID, alexTok, nil, 200)
	author := ans["author"].(map[string]any)
	if author["handle"] != "lotse" || ans["origin"] != "agent" || !strings.Contains(ans["content_md"].(string), "the printer is down") {
		t.Fatalf("the answer %v", ans)
	}
}

// createFirstOwner checks that bothy serve on a database without an owner
// says how to make one, creates robin with admin create-owner, checks that
// a second robin is refused and that robin is the owner, and returns
// robin's token.
func createFirstOwner(t *testing.T, env *apitest.Env) string {
	t.Helper()
	// bothy serve on a database without an owner says how to make one.
	stderr := serveBriefly(t)
	if !strings.Contains(stderr, "no owner exists yet: create one with bothy admin create-owner") {
		t.Fatalf("serve did not say how to create an owner:\n%s", stderr)
	}

	var owner struct{ ID, Token string }
	decode(t, mustBothy(t, "admin", "create-owner", "--handle", "robin", "--display-name", "Robin", "--email", "robin@example.com", "--json"), &owner)
	if owner.ID == "" || !strings.HasPrefix(owner.Token, "bothy_s_") {
		t.Fatalf("create-owner printed %+v", owner)
	}
	if _, err := bothy(t, "admin", "create-owner", "--handle", "robin", "--display-name", "Robin"); err == nil || !strings.Contains(err.Error(), "handle_taken") {
		t.Fatalf("a second robin: %v", err)
	}
	me := env.MustREST(t, http.MethodGet, "/api/v1/me", owner.Token, nil, 200)
	if me["is_owner"] != true || me["handle"] != "robin" {
		t.Fatalf("the owner: %v", me)
	}
	return owner.Token
}

// runEchoAdapterOnce runs the reference adapter with the echo model once
// with the agent's token and returns the reports of the runs it did; the
// adapter itself must not fail.
func runEchoAdapterOnce(t *testing.T, env *apitest.Env, agentTok string) []agent.RunReport {
	t.Helper()
	client, err := agent.NewClient(env.URL, agentTok, agent.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var reports []agent.RunReport
	a, err := agent.New(agent.Config{Client: client, Model: agent.EchoModel{}, Once: true, PollWait: 5 * time.Second,
		OnRunDone: func(r agent.RunReport) { reports = append(reports, r) }})
	if err != nil {
		t.Fatal(err)
	}
	actx, acancel := context.WithTimeout(t.Context(), time.Minute)
	defer acancel()
	if err := a.Run(actx); err != nil {
		t.Fatalf("adapter: %v", err)
	}
	return reports
}

// TestAdminCommandLine drives every bothy admin command: principals,
// tokens, the last-owner rule, usage errors, and seed run twice.
func TestAdminCommandLine(t *testing.T) {
	// Not parallel: startAdminEnv sets BOTHY_DATABASE_URL, which the
	// in-process command line reads.
	env := startAdminEnv(t, false)

	var scout struct{ ID, Token string }
	decode(t, mustBothy(t, "admin", "principal", "create", "--kind", "agent", "--handle", "scout", "--display-name", "Scout", "--json"), &scout)
	if !strings.HasPrefix(scout.Token, "bothy_a_") {
		t.Fatalf("agent create printed %+v", scout)
	}
	if me := env.MustREST(t, http.MethodGet, "/api/v1/me", scout.Token, nil, 200); me["handle"] != "scout" {
		t.Fatalf("scout's token: %v", me)
	}
	var list []struct{ Handle, Kind, Status string }
	decode(t, mustBothy(t, "admin", "principal", "list", "--json"), &list)
	if len(list) != 8 || list[7].Handle != "scout" || list[7].Kind != "agent" {
		t.Fatalf("principal list %+v", list)
	}
	if out := mustBothy(t, "admin", "principal", "list"); !strings.Contains(out, "HANDLE") || !strings.Contains(out, "scout") {
		t.Fatalf("principal list table:\n%s", out)
	}

	checkAdminDisableEnable(t, env)
	checkAdminTokenCommands(t, env)

	checkAdminUsageErrors(t, env)
	if _, err := bothy(t, "admin", "token", "revoke", "--id", "01a22de8-0000-7000-8000-000000000000"); err == nil || !strings.Contains(err.Error(), "no token has the id") {
		t.Fatalf("revoking a missing token: %v", err)
	}
	// Every command line action was audited as the operator.
	if n := env.Count(`SELECT count(*) FROM audit_log WHERE actor_id = '00000000-0000-0000-0000-000000000000' AND decision = 'allow'`); n < 8 {
		t.Fatalf("%d audited operator actions", n)
	}
}

// wantMeStatus checks the status GET /api/v1/me answers with token: it
// tells whether a command line action left the token usable or not.
func wantMeStatus(t *testing.T, env *apitest.Env, token string, want int, what string) {
	t.Helper()
	if r := env.REST(http.MethodGet, "/api/v1/me", token, nil); r.Status != want {
		t.Fatalf("%s: %d", what, r.Status)
	}
}

// checkAdminDisableEnable disables and enables alex from the command line
// (alex's token stops and starts working) and checks that the last owner
// cannot be disabled.
func checkAdminDisableEnable(t *testing.T, env *apitest.Env) {
	t.Helper()
	alex := env.World.Token("alex")
	mustBothy(t, "admin", "principal", "disable", "--handle", "alex")
	wantMeStatus(t, env, alex, 401, "disabled alex")
	mustBothy(t, "admin", "principal", "enable", "--handle", "alex")
	wantMeStatus(t, env, alex, 200, "enabled alex")
	if _, err := bothy(t, "admin", "principal", "disable", "--handle", "robin"); err == nil || !strings.Contains(err.Error(), "last_owner") {
		t.Fatalf("disabling the last owner: %v", err)
	}
}

// checkAdminTokenCommands creates, lists and revokes a token of sam from the
// command line (the list never shows the secret, a revoked token stops
// working) and checks that bothy token create issues a working token.
func checkAdminTokenCommands(t *testing.T, env *apitest.Env) {
	t.Helper()
	var tok struct{ ID, Token string }
	decode(t, mustBothy(t, "admin", "token", "create", "--handle", "sam", "--label", "cli", "--ttl", "1h", "--json"), &tok)
	wantMeStatus(t, env, tok.Token, 200, "sam's new token")
	listed := mustBothy(t, "admin", "token", "list", "--handle", "sam", "--json")
	if !strings.Contains(listed, tok.ID) || strings.Contains(listed, tok.Token) {
		t.Fatalf("token list:\n%s", listed)
	}
	mustBothy(t, "admin", "token", "revoke", "--id", tok.ID)
	wantMeStatus(t, env, tok.Token, 401, "revoked token")
	// bothy token create is the same command.
	plain := strings.TrimSpace(mustBothy(t, "token", "create", "--handle", "alex"))
	wantMeStatus(t, env, plain, 200, "bothy token create")
}

// checkAdminUsageErrors runs admin and token command lines with mistakes:
// each is a usage error (exit 2), never ignored, and none issues a token.
func checkAdminUsageErrors(t *testing.T, env *apitest.Env) {
	t.Helper()
	tokensBefore := env.Count(`SELECT count(*) FROM tokens`)
	for _, args := range [][]string{
		{"admin"},
		{"admin", "bogus"},
		{"admin", "principal", "rename", "--handle", "alex"},
		{"admin", "token", "create", "--handle", "alex", "--ttl", "-1s"},
		{"admin", "token", "create", "--handle", "alex", "extra"},
		{"admin", "token", "list", "--handle", "alex", "--nope"},
		{"admin", "create-owner", "--handle", "dana"},
		{"token", "create", "--handle", "alex", "--ttl", "-24h"},
		{"token", "list"},
	} {
		_, err := bothy(t, args...)
		var u usageError
		if !errors.As(err, &u) {
			t.Errorf("bothy %s: %v, want a usage error", strings.Join(args, " "), err)
		}
	}
	if n := env.Count(`SELECT count(*) FROM tokens`); n != tokensBefore {
		t.Fatalf("a refused command issued a token: %d -> %d", tokensBefore, n)
	}
}

// TestAdminAuditExport: bothy admin audit export writes the audit log as
// JSON lines, oldest first, narrowed by --since, --actor, --action and
// --decision; bad flags are usage errors.
func TestAdminAuditExport(t *testing.T) {
	// Not parallel: startAdminEnv sets BOTHY_DATABASE_URL.
	env := startAdminEnv(t, false)
	grant := map[string]any{"subject_id": env.World.ID("writer"), "subject_kind": "principal", "target_kind": "channel",
		"target_id": env.World.Channel("Support/Allgemein").ID, "level": "read"}
	env.MustREST(t, http.MethodPost, "/api/v1/grants", env.World.Token("robin"), grant, http.StatusCreated)
	for range 3 {
		env.REST(http.MethodPost, "/api/v1/grants", env.World.Token("sam"), grant)
	}
	since := env.Clock.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	lines := func(out string) []map[string]any {
		var all []map[string]any
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			var m map[string]any
			decode(t, l, &m)
			all = append(all, m)
		}
		return all
	}
	all := lines(mustBothy(t, "admin", "audit", "export", "--since", since, "--action", "grant.create"))
	if len(all) != 2 || all[0]["decision"] != "allow" || all[1]["decision"] != "deny" || all[1]["count"] != float64(3) || all[1]["actor_id"] != env.World.ID("sam") {
		t.Fatalf("export: %+v", all)
	}
	sam := lines(mustBothy(t, "admin", "audit", "export", "--since", since, "--actor", "sam", "--decision", "deny", "--format", "jsonl"))
	if len(sam) != 1 || sam[0]["reason"] != "level_insufficient" {
		t.Fatalf("sam's refusals: %+v", sam)
	}
	if out := mustBothy(t, "admin", "audit", "export", "--since", env.Clock.Now().Add(time.Hour).UTC().Format(time.RFC3339), "--action", "grant.create"); out != "" {
		t.Fatalf("entries from an hour ahead: %q", out)
	}
	for _, args := range [][]string{{"--since", "yesterday"}, {}, {"--since", since, "--format", "csv"}} {
		var ue usageError
		if _, err := bothy(t, append([]string{"admin", "audit", "export"}, args...)...); !errors.As(err, &ue) {
			t.Fatalf("%v: %v, want a usage error", args, err)
		}
	}
	if _, err := bothy(t, "admin", "audit", "export", "--since", since, "--decision", "maybe"); err == nil || !strings.Contains(err.Error(), "--decision") {
		t.Fatalf("a bad decision: %v", err)
	}
}

// TestMigrateStatusSaysWhichCase: migrate status says whether this binary
// serves the schema; with --check a schema newer by a step this binary
// cannot serve exits 4, one newer by expand steps only exits 0.
func TestMigrateStatusSaysWhichCase(t *testing.T) {
	// Not parallel: startAdminEnv sets BOTHY_DATABASE_URL.
	env := startAdminEnv(t, true)
	if out := mustBothy(t, "migrate", "status", "--check"); !strings.Contains(out, "the schema is current: this binary serves it") {
		t.Fatalf("current:\n%s", out)
	}
	var newest int64
	if err := env.Pool.QueryRow(t.Context(), `SELECT max(version_id) FROM goose_db_version`).Scan(&newest); err != nil {
		t.Fatal(err)
	}
	env.Exec(`INSERT INTO goose_db_version (version_id, is_applied) VALUES (99, true)`)
	env.Exec(`INSERT INTO schema_compat (version, requires) VALUES (99, 99)`)
	out, err := bothy(t, "migrate", "status", "--check")
	var st exitStatus
	if !errors.As(err, &st) || st.code != 4 || !strings.Contains(out, "by migrations it cannot serve ([99])") {
		t.Fatalf("a contract step ahead: %v\n%s", err, out)
	}
	// serve says so in its log and keeps the replica out of traffic.
	if stderr := serveBriefly(t); !strings.Contains(stderr, `"level":"ERROR","msg":"the database schema is newer than this binary can serve; /readyz answers schema_newer: upgrade this binary"`) ||
		!strings.Contains(stderr, `"blocking_migrations":[99]`) {
		t.Fatalf("serve on a schema it cannot serve logged:\n%s", stderr)
	}
	env.Exec(`UPDATE schema_compat SET requires = $1 WHERE version = 99`, newest)
	if out := mustBothy(t, "migrate", "status", "--check"); !strings.Contains(out, "by expand steps only: this binary serves it") {
		t.Fatalf("an expand step ahead:\n%s", out)
	}
}

// TestMigrateRefusesSchemaItCannotServe: bothy migrate on a schema newer
// than this binary can serve leaves it alone and exits 4, as migrate
// status --check does, so that a rollback's migration step (a Kubernetes
// Job) fails instead of completing before replicas that never get ready;
// on a schema newer by expand steps only it succeeds.
func TestMigrateRefusesSchemaItCannotServe(t *testing.T) {
	// Not parallel: startAdminEnv sets BOTHY_DATABASE_URL.
	env := startAdminEnv(t, true)
	newest := db.EmbeddedVersion()
	env.Exec(`INSERT INTO goose_db_version (version_id, is_applied) VALUES (99, true)`)
	env.Exec(`INSERT INTO schema_compat (version, requires) VALUES (99, 99)`)
	out, err := bothy(t, "migrate")
	var st exitStatus
	if !errors.As(err, &st) || st.code != 4 || !strings.Contains(out, fmt.Sprintf("the schema (99) is newer than this binary (%d) and has migrations it cannot serve ([99])", newest)) ||
		!strings.Contains(err.Error(), "upgrade the binary, or restore the backup") {
		t.Fatalf("migrate on a schema it cannot serve: %v\n%s", err, out)
	}
	var schema int64
	if err := env.Pool.QueryRow(t.Context(), `SELECT max(version_id) FROM goose_db_version WHERE is_applied`).Scan(&schema); err != nil || schema != 99 {
		t.Fatalf("migrate changed the newer schema: %d %v", schema, err)
	}
	env.Exec(`UPDATE schema_compat SET requires = $1 WHERE version = 99`, newest)
	if out := mustBothy(t, "migrate"); !strings.Contains(out, "nothing to apply: the schema (99) is newer than this binary") || !strings.Contains(out, "by expand steps only") {
		t.Fatalf("migrate on a schema newer by expand steps only:\n%s", out)
	}
}

// TestMigrateStatusRollbackTo: migrate status --rollback-to N says, from
// the requirements this binary recorded, whether an older binary serves
// the schema; 1.0.0 (migration 8), which cannot tell itself, never serves
// one past migrations 9 to 12 (contract steps).
func TestMigrateStatusRollbackTo(t *testing.T) {
	// Not parallel: startAdminEnv sets BOTHY_DATABASE_URL.
	env := startAdminEnv(t, true)
	out, err := bothy(t, "migrate", "status", "--check", "--rollback-to", "8")
	var st exitStatus
	if !errors.As(err, &st) || st.code != 4 ||
		!strings.Contains(out, fmt.Sprintf("rollback to a binary of migration 8: not safe, the schema (%d) has migrations it cannot serve ([9 10 11 12", db.EmbeddedVersion())) {
		t.Fatalf("rollback to 1.0.0: %v\n%s", err, out)
	}
	// Without --check it only says so.
	if out := mustBothy(t, "migrate", "status", "--rollback-to", "8"); !strings.Contains(out, "rollback to a binary of migration 8: not safe") {
		t.Fatalf("without --check:\n%s", out)
	}
	current := fmt.Sprint(db.EmbeddedVersion())
	if out := mustBothy(t, "migrate", "status", "--check", "--rollback-to", current); !strings.Contains(out, "rollback to a binary of migration "+current+": safe, it is the schema's version") {
		t.Fatalf("to the schema's own version:\n%s", out)
	}
	// A newer expand step (99 requiring this binary) keeps the rollback
	// to this binary safe; a newer contract step does not.
	env.Exec(`INSERT INTO goose_db_version (version_id, is_applied) VALUES (99, true)`)
	env.Exec(`INSERT INTO schema_compat (version, requires) VALUES (99, $1)`, db.EmbeddedVersion())
	if out := mustBothy(t, "migrate", "status", "--check", "--rollback-to", current); !strings.Contains(out, "rollback to a binary of migration "+current+": safe, the schema (99) is newer by expand steps only") {
		t.Fatalf("an expand step past the target:\n%s", out)
	}
	env.Exec(`UPDATE schema_compat SET requires = 99 WHERE version = 99`)
	if out, err := bothy(t, "migrate", "status", "--check", "--rollback-to", current); !errors.As(err, &st) || st.code != 4 || !strings.Contains(out, "has migrations it cannot serve ([99])") {
		t.Fatalf("a contract step past the target: %v\n%s", err, out)
	}
	var ue usageError
	if _, err := bothy(t, "migrate", "status", "--rollback-to", "-1"); !errors.As(err, &ue) {
		t.Fatalf("--rollback-to -1: %v, want a usage error", err)
	}
}

// TestSeedTwice builds the example world with bothy seed and runs it again:
// the second run says so, changes nothing and succeeds.
func TestSeedTwice(t *testing.T) {
	// Not parallel: startAdminEnv sets BOTHY_DATABASE_URL, which the
	// in-process command line reads.
	env := startAdminEnv(t, true)
	var w struct {
		Principals map[string]struct{ ID, Token string }
	}
	decode(t, mustBothy(t, "seed", "--json"), &w)
	if len(w.Principals) != 7 || w.Principals["robin"].Token == "" {
		t.Fatalf("seed printed %+v", w)
	}
	count := func() int {
		return env.Count(`SELECT (SELECT count(*) FROM principals) + (SELECT count(*) FROM tokens) + (SELECT count(*) FROM spaces)
			+ (SELECT count(*) FROM channels) + (SELECT count(*) FROM grants) + (SELECT count(*) FROM event_log)`)
	}
	before := count()
	out := mustBothy(t, "seed", "--json")
	if !strings.Contains(out, "already there") {
		t.Fatalf("second seed printed %q", out)
	}
	if after := count(); after != before {
		t.Fatalf("the second seed changed the database: %d -> %d", before, after)
	}
}
