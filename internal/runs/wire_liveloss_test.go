package runs_test

import (
	"net/http"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/apitest"
)

// wantLostOnEveryPath checks, right after a change took the triggering
// person's trigger away (no sweep in between), every path of the running
// run held by holder: the context answers 404, renewRun, awaitRunInput and
// an answer naming the run answer 409 trigger_revoked (nothing stored),
// and finishRun(COMPLETED) ends the run cancelled with trigger_revoked.
func wantLostOnEveryPath(t *testing.T, env *apitest.Env, agent, run, holder string) {
	t.Helper()
	if _, r := readContextAs(t, env, agent, run); r.Status != http.StatusNotFound {
		t.Fatalf("context after the loss: %d %s", r.Status, r.Body)
	}
	_, errs := claim(t, env, agent, "renewRun", run, holder)
	wantGQLConflict(t, "renew after the loss", errs, "trigger_revoked")
	_, errs = heldOp(t, env, agent, "awaitRunInput", run, holder, "")
	wantGQLConflict(t, "await after the loss", errs, "trigger_revoked")
	thread := getRun(t, env, agent, run).ThreadID
	wantGQLConflict(t, "answer after the loss", answerAs(t, env, agent, thread, run, holder, "lost-answer", "a reply to a request its author lost"), "trigger_revoked")
	// trigger_revoked wins over run_claimed.
	wantGQLConflict(t, "another holder's answer after the loss", answerAs(t, env, agent, thread, run, "someone-else", "lost-answer-2", "x"), "trigger_revoked")
	if n := env.Count(`SELECT count(*) FROM messages WHERE client_msg_id LIKE 'lost-answer%'`); n != 0 {
		t.Fatalf("%d answers stored after the loss", n)
	}
	end, errs := heldOp(t, env, agent, "finishRun", run, holder, "COMPLETED")
	if len(errs) > 0 || end.State != "CANCELLED" || end.EndReason == nil || *end.EndReason != "trigger_revoked" {
		t.Fatalf("finish(COMPLETED) after the loss: %+v %+v", end, errs)
	}
}

// readContextAs reads the run's context over REST as who.
func readContextAs(t *testing.T, env *apitest.Env, who, run string) (map[string]any, *apitest.Response) {
	t.Helper()
	r := env.REST(http.MethodGet, "/api/v1/runs/"+run+"/context", env.World.Token(who), nil)
	var out map[string]any
	if r.Status == http.StatusOK {
		r.JSON(t, &out)
	}
	return out, r
}

// TestLossOfTriggerIsImmediate: a move of the run's thread into a channel
// where its person has no trigger, and the expiry of the grant that gave
// it, take effect on the next call of every path, before any sweep.
func TestLossOfTriggerIsImmediate(t *testing.T) {
	t.Parallel()
	t.Run("thread moved", func(t *testing.T) {
		t.Parallel()
		env := apitest.Start(t, apitest.Options{Config: map[string]string{"run.sweep_interval": "1h"}})
		s := newStream(t, env, "lotse")
		env.MustPost("alex", env.Main("Support/Allgemein"), "mv-1", "@lotse summarise the outage")
		run := s.nextRun()
		if _, errs := claim(t, env, "lotse", "startRun", run, "proc-a"); len(errs) > 0 {
			t.Fatal(errs)
		}
		if _, r := readContextAs(t, env, "lotse", run); r.Status != http.StatusOK {
			t.Fatalf("context before the move: %d", r.Status)
		}
		thread := getRun(t, env, "lotse", run).ThreadID
		env.MustREST(t, http.MethodPost, "/api/v1/threads/"+thread+"/move", env.World.Token("sam"),
			map[string]any{"channel_id": env.World.Channel("Marketing/Kampagnen").ID}, http.StatusOK)
		// The move itself re-checks: the adapter is told at once.
		evs, _ := env.Poll(t, "lotse", s.cursor, 0)
		told := false
		for _, e := range evs {
			told = told || e.Type == "run.cancel_requested" && e.Payload["run_id"] == run
		}
		if !told {
			t.Fatalf("no run.cancel_requested after the move: %+v", evs)
		}
		wantLostOnEveryPath(t, env, "lotse", run, "proc-a")
	})
	t.Run("grant expired", func(t *testing.T) {
		t.Parallel()
		env := apitest.Start(t, apitest.Options{Config: map[string]string{"run.sweep_interval": "1h"}})
		expires := env.Clock.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		env.CreateGrant(t, map[string]any{"subject_id": env.World.ID("alex"), "subject_kind": "principal",
			"target_kind": "channel", "target_id": env.World.Channel("Marketing/Kampagnen").ID, "level": "trigger", "expires_at": expires})
		s := newStream(t, env, "texter")
		env.MustPost("alex", env.Main("Marketing/Kampagnen"), "ex-1", "@texter draft the newsletter")
		run := s.nextRun()
		if _, errs := claim(t, env, "texter", "startRun", run, "proc-a"); len(errs) > 0 {
			t.Fatal(errs)
		}
		env.Clock.Advance(2 * time.Hour)
		wantLostOnEveryPath(t, env, "texter", run, "proc-a")
	})
}
