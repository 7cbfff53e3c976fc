// Package extract turns an uploaded file into plain text for agents: text,
// Markdown, CSV, JSON, HTML (as text), DOCX and XLSX. PDF and every other
// type are reported unsupported.
//
// Extraction is bounded in what it keeps (Options.MaxBytes of text), in what
// it unpacks (Options.MaxUncompressed, with checks of a zip archive's entry
// count, declared sizes and compression ratios before anything is inflated)
// and in time (Options.Timeout and the caller's context, checked as the
// input is walked). It starts no goroutine, so nothing of a call outlives it.
//
// The text it returns is data: it is never interpreted here, and the caller
// renders it as untrusted content, whatever the file says.
package extract

import (
	"bufio"
	"context"
	"errors"
	"io"
	"mime"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/text/encoding/htmlindex"
)

// The statuses of a Result, the values of Attachment.textStatus (issue 44)
// that an extraction can end in.
const (
	// StatusReady means Text holds the file's text (possibly truncated).
	StatusReady = "READY"
	// StatusUnsupported means the file's type has no extractor.
	StatusUnsupported = "UNSUPPORTED"
	// StatusTooLarge means the file passes a bound of the extraction (its
	// uncompressed size, its number of archive entries, its compression
	// ratio), so it was not read: a zip bomb ends here.
	StatusTooLarge = "TOO_LARGE"
	// StatusFailed means the file could not be read as its type says, or
	// its extraction took longer than Options.Timeout.
	StatusFailed = "FAILED"
)

// Defaults of the zero fields of Options.
const (
	// DefaultMaxBytes is the default of files.text_max_bytes.
	DefaultMaxBytes = 256 << 10
	// DefaultTimeout bounds one extraction.
	DefaultTimeout = 10 * time.Second
	// DefaultMaxUncompressed bounds what an archive format may unpack, and
	// the size of such a file, which must be held whole to be unpacked.
	DefaultMaxUncompressed = 64 << 20
)

// Options bound one extraction. Zero fields take the defaults above.
type Options struct {
	// MaxBytes is the most text kept, in bytes of UTF-8 (files.text_max_bytes).
	// Longer text is cut at a character boundary and Result.Truncated set.
	MaxBytes int64
	// Timeout bounds the extraction; the context's deadline, if earlier,
	// bounds it too. Passing it gives StatusFailed, not an error.
	Timeout time.Duration
	// MaxUncompressed bounds what a DOCX or XLSX file may unpack (the
	// archive-bomb guard), and the size of the file itself.
	MaxUncompressed int64
}

// Result is the outcome of an extraction.
type Result struct {
	// Text is the extracted text, valid UTF-8 without NUL bytes, at most
	// Options.MaxBytes long; empty unless Status is StatusReady.
	Text string
	// Status is one of the Status constants.
	Status string
	// Truncated reports that the file had more text than Options.MaxBytes.
	Truncated bool
}

// Text extracts the text of a file of the given media type, read from r.
// mimeType is the sniffed type, with or without parameters (as
// gabriel-vasile/mimetype reports it, "text/plain; charset=utf-8"); a charset
// parameter other than UTF-8 is decoded. size is the file's size in bytes, or
// -1 if unknown: when r is also an io.ReaderAt (an *os.File, a bytes.Reader)
// and size is known, archives are read in place instead of into memory.
//
// Every property of the file ends in Result.Status, with a nil error. The
// error is non-nil only when the caller's context ended (its error) or r
// failed to read: neither says anything about the file, so the caller should
// retry later rather than record a status.
func Text(ctx context.Context, mimeType string, r io.Reader, size int64, opts Options) (Result, error) {
	opts = opts.withDefaults()
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	tctx, cancel := context.WithTimeoutCause(ctx, opts.Timeout, errTimeout)
	defer cancel()

	// Every read of the file checks the context, so a reader that trickles
	// (or a tokenizer that reads a long token) cannot outlast the bound.
	r = ctxReader{ctx: tctx, r: r}

	mediaType, params := parseType(mimeType)
	var (
		res Result
		err error
	)
	switch mediaType {
	case "text/plain", "text/markdown", "text/x-markdown", "text/csv",
		"text/tab-separated-values", "application/json", "application/x-ndjson":
		res, err = plainText(tctx, r, params["charset"], opts)
	case "text/html", "application/xhtml+xml":
		res, err = htmlText(tctx, r, params["charset"], opts)
	case docxType:
		res, err = docxText(tctx, r, size, opts)
	case xlsxType:
		res, err = xlsxText(tctx, r, size, opts)
	default:
		// PDF included: see docs/DECISIONS.md (2026-12-04, PDF text).
		return Result{Status: StatusUnsupported}, nil
	}
	return finish(ctx, tctx, res, err)
}

// The media types of Office Open XML files, as mimetype names them.
const (
	docxType = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
	xlsxType = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
)

var errTimeout = errors.New("extract: timed out")

// fileError marks a failure that is the file's fault: it ends in a status,
// not an error of Text.
type fileError struct {
	status string
	err    error
}

func (e *fileError) Error() string { return e.status + ": " + e.err.Error() }
func (e *fileError) Unwrap() error { return e.err }

