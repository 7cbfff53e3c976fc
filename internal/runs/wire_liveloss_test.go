package runs_test

import (
	"net/http"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/apitest"
)

// wantLostOnEveryPath checks, right after a change took the triggering
// person's trigger away (no sweep in between), every path of the running
// run held by holder: the context answers 404, renewRun, awaitRunInput and
// an answer naming the run answer 409 trigger_revoked (nothing stored),
// and finishRun(COMPLETED) ends the run cancelled with trigger_revoked.
func wantLostOnEveryPath(t *testing.T, env *apitest.Env, agent, run, holder string) {
	t.Helper()
	wantLost(t, env, agent, run, holder, "trigger_revoked")
}

// wantLost is wantLostOnEveryPath where an answer may be refused with
// another reason first (an archived channel refuses every write with
// channel_read_only before the run is asked).
func wantLost(t *testing.T, env *apitest.Env, agent, run, holder string, answerReasons ...string) {
	t.Helper()
	if _, r := readContextAs(t, env, agent, run); r.Status != http.StatusNotFound {
		t.Fatalf("context after the loss: %d %s", r.Status, r.Body)
	}
	_, errs := claim(t, env, agent, "renewRun", run, holder)
	wantGQLConflict(t, "renew after the loss", errs, "trigger_revoked")
	_, errs = heldOp(t, env, agent, "awaitRunInput", run, holder, "")
	wantGQLConflict(t, "await after the loss", errs, "trigger_revoked")
	_, errs = updateLive(t, env, agent, run, holder, map[string]any{"baseVersion": 0, "append": "still writing"})
	wantGQLConflict(t, "live box after the loss", errs, "trigger_revoked")
	res := env.GraphQL(env.World.Token(agent), `mutation($r: ID!, $h: String) { requestApproval(runId: $r, holder: $h, input: {title: "Go on?", options: [{id: "yes", label: "Yes"}]}) { id } }`,
		map[string]any{"r": run, "h": holder}, nil)
	wantGQLConflict(t, "approval after the loss", res.Errors, "trigger_revoked")
	thread := getRun(t, env, agent, run).ThreadID
	refused := func(what string, errs []apitest.GQLError) {
		t.Helper()
		for _, reason := range answerReasons {
			if len(errs) == 1 && (errs[0].Extensions.Reason == reason || errs[0].Extensions.Code == reason) {
				return
			}
		}
		t.Fatalf("%s: %+v, want one of %v", what, errs, answerReasons)
	}
	refused("answer after the loss", answerAs(t, env, agent, thread, run, holder, "lost-answer", "a reply to a request its author lost"))
	// trigger_revoked wins over run_claimed.
	refused("another holder's answer after the loss", answerAs(t, env, agent, thread, run, "someone-else", "lost-answer-2", "x"))
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

// TestLossOfTriggerOnEveryPath is the table of the ways a person loses
// trigger on a running run's channel (grant revoke, disable, owner
// demotion, group removal, channel and space archive; the move and the
// expiry are TestLossOfTriggerIsImmediate's) against every path of the run:
// right after the change has answered, with no sweep in between, the
// context, renew, await and an answer are refused and a finish ends the
// run cancelled with trigger_revoked.
func TestLossOfTriggerOnEveryPath(t *testing.T) {
	t.Parallel()
	for _, tc := range lossOfTriggerCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.check(t)
		})
	}
}

// lossOfTriggerCase is one way a person loses trigger on the channel of a
// running run, in TestLossOfTriggerOnEveryPath.
type lossOfTriggerCase struct {
	name string
	// who triggers which agent in which channel
	person, agent, channel string
	// before, when set, prepares the world (before the trigger) and
	// returns what loss needs of it
	before func(t *testing.T, env *apitest.Env) string
	loss   func(t *testing.T, env *apitest.Env, prepared string)
	// answerReasons are the refusals an answer may get after the loss
	answerReasons []string
}

