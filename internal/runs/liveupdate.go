package runs

import (
	"context"
	"errors"
	"time"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/platform/text"
	"bothy.example.com/bothy/internal/runs/domain"
	"bothy.example.com/bothy/internal/runs/livebox"
	"bothy.example.com/bothy/internal/runs/livehub"
)

// LiveUpdate is a holder's change of its run's live box (updateRunLive).
type LiveUpdate struct {
	// BaseVersion must be the box's current version.
	BaseVersion int
	// Append is added after the text (after Replace when both are set).
	Append string
	// Replace, when set, replaces the text.
	Replace *string
	// Status, when set, replaces the status line (at most 200 bytes).
	Status *string
	// Done marks the box done.
	Done bool
}

// Live is a run's live box with the anchor that shows it.
type Live struct {
	RunID, AnchorID string
	livebox.Box
}

// liveDecideWait bounds how long an update waits for its own notification
// to come back; past it the update answers unavailable (the box may or may
// not have taken it: the caller reads live).
const liveDecideWait = 5 * time.Second

// UpdateLive applies a holder's update to the live box of the agent's own
// run id (run.live.update): only while the run runs or waits, only for the
// process that holds it (run_claimed otherwise), only while the run's
// person still holds trigger (trigger_revoked), and only against the
// current version (conflict live_version naming it). Nothing is written to
// the database: the update is ordered by a notification and applied by
// every replica (docs/design/runs.md#live-box).
func (s *Service) UpdateLive(ctx context.Context, actor identity.Principal, id string, holder Holder, u LiveUpdate) (Live, error) {
	if err := holder.check(); err != nil {
		return Live{}, err
	}
	if err := s.checkLiveUpdate(u); err != nil {
		return Live{}, err
	}
	if _, _, err := s.authz.Authorize(ctx, actor, authz.RunLiveUpdate, authz.Resource{Kind: authz.KindRun, ID: id}); err != nil {
		return Live{}, err
	}
	if s.hub != nil && !s.hub.Connected() {
		// An update sent while this replica does not listen would not
		// come back to it: wait for the listener a moment.
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		connected := s.hub.RetryNow(wctx)
		cancel()
		if !connected {
			return Live{}, problem.Newf(problem.Unavailable, "", "the live box is not reachable now: try again")
		}
	}
	res, err := s.sendLive(ctx, actor, id, holder, u)
	if errors.Is(err, livehub.ErrUnsure) {
		// This replica took the box over while the update travelled (it
		// joined late or reconnected): send it once more against the
		// box everyone holds now; a version conflict then says it was
		// taken the first time.
		res, err = s.sendLive(ctx, actor, id, holder, u)
	}
	if err != nil {
		if errors.Is(err, livehub.ErrUnsure) {
			return Live{}, problem.Newf(problem.Unavailable, "", "the live box is being recovered: read the run's live box and continue from there")
		}
		return Live{}, err
	}
	switch {
	case errors.Is(res.Err, livebox.ErrVersion):
		p := problem.Newf(problem.Conflict, "live_version", "the live box is at another version: continue from currentVersion")
		v := res.Box.Version
		p.CurrentVersion = &v
		return Live{}, p
	case errors.Is(res.Err, livebox.ErrEnded):
		return Live{}, errNotActive()
	case errors.Is(res.Err, livebox.ErrTooLong):
		return Live{}, problem.Invalid(problem.FieldError{Pointer: "/append", Code: "too_long", Detail: "the live box's text would exceed run.live_max_bytes"})
	}
	return Live{RunID: id, AnchorID: res.Anchor, Box: res.Box}, nil
}

// sendLive checks the run and sends one update, and returns what this
// replica decided of it; livehub.ErrUnsure when it cannot know.
func (s *Service) sendLive(ctx context.Context, actor identity.Principal, id string, holder Holder, u LiveUpdate) (livehub.Result, error) {
	m := livehub.Msg{ID: ids.New(), Run: id, Kind: string(livebox.Update), Base: u.BaseVersion, Append: u.Append, Replace: u.Replace,
		Status: u.Status, Done: u.Done, At: s.st.clock.Now().UnixMicro()}
	wait := s.live.Expect(m.ID)
	defer s.live.Forget(m.ID)
	var refusal error
	lost := false
	err := s.db.InTx(ctx, func(ctx context.Context) error {
		refusal, lost = nil, false
		r, err := s.st.runForLive(ctx, id)
		if err != nil {
			return problem.Internal("runs.UpdateLive: read run", err)
		}
		switch {
		case !r.State.Active():
			refusal = errNotActive()
			return nil
		case r.State == domain.RunQueued:
			refusal = problem.Newf(problem.Conflict, "run_not_started", "start the run first")
			return nil
		}
		if lost, err = s.agentCallLost(ctx, actor, r); err != nil || lost {
			return err
		}
		if refusal = fence(r, holder); refusal != nil {
			return nil
		}
		if err := s.live.Publish(ctx, m); err != nil {
			return problem.Internal("runs.UpdateLive: publish live update", err)
		}
		return nil
	})
	if err != nil {
		return livehub.Result{}, err
	}
	if lost {
		// The loss is applied the way every call of the agent applies it.
		_, err := s.change(ctx, actor, authz.RunLiveUpdate, id, func(context.Context, Run, string) (Run, []events.Event, error) {
			return Run{}, nil, errTriggerRevoked()
		})
		if err == nil {
			err = errTriggerRevoked()
		}
		return livehub.Result{}, err
	}
	if refusal != nil {
		return livehub.Result{}, refusal
	}
	return awaitLive(ctx, wait)
}

