package messaging

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/clock"
	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/platform/text"
	"bothy.example.com/bothy/internal/platform/textcut"
	"bothy.example.com/bothy/internal/trust"
)

// Posted describes a message just stored, handed to subscribers inside the
// unit of work that stores it.
type Posted struct {
	Message Message
	Thread  chat.Thread
	Channel chat.Channel
	Author  identity.Principal
	// RunID is the run a client named in run_id (agents only), after the
	// body rules; empty otherwise.
	RunID string
	// Holder is the adapter process the answer came from (Input.Holder).
	Holder string
	// ClientMsgID is the key the message was sent with.
	ClientMsgID string
}

// Subscriber reacts to a posted message inside its unit of work (the
// trigger decision of the runs module, for example). Returning an error
// vetoes the whole unit: nothing of it is stored. Subscribers may append
// events to the returned list; they commit with the message.
type Subscriber interface {
	OnMessagePosted(ctx context.Context, p *Posted) ([]events.Event, error)
}

// Limits are the configured limits of messaging.
type Limits struct {
	MaxContentBytes     int // message.max_content_bytes
	ListContentMaxBytes int // message.list_content_max_bytes
	ListLimitDefault    int // message.list_limit_default
	ListLimitMax        int // message.list_limit_max
}

// Service is the messaging module's service.
type Service struct {
	st    store
	db    *db.DB
	ident *identity.Service
	chat  *chat.Service
	// chatW numbers and locks the threads messaging writes into (its door
	// call decided the right).
	chatW       *chat.Writer
	authz       *authz.Service
	events      *events.Log
	limits      Limits
	subscribers []Subscriber
	provenance  ProvenanceDecider
	files       Attacher
	created     *prometheus.CounterVec
	history     HistoryHook // nil in production
}

// HistoryHook is a test instrument: it sees the rows of a history read
// before filter mode checks them, so that a test can prove that filter mode
// drops an item a faulty query would leak. Production passes none.
type HistoryHook interface {
	History(ms []Message) []Message
}

// Option adjusts a Service at construction.
type Option func(*Service)

// WithHistoryHook installs h (tests only; see HistoryHook).
func WithHistoryHook(h HistoryHook) Option { return func(s *Service) { s.history = h } }

// NewService returns the messaging service.
func NewService(pool db.Querier, txs *db.DB, c clock.Clock, ident *identity.Service, ch *chat.Service, chatW *chat.Writer, az *authz.Service, ev *events.Log, limits Limits, opts ...Option) *Service {
	s := &Service{st: store{pool: pool, clock: c}, db: txs, ident: ident, chat: ch, chatW: chatW, authz: az, events: ev, limits: limits}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Instrument registers bothy_messages_created_total{origin} in reg: every
// committed message counts once (replays do not), labelled with its origin
// so operators see how much agents and apps write.
func (s *Service) Instrument(reg prometheus.Registerer) {
	s.created = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bothy_messages_created_total",
		Help: "Messages stored, by origin."}, []string{"origin"})
	reg.MustRegister(s.created)
	for _, o := range []Origin{OriginHuman, OriginAgent, OriginApp, OriginImport, OriginSystem} {
		s.created.WithLabelValues(string(o)).Add(0)
	}
}

func (s *Service) count(ms ...Message) {
	if s.created == nil {
		return
	}
	for _, m := range ms {
		s.created.WithLabelValues(string(m.Origin)).Inc()
	}
}

// Subscribe adds a subscriber of posted messages.
func (s *Service) Subscribe(sub Subscriber) { s.subscribers = append(s.subscribers, sub) }

// Input is the body of a message create.
type Input struct {
	ClientMsgID      string
	ContentMD        string
	Kind             Kind // text (default), voice or card
	ReplyToMessageID string
	RunID            string
	// Holder is the adapter process that sends an answer naming RunID (the
	// Bothy-Run-Holder header, the holder argument; "" for the anonymous
	// holder). It is not part of the request hash: a replay of a stored
	// answer is a replay whoever holds the run now.
	Holder string
	// InputTrust is what an agent declares it derived the message from
	// (input_trust; "" when it declares nothing). It can only lower the
	// message's provenance, and like RunID it is not part of the request
	// hash.
	InputTrust trust.Level
	// AttachmentFileIDs are the files the message attaches
	// (attachment_file_ids, at most MaxAttachments), each uploaded by the
	// writer and attached nowhere yet. Part of the request hash, so a
	// replay with the same files answers the original.
	AttachmentFileIDs []string

	// provenance is the answer's provenance, decided before the unit of
	// work (Service.Create) by the ProvenanceDecider.
	provenance trust.Level
}

// Attacher attaches uploaded files to a message being created, in its
// unit of work, and hears of a deleted message (the files module).
// Attach decides the writer's right to each file (its uploader, an
// agent's capability files_out) and refuses with field errors under ptr.
type Attacher interface {
	Attach(ctx context.Context, actor identity.Principal, messageID string, fileIDs []string, ptr string) ([]Attachment, error)
	MessageDeleted(ctx context.Context, messageID string) error
}

// AttachWith installs the files module (the wiring does, once). Without
// one, a create that names files is refused.
func (s *Service) AttachWith(a Attacher) { s.files = a }

