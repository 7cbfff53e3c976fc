package chat

// ChannelKind is the kind of a channel (the GraphQL enum ChannelKind binds
// to it).
type ChannelKind string

// The channel kinds.
const (
	// ChannelText has a main thread and threads started from its messages.
	ChannelText ChannelKind = "text"
	// ChannelForum has posts only.
	ChannelForum ChannelKind = "forum"
)

// OperatorMode says where a channel's operator comes from (the GraphQL enum
// OperatorMode binds to it).
type OperatorMode string

// The operator modes.
const (
	// OperatorInherit takes the space's default operator.
	OperatorInherit OperatorMode = "inherit"
	// OperatorAgent names the channel's own operator agent.
	OperatorAgent OperatorMode = "agent"
	// OperatorNone leaves the channel without operator.
	OperatorNone OperatorMode = "none"
)

// ThreadKind is the kind of a thread (the GraphQL enum ThreadKind binds to
// it).
type ThreadKind string

// The thread kinds.
const (
	// ThreadMain is the one main thread of a text channel.
	ThreadMain ThreadKind = "main"
	// ThreadThread is a thread of a text channel.
	ThreadThread ThreadKind = "thread"
	// ThreadPost is a post of a forum.
	ThreadPost ThreadKind = "post"
)

// ThreadState is the state of a thread (the GraphQL enum ThreadState binds
// to it).
type ThreadState string

// The thread states.
const (
	ThreadOpen ThreadState = "open"
	ThreadDone ThreadState = "done"
)

// TitleSource says who gave a thread its title (the GraphQL enum
// TitleSource binds to it); empty for a thread without title.
type TitleSource string

// The title sources.
const (
	TitleByUser TitleSource = "user"
	TitleAuto   TitleSource = "auto"
)
