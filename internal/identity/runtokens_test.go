package identity_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/runs/domain"
)

// newRun has Alex ask Lotse in Support/Eskalation and returns the id of the
// (queued) run the message triggered.
func newRun(t *testing.T, env *moduletest.Env, clientMsgID string) string {
	t.Helper()
	m := env.Post("alex", env.Main("Support/Eskalation"), clientMsgID, "@lotse please have a look")
	var id string
	if err := env.Pool.QueryRow(t.Context(), `SELECT id::text FROM runs WHERE triggering_message_id = $1`, m.ID).Scan(&id); err != nil {
		t.Fatalf("run of %s: %v", clientMsgID, err)
	}
	return id
}

// TestRunTokens: only an agent gets a run token; it has the run prefix and
// kind, is never listed or found by id, and authenticates (alone and in
// AuthenticateMany) as its agent carrying the run, its thread and its
// holder while the run is active (queued or running), and no more once the
// run ended, even when minted after the end; the agent's own token carries
// no run.
func TestRunTokens(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	lotse := env.Principal("lotse")
	run := newRun(t, env, "rt-1")
	thread := env.Main("Support/Eskalation")

	for _, who := range []string{"alex", "feedbot"} {
		_, err := env.Writers.Identity.CreateRunToken(ctx, env.Principal(who), run, "proc-a")
		moduletest.WantProblem(t, who+"'s run token", err, problem.ValidationFailed, "")
	}
	it, err := env.Writers.Identity.CreateRunToken(ctx, lotse, run, "proc-a")
	if err != nil {
		t.Fatal(err)
	}
	checkRunTokenHidden(t, env, it, run, lotse.ID)
	wantRunBound(t, env, "queued run", it.Token, lotse.ID, run, thread)
	if _, err := env.Runs.Start(ctx, lotse, run, "proc-a"); err != nil {
		t.Fatal(err)
	}
	wantRunBound(t, env, "running run", it.Token, lotse.ID, run, thread)
	if _, err := env.Runs.Finish(ctx, lotse, run, "proc-a", domain.RunCompleted, ""); err != nil {
		t.Fatal(err)
	}
	late, err := env.Writers.Identity.CreateRunToken(ctx, lotse, run, "proc-b")
	if err != nil {
		t.Fatal(err)
	}
	for what, tok := range map[string]string{"ended run": it.Token, "minted after the end": late.Token} {
		_, err := env.Identity.Authenticate(ctx, tok)
		moduletest.WantProblem(t, what, err, problem.Unauthorized, "")
		if held, err := env.Identity.AuthenticateMany(ctx, []string{tok}); err != nil || len(held) != 0 {
			t.Fatalf("%s: AuthenticateMany %+v %v", what, held, err)
		}
	}
	wantAuth(t, env, "Lotse's own token", env.World.Token("lotse"), lotse.ID)
}

// checkRunTokenHidden checks the run token it, just issued to lotse
// (lotseID) for run: it has the run kind, prefix and label and no expiry,
// GetToken and RevokeTokenByID do not find it (nor a malformed id), and
// Lotse's token list holds only the agent token.
func checkRunTokenHidden(t *testing.T, env *moduletest.Env, it identity.IssuedToken, run, lotseID string) {
	t.Helper()
	ctx := t.Context()
	if it.Kind != identity.TokenRun || !identity.IsRunToken(it.Token) || it.Label != "run "+run || it.ExpiresAt != nil {
		t.Fatalf("issued %+v", it)
	}
	if _, err := env.Identity.GetToken(ctx, it.ID); !errors.Is(err, identity.ErrNotFound) {
		t.Fatalf("GetToken of a run token: %v, want ErrNotFound", err)
	}
	// Nor revoked by id: it is nobody's to revoke, and stays as it was.
	if _, err := env.Writers.Identity.RevokeTokenByID(ctx, it.ID); !errors.Is(err, identity.ErrNotFound) {
		t.Fatalf("RevokeTokenByID of a run token: %v, want ErrNotFound", err)
	}
	if _, err := env.Writers.Identity.RevokeTokenByID(ctx, "not-an-id"); !errors.Is(err, identity.ErrNotFound) {
		t.Fatalf("RevokeTokenByID of a malformed id: %v, want ErrNotFound", err)
	}
	list, err := env.Identity.ListTokens(ctx, lotseID)
	if err != nil || len(list) != 1 || list[0].Kind != identity.TokenAgent {
		t.Fatalf("Lotse's tokens %+v %v, want only the agent token", list, err)
	}
}