// lossOfTriggerCases are the ways of TestLossOfTriggerOnEveryPath: grant
// revoke, disable, owner demotion, group removal, channel and space
// archive.
func lossOfTriggerCases() []lossOfTriggerCase {
	robin := func(env *apitest.Env) string { return env.World.Token("robin") }
	return []lossOfTriggerCase{
		{name: "grant revoked", person: "alex", agent: "lotse", channel: "Support/Eskalation",
			loss: func(t *testing.T, env *apitest.Env, _ string) {
				env.MustREST(t, http.MethodDelete, "/api/v1/grants/"+grantOf(t, env, "alex", env.World.Spaces["Support"]), robin(env), nil, http.StatusOK)
			}},
		{name: "person disabled", person: "alex", agent: "lotse", channel: "Support/Eskalation",
			loss: func(t *testing.T, env *apitest.Env, _ string) {
				env.MustREST(t, http.MethodPatch, "/api/v1/principals/"+env.World.ID("alex"), robin(env), map[string]any{"status": "disabled"}, http.StatusOK)
			}},
		{name: "owner demoted", person: "robin", agent: "lotse", channel: "Support/Eskalation",
			before: func(t *testing.T, env *apitest.Env) string {
				env.MustREST(t, http.MethodPatch, "/api/v1/principals/"+env.World.ID("sam"), robin(env), map[string]any{"is_owner": true}, http.StatusOK)
				return ""
			},
			loss: func(t *testing.T, env *apitest.Env, _ string) {
				env.MustREST(t, http.MethodPatch, "/api/v1/principals/"+env.World.ID("robin"), env.World.Token("sam"), map[string]any{"is_owner": false}, http.StatusOK)
			}},
		{name: "group removal", person: "writer", agent: "lotse", channel: "Support/Eskalation",
			before: func(t *testing.T, env *apitest.Env) string {
				g := env.MustREST(t, http.MethodPost, "/api/v1/groups", robin(env), map[string]any{"name": "Escalation desk"}, http.StatusCreated)
				env.MustREST(t, http.MethodPost, "/api/v1/groups/"+g["id"].(string)+"/members", robin(env), map[string]any{"principal_id": env.World.ID("writer")}, http.StatusOK)
				env.CreateGrant(t, map[string]any{"subject_id": g["id"], "subject_kind": "group", "target_kind": "channel",
					"target_id": env.World.Channel("Support/Eskalation").ID, "level": "trigger"})
				return g["id"].(string)
			},
			loss: func(t *testing.T, env *apitest.Env, group string) {
				env.MustREST(t, http.MethodDelete, "/api/v1/groups/"+group+"/members/"+env.World.ID("writer"), robin(env), nil, http.StatusOK)
			}},
		{name: "channel archived", person: "alex", agent: "lotse", channel: "Support/Eskalation",
			loss: func(t *testing.T, env *apitest.Env, _ string) {
				env.MustREST(t, http.MethodPost, "/api/v1/channels/"+env.World.Channel("Support/Eskalation").ID+"/archive", robin(env), nil, http.StatusOK)
			}, answerReasons: []string{"trigger_revoked", "channel_read_only"}},
		{name: "space archived", person: "alex", agent: "lotse", channel: "Support/Eskalation",
			loss: func(t *testing.T, env *apitest.Env, _ string) {
				env.MustREST(t, http.MethodPost, "/api/v1/spaces/"+env.World.Spaces["Support"]+"/archive", robin(env), nil, http.StatusOK)
			}, answerReasons: []string{"trigger_revoked", "channel_read_only"}},
	}
}

// check runs the case on a server of its own: the person triggers the
// agent, which starts the run and reads its context; after the loss every
// path of the run answers it (wantLost).
func (tc lossOfTriggerCase) check(t *testing.T) {
	env := apitest.Start(t, apitest.Options{Config: map[string]string{"run.sweep_interval": "1h"}})
	prepared := ""
	if tc.before != nil {
		prepared = tc.before(t, env)
	}
	s := newStream(t, env, tc.agent)
	env.MustPost(tc.person, env.Main(tc.channel), "loss-1", "@"+tc.agent+" please look into this")
	run := s.nextRun()
	if _, errs := claim(t, env, tc.agent, "startRun", run, "proc-a"); len(errs) > 0 {
		t.Fatal(errs)
	}
	if _, r := readContextAs(t, env, tc.agent, run); r.Status != http.StatusOK {
		t.Fatalf("context before the loss: %d %s", r.Status, r.Body)
	}
	tc.loss(t, env, prepared)
	reasons := tc.answerReasons
	if reasons == nil {
		reasons = []string{"trigger_revoked"}
	}
	wantLost(t, env, tc.agent, run, "proc-a", reasons...)
}