// MaxAttachments bounds attachment_file_ids of one message.
const MaxAttachments = 10

// ProvenanceDecider decides the provenance of what an agent writes in one
// of its runs (the runs module: the lowest of the run context's live trust
// summary, self and what the agent declares; docs/design/trust.md#provenance).
// It runs before the unit of work that stores the message, since the
// decision reads the run's context on connections of its own.
type ProvenanceDecider interface {
	AnswerProvenance(ctx context.Context, agent identity.Principal, runID string, declared trust.Level) (trust.Level, error)
}

// DecideProvenanceWith installs the decider of answers' provenance (the
// wiring does, once). Without one, every agent message is unverified.
func (s *Service) DecideProvenanceWith(d ProvenanceDecider) { s.provenance = d }

// RunMismatchDetail is the one detail of every run_mismatch answer, so that
// the answer tells nothing about runs outside the thread.
const RunMismatchDetail = "run_id must name an active run of the calling agent in this thread"

// ClientMsgIDMax bounds client_msg_id (characters).
const ClientMsgIDMax = 128

// validate applies the body rules of a create (see ValidateCreate).
func (s *Service) validate(actor identity.Principal, in Input, ptr string, firstMessage bool) error {
	return ValidateCreate(actor.Kind, in, ptr, firstMessage, s.limits.MaxContentBytes)
}

// ValidateCreate applies the body rules of a message create by a principal
// of kind kind: client_msg_id of 1 to ClientMsgIDMax characters, non-blank
// content_md of at most maxContentBytes bytes (message.max_content_bytes),
// kind text (voice and card are not enabled yet), and run_id only from an
// agent and never on a thread's first message. ptr prefixes the pointers
// (/first_message for createThread). It returns a validation_failed problem
// listing every broken rule, or nil.
func ValidateCreate(kind identity.Kind, in Input, ptr string, firstMessage bool, maxContentBytes int) error {
	var fields []problem.FieldError
	if n := len([]rune(in.ClientMsgID)); n == 0 || n > ClientMsgIDMax || strings.TrimSpace(in.ClientMsgID) == "" {
		fields = append(fields, problem.FieldError{Pointer: ptr + "/client_msg_id", Code: "invalid_length", Detail: "1 to 128 characters"})
	}
	if len(in.ContentMD) > maxContentBytes {
		fields = append(fields, problem.FieldError{Pointer: ptr + "/content_md", Code: "too_long", Detail: "longer than message.max_content_bytes"})
	} else if strings.TrimSpace(in.ContentMD) == "" {
		fields = append(fields, problem.FieldError{Pointer: ptr + "/content_md", Code: "required"})
	}
	switch in.Kind {
	case "", KindText:
	case KindVoice, KindCard:
		fields = append(fields, problem.FieldError{Pointer: ptr + "/kind", Code: "not_enabled", Detail: "voice and card messages are not enabled yet"})
	default:
		fields = append(fields, problem.FieldError{Pointer: ptr + "/kind", Code: "invalid_enum"})
	}
	fields = checkAgentFields(fields, kind, in, ptr, firstMessage)
	fields = append(fields, checkAttachmentIDs(in.AttachmentFileIDs, ptr+"/attachment_file_ids")...)
	if len(fields) > 0 {
		return problem.Invalid(fields...)
	}
	return nil
}

// checkAgentFields applies the rules of the fields only an agent may send,
// run_id and input_trust, and appends the broken ones to fields.
func checkAgentFields(fields []problem.FieldError, kind identity.Kind, in Input, ptr string, firstMessage bool) []problem.FieldError {
	// run_id names the run an agent answers in. A person or an app can never
	// own a run, and a thread being created has none, so both are refused
	// with the one uniform mismatch answer (the run itself is checked by the
	// runs module inside the unit of work).
	if in.RunID != "" && (firstMessage || kind != identity.KindAgent) {
		fields = append(fields, problem.FieldError{Pointer: ptr + "/run_id", Code: "run_mismatch", Detail: RunMismatchDetail})
	}
	// input_trust is an agent's declaration about its own inputs: a person
	// or an app has no provenance to declare.
	switch {
	case in.InputTrust == "":
	case kind != identity.KindAgent:
		fields = append(fields, problem.FieldError{Pointer: ptr + "/input_trust", Code: "not_allowed", Detail: "only agents declare input_trust"})
	case !trust.Known(in.InputTrust):
		fields = append(fields, problem.FieldError{Pointer: ptr + "/input_trust", Code: "invalid_enum"})
	}
	return fields
}

// checkAttachmentIDs applies the list rules of attachment_file_ids: at
// most MaxAttachments, no file twice. Whether each file may be attached is
// the files module's decision, in the unit of work.
func checkAttachmentIDs(list []string, ptr string) []problem.FieldError {
	if len(list) > MaxAttachments {
		return []problem.FieldError{{Pointer: ptr, Code: "too_many", Detail: "at most 10 files"}}
	}
	seen := map[string]bool{}
	for i, id := range list {
		if seen[id] {
			return []problem.FieldError{{Pointer: fmt.Sprintf("%s/%d", ptr, i), Code: "duplicate", Detail: "each file once"}}
		}
		seen[id] = true
	}
	return nil
}

