package agent

import (
	"context"
	"fmt"
	"strings"
	"unicode"
)

// Model turns a rendered run context into an answer. Implementations wrap
// a language model service (send Prompt.System and Prompt.User), a rules
// engine, or EchoModel. Answer must return when ctx ends: the adapter
// cancels ctx when a person cancels the run or the adapter stops.
//
// Errors: any error fails the run with reason model_error; an empty answer
// counts as an error, because the server refuses blank messages.
type Model interface {
	Answer(ctx context.Context, prompt Prompt) (string, error)
}

// EchoModel is a Model that needs no model service: it answers a summary
// of the context, how many elements it holds in total and by trust level,
// and quotes the trigger text, for example
//
//	Context: 5 elements (trigger 1, authorized 1, self 1, unverified 2, system 0). You asked: "..."
//
// It reads the structured Prompt.Context and is meant for tests, demos and
// checking an installation end to end.
type EchoModel struct {
	// MaxQuoteRunes cuts the quoted trigger text (default 200 runes); a cut
	// quote ends with "...".
	MaxQuoteRunes int
}

// Answer returns the summary of prompt.Context. Trust levels this code does
// not know count as unverified, as Render treats them.
//
// Errors: ctx.Err() when ctx has ended.
func (m EchoModel) Answer(ctx context.Context, prompt Prompt) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	counts := map[Trust]int{}
	elems := prompt.Context.Elements()
	for _, e := range elems {
		switch e.Trust {
		case TrustTrigger, TrustAuthorized, TrustSelf, TrustSystem:
			counts[e.Trust]++
		default:
			counts[TrustUnverified]++
		}
	}
	noun := "elements"
	if len(elems) == 1 {
		noun = "element"
	}
	return m.format(len(elems), noun, counts, prompt.Context.TriggerMessage.ContentMD), nil
}

// format builds the answer text; the quote is plain (not Go-escaped) so it
// reads naturally in the chat.
func (m EchoModel) format(n int, noun string, counts map[Trust]int, trigger string) string {
	return fmt.Sprintf("Context: %d %s (trigger %d, authorized %d, self %d, unverified %d, system %d). You asked: \"%s\"",
		n, noun, counts[TrustTrigger], counts[TrustAuthorized], counts[TrustSelf], counts[TrustUnverified], counts[TrustSystem], m.quote(trigger))
}

// quote folds the trigger text onto one line (runs of white space become
// one space) and cuts it to MaxQuoteRunes.
func (m EchoModel) quote(s string) string {
	limit := m.MaxQuoteRunes
	if limit <= 0 {
		limit = 200
	}
	s = strings.Join(strings.FieldsFunc(s, unicode.IsSpace), " ")
	if r := []rune(s); len(r) > limit {
		return string(r[:limit]) + "..."
	}
	return s
}
