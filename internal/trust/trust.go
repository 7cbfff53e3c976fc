// Package trust owns the trust levels of Bothy (docs/design/trust.md):
// how far a piece of data may instruct an agent, and their order. The run
// context marks every element with one (runs/domain.Classify); messaging
// stores one as the provenance of every message an agent writes. It is a
// leaf package so that both can share the one type and the one order.
package trust

import "slices"

// Level says how far data may instruct an agent.
type Level string

// The trust levels, from the most trusted down.
const (
	// Trigger marks the request of the person who triggered the run.
	Trigger Level = "trigger"
	// Authorized marks another active person with trigger on the channel.
	Authorized Level = "authorized"
	// System marks lines written by the server itself.
	System Level = "system"
	// Self marks the agent's own earlier messages.
	Self Level = "self"
	// Unverified marks everything that may not instruct the agent:
	// people without trigger, other agents, apps, imports, tool output.
	Unverified Level = "unverified"
)

// Levels lists every level from least to most trusted.
var levels = []Level{Unverified, Self, System, Authorized, Trigger}

// rank orders the levels from least to most trusted. Self sits below
// system because an agent's own earlier answer may repeat data it was
// shown; system lines are written by the server alone.
var rank = map[Level]int{Unverified: 0, Self: 1, System: 2, Authorized: 3, Trigger: 4}

// Known reports whether l is one of Levels.
func Known(l Level) bool {
	_, ok := rank[l]
	return ok
}

// Rank returns l's place in Levels; a level this code does not know ranks
// as Unverified, so that nothing unknown is ever trusted.
func Rank(l Level) int { return rank[l] }

// Lowest returns the least trusted of ls; a level this code does not know
// counts as Unverified, and no level at all is Unverified (fail closed).
func Lowest(ls ...Level) Level {
	if len(ls) == 0 {
		return Unverified
	}
	low := Trigger
	for _, l := range ls {
		if !Known(l) {
			return Unverified
		}
		if rank[l] < rank[low] {
			low = l
		}
	}
	return low
}

// Levels returns a copy of levels: an importer cannot change it
// (house rule: no exported mutable package variable).
func Levels() []Level { return slices.Clone(levels) }
