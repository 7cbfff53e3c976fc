package files

import (
	"context"
	"fmt"

	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/platform/problem"
)

// MaxAttachments bounds attachment_file_ids of one message.
const MaxAttachments = 10

// Attach attaches the files of list to message messageID in the
// transaction of ctx (messaging's create calls it after its door call
// allowed the message). A file attaches once, by its uploader; an agent
// attaches only with the capability files_out. Every refusal is a field
// error under ptr (the pointer of attachment_file_ids), the same for a
// file that is missing, deleted or another's, so that it tells nothing of
// files the writer cannot see.
func (s *Service) Attach(ctx context.Context, actor identity.Principal, messageID string, list []string, ptr string) ([]messaging.Attachment, error) {
	if len(list) == 0 {
		return []messaging.Attachment{}, nil
	}
	if actor.Kind == identity.KindAgent {
		ok, err := s.d.Capabilities.FilesOut(ctx, actor.ID)
		if err != nil {
			return nil, problem.Internal("files.attach: read files_out capability", err)
		}
		if !ok {
			return nil, problem.Invalid(problem.FieldError{Pointer: ptr, Code: "capability_required",
				Detail: "an agent attaches files only with the capability files_out, which an owner grants"})
		}
	}
	var valid []string
	for _, id := range list {
		if ids.Valid(id) {
			valid = append(valid, id)
		}
	}
	found, err := s.st.lockMany(ctx, valid)
	if err != nil {
		return nil, problem.Internal("files.attach: lock files", err)
	}
	var fields []problem.FieldError
	out := make([]messaging.Attachment, 0, len(list))
	for i, id := range list {
		f, ok := found[id]
		if !ok || f.UploaderID != actor.ID {
			fields = append(fields, problem.FieldError{Pointer: fmt.Sprintf("%s/%d", ptr, i), Code: "invalid_reference",
				Detail: "must name a file the writer uploaded"})
			continue
		}
		if f.MessageID != "" {
			fields = append(fields, problem.FieldError{Pointer: fmt.Sprintf("%s/%d", ptr, i), Code: "already_attached",
				Detail: "a file is attached to one message"})
			continue
		}
		out = append(out, AttachmentOf(f))
	}
	if len(fields) > 0 {
		return nil, problem.Invalid(fields...)
	}
	if err := s.st.attach(ctx, messageID, list, s.d.Clock.Now()); err != nil {
		return nil, problem.Internal("files.attach: attach files", err)
	}
	return out, nil
}

// AttachmentOf is f as a message shows it.
func AttachmentOf(f File) messaging.Attachment {
	return messaging.Attachment{FileID: f.ID, Name: f.Name, MIMEType: f.MIMEType, Size: f.Size, ScanStatus: messaging.ScanStatus(f.ScanStatus),
		TextStatus: string(f.TextStatus), SHA256: f.SHA256Hex(), UploadedAt: f.CreatedAt}
}

// AttachmentsOf returns the attachments of the messages of list, keyed by
// message, in one statement (a fact for the loaders: the reader's right to
// the message was decided by its read). A message without files has none.
func (s *Service) AttachmentsOf(ctx context.Context, list []string) (map[string][]messaging.Attachment, error) {
	fs, err := s.st.byMessages(ctx, list)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]messaging.Attachment, len(list))
	for _, f := range fs {
		out[f.MessageID] = append(out[f.MessageID], AttachmentOf(f))
	}
	return out, nil
}

// MessageDeleted schedules the files of a deleted message for deletion
// after files.deleted_ttl, in the transaction of ctx (messaging's delete
// calls it). From then on they are served to nobody.
func (s *Service) MessageDeleted(ctx context.Context, messageID string) error {
	return s.st.scheduleDelete(ctx, messageID, s.d.Clock.Now().Add(s.d.Limits.DeletedTTL))
}

// MessagesWithText returns which of the messages of list carry a file
// whose text an agent may read (ready and served), in one statement: the
// runs module counts such a message as unverified in a run's trust
// summary and an answer's provenance (docs/design/trust.md#files).
func (s *Service) MessagesWithText(ctx context.Context, list []string) (map[string]bool, error) {
	fs, err := s.st.byMessages(ctx, list)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, f := range fs {
		if f.TextStatus == TextReady && f.Servable(s.d.Limits.RequireScan) {
			out[f.MessageID] = true
		}
	}
	return out, nil
}
