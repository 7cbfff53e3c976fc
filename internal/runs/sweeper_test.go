package runs_test

import (
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/devtools/runtest"
	"bothy.example.com/bothy/internal/runs/domain"
)

// TestSweepSettlesPastARunItCannot: a run whose unit of work fails (here a
// trigger of the test's database refuses its update) does not stop the
// sweep: the other due run is settled and counted once, the sweep reports
// the failure, and the next sweep settles the first run once it can be.
func TestSweepSettlesPastARunItCannot(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	first := runtest.RunOf(t, env, env.Post("alex", env.Main("Support/Eskalation"), "s1", "@lotse first"))
	second := runtest.RunOf(t, env, env.Post("alex", env.Main("Support/Allgemein"), "s2", "@lotse second"))
	env.Exec(`CREATE FUNCTION refuse_run() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.id = '` + first + `' THEN RAISE EXCEPTION 'this run cannot be settled'; END IF; RETURN NEW; END $$`)
	env.Exec(`CREATE TRIGGER refuse_run BEFORE UPDATE ON runs FOR EACH ROW EXECUTE FUNCTION refuse_run()`)
	env.Clock.Advance(6 * time.Minute) // both queued beyond run.start_timeout

	n, err := env.Runs.SweepOnce(ctx)
	if err == nil {
		t.Fatal("the sweep hid the run it could not settle")
	}
	if n != 1 {
		t.Fatalf("the sweep changed %d runs, want 1", n)
	}
	if r := runtest.ReadRun(t, env, "lotse", second); r.State != domain.RunFailed || r.EndReason != "timeout" {
		t.Fatalf("the second run: %s %s", r.State, r.EndReason)
	}
	if r := runtest.ReadRun(t, env, "lotse", first); r.State != domain.RunQueued {
		t.Fatalf("the first run: %s", r.State)
	}
	env.Exec(`DROP TRIGGER refuse_run ON runs`)
	if n, err := env.Runs.SweepOnce(ctx); err != nil || n != 1 {
		t.Fatalf("the next sweep changed %d (%v)", n, err)
	}
	if r := runtest.ReadRun(t, env, "lotse", first); r.State != domain.RunFailed {
		t.Fatalf("the first run after the next sweep: %s", r.State)
	}
}
