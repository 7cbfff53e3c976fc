package files

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gabriel-vasile/mimetype"
	"github.com/prometheus/client_golang/prometheus"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/clock"
	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/platform/problem"
)

// Limits are the configured bounds of files.
type Limits struct {
	MaxBytes    int64         // files.max_bytes
	QuotaBytes  int64         // files.quota_bytes
	RequireScan bool          // files.require_scan
	OrphanTTL   time.Duration // files.orphan_ttl
	DeletedTTL  time.Duration // files.deleted_ttl
	// TextMaxBytes is files.text_max_bytes: the most text kept of a file.
	TextMaxBytes int64
}

// Capabilities answers whether an agent holds an owner-granted
// capability (identity owns them).
type Capabilities interface {
	FilesOut(ctx context.Context, principalID string) (bool, error)
}

// Triggers answers the triggering message of a run of an agent.
type Triggers interface {
	TriggeringMessage(ctx context.Context, agentID, runID string) (string, error)
}

// Deps are what the files service needs.
type Deps struct {
	Pool db.Querier
	DB   *db.DB
	// Storage is files.storage, the blob store's URL, opened at the first
	// use (or by Open at a server's start): commands that never touch a
	// file (seed, token create) need no store.
	Storage string
	Authz   *authz.Service
	// Messages resolves the path of the message a file is attached to (the
	// messaging module): a file is readable where its message is.
	Messages     authz.Source
	Capabilities Capabilities
	// Triggers answers which message triggered a run token's run (the
	// runs module): that message belongs to the run's context though it
	// may lie outside the run's thread.
	Triggers Triggers
	Clock    clock.Clock
	Log      *slog.Logger
	Limits   Limits
	// Scanner scans every upload (files.clamd_addr); nil: no scanner, and
	// uploads are not_scanned.
	Scanner Scanner
	// Registry receives the module's metrics (Instrument); nil registers
	// none.
	Registry prometheus.Registerer
}

// Service is the files module's service.
type Service struct {
	st store
	d  Deps

	once    sync.Once
	bucket  *blob.Bucket
	openErr error
	metrics *metrics
}