// errReplayRace signals that a concurrent create with the same
// client_msg_id committed first; the caller answers it as a replay.
var errReplayRace = errors.New("messaging: concurrent create with the same client_msg_id")

// Create stores a message by actor in thread threadID (message.create: write
// on the thread). It returns the message and whether the answer is an
// idempotent replay of an earlier create with the same client_msg_id and
// request hash; the same client_msg_id with another hash is a conflict.
// A message in a done thread first reopens it (system line
// thread.reopened). Subscribers run in the same unit of work.
func (s *Service) Create(ctx context.Context, actor identity.Principal, threadID string, in Input) (Message, bool, error) {
	if _, _, err := s.authz.Authorize(ctx, actor, authz.MessageCreate, authz.Resource{Kind: authz.KindThread, ID: threadID}); err != nil {
		return Message{}, false, err
	}
	// A run token writes its run's answers and nothing else: the door let
	// it write in its thread, and only the answer is run-bound.
	if actor.RunID != "" && in.RunID != actor.RunID {
		return Message{}, false, problem.Newf(problem.Forbidden, authz.ReasonRunToken, "a run token posts only its run's answers (input.runId)")
	}
	if err := s.validate(actor, in, "", false); err != nil {
		return Message{}, false, err
	}
	hash := RequestHash([]string{"thread", threadID}, in.ContentMD, in.ReplyToMessageID, in.AttachmentFileIDs)
	if m, _, ok, err := s.replay(ctx, actor, in.ClientMsgID, hash); ok || err != nil {
		return m, ok, err
	}
	if in.RunID != "" && s.provenance != nil {
		p, err := s.provenance.AnswerProvenance(ctx, actor, in.RunID, in.InputTrust)
		if err != nil {
			return Message{}, false, err
		}
		in.provenance = p
	}
	var out Message
	err := s.db.InTx(ctx, func(ctx context.Context) error {
		var err error
		out, err = s.createIn(ctx, actor, threadID, in, hash)
		return err
	})
	if errors.Is(err, errReplayRace) {
		m, _, err := s.replayAfterRace(ctx, actor, in.ClientMsgID, hash)
		return m, err == nil, err
	}
	if err != nil {
		return Message{}, false, err
	}
	s.count(out)
	return out, false, nil
}

// createIn is the unit of work of Create: it locks the thread, checks the
// reply, reopens a done thread, posts the message and appends the events.
func (s *Service) createIn(ctx context.Context, actor identity.Principal, threadID string, in Input, hash []byte) (Message, error) {
	thread, err := s.chatW.LockThread(ctx, threadID)
	if err != nil {
		return Message{}, problem.Internal("messaging.create: lock thread", err)
	}
	channel, err := s.chat.GetChannel(ctx, thread.ChannelID)
	if err != nil {
		return Message{}, problem.Internal("messaging.create: read channel", err)
	}
	if in.ReplyToMessageID != "" {
		if err := s.checkReply(ctx, threadID, in.ReplyToMessageID, "/reply_to_message_id"); err != nil {
			return Message{}, err
		}
	}
	var evs []events.Event
	if thread.State == chat.ThreadDone {
		reopen, err := s.reopen(ctx, actor, thread, channel)
		if err != nil {
			return Message{}, err
		}
		evs = append(evs, reopen...)
		thread.State = chat.ThreadOpen
	}
	m, more, err := s.post(ctx, actor, thread, channel, in, hash, "/attachment_file_ids")
	if err != nil {
		return Message{}, err
	}
	evs = append(evs, more...)
	return m, s.events.Append(ctx, evs...)
}

// replay answers a create whose client_msg_id the author used before: the
// original message and its thread when the hash matches, a conflict
// otherwise; ok is false when the id is new.
func (s *Service) replay(ctx context.Context, actor identity.Principal, clientMsgID string, hash []byte) (Message, chat.Thread, bool, error) {
	r, err := s.st.byClientID(ctx, actor.ID, clientMsgID)
	if errors.Is(err, ErrNotFound) {
		return Message{}, chat.Thread{}, false, nil
	}
	if err != nil {
		return Message{}, chat.Thread{}, false, problem.Internal("messaging.replay: find by client id", err)
	}
	if !bytes.Equal(r.hash, hash) {
		return Message{}, chat.Thread{}, false, problem.Newf(problem.Conflict, "idempotency_key_reused", "client_msg_id was used for another request")
	}
	thread, err := s.chat.GetThread(ctx, r.ThreadID)
	if err != nil {
		return Message{}, chat.Thread{}, false, problem.Internal("messaging.replay: read thread", err)
	}
	ms, err := s.resolve(ctx, []row{r}, func(string) string { return thread.ChannelID })
	if err != nil {
		return Message{}, chat.Thread{}, false, problem.Internal("messaging.replay: resolve message", err)
	}
	return ms[0], thread, true, nil
}

// replayAfterRace answers a create that lost the race for its
// client_msg_id to a concurrent create that committed first: that one must
// now be found.
func (s *Service) replayAfterRace(ctx context.Context, actor identity.Principal, clientMsgID string, hash []byte) (Message, chat.Thread, error) {
	m, t, ok, err := s.replay(ctx, actor, clientMsgID, hash)
	if err == nil && !ok {
		err = problem.Internal("messaging.replayAfterRace", errReplayRace)
	}
	return m, t, err
}

