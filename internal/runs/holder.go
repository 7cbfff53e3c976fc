package runs

import (
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/problem"
)

// Holder names the adapter process that holds a claimed run: an opaque id
// of 1 to 128 letters, digits, '.', '_', ':' or '-' per process
// (docs/design/runs.md#claims-and-leases). The zero Holder is the
// anonymous holder of adapters that predate claims. Every face turns what
// it received into a Holder with ParseHolder (or HolderFor, which adds the
// run token's holder), so one rule and one field pointer decide every call
// on a run.
type Holder string

// AnonymousHolder is the holder of calls that name none.
const AnonymousHolder Holder = ""

// HolderPointer is the one field pointer of a refused holder: the bare
// argument name. GraphQL answers it as the argument holder; the REST shim
// renders it as /holder where the holder is a body member (startRun,
// renewRun, createRunToken) and header:Bothy-Run-Holder elsewhere.
const HolderPointer = "holder"

// HolderMaxLen bounds a holder name.
const HolderMaxLen = 128

// ParseHolder is the one parse of a holder as a face received it: raw nil
// (the argument absent or null, no header, no body member) is the
// anonymous holder; a present holder must be a holder name. An empty one
// is validation_failed empty (omit it for the anonymous holder, as every
// optional input of the API), a malformed one invalid_format, both at
// HolderPointer.
func ParseHolder(raw *string) (Holder, error) {
	if raw == nil {
		return AnonymousHolder, nil
	}
	if *raw == "" {
		return "", problem.Invalid(problem.FieldError{Pointer: HolderPointer, Code: "empty", Detail: "omit it for the anonymous holder"})
	}
	if !ValidHolder(*raw) {
		return "", problem.Invalid(problem.FieldError{Pointer: HolderPointer, Code: "invalid_format", Detail: "1 to 128 letters, digits, '.', '_', ':' or '-'"})
	}
	return Holder(*raw), nil
}

// HolderFor is ParseHolder for a call of p: a run token acts as the
// holder it was minted for (the runner's process, whose claim the token's
// child acts under) when the call names none. A named holder is parsed as
// any other, and fencing decides whether it holds the run.
func HolderFor(p identity.Principal, raw *string) (Holder, error) {
	if raw == nil && p.RunHolder != "" {
		raw = &p.RunHolder
	}
	return ParseHolder(raw)
}

// check validates h where it did not come through a face (an in-process
// call of the module): the anonymous holder passes, any other by the rule
// of ParseHolder.
func (h Holder) check() error {
	if h == AnonymousHolder {
		return nil
	}
	s := string(h)
	_, err := ParseHolder(&s)
	return err
}

// named validates h for a call that needs a named holder (renew, a run
// token): the anonymous holder has no lease, so it is required.
func (h Holder) named() error {
	if h == AnonymousHolder {
		return problem.Invalid(problem.FieldError{Pointer: HolderPointer, Code: "required", Detail: "the holder that started the run"})
	}
	return h.check()
}

// ValidHolder reports whether h is a holder name: 1 to 128 characters out
// of letters, digits and . _ : - (an opaque id per adapter process).
func ValidHolder(h string) bool {
	if len(h) == 0 || len(h) > HolderMaxLen {
		return false
	}
	for _, c := range h {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}