// NewService returns the files service.
func NewService(d Deps) *Service {
	if d.Clock == nil {
		d.Clock = clock.Real{}
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	s := &Service{st: store{pool: d.Pool}, d: d}
	if d.Registry != nil {
		s.Instrument(d.Registry)
	}
	return s
}

// OpenStorage opens the blob store of files.storage, once; a server calls
// it at its start so that a store it cannot open stops it there.
func (s *Service) OpenStorage(ctx context.Context) error {
	_, err := s.store(ctx)
	return err
}

// store returns the opened blob store.
func (s *Service) store(ctx context.Context) (*blob.Bucket, error) {
	s.once.Do(func() { s.bucket, s.openErr = OpenBucket(ctx, s.d.Storage) })
	return s.bucket, s.openErr
}

// Close closes the blob store, if it was opened.
func (s *Service) Close() error {
	if b, err := s.store(context.Background()); err == nil && b != nil {
		return b.Close()
	}
	return nil
}

// RequireScan is files.require_scan.
func (s *Service) RequireScan() bool { return s.d.Limits.RequireScan }

// ReasonFileTooLarge and ReasonQuotaExceeded are the reasons of the two
// refusals of an upload by size.
const (
	ReasonFileTooLarge  = "file_too_large"
	ReasonQuotaExceeded = "quota_exceeded"
)

// ErrTooLarge is the refusal of a file over files.max_bytes (413).
func ErrTooLarge() error {
	return problem.Newf(problem.PayloadTooLarge, ReasonFileTooLarge, "the file is larger than files.max_bytes")
}

// sniffBytes is how much of a file the media type is sniffed from
// (mimetype's own default read limit).
const sniffBytes = 3072

// Upload stores a file of actor (file.upload, rate class rl.file): the
// bytes go to the blob store first, under a fresh key, while they are
// counted and hashed and their head is sniffed for the media type; then
// the row commits. A file over files.max_bytes or over the principal's
// quota leaves no bytes behind; a crash between the two leaves a blob
// without a row, which the sweep deletes.
func (s *Service) Upload(ctx context.Context, actor identity.Principal, name string, body io.Reader) (File, error) {
	if _, _, err := s.d.Authz.Authorize(ctx, actor, authz.FileUpload, authz.Own(authz.KindPrincipal, actor.ID)); err != nil {
		return File{}, err
	}
	f := File{ID: ids.New(), UploaderID: actor.ID, Name: CleanName(name), ScanStatus: ScanNotScanned, TextStatus: TextPending,
		CreatedAt: s.d.Clock.Now().UTC().Truncate(time.Microsecond)}
	f.storageKey = f.ID
	if s.d.Scanner != nil {
		f.ScanStatus = ScanPending
	}
	if err := s.write(ctx, &f, body); err != nil {
		return File{}, err
	}
	err := s.d.DB.InTx(ctx, func(ctx context.Context) error {
		held, err := s.st.held(ctx, actor.ID)
		if err != nil {
			return problem.Internal("files.upload: read held bytes", err)
		}
		if held+f.Size > s.d.Limits.QuotaBytes {
			return problem.Newf(problem.Conflict, ReasonQuotaExceeded, "the upload would exceed files.quota_bytes of what the uploader holds")
		}
		if err := s.st.insert(ctx, f); err != nil {
			return problem.Internal("files.upload: insert file", err)
		}
		return nil
	})
	if err != nil {
		s.dropBlob(f.storageKey)
		return File{}, err
	}
	// Scanning and extraction finish in the request, whatever the client
	// does meanwhile, so that the answer shows the verdict; what fails
	// here stays pending for the sweep.
	if err := s.process(context.WithoutCancel(ctx), &f); err != nil {
		s.d.Log.Warn("files: an upload stays pending until the sweep", "file_id", f.ID, "error", err.Error())
	}
	return f, nil
}

// write streams body into the blob of f, filling in its size, digest and
// media type. Reading stops one byte past files.max_bytes.
func (s *Service) write(ctx context.Context, f *File, body io.Reader) error {
	limited := io.LimitReader(body, s.d.Limits.MaxBytes+1)
	head := make([]byte, sniffBytes)
	n, err := io.ReadFull(limited, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return readError(err)
	}
	head = head[:n]
	f.MIMEType = mimetype.Detect(head).String()
	bucket, err := s.store(ctx)
	if err != nil {
		return problem.Internal("files.write: open store", err)
	}
	sum := sha256.New()
	w, err := bucket.NewWriter(ctx, f.storageKey, &blob.WriterOptions{ContentType: f.MIMEType})
	if err != nil {
		return problem.Internal("files.write: open blob writer", err)
	}
	size, err := io.Copy(io.MultiWriter(w, sum), io.MultiReader(bytes.NewReader(head), limited))
	if err == nil && size > s.d.Limits.MaxBytes {
		err = ErrTooLarge()
	}
	if err != nil {
		// Closing a writer whose context is not cancelled would commit a
		// partial blob: drop what was written instead.
		_ = w.Close()
		s.dropBlob(f.storageKey)
		return readError(err)
	}
	if err := w.Close(); err != nil {
		s.dropBlob(f.storageKey)
		return problem.Internal("files.write: close blob writer", err)
	}
	f.Size, f.SHA256 = size, sum.Sum(nil)
	return nil
}

// readError turns a failure to read an upload into its answer: a body
// over the limit stays 413, a client that stopped sending is a bad request.
func readError(err error) error {
	var p *problem.Error
	if errors.As(err, &p) {
		return p
	}
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return ErrTooLarge()
	}
	return problem.Newf(problem.ValidationFailed, "upload_incomplete", "the upload could not be read to its end")
}

// dropBlob deletes a blob that has, or will have, no row; a failure is
// left to the sweep.
func (s *Service) dropBlob(key string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bucket, err := s.store(ctx)
	if err != nil {
		return
	}
	if err := bucket.Delete(ctx, key); err != nil && !isNotFound(err) {
		s.d.Log.Warn("files: a blob without a row stays until the sweep", "key", key, "error", err.Error())
	}
}

// Get returns file id if actor may read it (file.read): its uploader
// before it is attached, afterwards whoever may read its message. A file
// actor may not read answers exactly as a missing one, after the same
// statements: the path of a message is looked up for every file (the nil
// id's for one that is missing or not attached).
func (s *Service) Get(ctx context.Context, actor identity.Principal, id string) (File, error) {
	var f File
	lookup := authz.Lookup(func(ctx context.Context) (authz.Facts, error) {
		var err error
		missing := !ids.Valid(id)
		if !missing {
			f, err = s.st.get(ctx, id)
			missing = errors.Is(err, errNoFile)
			if err != nil && !missing {
				return authz.Facts{}, err
			}
		}
		p, err := s.pathOf(ctx, f)
		if missing {
			p = authz.Path{Kind: authz.KindFile, ID: id}
		} else if err == nil && actor.RunID != "" {
			p, err = s.runContextPath(ctx, actor, f, p)
		}
		return authz.Facts{Path: p}, err
	})
	if _, _, err := s.d.Authz.Authorize(ctx, actor, authz.FileRead, lookup); err != nil {
		return File{}, err
	}
	return f, nil
}

