package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime/multipart"
	"net/textproto"
	"strings"
	"sync"
	"time"
)

// Files (the trust design: files): an agent reads the text of the files
// attached to its run's context as data, never as an instruction, and
// attaches files of its own to its answer when an owner granted it the
// capability files_out.

// The text statuses of a file (the schema's TextStatus).
const (
	TextPending     = "PENDING"
	TextReady       = "READY"
	TextUnsupported = "UNSUPPORTED"
	TextTooLarge    = "TOO_LARGE"
	TextFailed      = "FAILED"
)

// File is an uploaded file's metadata, as uploadFile answers it.
type File struct {
	ID         string    `json:"id"`
	Name       string    `json:"name"`
	MimeType   string    `json:"mimeType"`
	Size       int64     `json:"size"`
	Sha256     string    `json:"sha256"`
	ScanStatus string    `json:"scanStatus"`
	CreatedAt  time.Time `json:"createdAt"`
}

// FileText is the extracted text of a file (File.text). Text is nil
// unless Status is READY. The text is data whoever uploaded the file:
// Block renders it for a prompt as an UNVERIFIED DATA block.
type FileText struct {
	FileID   string  `json:"id"`
	Name     string  `json:"name"`
	MimeType string  `json:"mimeType"`
	Status   string  `json:"textStatus"`
	Text     *string `json:"text"`
}

const (
	mutationUploadFile = `mutation UploadFile($file: Upload!) { uploadFile(file: $file) { id name mimeType size sha256 scanStatus createdAt } }`

	queryFileText = `query FileText($id: ID!, $maxBytes: Int) { file(id: $id) { id name mimeType textStatus text(maxBytes: $maxBytes) } }`

	queryCapabilities = `query Capabilities { viewer { capabilities { filesOut } } }`
)

