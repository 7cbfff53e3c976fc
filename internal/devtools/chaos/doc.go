// Package chaos holds the chaos test of runs, claims and follow-ups
// (docs/reliability.md#chaos). Its tests carry the build tag chaos; make
// chaos runs them in full, and make test runs a smoke of TestChaos that
// is bounded by a budget (CHAOS_BUDGET: nothing of the chaos begins or
// lasts past it, then every run ends and is accounted for as in the full
// run; the test logs how long each part took):
//
//	make chaos                  # the fixed seed
//	CHAOS_SEED=7 make chaos     # another schedule, or the replay of a failed one
//	CHAOS_RUNS=2 CHAOS_BUDGET=15s go test -tags chaos -v -run '^TestChaos$' ./internal/devtools/chaos/  # the smoke
//
// The test serves Bothy in-process on the wall clock (leases and the
// sweeper must run in real time while adapter processes die), starts
// reference adapters (bothy agent run, built from this checkout) and the
// model examples of the Python and TypeScript SDKs for the agent lotse
// against a fake OpenAI-compatible model, kills them with SIGKILL at
// random moments (each SDK's example at least once while it serves),
// suspends one past its lease, lets people write requests and follow-ups
// meanwhile, and then accounts for every run and every request from the
// database and the API.
package chaos
