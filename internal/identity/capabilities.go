package identity

import "context"

// Capabilities are an agent's owner-granted capabilities beyond its grants.
type Capabilities struct {
	// FilesOut lets the agent attach files it uploaded to its messages.
	FilesOut bool
}

// FilesOut reports whether principal id holds the capability files_out (a
// fact: the files module asks it when an agent attaches). An unknown
// principal holds none.
func (s *Service) FilesOut(ctx context.Context, id string) (bool, error) {
	c, err := s.st.capabilitiesOf(ctx, id)
	return c.FilesOut, err
}

// CapabilitiesOf returns the capabilities of principal id (none for an
// unknown one).
func (s *Service) CapabilitiesOf(ctx context.Context, id string) (Capabilities, error) {
	return s.st.capabilitiesOf(ctx, id)
}

// CapabilitiesOfMany returns the capabilities of the principals of list,
// keyed by id, in one statement (the loaders' fact).
func (s *Service) CapabilitiesOfMany(ctx context.Context, list []string) (map[string]Capabilities, error) {
	return s.st.capabilitiesOfMany(ctx, list)
}

// SetCapabilities stores the capabilities of principal id (admin decides
// the owner's right first).
func (w *Writer) SetCapabilities(ctx context.Context, id string, c Capabilities) error {
	return w.s.st.setCapabilities(ctx, id, c)
}
