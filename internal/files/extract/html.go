package extract

import (
	"context"
	"errors"
	"io"
	"strings"

	"golang.org/x/net/html"
)

// htmlSkipped are the elements whose content is no text a reader sees.
var htmlSkipped = map[string]bool{
	"script": true, "style": true, "noscript": true, "template": true,
	"iframe": true, "object": true,
}

// htmlBlocks are the elements that start a new line of text.
var htmlBlocks = map[string]bool{
	"address": true, "article": true, "aside": true, "blockquote": true, "br": true,
	"dd": true, "div": true, "dl": true, "dt": true, "fieldset": true, "figcaption": true,
	"figure": true, "footer": true, "form": true, "h1": true, "h2": true, "h3": true,
	"h4": true, "h5": true, "h6": true, "header": true, "hr": true, "li": true,
	"main": true, "nav": true, "ol": true, "p": true, "pre": true, "section": true,
	"table": true, "tr": true, "ul": true, "title": true, "body": true,
}

// htmlMaxToken bounds the tokenizer's buffer: one tag or text run longer than
// this makes the file FAILED rather than fill memory.
const htmlMaxToken = 4 << 20

// htmlText renders HTML as the text a reader sees: no markup, no scripts or
// styles, block elements on lines of their own, white space collapsed
// outside pre. It walks the tokens as they are read, so memory stays bounded
// by the token limit and the text bound whatever the file's size.
func htmlText(ctx context.Context, r io.Reader, charset string, opts Options) (Result, error) {
	z := html.NewTokenizer(decoded(r, charset))
	z.SetMaxBuf(htmlMaxToken)
	w := &htmlWalker{out: newSink(opts.MaxBytes), skip: map[string]int{}}
	for n := 0; !w.out.full(); n++ {
		if n%256 == 0 {
			if err := ctx.Err(); err != nil {
				return Result{}, err
			}
		}
		switch z.Next() {
		case html.ErrorToken:
			return htmlEnd(w.out, z.Err())
		case html.StartTagToken, html.SelfClosingTagToken:
			name, _ := z.TagName()
			w.start(string(name))
		case html.EndTagToken:
			name, _ := z.TagName()
			w.end(string(name))
		case html.TextToken:
			w.text(z)
		case html.CommentToken, html.DoctypeToken:
			// Neither is text a reader sees.
		}
	}
	return trimmed(w.out), nil
}

// htmlEnd is htmlText's result once the tokenizer stopped with err: the
// text at the end of the file, FAILED for a token over the limit, or err.
func htmlEnd(out *sink, err error) (Result, error) {
	if errors.Is(err, io.EOF) {
		return trimmed(out), nil
	}
	if errors.Is(err, html.ErrBufferExceeded) {
		return Result{}, failed(err)
	}
	return Result{}, err
}

// htmlWalker is the state of htmlText's walk: the text so far, the skipped
// elements open (by name, and in all), and the pre elements open.
type htmlWalker struct {
	out      *sink
	skip     map[string]int
	skipping int
	pre      int
}

// start opens the element tag: a skipped one hides the text up to its end
// tag, a block starts a new line.
func (w *htmlWalker) start(tag string) {
	if htmlSkipped[tag] {
		w.skip[tag]++
		w.skipping++
		return
	}
	if tag == "pre" {
		w.pre++
	}
	if htmlBlocks[tag] {
		w.newline()
	}
}

// end closes the element tag. An end tag without its start tag closes
// nothing, so a stray one cannot reveal the content of another skipped
// element or end a pre early.
func (w *htmlWalker) end(tag string) {
	if htmlSkipped[tag] {
		if w.skip[tag] > 0 {
			w.skip[tag]--
			w.skipping--
		}
		return
	}
	if tag == "pre" && w.pre > 0 {
		w.pre--
	}
	if htmlBlocks[tag] {
		w.newline()
	}
}

// text adds the tokenizer's text token, unless a skipped element holds it;
// outside pre its white space is collapsed.
func (w *htmlWalker) text(z *html.Tokenizer) {
	if w.skipping > 0 {
		return
	}
	text := string(z.Text())
	if w.pre == 0 {
		text = collapse(text, w.out.len() == 0 || w.out.endsWith("\n") || w.out.endsWith(" "))
	}
	w.out.writeString(text)
}

// newline ends the current line, unless the text is empty or already at
// the start of a line.
func (w *htmlWalker) newline() {
	if w.out.len() > 0 && !w.out.endsWith("\n") {
		w.out.writeString("\n")
	}
}

// collapse turns each run of white space into one space, dropping a leading
// one when the text so far already ends in white space.
func collapse(s string, atSpace bool) string {
	if s == "" {
		return ""
	}
	fields := strings.Fields(s)
	if len(fields) == 0 {
		if atSpace {
			return ""
		}
		return " "
	}
	var b strings.Builder
	if isSpace(s[0]) && !atSpace {
		b.WriteByte(' ')
	}
	b.WriteString(strings.Join(fields, " "))
	if isSpace(s[len(s)-1]) {
		b.WriteByte(' ')
	}
	return b.String()
}

func isSpace(c byte) bool { return strings.IndexByte(" \t\n\r\f", c) >= 0 }

// trimmed is the sink's result without white space at the ends of its lines
// and of the whole.
func trimmed(out *sink) Result {
	res := out.result()
	lines := strings.Split(res.Text, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t")
	}
	res.Text = strings.TrimSpace(strings.Join(lines, "\n"))
	return res
}
