package server_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/oauth2-proxy/mockoidc"

	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/signin/signintest"
)

// TestSignInRefusalDisables: a refusal by the provider at a recheck does
// what an owner's disable does, through the same code path. Alex, signed
// in through the provider, has a running run of lotse (triggered by Alex)
// whose holder minted a run token and waits for Alex's approval. The
// provider refuses Alex: Alex is disabled (audited under the operator
// with the reason provider_refused), the session and the owner-made token
// answer 401, the run loses its trigger and ends cancelled
// (trigger_revoked) at the cancel grace, the approval is withdrawn and
// the run token answers 401. An owner re-enables Alex: the owner-made
// token works again, the revoked session does not.
func TestSignInRefusalDisables(t *testing.T) {
	t.Parallel()
	p := signintest.Start(t)
	env := signInEnv(t, p.MockOIDC, map[string]string{config.AuthOIDCRecheckInterval: "1s", config.RunSweepInterval: "1h"})
	robin := env.World.Token("robin")
	alex := &mockoidc.MockUser{Subject: "idp-alex", Email: "alex@example.com", EmailVerified: true}
	session := sessionOf(t, signIn(t, env, p.MockOIDC, alex))

	msg := env.MustPost("alex", env.Main("Support/Eskalation"), "leaver-1", "@lotse please look at the printer")
	run := runOf(t, env, msg["id"].(string))
	env.MustREST(t, http.MethodPost, "/api/v1/runs/"+run+"/start", env.World.Token("lotse"), map[string]any{"holder": "h1"}, http.StatusOK)
	runTok := env.MustREST(t, http.MethodPost, "/api/v1/runs/"+run+"/tokens", env.World.Token("lotse"), map[string]any{"holder": "h1"}, http.StatusCreated)["token"].(string)
	approval := env.MustREST(t, http.MethodPost, "/api/v1/runs/"+run+"/approvals", runTok,
		map[string]any{"title": "Restart the printer?", "options": []map[string]any{{"id": "yes", "label": "Yes"}}}, http.StatusCreated)["id"].(string)

	p.QueueError(&mockoidc.ServerError{Code: http.StatusBadRequest, Error: "invalid_grant", Description: "the account is disabled"})
	env.Clock.Advance(2 * time.Second)
	waitFor(t, "the leaver's disable", func() bool {
		return env.Count(`SELECT count(*) FROM principals WHERE handle = 'alex' AND status = 'disabled'`) == 1
	})
	for what, tok := range map[string]string{"session": session, "owner-made token": env.World.Token("alex")} {
		if r := env.REST(http.MethodGet, "/api/v1/me", tok, nil); r.Status != http.StatusUnauthorized {
			t.Fatalf("the leaver's %s answers %d, want 401", what, r.Status)
		}
	}
	if n := env.Count(`SELECT count(*) FROM audit_log WHERE actor_id = '00000000-0000-0000-0000-000000000000' AND action = 'principal.update'
		AND decision = 'allow' AND reason = 'provider_refused' AND resource_id = '` + env.World.ID("alex") + `'`); n != 1 {
		t.Fatalf("%d audit entries of the leaver's disable, want 1 (operator, provider_refused)", n)
	}
	// The run lost its trigger with the disable (the re-check follows its
	// commit): a cancel waits for the adapter.
	waitFor(t, "the leaver's run to have a cancel requested", func() bool {
		r := env.MustREST(t, http.MethodGet, "/api/v1/runs/"+run, robin, nil, http.StatusOK)
		return r["cancel_requested"] == true
	})

	// The adapter never confirms: the run ends at the cancel grace.
	env.Clock.Advance(env.Config.Duration(config.RunCancelGrace) + time.Second)
	if _, err := env.Runs.SweepOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if r := env.MustREST(t, http.MethodGet, "/api/v1/runs/"+run, robin, nil, http.StatusOK); r["state"] != "cancelled" || r["end_reason"] != "trigger_revoked" {
		t.Fatalf("the leaver's run after the grace: %v, want cancelled (trigger_revoked)", r)
	}
	if a := env.MustREST(t, http.MethodGet, "/api/v1/approvals/"+approval, robin, nil, http.StatusOK); a["state"] != "withdrawn" {
		t.Fatalf("the leaver's pending approval: %v, want withdrawn", a)
	}
	if r := env.REST(http.MethodGet, "/api/v1/runs/"+run, runTok, nil); r.Status != http.StatusUnauthorized {
		t.Fatalf("the run token of the leaver's run answers %d, want 401", r.Status)
	}

	// An owner re-enables Alex: the owner-made token works again; the
	// session the refusal revoked stays revoked.
	env.MustREST(t, http.MethodPatch, "/api/v1/principals/"+env.World.ID("alex"), robin, map[string]any{"status": "active"}, http.StatusOK)
	if h := viewer(t, env, env.World.Token("alex")); h != "alex" {
		t.Fatalf("after the re-enable the owner-made token signs in as %q", h)
	}
	if r := env.REST(http.MethodGet, "/api/v1/me", session, nil); r.Status != http.StatusUnauthorized {
		t.Fatalf("the revoked session after the re-enable answers %d, want 401", r.Status)
	}
}
