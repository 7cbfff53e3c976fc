// Package chat owns spaces, channels (kinds, operator modes, switches) and
// threads (kinds, parent message, fixed operator, title, state, move). It
// hands out thread sequence numbers to messaging.
package chat

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/platform/clock"
	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/platform/problem"
)

// Space is a stored space.
type Space struct {
	ID                     string
	Name                   string
	DefaultOperatorAgentID string
	ArchivedAt             *time.Time
}

// Switches are the behaviour switches of a channel
// (docs/design/model.md#spaces-and-channels).
type Switches struct {
	FreeResponse         bool
	AllowMentionedAgents bool
	AutoThread           bool
	HistoryBackfillLimit int
}

// Channel is a stored channel with what its space contributes.
type Channel struct {
	ID              string
	SpaceID         string
	Name            string
	Kind            ChannelKind
	ArchivedAt      *time.Time
	OperatorMode    OperatorMode
	OperatorAgentID string
	Switches        Switches
	// SpaceDefaultOperator and SpaceArchived come from the channel's space.
	SpaceDefaultOperator string
	SpaceArchived        bool
	MainThreadID         string
}

// EffectiveOperator returns the agent that operates the channel now: mode
// agent gives its agent, none gives none, inherit the space's default.
func (c Channel) EffectiveOperator() string {
	switch c.OperatorMode {
	case OperatorAgent:
		return c.OperatorAgentID
	case OperatorInherit:
		return c.SpaceDefaultOperator
	default:
		return ""
	}
}

// Archived reports whether the channel or its space is archived.
func (c Channel) Archived() bool { return c.ArchivedAt != nil || c.SpaceArchived }

// Thread is a stored thread.
type Thread struct {
	ID              string
	ChannelID       string
	Kind            ThreadKind
	ParentMessageID string
	OperatorAgentID string
	Title           string
	TitleSource     TitleSource
	CreatedBy       string
	State           ThreadState
	LastSeq         int64
	CreatedAt       time.Time
}

// ErrNotFound is returned for an unknown space, channel or thread.
var ErrNotFound = fmt.Errorf("chat: %w", problem.ErrMissing)

// Service is the chat module's service.
type Service struct {
	db *db.DB
	st store
	// backfillDefault and backfillMax are channel.history_backfill_limit_default
	// and channel.history_backfill_limit_max.
	backfillDefault, backfillMax int
}

// NewService returns the chat service over d.
func NewService(d *db.DB, c clock.Clock, backfillDefault, backfillMax int) *Service {
	return &Service{db: d, st: store{pool: d.Pool(), clock: c}, backfillDefault: backfillDefault, backfillMax: backfillMax}
}

// CreateSpace stores a space with an optional default operator agent. A
// bad name is a validation error, a taken one 409 name_taken.
func (w *Writer) CreateSpace(ctx context.Context, name, defaultOperator string) (Space, error) {
	s := w.s
	if err := CheckName(name, "/name"); err != nil {
		return Space{}, err
	}
	return s.st.insertSpace(ctx, name, defaultOperator)
}

// NewChannel describes a channel to create. Nil switch pointers take the
// defaults (free_response and allow_mentioned_agents off, auto_thread on,
// history_backfill_limit channel.history_backfill_limit_default).
type NewChannel struct {
	SpaceID              string
	Name                 string
	Kind                 ChannelKind
	OperatorMode         OperatorMode
	OperatorAgentID      string
	FreeResponse         *bool
	AllowMentionedAgents *bool
	AutoThread           *bool
	HistoryBackfillLimit *int
	CreatedBy            string
}

// CreateChannel stores a channel and, for a text channel, its main thread,
// in one transaction (the caller's, when ctx carries one). A bad name, kind
// or switch is a validation error, a name taken in the space 409 name_taken.
func (w *Writer) CreateChannel(ctx context.Context, nc NewChannel) (Channel, error) {
	s := w.s
	if err := CheckName(nc.Name, "/name"); err != nil {
		return Channel{}, err
	}
	if nc.Kind != ChannelText && nc.Kind != ChannelForum {
		return Channel{}, problem.Invalid(problem.FieldError{Pointer: "/kind", Code: "invalid_enum"})
	}
	if err := s.CheckSwitches(SwitchesPatch{HistoryBackfillLimit: nc.HistoryBackfillLimit}, "/switches"); err != nil {
		return Channel{}, err
	}
	sw := Switches{AutoThread: true, HistoryBackfillLimit: s.backfillDefault}
	if nc.FreeResponse != nil {
		sw.FreeResponse = *nc.FreeResponse
	}
	if nc.AllowMentionedAgents != nil {
		sw.AllowMentionedAgents = *nc.AllowMentionedAgents
	}
	if nc.AutoThread != nil {
		sw.AutoThread = *nc.AutoThread
	}
	if nc.HistoryBackfillLimit != nil {
		sw.HistoryBackfillLimit = *nc.HistoryBackfillLimit
	}
	if nc.OperatorMode == "" {
		nc.OperatorMode = OperatorInherit
	}
	id := ids.New()
	now := s.st.clock.Now()
	// The channel and its main thread are one unit: a text channel never
	// exists without its main thread.
	err := s.db.InTx(ctx, func(ctx context.Context) error {
		if err := s.st.insertChannel(ctx, id, nc, sw, now); err != nil {
			return err
		}
		if nc.Kind == ChannelText {
			return s.st.insertMainThread(ctx, id, nc.CreatedBy, now)
		}
		return nil
	})
	if err != nil {
		return Channel{}, err
	}
	return s.st.GetChannel(ctx, id)
}