// awaitLive waits at most liveDecideWait for this replica's decision on a
// sent update: its result, or livehub.ErrUnsure when the replica cannot know
// whether the update was taken.
func awaitLive(ctx context.Context, wait <-chan livehub.Result) (livehub.Result, error) {
	timer := time.NewTimer(liveDecideWait)
	defer timer.Stop()
	select {
	case res := <-wait:
		if errors.Is(res.Err, livehub.ErrUnsure) {
			return livehub.Result{}, livehub.ErrUnsure
		}
		return res, nil
	case <-timer.C:
		return livehub.Result{}, problem.Newf(problem.Unavailable, "", "the live box did not answer in time: read the run's live box and continue from there")
	case <-ctx.Done():
		return livehub.Result{}, problem.Internal("runs.UpdateLive", ctx.Err())
	}
}

// checkLiveUpdate validates an update's members.
func (s *Service) checkLiveUpdate(u LiveUpdate) error {
	var fields []problem.FieldError
	if u.BaseVersion < 0 {
		fields = append(fields, problem.FieldError{Pointer: "/base_version", Code: "out_of_range", Detail: "0 or more"})
	}
	if fe := text.Check(u.Append, "/append"); fe != nil {
		fields = append(fields, *fe)
	} else if len(u.Append) > s.live.MaxBytes() {
		fields = append(fields, problem.FieldError{Pointer: "/append", Code: "too_long", Detail: "at most run.live_max_bytes"})
	}
	if u.Replace != nil {
		if fe := text.Check(*u.Replace, "/replace"); fe != nil {
			fields = append(fields, *fe)
		} else if len(*u.Replace) > s.live.MaxBytes() {
			fields = append(fields, problem.FieldError{Pointer: "/replace", Code: "too_long", Detail: "at most run.live_max_bytes"})
		}
	}
	if u.Status != nil {
		if fe := text.Check(*u.Status, "/status"); fe != nil {
			fields = append(fields, *fe)
		} else if len(*u.Status) > livebox.StatusMaxBytes {
			fields = append(fields, problem.FieldError{Pointer: "/status", Code: "too_long", Detail: "at most 200 bytes"})
		}
	}
	if len(fields) > 0 {
		return problem.Invalid(fields...)
	}
	return nil
}

// Lives returns the live boxes of the runs runIDs: the latest version this
// replica holds, or the stored copy. It decides nothing: the caller read
// the runs with the reader's rights. Runs without a box are left out.
func (s *Service) Lives(ctx context.Context, runIDs []string) (map[string]Live, error) {
	out := map[string]Live{}
	held := s.live.Current(runIDs)
	if len(held) > 0 {
		// Read after write: what committed before this read (an answer,
		// an end, an update through another replica) is applied first.
		s.live.CatchUp(ctx)
		held = s.live.Current(runIDs)
	}
	var rest []string
	for _, id := range runIDs {
		if b, ok := held[id]; ok {
			out[id] = Live{RunID: id, AnchorID: b.AnchorID, Box: b.Box}
		} else if ids.Valid(id) {
			rest = append(rest, id)
		}
	}
	if len(rest) == 0 {
		return out, nil
	}
	stored, err := s.st.livesOf(ctx, rest)
	if err != nil {
		return nil, problem.Internal("runs.Lives", err)
	}
	for id, b := range stored {
		out[id] = Live{RunID: id, AnchorID: b.AnchorID, Box: b.Box}
	}
	return out, nil
}

// RunLive writes the live boxes this replica changed, every
// run.live_flush_interval and at once at an answer or an end, until ctx
// ends (then it writes what is left).
func (s *Service) RunLive(ctx context.Context) { s.live.Run(ctx) }

// LiveWrites returns how many box writes this replica made, and a channel
// closed at its next write (tests and benchmarks wait on it instead of
// sleeping).
func (s *Service) LiveWrites() (int, <-chan struct{}) { return s.live.Writes() }

// LiveEvent is one change of a box as readers receive it (livehub.Event).
type LiveEvent = livehub.Event

// LiveSubscription receives the changes of every box on this replica
// (livehub.Subscription); its owner decides which of them its reader may
// see.
type LiveSubscription = livehub.Subscription

// SubscribeLive returns a subscription to the box changes of this replica
// with room for queue changes; when a reader falls further behind, Full is
// closed and the subscription receives nothing more.
func (s *Service) SubscribeLive(queue int) *LiveSubscription { return s.live.Follow(queue) }