// checkReply requires the replied-to message to be in the same thread.
func (s *Service) checkReply(ctx context.Context, threadID, replyTo, ptr string) error {
	bad := problem.Invalid(problem.FieldError{Pointer: ptr, Code: "invalid_reference", Detail: "must name a message of the same thread"})
	if !ids.Valid(replyTo) {
		return bad
	}
	inThread, err := s.st.inThread(ctx, replyTo, threadID)
	if err != nil {
		return problem.Internal("messaging.checkReply", err)
	}
	if !inThread {
		return bad
	}
	return nil
}

// reopen appends the system line thread.reopened (author: the writer) and
// sets the thread open, returning its events.
func (s *Service) reopen(ctx context.Context, actor identity.Principal, thread chat.Thread, channel chat.Channel) ([]events.Event, error) {
	seq, err := s.chatW.NextSeq(ctx, thread.ID)
	if err != nil {
		return nil, problem.Internal("messaging.reopen: next seq", err)
	}
	m := Message{ID: ids.New(), ThreadID: thread.ID, ChannelID: channel.ID, ThreadSeq: seq, Author: actor.Ref(),
		Origin: OriginSystem, Kind: KindSystem, SystemCode: "thread.reopened", Mentions: []identity.Ref{},
		Attachments: []Attachment{}, CreatedAt: now(s.st.clock.Now())}
	if err := s.st.insert(ctx, m, "", nil); err != nil {
		return nil, problem.Internal("messaging.reopen: insert system line", err)
	}
	if err := s.chatW.SetState(ctx, thread.ID, chat.ThreadOpen); err != nil {
		return nil, problem.Internal("messaging.reopen: set thread open", err)
	}
	thread.State, thread.LastSeq = chat.ThreadOpen, seq
	return []events.Event{
		{Type: events.ThreadReopened, ChannelID: channel.ID, ThreadID: thread.ID, Payload: chat.ThreadPayload(thread)},
		{Type: events.MessageCreated, ChannelID: channel.ID, ThreadID: thread.ID, MessageID: m.ID, Payload: Payload(m)},
	}, nil
}

// post stores one message by actor in the locked thread, attaches its
// files (field errors under filesPtr), runs the subscribers and returns
// the message with its events.
func (s *Service) post(ctx context.Context, actor identity.Principal, thread chat.Thread, channel chat.Channel, in Input, hash []byte, filesPtr string) (Message, []events.Event, error) {
	seq, err := s.chatW.NextSeq(ctx, thread.ID)
	if err != nil {
		return Message{}, nil, problem.Internal("messaging.post: next seq", err)
	}
	mentions := []identity.Ref{}
	if handles := MentionedHandles(in.ContentMD); len(handles) > 0 {
		found, err := s.ident.ByHandles(ctx, handles)
		if err != nil {
			return Message{}, nil, problem.Internal("messaging.post: find mentioned handles", err)
		}
		for _, h := range handles {
			if p, ok := found[h]; ok {
				mentions = append(mentions, p.Ref())
			}
		}
	}
	m := Message{ID: ids.New(), ThreadID: thread.ID, ChannelID: channel.ID, ThreadSeq: seq, Author: actor.Ref(),
		Origin: OriginOf(actor), Kind: KindText, ContentMD: in.ContentMD, ReplyToMessageID: in.ReplyToMessageID,
		Mentions: mentions, Attachments: []Attachment{}, CreatedAt: now(s.st.clock.Now())}
	if m.Origin == OriginAgent {
		m.Provenance = agentProvenance(in)
	}
	if err := s.st.insert(ctx, m, in.ClientMsgID, hash); err != nil {
		if db.IsUniqueViolation(err, "messages_author_principal_id_client_msg_id_key") {
			return Message{}, nil, errReplayRace
		}
		return Message{}, nil, problem.Internal("messaging.post: insert message", fmt.Errorf("insert message: %w", err))
	}
	if len(in.AttachmentFileIDs) > 0 {
		if s.files == nil {
			return Message{}, nil, problem.Invalid(problem.FieldError{Pointer: filesPtr, Code: "not_enabled", Detail: "files are not enabled"})
		}
		if m.Attachments, err = s.files.Attach(ctx, actor, m.ID, in.AttachmentFileIDs, filesPtr); err != nil {
			return Message{}, nil, err
		}
	}
	thread.LastSeq = seq
	posted := &Posted{Message: m, Thread: thread, Channel: channel, Author: actor, RunID: in.RunID, Holder: in.Holder, ClientMsgID: in.ClientMsgID}
	var evs []events.Event
	for _, sub := range s.subscribers {
		more, err := sub.OnMessagePosted(ctx, posted)
		if err != nil {
			return Message{}, nil, err
		}
		evs = append(evs, more...)
	}
	m = posted.Message
	created := events.Event{Type: events.MessageCreated, ChannelID: channel.ID, ThreadID: thread.ID, MessageID: m.ID, Payload: Payload(m)}
	return m, append([]events.Event{created}, evs...), nil
}

