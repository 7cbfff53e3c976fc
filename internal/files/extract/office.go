package extract

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/xml"
	"errors"
	"fmt"
	"io"

	"github.com/xuri/excelize/v2"
)

// Bounds of the zip archives under DOCX and XLSX files, beyond
// Options.MaxUncompressed. Real documents stay far below them; an archive
// beyond them is built to hurt (a zip bomb) or is no office document.
const (
	// maxEntries bounds the entries of an archive: archive/zip reads the
	// whole central directory into memory, one record per entry.
	maxEntries = 10000
	// maxRatio bounds an entry's uncompressed size over its compressed
	// size once the entry is larger than ratioFloor. XML compresses about
	// ten to thirty times; a bomb's entries compress about a thousand times.
	maxRatio = 200
	// ratioFloor is the size below which the ratio is not checked: a small
	// entry cannot hurt, and tiny entries of repeated bytes have high ratios.
	ratioFloor = 1 << 20
)

// openZip opens r as a zip archive. An r that is an io.ReaderAt of a known
// size is read in place; any other is read into memory, at most limit bytes.
func openZip(r io.Reader, size, limit int64) (*zip.Reader, io.ReaderAt, int64, error) {
	var (
		ra io.ReaderAt
		n  int64
	)
	if at, ok := readerAt(r); ok && size >= 0 {
		if size > limit {
			return nil, nil, 0, tooLarge(fmt.Errorf("file of %d bytes", size))
		}
		ra, n = at, size
	} else {
		data, err := io.ReadAll(io.LimitReader(r, limit+1))
		if err != nil {
			return nil, nil, 0, err
		}
		if int64(len(data)) > limit {
			return nil, nil, 0, tooLarge(fmt.Errorf("file of more than %d bytes", limit))
		}
		ra, n = bytes.NewReader(data), int64(len(data))
	}
	zr, err := zip.NewReader(ra, n)
	// ErrInsecurePath comes with a usable reader: names are only looked up
	// here, never used as paths.
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		return nil, nil, 0, failed(err)
	}
	if len(zr.File) > maxEntries {
		return nil, nil, 0, tooLarge(fmt.Errorf("%d entries", len(zr.File)))
	}
	return zr, ra, n, nil
}

// readerAt returns r as an io.ReaderAt if the reader that r wraps is one.
func readerAt(r io.Reader) (io.ReaderAt, bool) {
	if c, ok := r.(ctxReader); ok {
		if _, ok := c.r.(io.ReaderAt); ok {
			return c, true
		}
		return nil, false
	}
	at, ok := r.(io.ReaderAt)
	return at, ok
}

// checkEntry applies the declared-size and ratio bounds to one entry, whose
// uncompressed size may be at most budget.
func checkEntry(f *zip.File, budget int64) error {
	u, c := f.UncompressedSize64, f.CompressedSize64
	if u > uint64(budget) {
		return tooLarge(fmt.Errorf("entry %q declares %d bytes", f.Name, u))
	}
	if u > ratioFloor && (c == 0 || u/c > maxRatio) {
		return tooLarge(fmt.Errorf("entry %q compressed %d to %d bytes", f.Name, u, c))
	}
	return nil
}

// boundedReader fails once more than n bytes were read: the declared size
// of an entry is the archive's word, and this holds whatever it says.
type boundedReader struct {
	r io.Reader
	n int64
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.n < 0 {
		return 0, tooLarge(errors.New("entry larger than its bound"))
	}
	if int64(len(p)) > b.n+1 {
		p = p[:b.n+1]
	}
	n, err := b.r.Read(p)
	b.n -= int64(n)
	if b.n < 0 {
		return n, tooLarge(errors.New("entry larger than its bound"))
	}
	return n, err
}

// wordML is the namespace of WordprocessingML's elements.
const wordML = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"

// docxText reads the text runs of word/document.xml: each paragraph a line,
// tabs and breaks kept, deleted text of tracked changes and field codes left
// out (they are in elements other than w:t). Headers, footers, notes and
// comments are not read.
func docxText(ctx context.Context, r io.Reader, size int64, opts Options) (Result, error) {
	doc, err := docxDocument(r, size, opts.MaxUncompressed)
	if err != nil {
		return Result{}, err
	}
	rc, err := doc.Open()
	if err != nil {
		return Result{}, failed(err)
	}
	defer rc.Close()

	w := &docxWalker{out: newSink(opts.MaxBytes)}
	dec := xml.NewDecoder(&boundedReader{r: rc, n: int64(doc.UncompressedSize64)})
	for n := 0; !w.out.full(); n++ {
		if n%512 == 0 {
			if err := ctx.Err(); err != nil {
				return Result{}, err
			}
		}
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Result{}, docxError(err)
		}
		w.token(tok)
	}
	return trimmed(w.out), nil
}

