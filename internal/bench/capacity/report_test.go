package capacity

import (
	"strings"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	msx := func(ns ...int) []time.Duration {
		out := make([]time.Duration, len(ns))
		for i, n := range ns {
			out[i] = time.Duration(n) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // unsorted on purpose
	}
	for _, tc := range []struct {
		name string
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{"none", nil, 99, 0},
		{"one", msx(7), 99, 7 * time.Millisecond},
		{"one, p50", msx(7), 50, 7 * time.Millisecond},
		{"p50 of four", msx(4, 1, 3, 2), 50, 2 * time.Millisecond},
		{"p99 of ten is the largest", msx(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 99, 10 * time.Millisecond},
		{"p99 of a hundred", msx(hundred...), 99, 99 * time.Millisecond},
		{"p100", msx(hundred...), 100, 100 * time.Millisecond},
		{"p50 of a hundred", msx(hundred...), 50, 50 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Percentile(tc.in, tc.p); got != tc.want {
				t.Errorf("Percentile(%v, %v) = %v, want %v", tc.in, tc.p, got, tc.want)
			}
		})
	}
}

func TestJudge(t *testing.T) {
	ok := StepResult{Posted: 10, RunsAsked: 2, RunsAnswered: 2, P99: 100 * time.Millisecond}
	with := func(f func(*StepResult)) StepResult { r := ok; f(&r); return r }
	for _, tc := range []struct {
		name string
		in   StepResult
		why  string
	}{
		{"holds", ok, ""},
		{"at the limit", with(func(r *StepResult) { r.P99 = 250 * time.Millisecond }), ""},
		{"p99 above", with(func(r *StepResult) { r.P99 = 251 * time.Millisecond }), "p99 251.0 ms above 250.0 ms"},
		{"a failed request first", with(func(r *StepResult) { r.Failures, r.FirstFailure, r.P99 = 1, "post: 429", time.Second }), "1 requests failed (first: post: 429)"},
		{"lost", with(func(r *StepResult) { r.Lost = 3 }), "3 of 10 messages did not reach every listener in time"},
		{"runs left", with(func(r *StepResult) { r.RunsAnswered = 1 }), "1 of 2 runs were not answered in time"},
		{"nothing posted", with(func(r *StepResult) { r.Posted = 0 }), "no message was posted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.in
			Judge(&r, 250*time.Millisecond)
			if r.Why != tc.why || r.Passed != (tc.why == "") {
				t.Errorf("why %q passed %v, want %q", r.Why, r.Passed, tc.why)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   CPU
		want []string
	}{
		{"database saturates", CPU{Server: 0.6, Database: 1.1, Bench: 0.2, Machine: 1.95, Cores: 2, Load1: 3},
			[]string{"CPU: the cores are saturated, most by PostgreSQL", "PostgreSQL 1.10 cores, the server 0.60, the load generator 0.20, other processes 0.05"}},
		{"others saturate", CPU{Server: 0.1, Database: 0.1, Bench: 0.1, Machine: 2, Cores: 2},
			[]string{"most by other processes (other processes 1.70 cores"}},
		{"server saturates", CPU{Server: 1.2, Database: 0.3, Bench: 0.3, Machine: 1.9, Cores: 2},
			[]string{"most by the server (the server 1.20 cores"}},
		{"idle machine", CPU{Server: 0.2, Database: 0.1, Bench: 0.1, Machine: 0.5, Cores: 2},
			[]string{"not CPU-bound", "machine 0.50 of 2 cores busy"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Summarize(tc.in)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("Summarize = %q, want it to contain %q", got, w)
				}
			}
		})
	}
}

// TestReportStatesItsConfiguration: the text report names the people,
// the connections and subscriptions per person, every step and the
// highest sustained level, and says so when none held.
func TestReportStatesItsConfiguration(t *testing.T) {
	setup := Setup{Server: "http://127.0.0.1:8080", Poster: "writer", Asker: "alex", Agent: "lotse", Place: "Support/Allgemein",
		ListenerPeople: []string{"alex", "sam", "robin", "writer"}, SubsPerConn: 1, Base: Step{Messages: 2, Listeners: 40, Runs: 1},
		MaxLevel: 32, StepDuration: 10 * time.Second, P99Limit: 250 * time.Millisecond}
	held := StepResult{Level: 2, Target: setup.Base.Scale(2), Posted: 40, Messages: 4, Runs: 2, P99: 80 * time.Millisecond, Passed: true}
	failed := StepResult{Level: 4, Target: setup.Base.Scale(4), Posted: 80, Messages: 8, Runs: 4, P99: 400 * time.Millisecond, Why: "p99 400.0 ms above 250.0 ms"}
	for _, tc := range []struct {
		name string
		rep  Report
		want []string
	}{
		{"one held", Report{Setup: setup, Steps: []StepResult{held, failed}, Best: &held, Bottleneck: Bottleneck{Level: 4, Summary: "CPU: saturated",
			Packages: []Share{{"runtime", 40}, {"github.com/jackc/pgx/v5", 12}}}}, []string{
			"writer posts messages in Support/Allgemein; alex asks lotse there",
			"4 people round robin (alex, sam, robin, writer), 1 events subscription(s) per connection",
			"level k = 2 messages/s, 40 listeners (10 connections per person), 1 runs/s, times k; up to k = 32",
			"failed: p99 400.0 ms above 250.0 ms",
			"highest sustained: 4.0 messages/s to 80 listeners (320 deliveries/s), 2.0 runs/s, p99 80.0 ms (level 2)",
			"first bottleneck (level 4): CPU: saturated",
			"server CPU by package: runtime 40%, github.com/jackc/pgx/v5 12%"}},
		{"none held", Report{Setup: setup, Steps: []StepResult{failed}}, []string{"highest sustained: none (the first level failed)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			tc.rep.Write(&b)
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("report lacks %q:\n%s", w, b.String())
				}
			}
		})
	}
}

func TestPackageOf(t *testing.T) {
	for in, want := range map[string]string{
		"github.com/jackc/pgx/v5/pgconn.(*PgConn).Exec": "github.com/jackc/pgx/v5/pgconn",
		"runtime.mallocgc": "runtime",
		"bothy.example.com/bothy/internal/feed.(*Fanout).deliver.func1": "bothy.example.com/bothy/internal/feed",
		"encoding/json.(*encodeState).string":                           "encoding/json",
		"main":                                                          "main",
	} {
		if got := PackageOf(in); got != want {
			t.Errorf("PackageOf(%q) = %q, want %q", in, got, want)
		}
	}
}