// agentProvenance is the provenance of an agent's message with body in:
// for an answer in a run, what the decider decided (the lowest of the
// context, self and the declaration); for anything written outside a run
// (an announcement, a reply by grant) unverified, since nothing vouches
// for what it was derived from, and no declaration can raise that.
func agentProvenance(in Input) trust.Level {
	if in.RunID != "" && in.provenance != "" {
		return trust.Lowest(in.provenance, trust.Self)
	}
	return trust.Unverified
}

// ThreadInput is the body of a thread create.
type ThreadInput struct {
	Title           string
	ParentMessageID string
	First           Input
}

// CreateThread creates a thread (a post in a forum) in channel channelID
// with its first message (thread.create: write on the channel). A thread of
// a text channel may start from a main-thread message of that channel (its
// parent); a forum post has no parent. The first message's client_msg_id
// makes the whole create idempotent.
func (s *Service) CreateThread(ctx context.Context, actor identity.Principal, channelID string, in ThreadInput) (chat.Thread, Message, bool, error) {
	if _, _, err := s.authz.Authorize(ctx, actor, authz.ThreadCreate, authz.Resource{Kind: authz.KindChannel, ID: channelID}); err != nil {
		return chat.Thread{}, Message{}, false, err
	}
	if err := s.validate(actor, in.First, "/first_message", true); err != nil {
		return chat.Thread{}, Message{}, false, err
	}
	hash := RequestHash([]string{"channel", channelID, in.Title, in.ParentMessageID}, in.First.ContentMD, in.First.ReplyToMessageID, in.First.AttachmentFileIDs)
	if m, t, ok, err := s.replay(ctx, actor, in.First.ClientMsgID, hash); ok || err != nil {
		if err != nil {
			return t, m, ok, err
		}
		return s.readableReplay(ctx, actor, t, m)
	}
	var thread chat.Thread
	var first Message
	err := s.db.InTx(ctx, func(ctx context.Context) error {
		var err error
		thread, first, err = s.createThreadIn(ctx, actor, channelID, in, hash)
		return err
	})
	if errors.Is(err, errReplayRace) {
		m, t, err := s.replayAfterRace(ctx, actor, in.First.ClientMsgID, hash)
		if err != nil {
			return t, m, false, err
		}
		return s.readableReplay(ctx, actor, t, m)
	}
	if err != nil {
		return chat.Thread{}, Message{}, false, err
	}
	s.count(first)
	return thread, first, false, nil
}

// createThreadIn is the unit of work of CreateThread: it checks the
// parent and the first message's reply, creates the thread, posts its
// first message and appends the events.
func (s *Service) createThreadIn(ctx context.Context, actor identity.Principal, channelID string, in ThreadInput, hash []byte) (chat.Thread, Message, error) {
	channel, err := s.chat.GetChannel(ctx, channelID)
	if err != nil {
		return chat.Thread{}, Message{}, problem.Internal("messaging.createThread", err)
	}
	if in.ParentMessageID != "" {
		if channel.Kind == chat.ChannelForum {
			return chat.Thread{}, Message{}, problem.Invalid(problem.FieldError{Pointer: "/parent_message_id", Code: "invalid_reference", Detail: "a forum post has no parent message"})
		}
		if err := s.checkReply(ctx, channel.MainThreadID, in.ParentMessageID, "/parent_message_id"); err != nil {
			return chat.Thread{}, Message{}, err
		}
	}
	if in.First.ReplyToMessageID != "" {
		return chat.Thread{}, Message{}, problem.Invalid(problem.FieldError{Pointer: "/first_message/reply_to_message_id", Code: "invalid_reference", Detail: "the first message of a thread cannot reply"})
	}
	t, err := s.chatW.CreateThread(ctx, chat.NewThread{Channel: channel, ParentMessageID: in.ParentMessageID, Title: in.Title,
		ByAgent: actor.Kind == identity.KindAgent, CreatedBy: actor.ID, TitleFrom: in.First.ContentMD})
	if err != nil {
		return chat.Thread{}, Message{}, err
	}
	m, evs, err := s.post(ctx, actor, t, channel, in.First, hash, "/first_message/attachment_file_ids")
	if err != nil {
		return chat.Thread{}, Message{}, err
	}
	t.LastSeq = m.ThreadSeq
	created := events.Event{Type: events.ThreadCreated, ChannelID: channel.ID, ThreadID: t.ID, Payload: chat.ThreadPayload(t)}
	return t, m, s.events.Append(ctx, append([]events.Event{created}, evs...)...)
}

// readableReplay answers the replay of a thread create only when actor may
// read the thread where it is now: a thread moved since into a channel the
// writer cannot read answers the same 404 as a missing thread, never its
// new channel, last_seq or state.
func (s *Service) readableReplay(ctx context.Context, actor identity.Principal, t chat.Thread, m Message) (chat.Thread, Message, bool, error) {
	if _, _, err := s.authz.Authorize(ctx, actor, authz.ThreadRead, authz.Resource{Kind: authz.KindThread, ID: t.ID}); err != nil {
		if problem.Is(err, problem.Forbidden) || problem.Is(err, problem.NotFound) {
			return chat.Thread{}, Message{}, false, problem.New(problem.NotFound, "")
		}
		return chat.Thread{}, Message{}, false, err
	}
	return t, m, true, nil
}