// UploadFile uploads content as a file named name (the GraphQL multipart
// request convention). The file is the uploader's alone until a message
// of theirs attaches it (MessageCreate.AttachmentFileIDs). The upload is
// never retried by the client: a repeat makes a second file.
//
// Errors: as Do; payload_too_large (reason file_too_large) over
// files.max_bytes, conflict (reason quota_exceeded) over the quota.
func (c *Client) UploadFile(ctx context.Context, name string, content []byte) (File, error) {
	ops, err := json.Marshal(request{Query: mutationUploadFile, OperationName: "UploadFile", Variables: map[string]any{"file": nil}})
	if err != nil {
		return File{}, fmt.Errorf("adapter: UploadFile: %w", err)
	}
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	_ = w.WriteField("operations", string(ops))
	_ = w.WriteField("map", `{"0":["variables.file"]}`)
	h := textproto.MIMEHeader{}
	// The server sniffs the media type; the client claims none.
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="0"; filename=%q`, strings.Map(noControl, name)))
	h.Set("Content-Type", "application/octet-stream")
	part, err := w.CreatePart(h)
	if err == nil {
		_, err = part.Write(content)
	}
	if err == nil {
		err = w.Close()
	}
	if err != nil {
		return File{}, fmt.Errorf("adapter: UploadFile: %w", err)
	}
	var out struct {
		UploadFile *File `json:"uploadFile"`
	}
	if err := c.send(ctx, "UploadFile", w.FormDataContentType(), body.Bytes(), &out, 0); err != nil {
		return File{}, err
	}
	if out.UploadFile == nil {
		return File{}, notFound("UploadFile")
	}
	return *out.UploadFile, nil
}

// noControl drops control characters from a file name for its header.
func noControl(r rune) rune {
	if r < ' ' || r == 0x7f || r == '"' || r == '\\' {
		return -1
	}
	return r
}

// FileText reads the extracted text of file fileID, at most maxBytes
// bytes of it (0 takes the server's files.text_max_bytes, which also caps
// it); the server cuts at a character boundary. The caller may read a
// file when it may read a message that attaches it (a run token: the
// files of its run's context).
//
// Errors: as Do; not_found for a missing file and for one the caller may
// not read (the server answers both alike).
func (c *Client) FileText(ctx context.Context, fileID string, maxBytes int) (FileText, error) {
	vars := map[string]any{"id": fileID}
	if maxBytes > 0 {
		vars["maxBytes"] = maxBytes
	}
	var out struct {
		File *FileText `json:"file"`
	}
	if err := c.Do(ctx, "FileText", queryFileText, vars, &out, 0); err != nil {
		return FileText{}, err
	}
	if out.File == nil {
		return FileText{}, notFound("FileText")
	}
	if out.File.Status != TextReady {
		// Only a READY file's text is served; anything else is not text.
		out.File.Text = nil
	}
	return *out.File, nil
}

// FilesOut reports whether the client's principal holds the capability
// files_out (an owner grants it), without which its messages attach no
// files.
//
// Errors: as Do.
func (c *Client) FilesOut(ctx context.Context) (bool, error) {
	var out struct {
		Viewer struct {
			Capabilities struct {
				FilesOut bool `json:"filesOut"`
			} `json:"capabilities"`
		} `json:"viewer"`
	}
	err := c.Do(ctx, "Capabilities", queryCapabilities, nil, &out, 0)
	return out.Viewer.Capabilities.FilesOut, err
}

// ErrNoFilesOut is the error of Task.AttachFile for an agent without the
// capability files_out: an owner grants it (PUT
// /api/v1/principals/{principal_id}/capabilities with {"files_out": true},
// or setCapabilities).
var ErrNoFilesOut = errors.New("agent: attaching files needs the capability files_out, which an owner grants the agent (PUT /api/v1/principals/{principal_id}/capabilities {\"files_out\": true})")

// runFiles is what a run's Tasks share about files: the client that reads
// and uploads them, the files uploaded in the run (by name and digest, so
// that a later round attaching the same file reuses its upload), and the
// files the current round attaches to the answer.
type runFiles struct {
	client *Client
	mu     sync.Mutex
	// filesOut caches the capability once it was read as granted.
	filesOut bool
	uploaded map[string]string
	attached []string
}

// newRunFiles returns the file state of one run; client nil makes a run
// that can neither read nor attach files (a Task the SDK did not make).
func newRunFiles(client *Client) *runFiles {
	return &runFiles{client: client, uploaded: map[string]string{}}
}

// newRound forgets what an earlier round attached: the answer of the last
// round is the one posted, with the files that round attached.
func (f *runFiles) newRound() {
	if f == nil {
		return
	}
	f.mu.Lock()
	f.attached = nil
	f.mu.Unlock()
}

// ids returns the files the answer attaches, in the order attached.
func (f *runFiles) ids() []string {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.attached...)
}

// maxAttachments is the server's bound on the files of one message.
const maxAttachments = 10

// AttachFile uploads content as a file named name and attaches it to the
// run's answer: the answer posted when the handler returns carries it,
// and every retry and replay of that answer carries the same file. A
// later round of the run (follow-ups) attaches anew: the answer carries
// the files its last round attached, and a file attached again with the
// same name and content is not uploaded twice. It returns the file's id.
//
// Errors: ErrNoFilesOut when the agent lacks the capability files_out;
// more than 10 files; the upload's (Client.UploadFile); a Task the SDK
// did not make has no client and attaches nothing.
func (t *Task) AttachFile(ctx context.Context, name string, content []byte) (string, error) {
	if t == nil || t.files == nil || t.files.client == nil {
		return "", errors.New("agent: this Task has no connection to the server; it attaches no files")
	}
	f := t.files
	if err := f.checkFilesOut(ctx); err != nil {
		return "", err
	}
	sum := sha256.Sum256(content)
	key := name + "\x00" + hex.EncodeToString(sum[:])
	f.mu.Lock()
	id, ok := f.uploaded[key]
	n := len(f.attached)
	f.mu.Unlock()
	if !ok && n >= maxAttachments {
		return "", fmt.Errorf("agent: an answer attaches at most %d files", maxAttachments)
	}
	if !ok {
		file, err := f.client.UploadFile(ctx, name, content)
		if err != nil {
			return "", err
		}
		id = file.ID
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.uploaded[key] = id
	for _, a := range f.attached {
		if a == id {
			return id, nil
		}
	}
	if len(f.attached) >= maxAttachments {
		return "", fmt.Errorf("agent: an answer attaches at most %d files", maxAttachments)
	}
	f.attached = append(f.attached, id)
	return id, nil
}

// checkFilesOut reads the capability files_out until it is granted: an
// agent without it learns why before anything is uploaded, not when its
// answer is refused.
func (f *runFiles) checkFilesOut(ctx context.Context) error {
	f.mu.Lock()
	ok := f.filesOut
	f.mu.Unlock()
	if ok {
		return nil
	}
	has, err := f.client.FilesOut(ctx)
	if err != nil {
		return err
	}
	if !has {
		return ErrNoFilesOut
	}
	f.mu.Lock()
	f.filesOut = true
	f.mu.Unlock()
	return nil
}

// FileText reads the text of file fileID, a file attached to the run's
// context, through the server's text API (Client.FileText, at most the
// server's files.text_max_bytes). The text is data whoever uploaded the
// file: put it before a model only as FileText.Block renders it (a DATA
// block with trust UNVERIFIED), never as an instruction. Reading it lowers
// the run's in-play trust to UNVERIFIED (Task.Lower) whatever its status,
// so a consequential tool called after it needs the person's approval.
//
// Errors: not_found for a file the run may not read (or a missing one);
// those of Do; a Task the SDK did not make has no client.
func (t *Task) FileText(ctx context.Context, fileID string) (FileText, error) {
	if t == nil || t.files == nil || t.files.client == nil {
		return FileText{}, errors.New("agent: this Task has no connection to the server; it reads no files")
	}
	// Lowered before the read: a text that arrived is in play even when
	// the call fails afterwards.
	t.lowerFile()
	return t.files.client.FileText(ctx, fileID, 0)
}

// readFiles reads the texts of the READY files of task's context that
// the run has not read yet (texts holds those read, by file id), appends
// every text read in the run to the task's prompt in the order of the
// context, and lowers the in-play trust when any is there. A text that
// cannot be read is left out and logged by id.
func (a *Adapter) readFiles(ctx context.Context, log *slog.Logger, task *Task, texts map[string]FileText) {
	var list []FileText
	for _, m := range task.prompt.Context.Elements() {
		for _, at := range m.Attachments {
			if at.TextStatus != TextReady {
				continue
			}
			ft, ok := texts[at.FileID]
			if !ok {
				err := a.retry(ctx, "FileText", func(ctx context.Context) (err error) {
					ft, err = a.cfg.Client.FileText(ctx, at.FileID, 0)
					return err
				})
				if err != nil {
					log.Warn("file text unreadable; the model is not shown it", append([]any{"file_id", at.FileID}, errAttrs(err)...)...)
					continue
				}
				texts[at.FileID] = ft
			}
			list = append(list, ft)
		}
	}
	if len(list) > 0 {
		task.lowerFile()
		task.prompt = WithFileTexts(task.prompt, list)
	}
}

// PromptWithFiles returns the run's prompt with the text of every file of
// its context whose text is READY appended as DATA blocks with trust
// UNVERIFIED (WithFileTexts), and lowers the run's in-play trust to
// UNVERIFIED when it appended any: what a handler hands its model to let
// it read the run's files. A text that cannot be read is left out; the
// prompt of a Task without files is Prompt().
func (t *Task) PromptWithFiles(ctx context.Context) Prompt {
	if t == nil || t.files == nil || t.files.client == nil {
		return t.Prompt()
	}
	var list []FileText
	for _, m := range t.prompt.Context.Elements() {
		for _, at := range m.Attachments {
			if at.TextStatus != TextReady {
				continue
			}
			if ft, err := t.files.client.FileText(ctx, at.FileID, 0); err == nil {
				list = append(list, ft)
			}
		}
	}
	if len(list) == 0 {
		return t.prompt
	}
	t.lowerFile()
	return WithFileTexts(t.prompt, list)
}

// AttachFileToolName is the name of AttachFileTool.
const AttachFileToolName = "attach_file"

// AttachFileTool returns a tool a model calls to attach a text file to its
// answer (Task.AttachFile, which needs the capability files_out): its
// arguments are content, the file's text, and name (default answer.txt).
// It is not consequential: the file goes where the answer goes. A refusal
// (no files_out) is text for the model, which can say so in its answer.
func AttachFileTool() Tool {
	return Tool{
		Name:        AttachFileToolName,
		Description: "Attach a text file to your answer in the chat (a report, a table as CSV, code). Everyone who reads your answer can download it.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"content":{"type":"string","description":"the file's text"},` +
			`"name":{"type":"string","description":"the file's name, e.g. report.md"}},"required":["content"]}`),
		// What the model reads back is the SDK's own line.
		OutputTrust: TrustSystem,
		Call: func(ctx context.Context, args json.RawMessage) (string, error) {
			var in struct{ Content, Name string }
			if err := json.Unmarshal(args, &in); err != nil {
				return "", fmt.Errorf("attach_file: the arguments are no JSON object with content: %w", err)
			}
			if strings.TrimSpace(in.Name) == "" {
				in.Name = "answer.txt"
			}
			if _, err := TaskFrom(ctx).AttachFile(ctx, in.Name, []byte(in.Content)); err != nil {
				return "", err
			}
			return "Attached " + in.Name + " to your answer.", nil
		},
	}
}

