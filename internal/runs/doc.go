// Package runs owns the agent runtime: runs and their state machine, the
// trigger decision's facts and effects (the decision itself is the pure
// domain.DecideTrigger), agent sessions, follow-ups, the run anchor, the
// timeouts, the run context, the live boxes and how a run waits for an
// approval.
//
// Some of its ideas live in subpackages that never import runs (runs
// imports them and keeps their exported names as aliases and delegates):
// runs/domain the pure rules without I/O, runs/livebox the live box's
// pure rule, runs/livehub the live boxes of a replica (the order of their
// updates by notification, the replicas kept as one, the writes and the
// readers that follow them; its Store is implemented here, beside the run
// it stores a box with), runs/approvals the approval itself and its table,
// runs/stream each agent's event stream (long poll, acknowledgement,
// subscription steps) and the hub that wakes it, and runs/runcontext the
// run context's read (plan, fetch, shape, finish) and the rule that
// finishes its elements. The door that reads a run, and the statements on
// runs' own tables a context read needs (earlier runs, follow-up facts),
// stay here and reach runs/runcontext as its Runs.
package runs
