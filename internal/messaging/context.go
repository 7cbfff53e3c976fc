package messaging

import (
	"time"

	"bothy.example.com/bothy/internal/trust"
)

// ContextItem is a message as a run context needs it: the representation
// fields with full content and the author as an id (the GraphQL face
// resolves authors in one batch).
type ContextItem struct {
	ID               string
	ThreadID         string
	ThreadSeq        int64
	AuthorID         string
	Origin           Origin
	Kind             Kind
	ContentMD        string
	ReplyToMessageID string
	Deleted          bool
	CreatedAt        time.Time
	// Provenance is the stored provenance of an agent's message
	// (Message.Provenance); empty for every other origin.
	Provenance trust.Level
}

// ContextQuery selects messages of one thread for a run context. The caller
// has authorized run.context.read on the run of this thread.
type ContextQuery struct {
	ThreadID  string
	AfterSeq  int64 // exclusive lower bound (context_floor_seq, or 0)
	BeforeSeq int64 // exclusive upper bound (thread_seq of the trigger or the parent)
	Limit     int   // keep the newest Limit messages; 0 returns none
	// ExcludeAuthorID leaves out one author's messages (the agent itself in
	// session mode resume); empty excludes none.
	ExcludeAuthorID string
}

// ContextPage holds the selected messages ascending by thread_seq, with
// full content, and whether a selectable older message exists.
type ContextPage struct {
	Items    []ContextItem
	HasOlder bool
}
