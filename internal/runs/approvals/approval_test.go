package approvals

import (
	"errors"
	"strings"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/platform/problem"
)

// TestCheck pins the checks of a request (docs/design/trust.md#approvals):
// each broken member is one field error at its REST pointer, a valid
// request passes, and an expiry of 0 is valid (it takes DefaultExpiry).
func TestCheck(t *testing.T) {
	t.Parallel()
	yes := []Option{{ID: "yes", Label: "Yes"}}
	many := make([]Option, OptionsMax+1)
	for i := range many {
		many[i] = Option{ID: strings.Repeat("o", i+1), Label: "x"}
	}
	for name, c := range map[string]struct {
		req     Request
		pointer string
	}{
		"valid":              {Request{Title: "Deploy?", Detail: "deploy(v2)", Options: yes, ExpiresIn: MaxExpiry}, ""},
		"default expiry":     {Request{Title: "Deploy?", Options: yes}, ""},
		"no title":           {Request{Options: yes}, "/title"},
		"two-line title":     {Request{Title: "one\ntwo", Options: yes}, "/title"},
		"long title":         {Request{Title: strings.Repeat("t", TitleMaxChars+1), Options: yes}, "/title"},
		"long detail":        {Request{Title: "x", Detail: strings.Repeat("d", DetailMaxBytes+1), Options: yes}, "/detail"},
		"no options":         {Request{Title: "x"}, "/options"},
		"too many options":   {Request{Title: "x", Options: many}, "/options"},
		"bad option id":      {Request{Title: "x", Options: []Option{{ID: "Yes!", Label: "Yes"}}}, "/options/0/id"},
		"long option id":     {Request{Title: "x", Options: []Option{{ID: strings.Repeat("a", OptionIDMax+1), Label: "A"}}}, "/options/0/id"},
		"repeated option id": {Request{Title: "x", Options: []Option{{ID: "a", Label: "A"}, {ID: "a", Label: "B"}}}, "/options/1/id"},
		"no label":           {Request{Title: "x", Options: []Option{{ID: "a"}}}, "/options/0/label"},
		"negative expiry":    {Request{Title: "x", Options: yes, ExpiresIn: -1}, "/expires_in"},
		"too long expiry":    {Request{Title: "x", Options: yes, ExpiresIn: MaxExpiry + 1}, "/expires_in"},
	} {
		err := Check(c.req)
		if c.pointer == "" {
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			continue
		}
		p := problem.From("approvals.TestCheck", err)
		if p == nil || p.Code != problem.ValidationFailed || len(p.Fields) != 1 || p.Fields[0].Pointer != c.pointer {
			t.Errorf("%s: %v, want one field error at %s", name, err, c.pointer)
		}
	}
}

// TestAnswerable pins when an approval can still be answered
// (docs/design/trust.md#approvals): once (already_decided), before its
// expiry (approval_expired, also for one still pending at it), and while
// it stands and its run is active (ErrRunNotActive).
func TestAnswerable(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	later := now.Add(time.Minute)
	for name, c := range map[string]struct {
		state     string
		expires   time.Time
		runActive bool
		reason    string // "" answerable, "-" ErrRunNotActive
	}{
		"pending":                {Pending, later, true, ""},
		"pending at its expiry":  {Pending, now, true, "approval_expired"},
		"decided":                {Decided, later, true, "already_decided"},
		"decided, run ended":     {Decided, later, false, "already_decided"},
		"expired":                {Expired, later, true, "approval_expired"},
		"withdrawn":              {Withdrawn, later, true, "-"},
		"pending, run ended":     {Pending, later, false, "-"},
		"expired and run ended":  {Expired, now, false, "approval_expired"},
		"pending past, run gone": {Pending, now.Add(-time.Second), false, "approval_expired"},
	} {
		err := Answerable(Approval{State: c.state, ExpiresAt: c.expires}, c.runActive, now)
		switch c.reason {
		case "":
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
		case "-":
			if !errors.Is(err, ErrRunNotActive) {
				t.Errorf("%s: %v, want ErrRunNotActive", name, err)
			}
		default:
			if p := problem.From("approvals.TestAnswerable", err); p == nil || p.Code != problem.Conflict || p.Reason != c.reason {
				t.Errorf("%s: %v, want conflict %s", name, err, c.reason)
			}
		}
	}
}

// TestPrivateAndOptions pins who reads an approval's private part (its
// person and the run's agent) and which options it knows.
func TestPrivateAndOptions(t *testing.T) {
	t.Parallel()
	a := Approval{RestrictedTo: "person", Options: []Option{{ID: "yes", Label: "Yes"}, {ID: "no", Label: "No"}}}
	for reader, want := range map[string]bool{"person": true, "agent": true, "other": false, "": false} {
		if got := a.Private(reader, "agent"); got != want {
			t.Errorf("Private(%q) = %v, want %v", reader, got, want)
		}
	}
	for id, want := range map[string]bool{"yes": true, "no": true, "maybe": false, "": false} {
		if got := a.HasOption(id); got != want {
			t.Errorf("HasOption(%q) = %v, want %v", id, got, want)
		}
	}
}
