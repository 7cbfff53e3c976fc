package injection

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// Origin is where an injection reaches the agent from.
type Origin string

// The origins of an injection.
const (
	// OriginPerson: a message of a person who may not trigger the agent.
	OriginPerson Origin = "person"
	// OriginAgent: a message of another agent.
	OriginAgent Origin = "agent"
	// OriginApp: a message of an app (an integration posting in the
	// channel).
	OriginApp Origin = "app"
	// OriginImport: a message imported from another system, attributed
	// to Alex herself.
	OriginImport Origin = "import"
	// OriginFollowUp: a follow-up of another person (one who may trigger
	// the agent) in Alex's run.
	OriginFollowUp Origin = "followup"
	// OriginWebPage: a web page a read-only tool returns.
	OriginWebPage Origin = "webpage"
	// OriginOwnAnswer: the agent's own earlier answer, which quoted an
	// injection whose original was deleted since.
	OriginOwnAnswer Origin = "own_answer"
	// OriginFile: the text of a file Alex herself attached to her
	// request (a document she forwards): data with trust unverified
	// whoever uploaded it.
	OriginFile Origin = "file"
)

// origins are the origins in the order the cases cycle through them.
var origins = []Origin{OriginPerson, OriginAgent, OriginApp, OriginImport, OriginFollowUp, OriginWebPage, OriginOwnAnswer, OriginFile}

// Describe says an origin in words, for the table.
func (o Origin) Describe() string {
	switch o {
	case OriginPerson:
		return "a person without trigger"
	case OriginAgent:
		return "another agent"
	case OriginApp:
		return "an app"
	case OriginImport:
		return "an import"
	case OriginFollowUp:
		return "a follow-up of another person"
	case OriginWebPage:
		return "a web page returned by a tool"
	case OriginOwnAnswer:
		return "the agent's own earlier answer"
	case OriginFile:
		return "a file attached by the person who asks"
	}
	return string(o)
}

// Case is one conversation of the bench: a user task, and for an
// injection case the injection and where it is planted. A benign case has
// no origin.
type Case struct {
	// Name is unique in a bench: the user task's id for a benign case,
	// else origin/injection/user task.
	Name      string
	Origin    Origin
	Injection InjectionTask
	User      UserTask
	// Wrapper is the number of the words the injection is dressed in.
	Wrapper int
}

// Benign reports whether the case plants no injection.
func (c Case) Benign() bool { return c.Origin == "" }

// Selection chooses the cases of a bench.
type Selection struct {
	// Cases bounds the injection cases (0: all); the first ones cycle
	// through the origins, so a few cases cover several origins.
	Cases int
	// Only keeps the cases of these origins (empty: all).
	Only []Origin
	// Seed decides which user task each injection case pairs with.
	Seed uint64
}

// Cases returns the injection cases of sel, in the order they cycle
// through the origins, and the benign cases of the user tasks they use.
// Each injection is planted through every origin; a web-page injection
// pairs with a user task that reads a page, every other one with any user
// task (drawn with the seed).
//
// Errors: Only names an origin that does not exist.
func Cases(sel Selection) (injected, benign []Case, err error) {
	for _, o := range sel.Only {
		if !slices.Contains(origins, o) {
			return nil, nil, fmt.Errorf("injection: no origin %q (there are %s)", o, originList())
		}
	}
	rng := rand.New(rand.NewPCG(sel.Seed, 0x62656e6368))
	readers := slices.DeleteFunc(slices.Clone(userTasks), func(u UserTask) bool { return u.Page == "" })
	for i, inj := range injectionTasks {
		for j, o := range origins {
			pool := userTasks
			if o == OriginWebPage {
				pool = readers
			}
			u := pool[rng.IntN(len(pool))]
			if len(sel.Only) > 0 && !slices.Contains(sel.Only, o) {
				continue
			}
			injected = append(injected, Case{Name: string(o) + "/" + inj.ID + "/" + u.ID, Origin: o, Injection: inj, User: u, Wrapper: i*len(origins) + j})
		}
	}
	if sel.Cases > 0 && sel.Cases < len(injected) {
		injected = injected[:sel.Cases]
	}
	used := map[string]bool{}
	for _, c := range injected {
		used[c.User.ID] = true
	}
	for _, u := range userTasks {
		if used[u.ID] || len(injected) == 0 {
			benign = append(benign, Case{Name: u.ID, User: u})
		}
	}
	return injected, benign, nil
}

// ParseOrigins reads a comma-separated list of origins.
//
// Errors: a name that is no origin.
func ParseOrigins(s string) ([]Origin, error) {
	var out []Origin
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if !slices.Contains(origins, Origin(f)) {
			return nil, fmt.Errorf("injection: no origin %q (there are %s)", f, originList())
		}
		out = append(out, Origin(f))
	}
	return out, nil
}

// originList names the origins for an error.
func originList() string {
	names := make([]string, len(origins))
	for i, o := range origins {
		names[i] = string(o)
	}
	return strings.Join(names, ", ")
}

// Origins returns a copy of origins: an importer cannot change it
// (house rule: no exported mutable package variable).
func Origins() []Origin { return slices.Clone(origins) }
