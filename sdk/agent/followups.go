package agent

import "strings"

// WithFollowUps adds the run's follow-ups to a rendered prompt, after the
// trigger and in the order they came, each in the section of its trust
// like every other element (a follow-up is a request only of someone the
// server marks trigger or authorized; anyone else's is DATA), and lowers
// p.Lowest by their provenance as Render does. p.Boundary
// fences them like the rest, so follow-up content cannot leave its block.
func WithFollowUps(p Prompt, followUps []RunContextMessage) Prompt {
	if len(followUps) == 0 {
		return p
	}
	var u strings.Builder
	u.WriteString(p.User)
	u.WriteString("\n\n")
	for _, m := range followUps {
		writeBlock(&u, sectionFor(m.standing()), p.Boundary, "followup", m)
	}
	p.User = strings.TrimRight(u.String(), "\n")
	p.Lowest = contextLowest(p.Lowest, followUps)
	p.Context.FollowUps = followUps
	return p
}
