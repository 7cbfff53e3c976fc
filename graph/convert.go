package graph

import (
	"strconv"
	"strings"

	"bothy.example.com/bothy/graph/model"
	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/runs"
)

// The converters below render module values as GraphQL models. They hold no
// rule: optional values become nil pointers, enums upper case.

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

func upper(s string) string { return strings.ToUpper(s) }

func refModel(r identity.Ref) *model.PrincipalRef {
	return &model.PrincipalRef{ID: r.ID, Kind: model.PrincipalKind(upper(string(r.Kind))), Handle: r.Handle, DisplayName: r.DisplayName}
}

func messageModel(m messaging.Message) *model.Message {
	out := &model.Message{
		ID: m.ID, ThreadID: m.ThreadID, ChannelID: m.ChannelID, ThreadSeq: int(m.ThreadSeq), Author: refModel(m.Author),
		Origin: model.MessageOrigin(upper(m.Origin)), Kind: model.MessageKind(upper(m.Kind)), ContentMd: m.ContentMD,
		ContentTruncated: trueOrNil(m.ContentTruncated), ReplyToMessageID: opt(m.ReplyToMessageID),
		Mentions: make([]*model.PrincipalRef, len(m.Mentions)), Attachments: make([]*model.Attachment, len(m.Attachments)),
		TriggerReason: opt(m.TriggerReason), SystemCode: opt(m.SystemCode), RunID: opt(m.RunID),
		Deleted: trueOrNil(m.Deleted), CreatedAt: m.CreatedAt,
	}
	for i, r := range m.Mentions {
		out.Mentions[i] = refModel(r)
	}
	for i, a := range m.Attachments {
		out.Attachments[i] = &model.Attachment{FileID: a.FileID, Name: a.Name, MimeType: a.MIMEType, Size: int(a.Size)}
	}
	if m.TriggerState != "" {
		ts := model.TriggerState(upper(m.TriggerState))
		out.TriggerState = &ts
	}
	return out
}

func threadModel(t chat.Thread) *model.Thread {
	out := &model.Thread{ID: t.ID, ChannelID: t.ChannelID, Kind: model.ThreadKind(upper(t.Kind)),
		ParentMessageID: opt(t.ParentMessageID), OperatorAgentID: opt(t.OperatorAgentID), Title: opt(t.Title),
		CreatedBy: t.CreatedBy, State: model.ThreadState(upper(t.State)), LastSeq: int(t.LastSeq), CreatedAt: t.CreatedAt}
	if t.TitleSource != "" {
		ts := model.TitleSource(upper(t.TitleSource))
		out.TitleSource = &ts
	}
	return out
}

func channelModel(c chat.Channel) *model.Channel {
	return &model.Channel{ID: c.ID, SpaceID: c.SpaceID, Name: c.Name, Kind: model.ChannelKind(upper(c.Kind)),
		Archived: c.Archived(), OperatorMode: model.OperatorMode(upper(c.OperatorMode)), OperatorAgentID: opt(c.OperatorAgentID),
		EffectiveOperatorID: opt(c.EffectiveOperator()), MainThreadID: opt(c.MainThreadID),
		Switches: &model.ChannelSwitches{FreeResponse: c.Switches.FreeResponse, AllowMentionedAgents: c.Switches.AllowMentionedAgents,
			AutoThread: c.Switches.AutoThread, HistoryBackfillLimit: c.Switches.HistoryBackfillLimit}}
}

func spaceModel(s chat.Space) *model.Space {
	return &model.Space{ID: s.ID, Name: s.Name, DefaultOperatorAgentID: opt(s.DefaultOperatorAgentID), Archived: s.ArchivedAt != nil}
}

func grantModel(g authz.Grant) *model.Grant {
	return &model.Grant{ID: g.ID, SubjectID: g.SubjectID, SubjectKind: model.SubjectKind(upper(g.SubjectKind)),
		TargetKind: model.TargetKind(upper(string(g.TargetKind))), TargetID: g.TargetID,
		Level: model.GrantLevel(upper(g.Level.String())), ExpiresAt: g.ExpiresAt, CreatedAt: g.CreatedAt, RevokedAt: g.RevokedAt}
}

func eventModel(e events.Event) *model.Event {
	return &model.Event{Seq: itoa64(e.Seq), Type: e.Type, CreatedAt: e.CreatedAt, ChannelID: opt(e.ChannelID), SpaceID: opt(e.SpaceID), Payload: e.Payload}
}

func messageInput(in model.MessageCreate) messaging.Input {
	out := messaging.Input{ClientMsgID: in.ClientMsgID, ContentMD: in.ContentMd}
	if in.Kind != nil {
		out.Kind = strings.ToLower(string(*in.Kind))
	}
	if in.ReplyToMessageID != nil {
		out.ReplyToMessageID = *in.ReplyToMessageID
	}
	if in.RunID != nil {
		out.RunID = *in.RunID
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func itoa64(n int64) string { return strconv.FormatInt(n, 10) }

func runModel(r runs.Run) *model.Run {
	out := &model.Run{ID: r.ID, ThreadID: r.ThreadID, State: model.RunState(upper(r.State)), Version: r.Version,
		TriggerKind: model.TriggerKind(upper(r.TriggerKind)), TriggeringMessageID: opt(r.TriggeringMessageID),
		Session:         &model.RunSession{ID: opt(r.SessionID), Mode: model.SessionMode(upper(r.SessionMode))},
		CancelRequested: trueOrNil(r.CancelRequested), QueuedAt: r.QueuedAt, StartedAt: r.StartedAt, EndedAt: r.EndedAt,
		EndReason: opt(r.EndReason), AgentID: r.AgentID, TriggeredByID: r.TriggeredBy}
	return out
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

// contextMessageModel is the GraphQL model of a finished context element
// with its author's public view.
func contextMessageModel(e runs.FinishedElement, author *model.PrincipalRef) *model.RunContextMessage {
	return &model.RunContextMessage{MessageID: e.ID, ThreadSeq: int(e.ThreadSeq), CreatedAt: e.CreatedAt, ChannelID: e.ChannelID,
		Author: author, Role: model.Role(upper(string(e.Role))), Origin: model.MessageOrigin(upper(e.Origin)),
		Kind: model.MessageKind(upper(e.Kind)), ContentMd: e.ContentMD, Truncated: trueOrNil(e.Truncated),
		Attachments: []*model.Attachment{}, ReplyToMessageID: opt(e.ReplyToMessageID), Trust: trustModel(e.Trust),
		AlreadyDelivered: trueOrNil(e.AlreadyDelivered)}
}