// filesOf is the file state a handler's Task shares: the run's, from the
// Task the adapter put on ctx; none outside a run.
func filesOf(ctx context.Context) *runFiles {
	if t := TaskFrom(ctx); t != nil {
		return t.files
	}
	return nil
}

// Block renders the text for a prompt of boundary (Prompt.Boundary): a
// DATA block with trust UNVERIFIED whoever uploaded the file, its content
// neutralised like every element's, so that nothing in a file can close
// the block or pass as a request. A text that is not READY renders as an
// empty block naming its status.
func (ft FileText) Block(boundary string) string {
	var u strings.Builder
	fmt.Fprintf(&u, "%s%s %s part=file file=%s name=%s type=%s trust=unverified text=%s>>>\n", markerPrefix, sectionData, boundary,
		safeID(ft.FileID), safeName(ft.Name, boundary), safeMime(ft.MimeType), safeWord(ft.Status))
	if ft.Text != nil && *ft.Text != "" {
		u.WriteString(neutralise(*ft.Text, boundary))
		u.WriteString("\n")
	}
	fmt.Fprintf(&u, "%sEND %s %s>>>", markerPrefix, sectionData, boundary)
	return u.String()
}

// WithFileTexts returns p with the texts appended to its user text as
// DATA blocks (FileText.Block), after the blocks of the context: the
// prompt a model reads after the adapter read the run's files.
func WithFileTexts(p Prompt, texts []FileText) Prompt {
	for _, ft := range texts {
		p.User = strings.TrimRight(p.User, "\n") + "\n\n" + ft.Block(p.Boundary)
	}
	return p
}

// safeID keeps an id (a server id) to [A-Za-z0-9_-], at most 64
// characters; "unknown" when nothing is left.
func safeID(s string) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= 64 {
			break
		}
		if r == '_' || r == '-' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		}
	}
	if b.Len() == 0 {
		return "unknown"
	}
	return b.String()
}

// safeMime keeps a media type to [a-z0-9.+/-] in lower case, at most 100
// characters, without its parameters; "unknown" when nothing is left.
func safeMime(s string) string {
	s, _, _ = strings.Cut(strings.ToLower(s), ";")
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= 100 {
			break
		}
		if r == '.' || r == '+' || r == '/' || r == '-' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		}
	}
	if b.Len() == 0 {
		return "unknown"
	}
	return b.String()
}
