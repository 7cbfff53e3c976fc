package runcontext

import (
	"bothy.example.com/bothy/internal/runs/domain"
)

// Keys are the questions a run context leaves to its finish step
// (Finish): every author, the people whose trust needs the live
// trigger-holder answer, and the messages whose delivery to the session
// (or, for a guest run, to the run) decides already_delivered. Each list is
// free of duplicates and in the order of first appearance, so that one
// batch per kind answers it.
type Keys struct {
	// Authors are the author ids of every element.
	Authors []string
	// Holders are the people for whom "has trigger on the channel now"
	// decides the trust of at least one element.
	Holders []string
	// Delivered are the message ids to ask about: every element but the
	// run's own trigger, which is never already delivered.
	Delivered []string
}

// Answers are the finish step's answers to Keys. A key without an
// answer reads as "no": no trigger (trust unverified), not delivered. The
// caller never builds answers from a failed source: a failed source fails
// the whole context (fail closed).
type Answers struct {
	Holders   map[string]bool
	Delivered map[string]bool
}

// FinishedElement is one context element with every value the faces show:
// role, trust and already_delivered computed, nothing left to resolve.
type FinishedElement struct {
	Element
	Role  domain.Role
	Trust domain.Trust
	// Provenance is the least trust of what the element was derived from
	// (domain.ElementProvenance); the trust summary counts the lower of
	// Trust and Provenance (domain.InPlay).
	Provenance       domain.Trust
	AlreadyDelivered bool
}

// Elements returns every element of rc in the order of run_context.v1:
// the trigger, the thread context, the channel context. The follow-ups
// are read apart (only when asked for) and finished by the same rule.
func (rc *RunContext) Elements() []Element {
	out := make([]Element, 0, 1+len(rc.Thread)+len(rc.Channel))
	out = append(out, rc.Trigger)
	out = append(out, rc.Thread...)
	return append(out, rc.Channel...)
}

// Keys returns what the finish step must answer to finish the elements of rc
// (Elements).
func (rc *RunContext) Keys() Keys {
	return rc.keysOf([]Element{rc.Trigger}, rc.Thread, rc.Channel)
}

// KeysOf returns what the finish step must answer to finish elems, elements of
// rc (its elements or its follow-ups).
func (rc *RunContext) KeysOf(elems []Element) Keys {
	return rc.keysOf(elems)
}

// keysOf is KeysOf over lists of elements taken in order, without copying
// them into one.
func (rc *RunContext) keysOf(lists ...[]Element) Keys {
	n := 0
	for _, elems := range lists {
		n += len(elems)
	}
	k := Keys{Delivered: make([]string, 0, n)}
	seen := map[string]bool{}
	asked := map[string]bool{}
	for _, elems := range lists {
		for i := range elems {
			rc.addKeys(&k, &elems[i], seen, asked)
		}
	}
	if len(k.Delivered) == 0 {
		k.Delivered = nil
	}
	return k
}

// addKeys adds the questions of element e to k.
func (rc *RunContext) addKeys(k *Keys, e *Element, seen, asked map[string]bool) {
	if !seen[e.AuthorID] {
		seen[e.AuthorID] = true
		k.Authors = append(k.Authors, e.AuthorID)
	}
	if !asked[e.AuthorID] && domain.NeedsHolders(domain.AuthorFacts{Origin: e.Origin, AuthorID: e.AuthorID}, rc.Parties) {
		asked[e.AuthorID] = true
		k.Holders = append(k.Holders, e.AuthorID)
	}
	if e.ID != rc.Trigger.ID {
		k.Delivered = append(k.Delivered, e.ID)
	}
}

// Finish classifies element e of rc with the finish step's answers a
// (docs/design/trust.md#live-permissions): role and trust by domain.Classify,
// where only a person's
// message other than the trigger person's reads the live trigger-holder
// answer, and already_delivered for messages the agent acknowledged as
// follow-ups of the run's session (of the run itself for a guest run),
// never for the run's own trigger.
func (rc *RunContext) Finish(e Element, a Answers) FinishedElement {
	// Classify reads the holder answer only where NeedsHolders asks for it
	// (Keys asked exactly there), so the answers go in whole.
	facts := domain.AuthorFacts{Origin: e.Origin, AuthorID: e.AuthorID}
	role, trust := domain.Classify(facts, rc.Parties, a.Holders)
	return FinishedElement{Element: e, Role: role, Trust: trust,
		Provenance:       domain.ElementProvenance(facts, rc.Parties, trust, e.Provenance),
		AlreadyDelivered: e.ID != rc.Trigger.ID && a.Delivered[e.ID]}
}