// runContextPath is the path a run token reads file f at: the file's own
// (its message's) when the message is in the run's thread, the run's when
// the message is the run's trigger (in its context, though in the parent
// thread), so that the door lets the token read exactly its context's
// files.
func (s *Service) runContextPath(ctx context.Context, actor identity.Principal, f File, p authz.Path) (authz.Path, error) {
	if f.MessageID == "" || p.ThreadID == actor.RunThreadID || s.d.Triggers == nil {
		return p, nil
	}
	trigger, err := s.d.Triggers.TriggeringMessage(ctx, actor.ID, actor.RunID)
	if err != nil || trigger != f.MessageID {
		return p, err
	}
	return s.d.Authz.PathOf(ctx, authz.Resource{Kind: authz.KindRun, ID: actor.RunID})
}

// nilID stands for "no message" in the path lookup of a file that has
// none, so that its statements are a missing message's.
const nilID = "00000000-0000-0000-0000-000000000000"

// pathOf is the path file.read decides on: the attaching message's, or
// the uploader's own before the file is attached.
func (s *Service) pathOf(ctx context.Context, f File) (authz.Path, error) {
	msg := f.MessageID
	if msg == "" {
		msg = nilID
	}
	p, err := s.d.Messages.Path(ctx, authz.KindMessage, msg)
	if err != nil {
		return authz.Path{}, err
	}
	if f.MessageID == "" {
		return authz.Path{Exists: true, Kind: authz.KindFile, ID: f.ID, OwnerID: f.UploaderID, Global: true, Private: true}, nil
	}
	p.Kind, p.ID = authz.KindFile, f.ID
	return p, nil
}

// Open returns file id and a reader of its bytes, when actor may read it
// (Get) and the file may be served (File.Servable): a file withheld for
// its scan state answers the same not_found as a missing one, so its
// state tells no reader more than the attachment's scanStatus does.
func (s *Service) Open(ctx context.Context, actor identity.Principal, id string) (File, io.ReadCloser, error) {
	f, err := s.Get(ctx, actor, id)
	if err != nil {
		return File{}, nil, err
	}
	if !f.Servable(s.d.Limits.RequireScan) {
		return File{}, nil, problem.New(problem.NotFound, "")
	}
	bucket, err := s.store(ctx)
	if err != nil {
		return File{}, nil, problem.Internal("files.open: open store", err)
	}
	r, err := bucket.NewReader(ctx, f.storageKey, nil)
	if err != nil {
		return File{}, nil, problem.Internal("files.open: open blob reader", err)
	}
	return f, r, nil
}

// isNotFound reports a blob store's "no such object".
func isNotFound(err error) bool { return gcerrors.Code(err) == gcerrors.NotFound }

// Text is what a reader gets of a file's text.
type Text struct {
	File File
	// Text is the file's text, at most the maxBytes asked (and
	// files.text_max_bytes), cut at a character boundary; empty unless
	// File.TextStatus is TextReady.
	Text string
	// Truncated reports that the file has more text than Text: cut here
	// by maxBytes, or at the extraction by files.text_max_bytes.
	Truncated bool
}

// ReadText returns the text of file id when actor may read it (Get) and
// the file may be served (File.Servable), with the same not_found as Open
// otherwise. maxBytes <= 0 or above files.text_max_bytes means
// files.text_max_bytes. The text is data: whoever renders it marks it
// untrusted (docs/design/trust.md#files).
func (s *Service) ReadText(ctx context.Context, actor identity.Principal, id string, maxBytes int) (Text, error) {
	f, err := s.Get(ctx, actor, id)
	if err != nil {
		return Text{}, err
	}
	if !f.Servable(s.d.Limits.RequireScan) {
		return Text{}, problem.New(problem.NotFound, "")
	}
	return s.textOf(ctx, f, maxBytes)
}

// TextOf returns the text of f, a file the caller was allowed to read
// (the GraphQL field File.text of a file Query.file answered): nothing
// unless its text is ready, which a withheld file's never is.
func (s *Service) TextOf(ctx context.Context, f File, maxBytes int) (Text, error) {
	if !f.Servable(s.d.Limits.RequireScan) {
		return Text{File: f}, nil
	}
	return s.textOf(ctx, f, maxBytes)
}

func (s *Service) textOf(ctx context.Context, f File, maxBytes int) (Text, error) {
	out := Text{File: f}
	if f.TextStatus != TextReady {
		return out, nil
	}
	text, err := s.st.text(ctx, f.ID)
	if err != nil {
		return Text{}, problem.Internal("files.text", err)
	}
	limit := s.d.Limits.TextMaxBytes
	if maxBytes > 0 && int64(maxBytes) < limit {
		limit = int64(maxBytes)
	}
	out.Text, out.Truncated = CutText(text, int(limit))
	out.Truncated = out.Truncated || f.textTruncated
	return out, nil
}

// CutText returns at most max bytes of text, cut at a UTF-8 character
// boundary, and whether it cut anything.
func CutText(text string, max int) (string, bool) {
	if len(text) <= max {
		return text, false
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return text[:cut], true
}
