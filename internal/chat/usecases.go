package chat

import (
	"context"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/paging"
	"bothy.example.com/bothy/internal/platform/problem"
)

// UseCases are the chat actions of people and agents, each decided by authz
// and written in one unit of work with its events.
type UseCases struct {
	chat   *Service
	authz  *authz.Service
	events *events.Log
	db     *db.DB
	moved  func(ctx context.Context, channelID string)
}

// NewUseCases returns the chat use cases.
func NewUseCases(c *Service, az *authz.Service, ev *events.Log, txs *db.DB) *UseCases {
	return &UseCases{chat: c, authz: az, events: ev, db: txs}
}

// OnMoved sets fn to run after a thread move committed, with the channel
// the thread entered: the runs module re-checks the trigger of the runs
// there, so that a run whose person has no trigger in the new channel is
// told at once. fn must not fail the move (it has committed).
func (u *UseCases) OnMoved(fn func(ctx context.Context, channelID string)) { u.moved = fn }

// Space returns space id (space.read).
func (u *UseCases) Space(ctx context.Context, actor identity.Principal, id string) (Space, error) {
	if _, _, err := u.authz.Authorize(ctx, actor, authz.SpaceRead, authz.Resource{Kind: authz.KindSpace, ID: id}); err != nil {
		return Space{}, err
	}
	sp, err := u.chat.st.GetSpace(ctx, id)
	return sp, internal(err)
}

// Channel returns channel id (channel.read).
func (u *UseCases) Channel(ctx context.Context, actor identity.Principal, id string) (Channel, error) {
	if _, _, err := u.authz.Authorize(ctx, actor, authz.ChannelRead, authz.Resource{Kind: authz.KindChannel, ID: id}); err != nil {
		return Channel{}, err
	}
	c, err := u.chat.st.GetChannel(ctx, id)
	return c, internal(err)
}

// Thread returns thread id (thread.read).
func (u *UseCases) Thread(ctx context.Context, actor identity.Principal, id string) (Thread, error) {
	if _, _, err := u.authz.Authorize(ctx, actor, authz.ThreadRead, authz.Resource{Kind: authz.KindThread, ID: id}); err != nil {
		return Thread{}, err
	}
	t, err := u.chat.st.GetThread(ctx, id)
	return t, internal(err)
}

// Close sets thread id done (thread.close: write on the thread) and emits
// thread.closed. A main thread cannot be closed; closing a done thread
// answers it unchanged.
func (u *UseCases) Close(ctx context.Context, actor identity.Principal, id string) (Thread, error) {
	if _, _, err := u.authz.Authorize(ctx, actor, authz.ThreadClose, authz.Resource{Kind: authz.KindThread, ID: id}); err != nil {
		return Thread{}, err
	}
	var out Thread
	err := u.db.InTx(ctx, func(ctx context.Context) error {
		t, err := u.chat.st.LockThread(ctx, id)
		if err != nil {
			return internal(err)
		}
		if t.Kind == ThreadMain {
			return problem.Newf(problem.Conflict, "main_thread", "the main thread of a channel cannot be closed")
		}
		out = t
		if t.State == ThreadDone {
			return nil
		}
		if err := u.chat.st.SetState(ctx, id, ThreadDone); err != nil {
			return internal(err)
		}
		out.State = ThreadDone
		return u.events.Append(ctx, events.Event{Type: events.ThreadClosed, ChannelID: t.ChannelID, ThreadID: id, Payload: ThreadPayload(out)})
	})
	return out, err
}

// Move moves thread id into channel target (thread.move: trigger on the
// source and the target channel; audited). A main thread cannot move, and a
// thread moves only between channels of the same kind. thread.moved is
// emitted in both channels, so readers of either learn of it.
func (u *UseCases) Move(ctx context.Context, actor identity.Principal, id, target string) (Thread, error) {
	_, src, err := u.authz.Authorize(ctx, actor, authz.ThreadMove, authz.Resource{Kind: authz.KindThread, ID: id})
	if err != nil {
		return Thread{}, err
	}
	_, _, err = u.authz.Authorize(ctx, actor, authz.ThreadMove, authz.Resource{Kind: authz.KindChannel, ID: target})
	if err != nil {
		return Thread{}, err
	}
	var out Thread
	err = u.db.InTx(ctx, func(ctx context.Context) error {
		t, err := u.chat.st.LockThread(ctx, id)
		if err != nil {
			return internal(err)
		}
		if t.Kind == ThreadMain {
			return problem.Newf(problem.Conflict, "main_thread", "the main thread of a channel cannot move")
		}
		from, err := u.chat.st.GetChannel(ctx, t.ChannelID)
		if err != nil {
			return internal(err)
		}
		to, err := u.chat.st.GetChannel(ctx, target)
		if err != nil {
			return internal(err)
		}
		if from.Kind != to.Kind {
			return problem.Invalid(problem.FieldError{Pointer: "/channel_id", Code: "invalid_reference", Detail: "a thread moves only between channels of the same kind"})
		}
		out = t
		if t.ChannelID == target {
			return nil
		}
		if err := u.chat.st.MoveThread(ctx, id, target); err != nil {
			return internal(err)
		}
		out.ChannelID = target
		if out.TitleSource == TitleAuto && out.ParentMessageID != "" {
			out.Title, out.TitleSource = "", "" // see Writer.MoveThread
		}
		payload := ThreadPayload(out)
		payload["from_channel_id"] = src.ChannelID
		return u.events.Append(ctx,
			events.Event{Type: events.ThreadMoved, ChannelID: src.ChannelID, ThreadID: id, Payload: payload},
			events.Event{Type: events.ThreadMoved, ChannelID: target, ThreadID: id, Payload: payload})
	})
	if err == nil && u.moved != nil && out.ChannelID != src.ChannelID {
		u.moved(context.WithoutCancel(ctx), target)
	}
	return out, err
}

func internal(err error) error {
	if err == nil {
		return nil
	}
	return problem.Internal("chat.internal", err)
}

// ChannelPage is a page of channels, in creation order.
type ChannelPage struct {
	Channels []Channel
	// More says whether channels follow the page.
	More bool
}

// Channels returns the channels actor may read (channel.list across the
// instance: those of the spaces and channels its grants name, those it
// operates as an agent; every channel for an owner), in creation order
// after the channel id after (empty for the first page), at most limit.
//
// Errors: rate_limited; invalid for a limit outside 1 to 100 or an after
// that is no channel id (invalid_cursor); not_found for an inactive actor.
func (u *UseCases) Channels(ctx context.Context, actor identity.Principal, after string, limit int) (ChannelPage, error) {
	if err := paging.Check(limit, 100, after); err != nil {
		return ChannelPage{}, err
	}
	d, _, err := u.authz.Authorize(ctx, actor, authz.ChannelsList, authz.Instance())
	if err != nil {
		return ChannelPage{}, err
	}
	var chans []string
	if !d.Scope.All {
		if chans, _, err = u.chat.VisibleIn(ctx, *d.Scope); err != nil {
			return ChannelPage{}, internal(err)
		}
	}
	list, err := u.chat.st.channelPage(ctx, d.Scope.All, chans, after, limit+1)
	if err != nil {
		return ChannelPage{}, internal(err)
	}
	page := ChannelPage{}
	page.Channels, page.More = paging.Cut(list, limit)
	return page, nil
}
