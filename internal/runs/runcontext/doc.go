// Package runcontext is the run context (run_context.v1,
// docs/design/trust.md#run-context): what a run's agent may read of the
// conversation that triggered it, read as one pipeline (plan, fetch,
// filter, cut and budget, finish), with the pure rule that finishes its
// elements (role, trust, already_delivered) and the trust summary an
// answer's provenance is decided on.
//
// It is a part of the runs module and never imports package runs: the run
// itself (its row, the door that reads it, its session's earlier runs and
// its follow-ups, all in tables runs owns) is the run's lifecycle and
// stays in package runs, which hands these facts in through Runs and keeps
// its exported names for the context (runs.RunContext,
// runs.ContextElement, runs.Service.Context, ...) as aliases and
// delegates. The context reads no table of its own: every statement is a
// neighbour's (messaging's windows, authz's people, runs' facts).
package runcontext