// wantRunBound checks that the run token token authenticates, alone and
// in AuthenticateMany beside Lotse's own token, as Lotse (lotseID) carrying run,
// its thread and the holder proc-a, while Lotse's own token carries no
// run.
func wantRunBound(t *testing.T, env *moduletest.Env, what, token, lotseID, run, thread string) {
	t.Helper()
	ctx := t.Context()
	p := wantAuth(t, env, what, token, lotseID)
	if p.RunID != run || p.RunThreadID != thread || p.RunHolder != "proc-a" {
		t.Fatalf("%s: run %q thread %q holder %q, want %s %s proc-a", what, p.RunID, p.RunThreadID, p.RunHolder, run, thread)
	}
	held, err := env.Identity.AuthenticateMany(ctx, []string{token, env.World.Token("lotse")})
	if err != nil || held[token].RunID != run || held[token].RunHolder != "proc-a" || held[token].RunThreadID != thread {
		t.Fatalf("%s: AuthenticateMany %+v %v", what, held, err)
	}
	if own := held[env.World.Token("lotse")]; own.ID != lotseID || own.RunID != "" || own.RunThreadID != "" || own.RunHolder != "" {
		t.Fatalf("%s: the agent token carries a run: %+v", what, own)
	}
}

// TestDeleteOldTokens: retention removes, in batches of at most limit,
// the tokens revoked or expired before the cutoff and the run tokens
// minted before it whose run ended; it keeps live tokens, tokens revoked
// at the cutoff or after, and the run token of an active run however old.
func TestDeleteOldTokens(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	alex, lotse := env.Principal("alex"), env.Principal("lotse")
	revoke := func(it identity.IssuedToken) identity.IssuedToken {
		t.Helper()
		if _, err := env.Writers.Identity.RevokeTokenByID(ctx, it.ID); err != nil {
			t.Fatal(err)
		}
		return it
	}
	runToken := func(run string) identity.IssuedToken {
		t.Helper()
		it, err := env.Writers.Identity.CreateRunToken(ctx, lotse, run, "proc-a")
		if err != nil {
			t.Fatal(err)
		}
		return it
	}
	ended := newRun(t, env, "old-1")
	if _, err := env.Runs.Start(ctx, lotse, ended, "proc-a"); err != nil {
		t.Fatal(err)
	}
	endedRunToken := runToken(ended)
	if _, err := env.Runs.Finish(ctx, lotse, ended, "proc-a", domain.RunCompleted, ""); err != nil {
		t.Fatal(err)
	}
	openRunToken := runToken(newRun(t, env, "old-2"))
	gone := []identity.IssuedToken{
		revoke(issue(t, env, alex, "revoked long ago", 0)),
		issue(t, env, alex, "expired long ago", time.Minute),
		endedRunToken,
	}
	kept := []identity.IssuedToken{
		issue(t, env, alex, "live", 0),
		issue(t, env, alex, "expires after the cutoff", 2*time.Hour),
		openRunToken,
	}
	env.Clock.Advance(time.Hour)
	cutoff := env.Clock.Now()
	kept = append(kept, revoke(issue(t, env, alex, "revoked at the cutoff", 0)))
	env.Clock.Advance(time.Hour)
	kept = append(kept, revoke(issue(t, env, alex, "revoked after the cutoff", 0)))

	removed := moduletest.Batches(t, 2, func(limit int) (int64, error) { return env.Writers.Identity.DeleteOldTokens(ctx, cutoff, limit) })
	if !slices.Equal(removed, []int64{2, 1, 0}) {
		t.Fatalf("batches removed %v, want [2 1 0]", removed)
	}
	for _, it := range gone {
		if env.Count(`SELECT count(*) FROM tokens WHERE id = $1`, it.ID) != 0 {
			t.Errorf("token %q was kept", it.Label)
		}
	}
	for _, it := range kept {
		if env.Count(`SELECT count(*) FROM tokens WHERE id = $1`, it.ID) != 1 {
			t.Errorf("token %q was removed", it.Label)
		}
	}
	wantAuth(t, env, "the open run's token", openRunToken.Token, lotse.ID)
}
