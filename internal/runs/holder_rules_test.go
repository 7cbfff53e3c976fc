package runs_test

import (
	"strings"
	"testing"

	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/runs"
)

// TestParseHolder: the one parse of a holder at every face. Absent is the
// anonymous holder; a run token's holder stands in for an absent one; a
// present holder must be a holder name, an empty one is refused empty, a
// malformed one invalid_format, always at the one pointer holder.
func TestParseHolder(t *testing.T) {
	t.Parallel()
	str := func(s string) *string { return &s }
	agent := identity.Principal{ID: "a1"}
	token := identity.Principal{ID: "a1", RunID: "r1", RunHolder: "runner-1"}
	for _, tc := range []struct {
		name string
		p    identity.Principal
		raw  *string
		want runs.Holder
		code string
	}{
		{"absent", agent, nil, runs.AnonymousHolder, ""},
		{"a name", agent, str("adapter-0123456789abcdef"), "adapter-0123456789abcdef", ""},
		{"every allowed character", agent, str("aZ09._:-"), "aZ09._:-", ""},
		{"128 characters", agent, str(strings.Repeat("a", 128)), runs.Holder(strings.Repeat("a", 128)), ""},
		{"empty", agent, str(""), "", "empty"},
		{"129 characters", agent, str(strings.Repeat("a", 129)), "", "invalid_format"},
		{"a space", agent, str("bad holder!"), "", "invalid_format"},
		{"a slash", agent, str("proc/a"), "", "invalid_format"},
		{"not ASCII", agent, str("pröc"), "", "invalid_format"},
		{"run token, absent", token, nil, "runner-1", ""},
		{"run token, named", token, str("proc-b"), "proc-b", ""},
		{"run token, empty", token, str(""), "", "empty"},
		{"run token, malformed", token, str("a b"), "", "invalid_format"},
	} {
		h, err := runs.HolderFor(tc.p, tc.raw)
		if tc.code == "" {
			if err != nil || h != tc.want {
				t.Errorf("%s: %q %v, want %q", tc.name, h, err, tc.want)
			}
			continue
		}
		p := problem.From("runs.TestParseHolder", err)
		if p == nil || p.Code != problem.ValidationFailed || len(p.Fields) != 1 || p.Fields[0].Pointer != runs.HolderPointer || p.Fields[0].Code != tc.code {
			t.Errorf("%s: %q %v, want %s at %s", tc.name, h, err, tc.code, runs.HolderPointer)
		}
		if tc.p.RunHolder == "" {
			if h2, err2 := runs.ParseHolder(tc.raw); h2 != h || (err2 == nil) != (err == nil) {
				t.Errorf("%s: ParseHolder and HolderFor disagree without a run token", tc.name)
			}
		}
	}
}