func failed(err error) error   { return &fileError{status: StatusFailed, err: err} }
func tooLarge(err error) error { return &fileError{status: StatusTooLarge, err: err} }

// finish maps an extractor's outcome to Text's: the caller's context ending
// is an error, the timeout and the file's faults are statuses.
func finish(ctx, tctx context.Context, res Result, err error) (Result, error) {
	if cerr := ctx.Err(); cerr != nil {
		return Result{}, cerr
	}
	if err == nil {
		res.Status = StatusReady
		return res, nil
	}
	var (
		fe *fileError
		se *sourceError
	)
	switch {
	case errors.As(err, &se):
		// Checked first: a parser may have wrapped the reader's failure
		// in its own complaint about the file.
		return Result{}, se.err
	case errors.As(err, &fe):
		return Result{Status: fe.status}, nil
	case errors.Is(context.Cause(tctx), errTimeout):
		return Result{Status: StatusFailed}, nil
	default:
		return Result{}, err
	}
}

func (o Options) withDefaults() Options {
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxUncompressed <= 0 {
		o.MaxUncompressed = DefaultMaxUncompressed
	}
	return o
}

// parseType splits a media type into its lower-case name and parameters. A
// malformed parameter list leaves the name usable: the name is what decides
// the extractor.
func parseType(s string) (string, map[string]string) {
	mt, params, err := mime.ParseMediaType(s)
	if err != nil {
		mt, _, _ = strings.Cut(s, ";")
		mt = strings.ToLower(strings.TrimSpace(mt))
		params = nil
	}
	return mt, params
}

// decoded returns r decoded from charset to UTF-8. UTF-8, US-ASCII and an
// unknown or absent charset are read as UTF-8, whose invalid bytes the
// output replaces, since the sniffer reports a charset only when it found
// one; any other name of the WHATWG encoding list (UTF-16, windows-1252,
// ...) is decoded.
func decoded(r io.Reader, charset string) io.Reader {
	switch strings.ToLower(charset) {
	case "", "utf-8", "utf8", "us-ascii":
		return r
	}
	enc, err := htmlindex.Get(charset)
	if err != nil {
		return r
	}
	return enc.NewDecoder().Reader(r)
}

// plainText reads a text format as it is.
func plainText(ctx context.Context, r io.Reader, charset string, opts Options) (Result, error) {
	out := newSink(opts.MaxBytes)
	br := bufio.NewReaderSize(decoded(r, charset), 32<<10)
	buf := make([]byte, 32<<10)
	for !out.full() {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		n, err := br.Read(buf)
		out.writeBytes(buf[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			return Result{}, err
		}
	}
	return out.result(), nil
}

// ctxReader fails its reads once its context is done. It keeps an
// io.ReaderAt of the reader it wraps, which archives are read through.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := c.r.Read(p)
	return n, source(err)
}

// sourceError marks a failure of the reader the file is read from (the
// storage), which Text returns as its error instead of a status.
type sourceError struct{ err error }

func (e *sourceError) Error() string { return "extract: reading the file: " + e.err.Error() }
func (e *sourceError) Unwrap() error { return e.err }

// source marks err as the reader's failure; io.EOF, which parsers expect as
// it is, stays unmarked.
func source(err error) error {
	if err == nil || errors.Is(err, io.EOF) {
		return err
	}
	return &sourceError{err: err}
}

// ReadAt lets an io.ReaderAt through: an archive is then read in place
// rather than copied into memory.
func (c ctxReader) ReadAt(p []byte, off int64) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	ra, ok := c.r.(io.ReaderAt)
	if !ok {
		return 0, errors.New("extract: the reader has no ReadAt")
	}
	n, err := ra.ReadAt(p, off)
	return n, source(err)
}

// sink collects text up to a bound. It keeps a few bytes more than the
// bound so that the final cut can fall on a character boundary after the
// text is made valid UTF-8.
type sink struct {
	b         strings.Builder
	max       int64
	truncated bool
}

func newSink(max int64) *sink { return &sink{max: max} }

// slack is what the sink keeps beyond its bound: the longest UTF-8
// character, so that cutting after sanitizing never drops a whole one that
// fitted.
const slack = utf8.UTFMax

func (s *sink) full() bool { return s.truncated }

func (s *sink) writeBytes(p []byte) {
	if s.truncated {
		return
	}
	room := s.max + slack - int64(s.b.Len())
	if int64(len(p)) > room {
		p = p[:room]
		s.truncated = true
	}
	s.b.Write(p)
}

func (s *sink) writeString(str string) { s.writeBytes([]byte(str)) }

// endsWith reports whether the text so far ends with suffix.
func (s *sink) endsWith(suffix string) bool { return strings.HasSuffix(s.b.String(), suffix) }

func (s *sink) len() int { return s.b.Len() }

// result makes the text valid UTF-8 without NUL bytes (a NUL ends strings in
// much of what reads the text later) and cuts it to the bound.
func (s *sink) result() Result {
	text := strings.ToValidUTF8(s.b.String(), "\uFFFD")
	text = strings.ReplaceAll(text, "\x00", "")
	truncated := s.truncated
	if int64(len(text)) > s.max {
		cut := int(s.max)
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut]
		truncated = true
	}
	return Result{Text: text, Truncated: truncated}
}
