package chat

import "context"

// The facts below are reads for the neighbouring modules: they decide no
// right and return what a neighbour needs to decide one, or to carry out a
// use case that its own door call allowed. People's and agents' reads go
// through UseCases, which asks authz first.

// SpaceExists reports whether a space with name exists (for scripts that
// must not build twice).
func (s *Service) SpaceExists(ctx context.Context, name string) (bool, error) {
	return s.st.SpaceExists(ctx, name)
}

// GetChannel returns the channel with id, or ErrNotFound.
func (s *Service) GetChannel(ctx context.Context, id string) (Channel, error) {
	return s.st.GetChannel(ctx, id)
}

// GetSpace returns the space with id, or ErrNotFound.
func (s *Service) GetSpace(ctx context.Context, id string) (Space, error) {
	return s.st.GetSpace(ctx, id)
}

// GetThread returns the thread with id, or ErrNotFound.
func (s *Service) GetThread(ctx context.Context, id string) (Thread, error) {
	return s.st.GetThread(ctx, id)
}

// ChannelsOfSpace returns the ids of the channels of space id.
func (s *Service) ChannelsOfSpace(ctx context.Context, id string) ([]string, error) {
	return s.st.ChannelsOfSpace(ctx, id)
}

// ThreadInfo returns thread id with its current channel (and that channel's
// space facts) in one statement, or ErrNotFound.
func (s *Service) ThreadInfo(ctx context.Context, id string) (Thread, Channel, error) {
	return s.st.ThreadInfo(ctx, id)
}

// StartedThreadIDs returns, for each of messageIDs that started a thread
// (the thread's parent message), the id of that thread, in one statement.
// Messages that started none are absent from the map. It decides nothing
// about visibility: callers read each thread through UseCases.Thread.
func (s *Service) StartedThreadIDs(ctx context.Context, messageIDs []string) (map[string]string, error) {
	return s.st.StartedThreadIDs(ctx, messageIDs)
}

// Threads returns the threads with the given ids in one statement, keyed
// by id; unknown and malformed ids are absent.
func (s *Service) Threads(ctx context.Context, idList []string) (map[string]Thread, error) {
	return s.st.GetThreads(ctx, idList)
}
