package extract_test

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"

	"bothy.example.com/bothy/internal/files/extract"
)

const (
	docxType = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
	xlsxType = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
)

// onlyReader hides every method of its reader but Read, so the extractor
// cannot take the io.ReaderAt path.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// zipFile builds a zip archive of the given entries, in order.
func zipFile(t *testing.T, entries ...[2]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		w, err := zw.Create(e[0])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(w, e[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// docx builds a minimal DOCX file whose body is the given WordprocessingML.
func docx(t *testing.T, body string) []byte {
	t.Helper()
	return zipFile(t,
		[2]string{"[Content_Types].xml", `<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>`},
		[2]string{"word/document.xml", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>` +
			`<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>` + body + `</w:body></w:document>`},
	)
}

// para is a paragraph of one run per text.
func para(texts ...string) string {
	var b strings.Builder
	b.WriteString("<w:p>")
	for _, s := range texts {
		fmt.Fprintf(&b, `<w:r><w:t xml:space="preserve">%s</w:t></w:r>`, s)
	}
	b.WriteString("</w:p>")
	return b.String()
}

// xlsx builds a workbook with a sheet "Team" and a sheet "Budget".
func xlsx(t *testing.T) []byte {
	t.Helper()
	f := excelize.NewFile()
	defer f.Close()
	if err := f.SetSheetName("Sheet1", "Team"); err != nil {
		t.Fatal(err)
	}
	cells := map[string]any{
		"A1": "Name", "B1": "Email", "C1": "Note",
		"A2": "Alex", "B2": "alex@example.com", "C2": `says "hi", twice`,
		"A4": "Robin", "B4": "robin@example.com",
	}
	for cell, v := range cells {
		if err := f.SetCellValue("Team", cell, v); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.NewSheet("Budget"); err != nil {
		t.Fatal(err)
	}
	for cell, v := range map[string]any{"A1": "Item", "B1": "Cost", "A2": "Laptops for Sam", "B2": 1200} {
		if err := f.SetCellValue("Budget", cell, v); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := f.Write(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// lyingZip builds an archive whose one entry declares far fewer bytes than
// it inflates to.
func lyingZip(t *testing.T, name string, declared uint64, actual int) []byte {
	t.Helper()
	data := bytes.Repeat([]byte("a"), actual)
	var comp bytes.Buffer
	fw, err := flate.NewWriter(&comp, flate.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	fw.Write(data)
	fw.Close()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.CreateRaw(&zip.FileHeader{
		Name:               name,
		Method:             zip.Deflate,
		CRC32:              crc32.ChecksumIEEE(data),
		CompressedSize64:   uint64(comp.Len()),
		UncompressedSize64: declared,
	})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(comp.Bytes())
	zw.Close()
	return buf.Bytes()
}

// textCase is one file given to Text and the result it must return.
type textCase struct {
	name          string
	mime          string
	body          []byte
	opts          extract.Options
	readerOnly    bool // hide io.ReaderAt
	want          string
	wantStatus    string
	wantTruncated bool
}

func TestText(t *testing.T) {
	tests := slices.Concat(textPlainCases(), textHTMLCases(), textDocxCases(t), textXlsxCases(t), textUnsupportedCases())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runTextCase(t, tt) })
	}
}

// textPlainCases are the text formats read as they are: their charsets
// and the bound of the text.
func textPlainCases() []textCase {
	return []textCase{
		{name: "plain", mime: "text/plain", body: []byte("Hello Robin,\nthe report is ready.\n"), want: "Hello Robin,\nthe report is ready.\n", wantStatus: "READY"},
		{name: "plain with charset", mime: "text/plain; charset=utf-8", body: []byte("Grüße, Alex"), want: "Grüße, Alex", wantStatus: "READY"},
		{name: "media type in capitals", mime: "Text/Plain", body: []byte("hi"), want: "hi", wantStatus: "READY"},
		{name: "malformed parameters", mime: "text/plain; charset", body: []byte("hi"), want: "hi", wantStatus: "READY"},
		{name: "markdown", mime: "text/markdown", body: []byte("# Plan\n\n- ask Sam\n"), want: "# Plan\n\n- ask Sam\n", wantStatus: "READY"},
		{name: "csv", mime: "text/csv", body: []byte("name,email\nAlex,alex@example.com\n"), want: "name,email\nAlex,alex@example.com\n", wantStatus: "READY"},
		{name: "json", mime: "application/json", body: []byte(`{"owner":"Robin","ok":true}`), want: `{"owner":"Robin","ok":true}`, wantStatus: "READY"},
		{name: "NUL removed, invalid UTF-8 replaced", mime: "text/plain", body: []byte("a\x00b\xffc"), want: "ab\uFFFDc", wantStatus: "READY"},
		{name: "UTF-16 decoded", mime: "text/plain; charset=utf-16le", body: []byte{'H', 0, 'i', 0, ' ', 0, 'S', 0, 'a', 0, 'm', 0}, want: "Hi Sam", wantStatus: "READY"},
		{name: "windows-1252 decoded", mime: "text/plain; charset=windows-1252", body: []byte("caf\xe9"), want: "café", wantStatus: "READY"},
		{name: "unknown charset read as UTF-8", mime: "text/plain; charset=x-nonesuch", body: []byte("plain"), want: "plain", wantStatus: "READY"},
		{
			name: "truncated at the bound",
			mime: "text/plain", body: []byte("0123456789abcdef"), opts: extract.Options{MaxBytes: 10},
			want: "0123456789", wantStatus: "READY", wantTruncated: true,
		},
		{
			name: "truncated at a character boundary",
			mime: "text/plain", body: []byte("aaaaaaaaa€€€"), opts: extract.Options{MaxBytes: 10},
			want: "aaaaaaaaa", wantStatus: "READY", wantTruncated: true,
		},
		{
			name: "exactly at the bound",
			mime: "text/plain", body: []byte("0123456789"), opts: extract.Options{MaxBytes: 10},
			want: "0123456789", wantStatus: "READY",
		},
	}
}

// textHTMLCases are HTML and XHTML files, rendered as the text a reader
// sees.
func textHTMLCases() []textCase {
	return []textCase{
		{
			name: "html",
			mime: "text/html; charset=utf-8",
			body: []byte(`<!doctype html><html><head><title>Plan</title><style>p{color:red}</style>
<script>alert("ignore previous instructions")</script></head>
<body><h1>Trip  to   the coast</h1><p>Alex &amp; Sam <b>drive</b>,
Robin takes the train.</p><ul><li>one</li><li>two</li></ul><noscript>enable js</noscript>
<pre>a  b
  c</pre></body></html>`),
			want:       "Plan\nTrip to the coast\nAlex & Sam drive, Robin takes the train.\none\ntwo\na  b\n  c",
			wantStatus: "READY",
		},
		{name: "xhtml", mime: "application/xhtml+xml", body: []byte(`<html><body><p>one</p><p>two</p></body></html>`), want: "one\ntwo", wantStatus: "READY"},
		{name: "html in windows-1252", mime: "text/html; charset=windows-1252", body: []byte("<p>caf\xe9</p>"), want: "café", wantStatus: "READY"},
		{
			name: "html truncated",
			mime: "text/html", body: []byte("<p>" + strings.Repeat("word ", 100) + "</p>"), opts: extract.Options{MaxBytes: 12},
			want: "word word wo", wantStatus: "READY", wantTruncated: true,
		},
	}
}

// textDocxCases are DOCX files, well-formed, broken and built to hurt
// (zip bombs, lying entries, too many entries).
func textDocxCases(t *testing.T) []textCase {
	t.Helper()
	longDoc := docx(t, strings.Repeat(para("Sam wrote this line again."), 1000))
	// A zip bomb: 40 MiB of one byte deflate to about 40 KiB.
	bomb := docx(t, para(strings.Repeat("a", 40<<20)))
	manyEntries := func() []byte {
		e := make([][2]string, 10001)
		for i := range e {
			e[i] = [2]string{fmt.Sprintf("word/part%d.xml", i), ""}
		}
		return zipFile(t, e...)
	}()
	return []textCase{
		{
			name: "docx",
			mime: docxType,
			body: docx(t, para("Agenda for ", "Alex")+
				`<w:p><w:r><w:t>one</w:t><w:tab/><w:t>two</w:t><w:br/><w:t>three</w:t></w:r></w:p>`+
				`<w:p><w:del><w:r><w:delText>deleted</w:delText></w:r></w:del><w:r><w:instrText>HYPERLINK</w:instrText><w:t>kept</w:t></w:r></w:p>`+
				`<w:tbl><w:tr><w:tc>`+para("cell 1")+`</w:tc><w:tc>`+para("cell 2")+`</w:tc></w:tr></w:tbl>`),
			want:       "Agenda for Alex\none\ttwo\nthree\nkept\ncell 1\n\tcell 2",
			wantStatus: "READY",
		},
		{name: "docx through a plain reader", mime: docxType, body: docx(t, para("Sam")), readerOnly: true, want: "Sam", wantStatus: "READY"},
		{
			name: "docx truncated",
			mime: docxType, body: longDoc, opts: extract.Options{MaxBytes: 30},
			want: "Sam wrote this line again.\nSam", wantStatus: "READY", wantTruncated: true,
		},
		{name: "docx without a document", mime: docxType, body: zipFile(t, [2]string{"word/other.xml", "<x/>"}), wantStatus: "FAILED"},
		{name: "docx that is no zip", mime: docxType, body: []byte("PK but not really"), wantStatus: "FAILED"},
		{name: "docx of broken XML", mime: docxType, body: zipFile(t, [2]string{"word/document.xml", "<w:document><w:body"}), wantStatus: "FAILED"},
		{name: "zip bomb by ratio", mime: docxType, body: bomb, wantStatus: "TOO_LARGE"},
		{name: "zip bomb through a plain reader", mime: docxType, body: bomb, readerOnly: true, wantStatus: "TOO_LARGE"},
		{
			name: "docx over the uncompressed bound",
			mime: docxType, body: docx(t, para(strings.Repeat("Robin ", 50000))), opts: extract.Options{MaxUncompressed: 100 << 10},
			wantStatus: "TOO_LARGE",
		},
		{name: "file over the uncompressed bound", mime: docxType, body: longDoc, opts: extract.Options{MaxUncompressed: 1 << 10}, wantStatus: "TOO_LARGE"},
		{name: "entry larger than it declares", mime: docxType, body: lyingZip(t, "word/document.xml", 100, 1<<20), wantStatus: "FAILED"},
		{name: "too many entries", mime: docxType, body: manyEntries, wantStatus: "TOO_LARGE"},
	}
}

// textXlsxCases are XLSX files: a workbook, a bomb, one over the bound
// and an archive that is no workbook.
func textXlsxCases(t *testing.T) []textCase {
	t.Helper()
	xlsxBomb := zipFile(t, [2]string{"xl/worksheets/sheet1.xml", strings.Repeat(" ", 20<<20)})
	return []textCase{
		{
			name:       "xlsx",
			mime:       xlsxType,
			body:       xlsx(t),
			want:       "Sheet: Team\nName,Email,Note\nAlex,alex@example.com,\"says \"\"hi\"\", twice\"\nRobin,robin@example.com\n\nSheet: Budget\nItem,Cost\nLaptops for Sam,1200",
			wantStatus: "READY",
		},
		{name: "xlsx through a plain reader", mime: xlsxType, body: xlsx(t), readerOnly: true, opts: extract.Options{MaxBytes: 16}, want: "Sheet: Team\nName", wantStatus: "READY", wantTruncated: true},
		{name: "xlsx bomb", mime: xlsxType, body: xlsxBomb, wantStatus: "TOO_LARGE"},
		{name: "xlsx over the uncompressed bound", mime: xlsxType, body: xlsx(t), opts: extract.Options{MaxUncompressed: 2 << 10}, wantStatus: "TOO_LARGE"},
		{name: "xlsx that is no workbook", mime: xlsxType, body: zipFile(t, [2]string{"hello.txt", "hi"}), wantStatus: "FAILED"},
	}
}

// textUnsupportedCases are the types Text has no extractor for.
func textUnsupportedCases() []textCase {
	return []textCase{
		{name: "pdf", mime: "application/pdf", body: []byte("%PDF-1.7\n"), wantStatus: "UNSUPPORTED"},
		{name: "image", mime: "image/png", body: []byte("\x89PNG"), wantStatus: "UNSUPPORTED"},
		{name: "empty type", mime: "", body: []byte("x"), wantStatus: "UNSUPPORTED"},
	}
}

// runTextCase extracts tt.body, through a plain reader when tt says so,
// and checks the text, status and truncation.
func runTextCase(t *testing.T, tt textCase) {
	var r io.Reader = bytes.NewReader(tt.body)
	if tt.readerOnly {
		r = onlyReader{r}
	}
	got, err := extract.Text(t.Context(), tt.mime, r, int64(len(tt.body)), tt.opts)
	if err != nil {
		t.Fatalf("Text: %v", err)
	}
	if got.Status != tt.wantStatus || got.Text != tt.want || got.Truncated != tt.wantTruncated {
		t.Errorf("Text = %+v\nwant {Text:%q Status:%s Truncated:%v}", got, tt.want, tt.wantStatus, tt.wantTruncated)
	}
}

// slowReader returns a byte every few milliseconds, forever.
type slowReader struct{}

func (slowReader) Read(p []byte) (int, error) {
	time.Sleep(5 * time.Millisecond)
	p[0] = 'a'
	return 1, nil
}

func TestTextTimeout(t *testing.T) {
	// HTML's tokenizer reads one endless text token: the bound must hold
	// inside a read of the parser, not only between tokens.
	for _, mt := range []string{"text/plain", "text/html", docxType, xlsxType} {
		start := time.Now()
		got, err := extract.Text(t.Context(), mt, slowReader{}, -1, extract.Options{Timeout: 100 * time.Millisecond})
		if err != nil || got.Status != extract.StatusFailed {
			t.Errorf("%s: Text = %+v, %v, want status FAILED", mt, got, err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s: took %v", mt, d)
		}
	}
}

func TestTextContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := extract.Text(ctx, "text/plain", strings.NewReader("x"), 1, extract.Options{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Text on a cancelled context: %v", err)
	}

	ctx, cancel = context.WithCancel(t.Context())
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := extract.Text(ctx, "text/html", slowReader{}, -1, extract.Options{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Text cancelled during the call: %v", err)
	}
}

// failingReader fails as a storage read may.
type failingReader struct{}

var errStorage = errors.New("storage unavailable")

func (failingReader) Read([]byte) (int, error) { return 0, errStorage }

// failingReaderAt fails its reads at any offset.
type failingReaderAt struct{ failingReader }

func (failingReaderAt) ReadAt([]byte, int64) (int, error) { return 0, errStorage }

func TestTextReadError(t *testing.T) {
	for _, mt := range []string{"text/plain", "text/html", docxType, xlsxType} {
		if _, err := extract.Text(t.Context(), mt, failingReader{}, -1, extract.Options{}); !errors.Is(err, errStorage) {
			t.Errorf("%s: Text error = %v, want the reader's", mt, err)
		}
		if _, err := extract.Text(t.Context(), mt, failingReaderAt{}, 4096, extract.Options{}); !errors.Is(err, errStorage) {
			t.Errorf("%s through ReadAt: Text error = %v, want the reader's", mt, err)
		}
	}
}
