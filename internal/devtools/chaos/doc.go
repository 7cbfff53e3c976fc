// Package chaos holds the chaos test of runs, claims and follow-ups
// (docs/reliability.md#chaos). Its tests carry the build tag chaos, so
// make test never runs them; make chaos does:
//
//	make chaos                  # the fixed seed
//	CHAOS_SEED=7 make chaos     # another schedule, or the replay of a failed one
//
// The test serves Bothy in-process on the wall clock (leases and the
// sweeper must run in real time while adapter processes die), starts
// reference adapters (bothy agent run, built from this checkout) for the
// agent lotse against a fake OpenAI-compatible model, kills them with
// SIGKILL at random moments, suspends one past its lease, lets people
// write requests and follow-ups meanwhile, and then accounts for every
// run and every request from the database and the API.
package chaos