// docxDocument finds word/document.xml in the archive r and applies the
// entry bounds to it, the uncompressed size at most budget.
func docxDocument(r io.Reader, size, budget int64) (*zip.File, error) {
	zr, _, _, err := openZip(r, size, budget)
	if err != nil {
		return nil, err
	}
	for _, f := range zr.File {
		if f.Name == "word/document.xml" {
			if err := checkEntry(f, budget); err != nil {
				return nil, err
			}
			return f, nil
		}
	}
	return nil, failed(errors.New("no word/document.xml"))
}

// docxError is docxText's error for a document the decoder stopped in: a
// file's fault already judged (the entry outgrew its bound) keeps its
// status, any other makes the file FAILED.
func docxError(err error) error {
	var fe *fileError
	if errors.As(err, &fe) {
		return err
	}
	return failed(err)
}

// docxWalker is the state of docxText's walk: the text so far, and how
// many w:t elements (the text runs) are open.
type docxWalker struct {
	out    *sink
	inText int
}

// token renders one token of the document; only WordprocessingML's
// elements count.
func (w *docxWalker) token(tok xml.Token) {
	switch t := tok.(type) {
	case xml.StartElement:
		if t.Name.Space == wordML {
			w.start(t.Name.Local)
		}
	case xml.EndElement:
		if t.Name.Space == wordML {
			w.end(t.Name.Local)
		}
	case xml.CharData:
		if w.inText > 0 {
			w.out.writeBytes(t)
		}
	}
}

// start opens the element local: a text run, or writes a tab or a break.
func (w *docxWalker) start(local string) {
	switch local {
	case "t":
		w.inText++
	case "tab":
		w.out.writeString("\t")
	case "br", "cr":
		w.out.writeString("\n")
	}
}

// end closes the element local: a text run, a paragraph (a line) or a
// table cell (a tab).
func (w *docxWalker) end(local string) {
	switch local {
	case "t":
		if w.inText > 0 {
			w.inText--
		}
	case "p":
		w.out.writeString("\n")
	case "tc":
		w.out.writeString("\t")
	}
}

// xlsxText renders each sheet as a line "Sheet: NAME" followed by its
// non-empty rows as CSV lines (cell values as formatted in the sheet), with
// a blank line between sheets.
func xlsxText(ctx context.Context, r io.Reader, size int64, opts Options) (Result, error) {
	zr, ra, n, err := openZip(r, size, opts.MaxUncompressed)
	if err != nil {
		return Result{}, err
	}
	// excelize unpacks every entry when it opens a workbook, so every
	// entry is checked first, and their sum.
	var total uint64
	for _, f := range zr.File {
		if err := checkEntry(f, opts.MaxUncompressed); err != nil {
			return Result{}, err
		}
		total += f.UncompressedSize64
		if total > uint64(opts.MaxUncompressed) {
			return Result{}, tooLarge(fmt.Errorf("entries declare more than %d bytes", opts.MaxUncompressed))
		}
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	wb, err := excelize.OpenReader(io.NewSectionReader(ra, 0, n), excelize.Options{
		UnzipSizeLimit: opts.MaxUncompressed,
		// Larger sheets are unpacked to temporary files, not memory.
		UnzipXMLSizeLimit: min(opts.MaxUncompressed, 16<<20),
	})
	if err != nil {
		return Result{}, failed(err)
	}
	defer wb.Close()

	out := newSink(opts.MaxBytes)
	w := csv.NewWriter(sinkWriter{out})
	for i, name := range wb.GetSheetList() {
		if out.full() {
			break
		}
		if i > 0 {
			out.writeString("\n")
		}
		out.writeString("Sheet: " + name + "\n")
		if err := sheetRows(ctx, wb, name, w, out); err != nil {
			return Result{}, err
		}
	}
	return trimmed(out), nil
}

// sheetRows writes the non-empty rows of one sheet as CSV lines. A sheet
// whose rows cannot be listed is left empty.
func sheetRows(ctx context.Context, wb *excelize.File, sheet string, w *csv.Writer, out *sink) error {
	rows, err := wb.Rows(sheet)
	if err != nil {
		// A chart sheet has no rows; the workbook's other sheets still
		// have their text.
		return nil
	}
	defer rows.Close()
	for n := 0; rows.Next() && !out.full(); n++ {
		if n%256 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		cols, err := rows.Columns()
		if err != nil {
			return failed(err)
		}
		for len(cols) > 0 && cols[len(cols)-1] == "" {
			cols = cols[:len(cols)-1]
		}
		if len(cols) == 0 {
			continue
		}
		if err := w.Write(cols); err != nil {
			return err
		}
		w.Flush()
	}
	if err := rows.Error(); err != nil {
		return failed(err)
	}
	return nil
}

// sinkWriter lets encoding/csv write into a sink.
type sinkWriter struct{ s *sink }

func (w sinkWriter) Write(p []byte) (int, error) {
	w.s.writeBytes(p)
	return len(p), nil
}
