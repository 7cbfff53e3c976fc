package graph

import (
	"context"
	"errors"

	"github.com/graph-gophers/dataloader/v7"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/identity"
)

// The loaders of the threads messages started (Message.startedThread,
// Message.startedThreadId): which thread, whether the caller may read it
// now, and the thread itself, each batched for a page of messages.

// readableStartedThread returns the id of the thread message messageID
// started when the caller of ctx may read it now, and "" otherwise (no
// thread, or one out of the caller's sight: the answer does not tell them
// apart), decided in one batch for all messages of the answer.
func readableStartedThread(ctx context.Context, messageID string) (string, error) {
	l, err := LoadersFor(ctx)
	if err != nil {
		return "", err
	}
	tid, err := l.StartedThreads.Load(ctx, messageID)()
	if err != nil || tid == "" {
		return "", err
	}
	readable, err := l.ReadableThreads.Load(ctx, tid)()
	if err != nil || !readable {
		return "", err
	}
	return tid, nil
}

func (src Sources) startedThreads(ctx context.Context, ids []string) (map[string]string, error) {
	return src.Chat.StartedThreadIDs(ctx, ids)
}

func (src Sources) threads(ctx context.Context, ids []string) (map[string]chat.Thread, error) {
	return src.Chat.Threads(ctx, ids)
}

// readableThreadsBatch loads, by thread id, whether the request's caller
// may read the thread now: one FilterMany over the threads' paths.
func readableThreadsBatch(src Sources) dataloader.BatchFunc[string, bool] {
	return func(ctx context.Context, keys []string) []*dataloader.Result[bool] {
		may, err := readableThreads(ctx, src, keys)
		out := make([]*dataloader.Result[bool], len(keys))
		for i := range keys {
			if err != nil {
				out[i] = &dataloader.Result[bool]{Error: internalError(err)}
			} else {
				out[i] = &dataloader.Result[bool]{Data: may[i]}
			}
		}
		return out
	}
}

// readableThreads decides thread.read on threads ids for the caller of
// ctx, in the order of ids.
func readableThreads(ctx context.Context, src Sources, ids []string) ([]bool, error) {
	p, ok := identity.FromContext(ctx)
	if !ok {
		return nil, errors.New("no caller")
	}
	paths, err := src.Chat.ThreadPaths(ctx, ids)
	if err != nil {
		return nil, err
	}
	facts := make([]authz.Facts, len(ids))
	for i, id := range ids {
		facts[i] = authz.Facts{Path: paths[id]}
	}
	// FilterMany: a thread the caller may not read is an answer here,
	// not a bug of a list's query (Filter would count it as one).
	may, err := src.Authz.FilterMany(ctx, []identity.Principal{p}, authz.ThreadRead, facts)
	if err != nil {
		return nil, err
	}
	return may[0], nil
}
