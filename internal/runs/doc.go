// Package runs owns the agent runtime: runs and their state machine, the
// trigger decision's facts and effects (the decision itself is the pure
// domain.DecideTrigger), agent sessions, follow-ups, the run anchor, the
// timeouts and each agent's event stream.
package runs