// Get returns message id (message.read), its content never cut.
func (s *Service) Get(ctx context.Context, actor identity.Principal, id string) (Message, error) {
	_, path, err := s.authz.Authorize(ctx, actor, authz.MessageRead, authz.Resource{Kind: authz.KindMessage, ID: id})
	if err != nil {
		return Message{}, err
	}
	r, err := s.st.loadRow(ctx, id)
	if err != nil {
		return Message{}, problem.Internal("messaging.get: load row", err)
	}
	ms, err := s.resolve(ctx, []row{r}, func(string) string { return path.ChannelID })
	if err != nil {
		return Message{}, problem.Internal("messaging.get: resolve message", err)
	}
	return ms[0], nil
}

// GetDecided is Get for a caller that has already decided the read: the
// subscriptions' fan-out, whose verdict on a message event for a listener
// is the decision to read its message (docs/design/rights.md#live-rights),
// and which reads it once for all listeners. It takes no token and decides
// nothing; a message that no longer exists answers not_found.
//
// Errors: not_found; a database error (internal_error).
func (s *Service) GetDecided(ctx context.Context, id string) (Message, error) {
	path, err := s.authz.PathOf(ctx, authz.Resource{Kind: authz.KindMessage, ID: id})
	if err != nil {
		return Message{}, problem.Internal("messaging.getDecided: read path", err)
	}
	if !path.Exists {
		return Message{}, problem.New(problem.NotFound, "")
	}
	r, err := s.st.loadRow(ctx, id)
	if err != nil {
		return Message{}, problem.Internal("messaging.getDecided: load row", err)
	}
	ms, err := s.resolve(ctx, []row{r}, func(string) string { return path.ChannelID })
	if err != nil {
		return Message{}, problem.Internal("messaging.getDecided: resolve message", err)
	}
	return ms[0], nil
}

// Page is a page of history.
type Page struct {
	Messages  []Message
	NextAfter *int64
}

// History returns the messages of thread threadID with thread_seq above
// after, oldest first, at most limit (message.list_limit_default when
// zero), content cut at message.list_content_max_bytes. Every item passes
// filter mode.
func (s *Service) History(ctx context.Context, actor identity.Principal, threadID string, after int64, limit int) (Page, error) {
	d, path, err := s.authz.Authorize(ctx, actor, authz.ThreadRead, authz.Resource{Kind: authz.KindThread, ID: threadID})
	if err != nil {
		return Page{}, err
	}
	if limit == 0 {
		limit = s.limits.ListLimitDefault
	}
	if limit < 1 || limit > s.limits.ListLimitMax {
		return Page{}, problem.Invalid(problem.FieldError{Pointer: "limit", Code: "out_of_range", Detail: "must lie between 1 and message.list_limit_max"})
	}
	if after < 0 {
		return Page{}, problem.Invalid(problem.FieldError{Pointer: "after", Code: "out_of_range", Detail: "must not be negative"})
	}
	rows, err := s.st.threadRows(ctx, threadID, after, limit+1)
	if err != nil {
		return Page{}, problem.Internal("messaging.history: read rows", err)
	}
	more := len(rows) > limit
	if more {
		rows = rows[:limit]
	}
	channels := map[string]string{threadID: path.ChannelID}
	ms, err := s.resolve(ctx, rows, func(t string) string { return channels[t] })
	if err != nil {
		return Page{}, problem.Internal("messaging.history: resolve messages", err)
	}
	if s.history != nil {
		ms = s.history.History(ms)
	}
	ms, err = s.filter(ctx, actor, ms, path, d.Grant)
	if err != nil {
		return Page{}, err
	}
	page := Page{Messages: ms}
	for i := range page.Messages {
		page.Messages[i].ContentMD, page.Messages[i].ContentTruncated = textcut.Cut(page.Messages[i].ContentMD, s.limits.ListContentMaxBytes)
	}
	if more && len(rows) > 0 {
		last := rows[len(rows)-1].ThreadSeq
		page.NextAfter = &last
	}
	return page, nil
}

// filter checks every message with message.read (filter mode) and drops
// what the reader may not see. Messages of the authorized thread (path, with
// the grant level its decision read) are checked without a statement; a
// message of any other thread can only come from a faulty query and is
// checked with its own path and grants.
func (s *Service) filter(ctx context.Context, actor identity.Principal, ms []Message, path authz.Path, grant authz.Level) ([]Message, error) {
	targets := make([]authz.Facts, 0, len(ms))
	for _, m := range ms {
		if m.ThreadID == path.ThreadID {
			p := path
			p.Kind, p.ID = authz.KindMessage, m.ID
			targets = append(targets, authz.Known(p, grant))
			continue
		}
		p, err := s.chat.ThreadPath(ctx, m.ThreadID)
		if err != nil {
			return nil, problem.Internal("messaging.filter: read thread path", err)
		}
		p.Kind, p.ID = authz.KindMessage, m.ID
		targets = append(targets, authz.Facts{Path: p})
	}
	oks, err := s.authz.Filter(ctx, actor, authz.MessageRead, targets)
	if err != nil {
		return nil, problem.Internal("messaging.filter: filter reads", err)
	}
	keep := map[string]bool{}
	for i, ok := range oks {
		keep[targets[i].Path.ID] = ok
	}
	out := ms[:0]
	for _, m := range ms {
		if keep[m.ID] {
			out = append(out, m)
		}
	}
	return out, nil
}