// NewThread describes a thread to create inside a unit of work.
type NewThread struct {
	Channel         Channel
	ParentMessageID string
	Title           string
	// ByAgent sets title_source auto (an agent's thread), otherwise user.
	ByAgent   bool
	CreatedBy string
	// TitleFrom, when Title is empty, is the text whose first line becomes
	// the title (the first message).
	TitleFrom string
}

// TitleMaxRunes bounds a derived title; longer first lines are cut.
const TitleMaxRunes = 120

// DeriveTitle returns the first non-empty line of text, cut to
// TitleMaxRunes runes.
func DeriveTitle(text string) string {
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if utf8.RuneCountInString(line) > TitleMaxRunes {
			r := []rune(line)
			line = string(r[:TitleMaxRunes])
		}
		return line
	}
	return ""
}

// CreateThread stores a new thread (kind post in a forum, thread in a text
// channel) with the channel's effective operator as its fixed operator.
func (w *Writer) CreateThread(ctx context.Context, nt NewThread) (Thread, error) {
	s := w.s
	kind := ThreadThread
	if nt.Channel.Kind == ChannelForum {
		kind = ThreadPost
	}
	title := strings.TrimSpace(nt.Title)
	if title == "" {
		title = DeriveTitle(nt.TitleFrom)
	}
	source := TitleByUser
	if nt.ByAgent {
		source = TitleAuto
	}
	t := Thread{ID: ids.New(), ChannelID: nt.Channel.ID, Kind: kind, ParentMessageID: nt.ParentMessageID,
		OperatorAgentID: nt.Channel.EffectiveOperator(), Title: title, TitleSource: source, CreatedBy: nt.CreatedBy,
		State: ThreadOpen, CreatedAt: s.st.clock.Now()}
	if title == "" {
		t.TitleSource = ""
	}
	if err := s.st.insertThread(ctx, t); err != nil {
		return Thread{}, err
	}
	return t, nil
}

// SwitchesPatch changes the named switches; nil members stay.
type SwitchesPatch struct {
	FreeResponse         *bool
	AllowMentionedAgents *bool
	AutoThread           *bool
	HistoryBackfillLimit *int
}

// UpdateSwitches applies p to the channel in the transaction of ctx. history_backfill_limit
// must lie between zero and channel.history_backfill_limit_max.
func (w *Writer) UpdateSwitches(ctx context.Context, channelID string, p SwitchesPatch) error {
	s := w.s
	if l := p.HistoryBackfillLimit; l != nil && (*l < 0 || *l > s.backfillMax) {
		return problem.Invalid(problem.FieldError{Pointer: "/history_backfill_limit", Code: "out_of_range",
			Detail: "must lie between 0 and channel.history_backfill_limit_max"})
	}
	return s.st.updateSwitches(ctx, channelID, p)
}

// ThreadPath returns the authorization path of thread id (Exists false for
// an unknown id), in one statement.
func (s *Service) ThreadPath(ctx context.Context, id string) (authz.Path, error) {
	t, c, err := s.st.ThreadInfo(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return authz.Path{Kind: authz.KindThread, ID: id}, nil
	}
	if err != nil {
		return authz.Path{}, fmt.Errorf("thread path: %w", err)
	}
	return PathInThread(c, t, authz.KindThread, id), nil
}

// channelPath builds the path of something in channel c.
func channelPath(c Channel, kind authz.ResourceKind, id string) authz.Path {
	return authz.Path{Exists: true, Kind: kind, ID: id, SpaceID: c.SpaceID, ChannelID: c.ID,
		ChannelOperator: c.EffectiveOperator(), ChannelArchived: c.ArchivedAt != nil, SpaceArchived: c.SpaceArchived}
}

// ChannelPath returns the path of channel c.
func ChannelPath(c Channel) authz.Path { return channelPath(c, authz.KindChannel, c.ID) }

// Path implements authz.Source for spaces, channels and threads.
func (s *Service) Path(ctx context.Context, kind authz.ResourceKind, id string) (authz.Path, error) {
	switch kind {
	case authz.KindThread:
		return s.ThreadPath(ctx, id)
	case authz.KindChannel:
		c, err := s.st.GetChannel(ctx, id)
		if errors.Is(err, ErrNotFound) {
			return authz.Path{Kind: kind, ID: id}, nil
		}
		if err != nil {
			return authz.Path{}, err
		}
		return ChannelPath(c), nil
	case authz.KindSpace:
		sp, err := s.st.GetSpace(ctx, id)
		if errors.Is(err, ErrNotFound) {
			return authz.Path{Kind: kind, ID: id}, nil
		}
		if err != nil {
			return authz.Path{}, err
		}
		return authz.Path{Exists: true, Kind: kind, ID: id, SpaceID: sp.ID, SpaceArchived: sp.ArchivedAt != nil}, nil
	default:
		// The other kinds have their paths in their own modules.
	}
	return authz.Path{}, fmt.Errorf("chat: no paths of kind %s", kind)
}

