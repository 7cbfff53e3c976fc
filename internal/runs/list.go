package runs

import (
	"context"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/paging"
	"bothy.example.com/bothy/internal/platform/problem"
)

// RunPage is a page of runs, newest first.
type RunPage struct {
	Runs []Run
	// More says whether runs follow the page.
	More bool
}

// Triggered returns the runs actor started (its message triggered them)
// that it may read now (runs.list across the instance: the run's thread
// lies in a channel of its read scope), newest first, before the run id
// after (empty for the first page), at most limit. A person's own
// assistant lists what it asked for; agents and apps never trigger runs
// and get an empty list.
//
// Errors: rate_limited; invalid for a limit outside 1 to 100 or an after
// that is no run id (invalid_cursor); not_found for an inactive actor.
func (s *Service) Triggered(ctx context.Context, actor identity.Principal, after string, limit int) (RunPage, error) {
	if err := paging.Check(limit, 100, after); err != nil {
		return RunPage{}, err
	}
	d, _, err := s.authz.Authorize(ctx, actor, authz.RunsList, authz.Instance())
	if err != nil {
		return RunPage{}, err
	}
	var chans, threads []string
	if !d.Scope.All {
		if chans, threads, err = s.chat.VisibleIn(ctx, *d.Scope); err != nil {
			return RunPage{}, problem.Internal("runs.triggered", err)
		}
	}
	list, err := s.triggeredRuns(ctx, actor.ID, d.Scope.All, chans, threads, after, limit+1)
	if err != nil {
		return RunPage{}, problem.Internal("runs.triggered", err)
	}
	page := RunPage{}
	page.Runs, page.More = paging.Cut(list, limit)
	return page, nil
}