// Delete turns message id into a tombstone (message.delete: its author with
// write, or an owner): content emptied, mentions removed, deleted set, and
// the content removed from earlier events too. System lines and run anchors
// cannot be deleted. Deleting a tombstone answers it unchanged.
func (s *Service) Delete(ctx context.Context, actor identity.Principal, id string) (Message, error) {
	_, path, err := s.authz.Authorize(ctx, actor, authz.MessageDelete, authz.Resource{Kind: authz.KindMessage, ID: id})
	if err != nil {
		return Message{}, err
	}
	var out Message
	err = s.db.InTx(ctx, func(ctx context.Context) error {
		r, err := s.st.lockRow(ctx, id)
		if err != nil {
			return problem.Internal("messaging.delete: lock message", err)
		}
		if r.Kind == KindSystem || r.Kind == KindRun {
			return problem.Newf(problem.Conflict, "not_deletable", "system lines and run anchors cannot be deleted")
		}
		// Deleting a tombstone answers it as it is, and tells nobody
		// anything new: no second message.deleted.
		already := r.Deleted
		if !already {
			if err := s.st.tombstoneRow(ctx, id); err != nil {
				return problem.Internal("messaging.delete: tombstone row", err)
			}
			r.Deleted, r.ContentMD, r.mentionIDs = true, "", nil
			// An auto title is the first line of the message that started
			// the thread (its parent, or its first message for a post
			// without one): it goes with that message.
			if err := s.chatW.DropAutoTitle(ctx, id, r.ThreadID, r.ThreadSeq == 1); err != nil {
				return problem.Internal("messaging.delete: drop auto title", err)
			}
			// A deleted message's files are served to nobody from now on
			// and deleted after files.deleted_ttl.
			if s.files != nil {
				if err := s.files.MessageDeleted(ctx, id); err != nil {
					return problem.Internal("messaging.delete: delete files", err)
				}
			}
		}
		ms, err := s.resolve(ctx, []row{r}, func(string) string { return path.ChannelID })
		if err != nil {
			return problem.Internal("messaging.delete: resolve message", err)
		}
		out = ms[0]
		if already {
			return nil
		}
		if err := s.events.Tombstone(ctx, id, Payload(out)); err != nil {
			return problem.Internal("messaging.delete: tombstone events", err)
		}
		return s.events.Append(ctx, events.Event{Type: events.MessageDeleted, ChannelID: path.ChannelID, ThreadID: r.ThreadID, MessageID: id, Payload: Payload(out)})
	})
	return out, err
}

// Path implements authz.Source for messages: the message's thread path with
// its author.
func (s *Service) Path(ctx context.Context, kind authz.ResourceKind, id string) (authz.Path, error) {
	threadID, authorID, err := s.st.threadAndAuthor(ctx, id)
	if errors.Is(err, ErrNotFound) {
		// The thread lookup runs for a missing message too (on the nil
		// UUID), so that a missing and a hidden message take the same
		// statements.
		if _, err := s.chat.ThreadPath(ctx, "00000000-0000-0000-0000-000000000000"); err != nil {
			return authz.Path{}, err
		}
		return authz.Path{Kind: kind, ID: id}, nil
	}
	if err != nil {
		return authz.Path{}, err
	}
	p, err := s.chat.ThreadPath(ctx, threadID)
	if err != nil {
		return authz.Path{}, err
	}
	p.AuthorID = authorID
	return p, nil
}

// AppendAnchor appends the run anchor of run runID to thread t in the transaction of ctx: a
// message of kind run, origin agent, author the run's agent, run_id set and
// empty content, which clients render as the run's live box; its
// provenance is self, since it holds nothing derived from anything. It returns the
// anchor and its message.created event. The caller holds t's row lock or
// created t in the transaction of ctx.
func (w *Writer) AppendAnchor(ctx context.Context, t chat.Thread, channelID string, agent identity.Ref, runID string) (Message, events.Event, error) {
	s := w.s
	seq, err := s.chatW.NextSeq(ctx, t.ID)
	if err != nil {
		return Message{}, events.Event{}, fmt.Errorf("anchor seq: %w", err)
	}
	m := Message{ID: ids.New(), ThreadID: t.ID, ChannelID: channelID, ThreadSeq: seq, Author: agent, Origin: OriginAgent,
		Kind: KindRun, RunID: runID, Provenance: trust.Self, Mentions: []identity.Ref{}, Attachments: []Attachment{}, CreatedAt: now(s.st.clock.Now())}
	if err := s.st.insert(ctx, m, "", nil); err != nil {
		return Message{}, events.Event{}, fmt.Errorf("insert anchor: %w", err)
	}
	return m, events.Event{Type: events.MessageCreated, ChannelID: channelID, ThreadID: t.ID, MessageID: m.ID, Payload: Payload(m)}, nil
}

