package main

import (
	"io"
	"log/slog"
	"sort"
	"strings"

	"bothy.example.com/bothy/internal/platform/config"
)

// unknownEnvMsg is the message of the warning about an unknown BOTHY_
// variable (docs/operations.md, Logs).
const unknownEnvMsg = "unknown BOTHY_ environment variable ignored: no configuration key, read by no Bothy program"

// otherEnv are the BOTHY_ variables that are no configuration key but that
// a Bothy program reads: the agent's token and the model's key of bothy
// agent run, the test database of the tests (pgtest.EnvURL; not imported,
// it would bring the test harness into the binary), and the settings of the
// GraphQL-over-HTTP audit script (internal/devtools/graphqlaudit/audit.mjs).
// TestKnownEnvCoversTheRepository fails when a program reads one more.
var otherEnv = []string{
	agentTokenEnv,
	modelKeyEnv,
	serverEnv,
	modelEnv,
	modelBaseURLEnv,
	modelNameEnv,
	toolsEnv,
	// What bothy agent run --runner hands to its command (sdk/runner).
	"BOTHY_MCP_URL",
	"BOTHY_MCP_TOKEN",
	"BOTHY_RUN_ID",
	"BOTHY_CONFORMANCE_TOOLS",
	"BOTHY_CONFORMANCE_DEBUG",
	// The kit's own tests: the whole matrix (make conformance-matrix) and
	// the test binary run as an adapter.
	"BOTHY_CONFORMANCE_MATRIX",
	"BOTHY_CONFORMANCE_HELPER",
	"BOTHY_TEST_DATABASE_URL",
	// The bothy binary make test builds once for the tests that start
	// bothy (internal/devtools/gobuild.EnvBothy).
	"BOTHY_TEST_BOTHY",
	// BenchmarkFanout's listener counts, and what it tells the process of
	// its listeners (internal/feed).
	"BOTHY_BENCH_LISTENERS",
	"BOTHY_FANOUT_LISTENERS_URL",
	"BOTHY_FANOUT_LISTENERS_TOKENS",
	"BOTHY_FANOUT_LISTENERS_COUNT",
	"BOTHY_FANOUT_LISTENERS_AFTER",
	"BOTHY_AUDIT_URL",
	"BOTHY_AUDIT_TOKEN",
	"BOTHY_AUDIT_TIMEOUT_MS",
}

// knownEnv returns every BOTHY_ variable a Bothy program reads: one per
// configuration key, and otherEnv.
func knownEnv() map[string]bool {
	known := map[string]bool{}
	for _, k := range config.Registry() {
		known[config.EnvName(k.Name)] = true
	}
	for _, n := range otherEnv {
		known[n] = true
	}
	return known
}

// unknownVar is a BOTHY_ variable nothing reads, with the known name
// nearest to it.
type unknownVar struct{ name, nearest string }

// unknownEnv returns the BOTHY_ variables of environ that nothing reads,
// sorted by name. A renamed key or a typo would otherwise be ignored
// without a word, and the server would run on the default it was meant to
// change.
func unknownEnv(environ []string) []unknownVar {
	known := knownEnv()
	names := make([]string, 0, len(known))
	for n := range known {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []unknownVar
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "BOTHY_") || known[name] {
			continue
		}
		best, dist := "", -1
		for _, n := range names {
			if d := editDistance(name, n); dist < 0 || d < dist {
				best, dist = n, d
			}
		}
		out = append(out, unknownVar{name: name, nearest: best})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// warnUnknownEnv writes one JSON warning line to w for each BOTHY_
// variable of environ that nothing reads. It names the variable and the
// nearest known one, never the value, which may be a password. It runs
// before the configuration is read, so log.level does not apply.
func warnUnknownEnv(w io.Writer, environ []string) {
	unknown := unknownEnv(environ)
	if len(unknown) == 0 {
		return
	}
	log := slog.New(slog.NewJSONHandler(w, nil))
	for _, u := range unknown {
		log.Warn(unknownEnvMsg, "variable", u.name, "nearest", u.nearest)
	}
}

// editDistance is the Levenshtein distance of a and b in bytes (the names
// are ASCII): the fewest insertions, deletions and substitutions that turn
// one into the other.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
