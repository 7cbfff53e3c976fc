package approvals

import (
	"errors"
	"fmt"
	"time"

	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/platform/text"
)

// Request is what a run's holder asks its person (requestApproval).
type Request struct {
	// Title is what every reader of the thread sees (1 to 200 characters,
	// one line).
	Title string
	// Detail is the action and its arguments, for the person only (at most
	// DetailMaxBytes).
	Detail string
	// Options are the answers, 1 to OptionsMax, ids unique.
	Options []Option
	// ExpiresIn is the time the person has, in seconds: 0 takes
	// DefaultExpiry, at most MaxExpiry.
	ExpiresIn int
}

// Option is one answer a person may give to an approval.
type Option struct {
	ID    string `json:"id"`
	Label string `json:"label"`
}

// Approval is a stored approval (docs/design/trust.md#approvals).
type Approval struct {
	ID, RunID, MessageID string
	// RestrictedTo is the person who may answer: the run's triggering
	// person.
	RestrictedTo string
	Title        string
	Detail       string
	Options      []Option
	// State is pending, decided, expired or withdrawn (the run ended or
	// went back to queued first).
	State string
	// OptionID, DecidedBy and DecidedAt are set once decided.
	OptionID, DecidedBy string
	DecidedAt           *time.Time
	ExpiresAt           time.Time
	CreatedAt           time.Time
}

// The states of an approval.
const (
	Pending   = "pending"
	Decided   = "decided"
	Expired   = "expired"
	Withdrawn = "withdrawn"
)

// Bounds of an approval request.
const (
	TitleMaxChars  = 200
	DetailMaxBytes = 8192
	OptionsMax     = 10
	LabelMaxChars  = 100
	OptionIDMax    = 64
	DefaultExpiry  = 600
	MaxExpiry      = 86400
)

// Check validates req; pointers name the REST members.
func Check(req Request) error {
	var fields []problem.FieldError
	if !text.Line(req.Title, 1, TitleMaxChars) {
		fields = append(fields, problem.FieldError{Pointer: "/title", Code: "invalid_format", Detail: "one line of 1 to 200 characters"})
	}
	if fe := text.Check(req.Detail, "/detail"); fe != nil {
		fields = append(fields, *fe)
	} else if len(req.Detail) > DetailMaxBytes {
		fields = append(fields, problem.FieldError{Pointer: "/detail", Code: "too_long", Detail: "at most 8192 bytes"})
	}
	if len(req.Options) < 1 || len(req.Options) > OptionsMax {
		fields = append(fields, problem.FieldError{Pointer: "/options", Code: "out_of_range", Detail: "1 to 10 options"})
	}
	seen := map[string]bool{}
	for i, o := range req.Options {
		if !validOptionID(o.ID) || seen[o.ID] {
			fields = append(fields, problem.FieldError{Pointer: fmt.Sprintf("/options/%d/id", i), Code: "invalid_format",
				Detail: "1 to 64 of a-z, 0-9, '_' and '-', unique"})
		}
		seen[o.ID] = true
		if !text.Line(o.Label, 1, LabelMaxChars) {
			fields = append(fields, problem.FieldError{Pointer: fmt.Sprintf("/options/%d/label", i), Code: "invalid_format", Detail: "one line of 1 to 100 characters"})
		}
	}
	if req.ExpiresIn < 0 || req.ExpiresIn > MaxExpiry {
		fields = append(fields, problem.FieldError{Pointer: "/expires_in", Code: "out_of_range", Detail: "1 to 86400 seconds"})
	}
	if len(fields) > 0 {
		return problem.Invalid(fields...)
	}
	return nil
}

func validOptionID(id string) bool {
	if len(id) == 0 || len(id) > OptionIDMax {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// HasOption says whether optionID is one of a's options.
func (a Approval) HasOption(optionID string) bool {
	for _, o := range a.Options {
		if o.ID == optionID {
			return true
		}
	}
	return false
}

// Private reports whether reader may see a's detail, options and chosen
// option: its person and the run's agent (agentID).
func (a Approval) Private(readerID, agentID string) bool {
	return readerID == a.RestrictedTo || readerID == agentID
}

// ErrRunNotActive is Answerable's answer for an approval that was
// withdrawn or whose run is no longer active: the caller answers it with
// the run's own run_not_active refusal.
var ErrRunNotActive = errors.New("approvals: the run is not active")

// Answerable says why approval a cannot be answered at now (its run active
// or not, runActive): it was answered already, it expired (or is pending
// past its expiry), or it was withdrawn or its run is no longer active
// (ErrRunNotActive); nil when it can.
func Answerable(a Approval, runActive bool, now time.Time) error {
	switch {
	case a.State == Decided:
		return problem.Newf(problem.Conflict, "already_decided", "the approval was answered already")
	case a.State == Expired || (a.State == Pending && !now.Before(a.ExpiresAt)):
		return problem.Newf(problem.Conflict, "approval_expired", "the approval expired")
	case a.State == Withdrawn || !runActive:
		return ErrRunNotActive
	}
	return nil
}