// Import stores a message of origin import by author in thread threadID,
// the way import tooling brings history from another system: no client can
// send origin import, and this write decides no right (the caller is the
// operator's tool, or the conformance kit's private server). It appends
// message.created and never triggers anything.
//
// Errors: the thread does not exist; the content is blank or not storable.
func (w *Writer) Import(ctx context.Context, threadID string, author identity.Ref, content string) (Message, error) {
	s := w.s
	if strings.TrimSpace(content) == "" || text.Check(content, "/content_md") != nil {
		return Message{}, problem.Invalid(problem.FieldError{Pointer: "/content_md", Code: "invalid_format"})
	}
	var out Message
	err := s.db.InTx(ctx, func(ctx context.Context) error {
		thread, err := s.chatW.LockThread(ctx, threadID)
		if err != nil {
			return problem.Internal("messaging.Import: lock thread", err)
		}
		seq, err := s.chatW.NextSeq(ctx, thread.ID)
		if err != nil {
			return problem.Internal("messaging.Import: next seq", err)
		}
		m := Message{ID: ids.New(), ThreadID: thread.ID, ChannelID: thread.ChannelID, ThreadSeq: seq, Author: author, Origin: OriginImport,
			Kind: KindText, ContentMD: content, Mentions: []identity.Ref{}, Attachments: []Attachment{}, CreatedAt: now(s.st.clock.Now())}
		if err := s.st.insert(ctx, m, "", nil); err != nil {
			return problem.Internal("messaging.Import: insert message", err)
		}
		out = m
		return s.events.Append(ctx, events.Event{Type: events.MessageCreated, ChannelID: thread.ChannelID, ThreadID: thread.ID, MessageID: m.ID, Payload: Payload(m)})
	})
	return out, err
}

// AppendCard appends the card of an approval to thread t in the
// transaction of ctx: a message of kind card, origin agent, author the
// run's agent and the approval's title as its content (what every reader
// of the thread sees; the detail and options are the approval's, shown
// only to its person, and the approval names its run: run_id stays the
// anchor's). provenance is the card's, decided like an answer's (the title
// comes from the agent). It returns the card and its message.created
// event. The caller holds t's row lock.
func (w *Writer) AppendCard(ctx context.Context, t chat.Thread, channelID string, agent identity.Ref, title string, provenance trust.Level) (Message, events.Event, error) {
	s := w.s
	seq, err := s.chatW.NextSeq(ctx, t.ID)
	if err != nil {
		return Message{}, events.Event{}, fmt.Errorf("card seq: %w", err)
	}
	m := Message{ID: ids.New(), ThreadID: t.ID, ChannelID: channelID, ThreadSeq: seq, Author: agent, Origin: OriginAgent,
		Kind: KindCard, ContentMD: title, Provenance: trust.Lowest(provenance, trust.Self), Mentions: []identity.Ref{}, Attachments: []Attachment{},
		CreatedAt: now(s.st.clock.Now())}
	if err := s.st.insert(ctx, m, "", nil); err != nil {
		return Message{}, events.Event{}, fmt.Errorf("insert card: %w", err)
	}
	return m, events.Event{Type: events.MessageCreated, ChannelID: channelID, ThreadID: t.ID, MessageID: m.ID, Payload: Payload(m)}, nil
}

// resolve fills authors and mentions of rows with one identity read, and
// sets the channel of each message.
func (s *Service) resolve(ctx context.Context, rows []row, channelOf func(threadID string) string) ([]Message, error) {
	need := map[string]bool{}
	for _, r := range rows {
		need[r.authorID] = true
		for _, m := range r.mentionIDs {
			need[m] = true
		}
	}
	idList := make([]string, 0, len(need))
	for id := range need {
		idList = append(idList, id)
	}
	people, err := s.ident.GetMany(ctx, idList)
	if err != nil {
		return nil, err
	}
	out := make([]Message, len(rows))
	for i, r := range rows {
		m := r.Message
		m.Author = people[r.authorID].Ref()
		m.Mentions = make([]identity.Ref, 0, len(r.mentionIDs))
		for _, id := range r.mentionIDs {
			if p, ok := people[id]; ok {
				m.Mentions = append(m.Mentions, p.Ref())
			}
		}
		m.Attachments = []Attachment{}
		m.ChannelID = channelOf(m.ThreadID)
		out[i] = m
	}
	return out, nil
}

// LoadMany is Load for several messages of one channel at once (two
// statements whatever their number); an unknown id is missing from the
// map.
func (s *Service) LoadMany(ctx context.Context, list []string, channelID string) (map[string]Message, error) {
	rows, err := s.st.loadByIDs(ctx, list)
	if err != nil {
		return nil, err
	}
	ms, err := s.resolve(ctx, rows, func(string) string { return channelID })
	if err != nil {
		return nil, err
	}
	out := make(map[string]Message, len(ms))
	for _, m := range ms {
		out[m.ID] = m
	}
	return out, nil
}

// Load returns message id as stored, with author and mentions,
// without any authorization: for a module that decides on a message it
// already holds (the runs module re-deciding a follow-up inside its unit of
// work). channelID is the channel the caller knows the message's thread in.
func (s *Service) Load(ctx context.Context, id, channelID string) (Message, error) {
	r, err := s.st.loadRow(ctx, id)
	if err != nil {
		return Message{}, err
	}
	ms, err := s.resolve(ctx, []row{r}, func(string) string { return channelID })
	if err != nil {
		return Message{}, err
	}
	return ms[0], nil
}
