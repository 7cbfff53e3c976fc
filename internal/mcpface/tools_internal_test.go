package mcpface

import (
	"testing"

	"bothy.example.com/bothy/sdk/agent"
)

// TestInputTrustArg: post_answer's input_trust takes the five levels in
// the REST spelling; unset declares nothing; any other spelling is
// refused, never read as a level.
func TestInputTrustArg(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]agent.Trust{"": "", "trigger": agent.TrustTrigger, "authorized": agent.TrustAuthorized,
		"self": agent.TrustSelf, "system": agent.TrustSystem, "unverified": agent.TrustUnverified} {
		if got, err := inputTrustArg(in); err != nil || got != want {
			t.Errorf("input_trust %q: %q %v, want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"UNVERIFIED", "Self", "trusted", "none", " self"} {
		if got, err := inputTrustArg(in); err == nil {
			t.Errorf("input_trust %q taken as %q", in, got)
		}
	}
}
