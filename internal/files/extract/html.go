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
	out := newSink(opts.MaxBytes)
	skip := map[string]int{}
	skipping := 0
	pre := 0
	newline := func() {
		if out.len() > 0 && !out.endsWith("\n") {
			out.writeString("\n")
		}
	}
	for n := 0; !out.full(); n++ {
		if n%256 == 0 {
			if err := ctx.Err(); err != nil {
				return Result{}, err
			}
		}
		switch z.Next() {
		case html.ErrorToken:
			err := z.Err()
			if err == io.EOF {
				return trimmed(out), nil
			}
			if errors.Is(err, html.ErrBufferExceeded) {
				return Result{}, failed(err)
			}
			return Result{}, err
		case html.StartTagToken, html.SelfClosingTagToken:
			name, _ := z.TagName()
			tag := string(name)
			if htmlSkipped[tag] {
				skip[tag]++
				skipping++
				continue
			}
			if tag == "pre" {
				pre++
			}
			if htmlBlocks[tag] {
				newline()
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			tag := string(name)
			if htmlSkipped[tag] {
				if skip[tag] > 0 {
					skip[tag]--
					skipping--
				}
				continue
			}
			if tag == "pre" && pre > 0 {
				pre--
			}
			if htmlBlocks[tag] {
				newline()
			}
		case html.TextToken:
			if skipping > 0 {
				continue
			}
			text := string(z.Text())
			if pre == 0 {
				text = collapse(text, out.len() == 0 || out.endsWith("\n") || out.endsWith(" "))
			}
			out.writeString(text)
		}
	}
	return trimmed(out), nil
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
