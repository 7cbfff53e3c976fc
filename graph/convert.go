package graph

import (
	"context"
	"fmt"
	"strconv"

	"bothy.example.com/bothy/graph/model"
	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/files"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/runs"
	"bothy.example.com/bothy/internal/runs/domain"
)

// The converters below render module values as GraphQL models. They hold no
// rule: optional values become nil pointers; enums are the modules' own
// types, bound in gqlgen.yml.

func opt(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func trueOrNil(b bool) *bool {
	if !b {
		return nil
	}
	return &b
}

func refModel(r identity.Ref) *model.PrincipalRef {
	return &model.PrincipalRef{ID: r.ID, Kind: r.Kind, Handle: r.Handle, DisplayName: r.DisplayName}
}

func messageModel(m messaging.Message) *model.Message {
	out := &model.Message{
		ID: m.ID, ThreadID: m.ThreadID, ChannelID: m.ChannelID, ThreadSeq: int(m.ThreadSeq), Author: refModel(m.Author),
		Origin: m.Origin, Kind: m.Kind, ContentMd: m.ContentMD,
		ContentTruncated: trueOrNil(m.ContentTruncated), ReplyToMessageID: opt(m.ReplyToMessageID),
		Mentions:      make([]*model.PrincipalRef, len(m.Mentions)),
		TriggerReason: opt(m.TriggerReason), SystemCode: opt(m.SystemCode), RunID: opt(m.RunID),
		Deleted: trueOrNil(m.Deleted), CreatedAt: m.CreatedAt,
	}
	for i, r := range m.Mentions {
		out.Mentions[i] = refModel(r)
	}
	if m.TriggerState != messaging.TriggerNone {
		ts := m.TriggerState
		out.TriggerState = &ts
	}
	if m.Provenance != "" {
		p := m.Provenance
		out.Provenance = &p
	}
	return out
}

func threadModel(t chat.Thread) *model.Thread {
	out := &model.Thread{ID: t.ID, ChannelID: t.ChannelID, Kind: t.Kind,
		ParentMessageID: opt(t.ParentMessageID), OperatorAgentID: opt(t.OperatorAgentID), Title: opt(t.Title),
		CreatedBy: t.CreatedBy, State: t.State, LastSeq: int(t.LastSeq), CreatedAt: t.CreatedAt}
	if t.TitleSource != "" {
		ts := t.TitleSource
		out.TitleSource = &ts
	}
	return out
}

func channelModel(c chat.Channel) *model.Channel {
	return &model.Channel{ID: c.ID, SpaceID: c.SpaceID, Name: c.Name, Kind: c.Kind,
		Archived: c.Archived(), OperatorMode: c.OperatorMode, OperatorAgentID: opt(c.OperatorAgentID),
		EffectiveOperatorID: opt(c.EffectiveOperator()), MainThreadID: opt(c.MainThreadID),
		Switches: &model.ChannelSwitches{FreeResponse: c.Switches.FreeResponse, AllowMentionedAgents: c.Switches.AllowMentionedAgents,
			AutoThread: c.Switches.AutoThread, HistoryBackfillLimit: c.Switches.HistoryBackfillLimit}}
}

func spaceModel(s chat.Space) *model.Space {
	return &model.Space{ID: s.ID, Name: s.Name, DefaultOperatorAgentID: opt(s.DefaultOperatorAgentID), Archived: s.ArchivedAt != nil}
}

func grantModel(g authz.Grant) *model.Grant {
	return &model.Grant{ID: g.ID, SubjectID: g.SubjectID, SubjectKind: g.SubjectKind,
		TargetKind: g.TargetKind, TargetID: g.TargetID,
		Level: g.Level, ExpiresAt: g.ExpiresAt, CreatedAt: g.CreatedAt, RevokedAt: g.RevokedAt}
}

// eventModel renders a client event as its GraphQL object type; the typed
// members come from the stored payload (the REST shape the event was
// written in).
func eventModel(e events.Event) model.Event {
	base := model.EventBase{Seq: itoa64(e.Seq), Type: string(e.Type), CreatedAt: e.CreatedAt, ChannelID: e.ChannelID, Payload: e.Payload}
	str := func(k string) string { s, _ := e.Payload[k].(string); return s }
	switch e.Type {
	case events.MessageCreated, events.MessageDeleted:
		return &model.MessageEvent{EventBase: base, MessageID: str("id"), ThreadID: str("thread_id")}
	case events.ThreadMoved:
		return &model.ThreadMovedEvent{EventBase: base, ThreadID: str("id"), FromChannelID: str("from_channel_id"), ToChannelID: str("channel_id")}
	case events.RunStateChanged:
		version, _ := e.Payload["version"].(float64)
		return &model.RunStateChangedEvent{EventBase: base, RunID: str("id"), ThreadID: str("thread_id"),
			State: domain.RunState(str("state")), Version: int(version), EndReason: opt(str("end_reason"))}
	case events.ChannelCreated, events.ChannelUpdated:
		return &model.ChannelEvent{EventBase: base}
	case events.SpaceCreated, events.SpaceUpdated:
		return &model.SpaceEvent{Seq: base.Seq, Type: base.Type, CreatedAt: base.CreatedAt, Payload: base.Payload, SpaceID: e.SpaceID}
	case events.AccessChanged:
		return &model.AccessChangedEvent{EventBase: base, Change: str("change"), TargetKind: str("target_kind"), TargetID: str("target_id"), SubjectID: opt(str("id"))}
	default:
		// thread.created, thread.reopened, thread.closed.
		return &model.ThreadEvent{EventBase: base, ThreadID: str("id")}
	}
}

// unreadable turns a refused read of an event's reference into null: the
// caller may not read it now. Other failures stay errors.
func unreadable(err error) error {
	switch problem.CodeOf(err) {
	case problem.NotFound, problem.Forbidden:
		return nil
	default:
		// Other failures are the server's and stay errors.
	}
	return err
}

func messageInput(in model.MessageCreate) messaging.Input {
	out := messaging.Input{ClientMsgID: in.ClientMsgID, ContentMD: in.ContentMd}
	if in.Kind != nil {
		out.Kind = *in.Kind
	}
	if in.ReplyToMessageID != nil {
		out.ReplyToMessageID = *in.ReplyToMessageID
	}
	if in.RunID != nil {
		out.RunID = *in.RunID
	}
	if in.InputTrust != nil {
		out.InputTrust = *in.InputTrust
	}
	out.AttachmentFileIDs = in.AttachmentFileIds
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func itoa64(n int64) string { return strconv.FormatInt(n, 10) }

// agentEventModel renders an agent event as its GraphQL object type; the
// typed members come from the stored payload (ids only). An event type this
// code does not know is a server fault.
func agentEventModel(e events.Event) (model.AgentEvent, error) {
	base := model.AgentEventBase{Seq: itoa64(e.Seq), Type: string(e.Type), CreatedAt: e.CreatedAt, Payload: e.Payload, RunID: e.RunID}
	str := func(k string) string { s, _ := e.Payload[k].(string); return s }
	switch e.Type {
	case events.AgentInvocation:
		attempt := 1
		if n, ok := e.Payload["attempt"].(float64); ok {
			attempt = int(n)
		}
		sess := &model.RunSession{}
		if m, ok := e.Payload["session"].(map[string]any); ok {
			mode, _ := m["mode"].(string)
			sess.Mode = domain.Mode(mode)
			if id, ok := m["id"].(string); ok {
				sess.ID = &id
			}
		}
		return &model.AgentInvocationEvent{AgentEventBase: base, Attempt: attempt, Session: sess,
			ThreadID: str("thread_id"), ChannelID: str("channel_id"), MessageID: str("message_id")}, nil
	case events.AgentFollowup:
		return &model.AgentFollowupEvent{AgentEventBase: base, MessageID: str("message_id")}, nil
	case events.RunCancelRequested:
		return &model.RunCancelRequestedEvent{AgentEventBase: base}, nil
	case events.AgentApprovalDecided:
		return &model.AgentApprovalDecidedEvent{AgentEventBase: base, ApprovalID: str("approval_id"), OptionID: opt(str("option_id")),
			State: str("state")}, nil
	default:
		// A type this face does not know yet is the error below.
	}
	return nil, problem.Internal("graph.agentEventModel", fmt.Errorf("agent event %d has unknown type %q", e.Seq, e.Type))
}

func runModel(r runs.Run) *model.Run {
	out := &model.Run{ID: r.ID, ThreadID: r.ThreadID, State: r.State, Version: r.Version,
		TriggerKind: r.TriggerKind, TriggeringMessageID: opt(r.TriggeringMessageID),
		Session:         &model.RunSession{ID: opt(r.SessionID), Mode: r.SessionMode},
		CancelRequested: trueOrNil(r.CancelRequested), QueuedAt: r.QueuedAt, StartedAt: r.StartedAt, EndedAt: r.EndedAt,
		EndReason: opt(r.EndReason), AgentID: r.AgentID, TriggeredByID: r.TriggeredBy,
		Attempt: r.Attempt, Holder: opt(r.Holder), LeaseExpiresAt: r.LeaseExpiresAt, Traceparent: opt(r.Traceparent)}
	return out
}

// attachmentModel renders a messaging attachment with its file; a file
// not scanned or extracted yet is pending.
func attachmentModel(a messaging.Attachment) *model.Attachment {
	status := a.ScanStatus
	if status == "" {
		status = messaging.ScanPending
	}
	text := textStatusModel(a.TextStatus)
	return &model.Attachment{FileID: a.FileID, Name: a.Name, MimeType: a.MIMEType, Size: int(a.Size),
		ScanStatus: status, Transcript: opt(a.Transcript), TextStatus: text,
		File: &model.File{ID: a.FileID, Name: a.Name, MimeType: a.MIMEType, Size: int(a.Size), Sha256: a.SHA256,
			ScanStatus: status, CreatedAt: a.UploadedAt, TextStatus: text}}
}

// textStatusModel is a stored text status as the enum TextStatus; an
// unknown or empty one is PENDING.
func textStatusModel(s string) model.TextStatus {
	if t, ok := textStatuses[files.TextStatus(s)]; ok {
		return t
	}
	return model.TextStatusPending
}

// textStatuses maps the files module's text statuses to the enum.
var textStatuses = map[files.TextStatus]model.TextStatus{
	files.TextPending:     model.TextStatusPending,
	files.TextReady:       model.TextStatusReady,
	files.TextUnsupported: model.TextStatusUnsupported,
	files.TextTooLarge:    model.TextStatusTooLarge,
	files.TextFailed:      model.TextStatusFailed,
}

// attachmentModels renders the attachments of one message.
func attachmentModels(as []messaging.Attachment) []*model.Attachment {
	out := make([]*model.Attachment, len(as))
	for i, a := range as {
		out[i] = attachmentModel(a)
	}
	return out
}

// fileModel renders a file's metadata.
func fileModel(f files.File) *model.File {
	return &model.File{ID: f.ID, Name: f.Name, MimeType: f.MIMEType, Size: int(f.Size), Sha256: f.SHA256Hex(),
		ScanStatus: messaging.ScanStatus(f.ScanStatus), CreatedAt: f.CreatedAt, TextStatus: textStatusModel(string(f.TextStatus)), Source: &f}
}

func runReadModel(rd runs.Read) *model.Run {
	out := runModel(rd.Run)
	out.Read = &rd
	return out
}

func sessionModel(s runs.Session) *model.AgentSession {
	return &model.AgentSession{ID: s.ID, ThreadID: s.ThreadID, AgentID: s.AgentID, IsCurrent: s.IsCurrent, Started: s.Started,
		ExternalRef: opt(s.ExternalRef), CreatedAt: s.CreatedAt}
}

// contextMessageModel writes into m the GraphQL model of a finished
// context element with its author's public view. replyTo is the element's
// own reply-to id where it lives on (the context's element), so that the
// model points at it instead of a copy.
func contextMessageModel(e runs.FinishedElement, author *model.PrincipalRef, replyTo *string, m *model.RunContextMessage) {
	*m = model.RunContextMessage{MessageID: e.ID, ThreadSeq: int(e.ThreadSeq), CreatedAt: e.CreatedAt, ChannelID: e.ChannelID,
		Author: author, Role: e.Role, Origin: e.Origin,
		Kind: e.Kind, ContentMd: e.ContentMD, Truncated: trueOrNil(e.Truncated),
		Attachments: []*model.Attachment{}, Trust: e.Trust, Provenance: e.Provenance,
		AlreadyDelivered: trueOrNil(e.AlreadyDelivered)}
	if *replyTo != "" {
		m.ReplyToMessageID = replyTo
	}
}

// liveModel is the GraphQL shape of a run's live box.
func liveModel(lv runs.Live) *model.RunLive {
	m := &model.RunLive{RunID: lv.RunID, Version: lv.Version, Text: lv.Text, Status: lv.Status, Done: lv.Done}
	if !lv.UpdatedAt.IsZero() {
		at := lv.UpdatedAt
		m.UpdatedAt = &at
	}
	return m
}

// approvalStates maps the states of runs' approvals to the schema's enum:
// one table, so a state added on one side and not the other shows as an
// empty enum value, which gqlgen refuses to write, not as a guessed name.
var approvalStates = map[string]model.ApprovalState{
	runs.ApprovalPending:   model.ApprovalStatePending,
	runs.ApprovalDecided:   model.ApprovalStateDecided,
	runs.ApprovalExpired:   model.ApprovalStateExpired,
	runs.ApprovalWithdrawn: model.ApprovalStateWithdrawn,
}

// auditDecisions maps the audit log's decisions to the schema's enum.
var auditDecisions = map[string]model.AuditDecision{
	"allow": model.AuditDecisionAllow,
	"deny":  model.AuditDecisionDeny,
}

// auditDecisionOf is the audit log's decision of the schema's value d
// (the reverse of auditDecisions); an unknown value is "", no filter,
// which gqlgen's enum validation makes unreachable.
func auditDecisionOf(d model.AuditDecision) string {
	for k, v := range auditDecisions {
		if v == d {
			return k
		}
	}
	return ""
}

// approvalModel is the GraphQL shape of approval a; private says whether
// the reader may see its detail, options and chosen option. agentID is
// the run's agent when known.
func approvalModel(a runs.Approval, agentID string, private bool) *model.Approval {
	m := &model.Approval{ID: a.ID, RunID: a.RunID, MessageID: a.MessageID, State: approvalStates[a.State],
		Title: a.Title, ExpiresAt: a.ExpiresAt, DecidedAt: a.DecidedAt, CreatedAt: a.CreatedAt,
		AgentID: agentID, RestrictedToID: a.RestrictedTo, DecidedByID: a.DecidedBy}
	if !private {
		return m
	}
	m.Detail = &a.Detail
	m.Options = make([]*model.ApprovalOption, len(a.Options))
	for i, o := range a.Options {
		m.Options[i] = &model.ApprovalOption{ID: o.ID, Label: o.Label}
		if o.ID == a.OptionID {
			m.Option = m.Options[i]
		}
	}
	return m
}

// runContextModel maps the finished run context fc to its GraphQL model:
// every element finished by the runs module's rule
// (runs.FinishedContext.Finish) into models that share one allocation per
// list, and the follow-ups read and finished (runs.Service.ContextFollowUps)
// only when followUps or trustSummary asks for them.
func runContextModel(svc *runs.Service, fc *runs.FinishedContext) *model.RunContext {
	rc := fc.Context
	m := contextModels{fc: fc, refs: make(map[string]*model.PrincipalRef, len(fc.Authors))}
	out := &model.RunContext{RunID: rc.RunID, ContextFloorSeq: int(rc.ContextFloorSeq),
		TriggerMessage: m.finishAll([]runs.ContextElement{rc.Trigger})[0], ThreadContext: m.finishAll(rc.Thread)}
	if rc.Channel != nil {
		out.ChannelContext = m.finishAll(rc.Channel)
	}
	if rc.TruncatedBeforeSeq != nil {
		n := int(*rc.TruncatedBeforeSeq)
		out.TruncatedBeforeSeq = &n
	}
	out.LoadFollowUps = func(ctx context.Context) (model.RunContextMessages, error) {
		elems, err := svc.ContextFollowUps(ctx, fc)
		if err != nil {
			return nil, err
		}
		return m.finishAll(elems), nil
	}
	return out
}

// contextModels finishes the elements of one run context into models,
// each author's ref built once.
type contextModels struct {
	fc   *runs.FinishedContext
	refs map[string]*model.PrincipalRef
}

// finishAll finishes elems into models that share one allocation.
func (c contextModels) finishAll(elems []runs.ContextElement) model.RunContextMessages {
	ms := make([]model.RunContextMessage, len(elems))
	out := make(model.RunContextMessages, len(elems))
	for i := range elems {
		e := &elems[i]
		contextMessageModel(c.fc.Finish(*e), c.ref(e.AuthorID), &e.ReplyToMessageID, &ms[i])
		out[i] = &ms[i]
	}
	return out
}

// ref returns the shared ref of author id (FinishContext read every
// author of the elements it finishes).
func (c contextModels) ref(id string) *model.PrincipalRef {
	r, ok := c.refs[id]
	if !ok {
		r = refModel(c.fc.Authors[id].Ref())
		c.refs[id] = r
	}
	return r
}

// withAttachments fills in the attachments of the context's elements, all
// of them in one statement, and of its follow-ups when they are read. The
// agent's right to each element's files is its right to the element,
// which the context decided.
func (r *Resolver) withAttachments(ctx context.Context, rc *model.RunContext) error {
	var elems model.RunContextMessages
	elems = append(append(append(elems, rc.TriggerMessage), rc.ThreadContext...), rc.ChannelContext...)
	if err := r.fillAttachments(ctx, elems); err != nil {
		return err
	}
	load := rc.LoadFollowUps
	if load != nil {
		rc.LoadFollowUps = func(ctx context.Context) (model.RunContextMessages, error) {
			ms, err := load(ctx)
			if err != nil {
				return nil, err
			}
			return ms, r.fillAttachments(ctx, ms)
		}
	}
	return nil
}

// fillAttachments sets the attachments of elems from one read.
func (r *Resolver) fillAttachments(ctx context.Context, elems model.RunContextMessages) error {
	if len(elems) == 0 {
		return nil
	}
	idList := make([]string, 0, len(elems))
	for _, m := range elems {
		if m != nil {
			idList = append(idList, m.MessageID)
		}
	}
	got, err := r.Files.AttachmentsOf(ctx, idList)
	if err != nil {
		return problem.Internal("graph.attachments", err)
	}
	for _, m := range elems {
		if m != nil {
			if as := got[m.MessageID]; len(as) > 0 {
				m.Attachments = attachmentModels(as)
			}
		}
	}
	return nil
}

// derefInt is *n, or 0 for nil.
func derefInt(n *int) int {
	if n == nil {
		return 0
	}
	return *n
}

// hasFileText reports whether a context element carries a file whose text
// an agent may read (ready and served, as files.Service.MessagesWithText
// decides for an answer's provenance): the element then puts unverified
// in play (domain.InPlayWithFiles).
func (r *Resolver) hasFileText(e *model.RunContextMessage) bool {
	for _, a := range e.Attachments {
		if a.TextStatus != model.TextStatusReady {
			continue
		}
		f := files.File{ScanStatus: files.ScanStatus(a.ScanStatus)}
		if f.Servable(r.Files.RequireScan()) {
			return true
		}
	}
	return false
}
