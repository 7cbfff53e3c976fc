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
// that it may read now (run.list; READ on the run's thread as the door
// decides it), newest first, before the run id
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
	if _, _, err := s.authz.Authorize(ctx, actor, authz.RunsList, authz.Instance()); err != nil {
		return RunPage{}, err
	}
	// The caller's own runs, newest first, kept when it may read the run's
	// thread now (one batched decision per batch read); a batch with
	// unreadable runs is followed by the next until the page is full.
	var page []Run
	cursor := after
	for {
		batch, err := s.st.triggeredRuns(ctx, actor.ID, cursor, limit+1)
		if err != nil {
			return RunPage{}, problem.Internal("runs.triggered: read triggered runs", err)
		}
		readable, err := s.readableThreads(ctx, actor, batch)
		if err != nil {
			return RunPage{}, problem.Internal("runs.triggered: read readable threads", err)
		}
		for i, r := range batch {
			if readable[i] {
				page = append(page, r)
			}
		}
		if len(page) > limit || len(batch) <= limit {
			out := RunPage{}
			out.Runs, out.More = paging.Cut(page, limit)
			return out, nil
		}
		cursor = batch[len(batch)-1].ID
	}
}

// readableThreads decides for each run of list whether actor may read its
// thread now, in one batch (chat's paths, authz's grants), without a
// rate-limit token or an audit row.
func (s *Service) readableThreads(ctx context.Context, actor identity.Principal, list []Run) ([]bool, error) {
	ids := make([]string, len(list))
	for i, r := range list {
		ids[i] = r.ThreadID
	}
	paths, err := s.chat.ThreadPaths(ctx, ids)
	if err != nil {
		return nil, err
	}
	facts := make([]authz.Facts, len(list))
	for i, r := range list {
		facts[i] = authz.Facts{Path: paths[r.ThreadID]}
	}
	ok, err := s.authz.FilterMany(ctx, []identity.Principal{actor}, authz.ThreadRead, facts)
	if err != nil {
		return nil, err
	}
	return ok[0], nil
}
