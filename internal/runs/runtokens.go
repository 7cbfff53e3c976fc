package runs

import (
	"context"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/problem"
)

// CreateRunToken mints a run token for the agent's own run and holder
// (run.token.create, audited): the process that holds the run hands it to
// a child (bothy agent run --runner), which may then call only that run's
// operations and read its thread, as that holder (authz.RunBound); the
// token dies when the run ends. The call renews the holder's lease.
//
// Errors: not_found for a run the caller may not see; forbidden for
// anyone but the run's agent (not_self, subject_kind_not_allowed) and for
// a run token (run_token_scope); invalid without a holder; conflict
// run_not_started while the run is queued (nobody holds it), run_claimed
// when another holder holds it, run_not_active once it ended;
// trigger_revoked when the run's person lost trigger.
func (s *Service) CreateRunToken(ctx context.Context, actor identity.Principal, id string, holder Holder) (identity.IssuedToken, error) {
	var tok identity.IssuedToken
	// A queued run has no holder to mint for: claim it first. Not
	// run_claimed, which would say another process holds it.
	notStarted := func() error {
		return problem.Newf(problem.Conflict, "run_not_started", "claim the run (startRun) before minting a token for it")
	}
	_, err := s.asHolder(ctx, actor, authz.RunTokenCreate, id, holder, notStarted, func(ctx context.Context) (err error) {
		if tok, err = s.identW.CreateRunToken(ctx, actor, id, string(holder)); err != nil {
			return problem.Internal("runs.createRunToken", err)
		}
		return nil
	})
	if err != nil {
		return identity.IssuedToken{}, err
	}
	return tok, nil
}