// PathInThread returns the path of a thing of kind id inside thread t of
// channel c (used for messages and runs without another query).
func PathInThread(c Channel, t Thread, kind authz.ResourceKind, id string) authz.Path {
	p := channelPath(c, kind, id)
	p.ThreadID, p.ThreadOperator = t.ID, t.OperatorAgentID
	return p
}

// ThreadPayload renders t in the REST shape for event payloads.
func ThreadPayload(t Thread) map[string]any {
	p := map[string]any{"id": t.ID, "channel_id": t.ChannelID, "kind": string(t.Kind), "created_by": t.CreatedBy,
		"state": string(t.State), "last_seq": t.LastSeq, "created_at": t.CreatedAt.UTC().Format("2006-01-02T15:04:05.000Z07:00")}
	for k, v := range map[string]string{"parent_message_id": t.ParentMessageID, "operator_agent_id": t.OperatorAgentID,
		"title": t.Title, "title_source": string(t.TitleSource)} {
		if v != "" {
			p[k] = v
		}
	}
	return p
}

// VisibleIn returns the channels of scope sc (authz decides it: the
// spaces and channels its grants name, and the agent the operator rule
// applies to): those that lie in its spaces or are named in its channels,
// plus those whose effective operator (Channel.EffectiveOperator, the one
// place that says who that is) is sc.Operator; and the threads whose fixed
// operator is sc.Operator. It is the visibility predicate of list queries.
func (s *Service) VisibleIn(ctx context.Context, sc authz.Scope) (chans, threads []string, err error) {
	var agent any
	if sc.Operator != "" {
		agent = sc.Operator
	}
	list, err := s.st.scopeChannels(ctx, sc.Spaces, sc.Channels, agent)
	if err != nil {
		return nil, nil, err
	}
	chans = []string{}
	for _, c := range list {
		if c.named || (sc.Operator != "" && c.EffectiveOperator() == sc.Operator) {
			chans = append(chans, c.ID)
		}
	}
	agentID := sc.Operator
	if agentID == "" {
		return chans, nil, nil
	}
	threads, err = s.st.operatedThreads(ctx, agentID)
	return chans, threads, err
}

// PathsOf returns the paths of (channel, thread) pairs — thread empty for
// channel-level things — in two statements, for filter mode over lists.
func (s *Service) PathsOf(ctx context.Context, kind authz.ResourceKind, pairs [][2]string) ([]authz.Path, error) {
	chanIDs, threadIDs := map[string]bool{}, map[string]bool{}
	for _, p := range pairs {
		chanIDs[p[0]] = true
		if p[1] != "" {
			threadIDs[p[1]] = true
		}
	}
	channels, err := s.st.channelsByID(ctx, keysOf(chanIDs))
	if err != nil {
		return nil, err
	}
	ops := map[string]string{}
	if len(threadIDs) > 0 {
		if ops, err = s.st.threadOperators(ctx, keysOf(threadIDs)); err != nil {
			return nil, err
		}
	}
	out := make([]authz.Path, len(pairs))
	for i, p := range pairs {
		c, ok := channels[p[0]]
		if !ok {
			out[i] = authz.Path{Kind: kind}
			continue
		}
		out[i] = channelPath(c, kind, "")
		if p[1] != "" {
			out[i].ThreadID, out[i].ThreadOperator = p[1], ops[p[1]]
		}
	}
	return out, nil
}

// ThreadPaths returns the paths of the threads ids, keyed by id, in three
// statements whatever their number (a thread that does not exist has a
// path that does not exist), for the batched read checks of loaders.
func (s *Service) ThreadPaths(ctx context.Context, ids []string) (map[string]authz.Path, error) {
	chans, err := s.st.threadChannels(ctx, ids)
	if err != nil {
		return nil, err
	}
	pairs := make([][2]string, 0, len(chans))
	for _, id := range ids {
		if c, ok := chans[id]; ok {
			pairs = append(pairs, [2]string{c, id})
		}
	}
	paths, err := s.PathsOf(ctx, authz.KindThread, pairs)
	if err != nil {
		return nil, err
	}
	out := make(map[string]authz.Path, len(ids))
	for _, id := range ids {
		out[id] = authz.Path{Kind: authz.KindThread}
	}
	for i, pr := range pairs {
		paths[i].ID = pr[1]
		out[pr[1]] = paths[i]
	}
	return out, nil
}

func keysOf(m map[string]bool) []string { return slices.Collect(maps.Keys(m)) }
