// Package approvals is the approval a run's holder asks its triggering
// person for (docs/design/trust.md#approvals): the approval and its
// request, the checks of a request, who may see its private part, when it
// can still be answered, and its table (run_approvals).
//
// It is a part of the runs module and never imports package runs: how a
// run waits for an approval (waiting_input, its paused stall timer, the
// card, the door, the sweeper's expiry) is the run's lifecycle and stays
// in package runs, which keeps its exported names for these
// (runs.Approval, runs.ApprovalRequest, ...) as aliases.
package approvals
