package capacity

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// Step is one load level: messages posted per second, listeners
// subscribed and agent runs asked for per second.
type Step struct {
	Messages  float64 `json:"messages_per_second"`
	Listeners int     `json:"listeners"`
	Runs      float64 `json:"runs_per_second"`
}

// Scale is the step at level k of base.
func (b Step) Scale(k int) Step {
	return Step{Messages: b.Messages * float64(k), Listeners: b.Listeners * k, Runs: b.Runs * float64(k)}
}

// Setup is the configuration of a run, stated in the report.
type Setup struct {
	Server         string        `json:"server"`
	Poster         string        `json:"poster"`
	Asker          string        `json:"asker"`
	Agent          string        `json:"agent"`
	ListenerPeople []string      `json:"listener_people"`
	SubsPerConn    int           `json:"subscriptions_per_connection"`
	Base           Step          `json:"base_step"`
	MaxLevel       int           `json:"max_level"`
	StepDuration   time.Duration `json:"step_duration_ns"`
	P99Limit       time.Duration `json:"p99_limit_ns"`
	Place          string        `json:"place"`
}

// CPU is the processor time used during a step, in cores (CPU seconds per
// second of wall time), by the server, the database (the postmaster and
// its backends), this benchmark's process and the whole machine.
type CPU struct {
	Server   float64 `json:"server"`
	Database float64 `json:"database"`
	Bench    float64 `json:"bench"`
	Machine  float64 `json:"machine"`
	Cores    int     `json:"cores"`
	Load1    float64 `json:"load1"`
}

// StepResult is what one step measured.
type StepResult struct {
	Level        int           `json:"level"`
	Target       Step          `json:"target"`
	Posted       int           `json:"posted"`
	Deliveries   int           `json:"deliveries"`
	Messages     float64       `json:"messages_per_second"`
	RunsAsked    int           `json:"runs_asked"`
	RunsAnswered int           `json:"runs_answered"`
	Runs         float64       `json:"runs_per_second"`
	P50          time.Duration `json:"p50_ns"`
	P99          time.Duration `json:"p99_ns"`
	Failures     int           `json:"failures"`
	FirstFailure string        `json:"first_failure,omitempty"`
	Lost         int           `json:"not_delivered"`
	CPU          CPU           `json:"cpu"`
	Passed       bool          `json:"passed"`
	Why          string        `json:"why,omitempty"`
}

// Share is a part of the server's CPU profile: a package or a function
// and its share of the samples in percent.
type Share struct {
	Name    string  `json:"name"`
	Percent float64 `json:"percent"`
}

// Bottleneck names what limited the first failing step (or the highest
// step when none failed).
type Bottleneck struct {
	Level    int     `json:"level"`
	Summary  string  `json:"summary"`
	Packages []Share `json:"packages,omitempty"`
	Top      []Share `json:"functions,omitempty"`
	Profile  string  `json:"profile,omitempty"`
}

// Report is the outcome of a capacity run.
type Report struct {
	Setup      Setup        `json:"setup"`
	Steps      []StepResult `json:"steps"`
	Best       *StepResult  `json:"best"`
	Bottleneck Bottleneck   `json:"bottleneck"`
}

// Percentile is the nearest-rank p-th percentile (0 < p <= 100) of ds,
// zero for none; ds is not changed.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// Judge decides whether a step held: no request failed, every message
// reached every listener, every run asked for was answered, and the p99
// from commit to the last listener stayed within limit. It sets Passed and
// Why (the first reason it did not hold).
func Judge(r *StepResult, limit time.Duration) {
	switch {
	case r.Failures > 0:
		r.Why = fmt.Sprintf("%d requests failed (first: %s)", r.Failures, r.FirstFailure)
	case r.Posted == 0:
		r.Why = "no message was posted"
	case r.Lost > 0:
		r.Why = fmt.Sprintf("%d of %d messages did not reach every listener in time", r.Lost, r.Posted)
	case r.RunsAnswered < r.RunsAsked:
		r.Why = fmt.Sprintf("%d of %d runs were not answered in time", r.RunsAsked-r.RunsAnswered, r.RunsAsked)
	case r.P99 > limit:
		r.Why = fmt.Sprintf("p99 %s above %s", ms(r.P99), ms(limit))
	}
	r.Passed = r.Why == ""
}

// ms formats d in milliseconds with one decimal.
func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

// Write prints the report as text: the configuration, one line per step,
// the highest sustained step and the bottleneck.
func (r Report) Write(w io.Writer) {
	s := r.Setup
	fmt.Fprintf(w, "bothy bench capacity against %s\n", s.Server)
	fmt.Fprintf(w, "configuration: %s posts messages in %s; %s asks %s there (each question a run in an auto thread,\n", s.Poster, s.Place, s.Asker, s.Agent)
	fmt.Fprintf(w, "  answered by one SDK adapter in this process: agent.Run with an echo handler);\n")
	fmt.Fprintf(w, "  listeners are WebSocket connections of %d people round robin (%s), %d events subscription(s) per connection;\n",
		len(s.ListenerPeople), strings.Join(s.ListenerPeople, ", "), s.SubsPerConn)
	fmt.Fprintf(w, "  level k = %g messages/s, %d listeners (%d connections per person), %g runs/s, times k; up to k = %d;\n",
		s.Base.Messages, s.Base.Listeners, perPerson(s.Base.Listeners, len(s.ListenerPeople)), s.Base.Runs, s.MaxLevel)
	fmt.Fprintf(w, "  each step %s; it holds when no request fails, every message reaches every listener, every run is answered\n", s.StepDuration)
	fmt.Fprintf(w, "  and p99 from commit (the post's answer) to the last listener is at most %s\n\n", ms(s.P99Limit))
	fmt.Fprintf(w, "%5s %9s %9s %9s %8s %10s %10s %10s %8s  %-26s %s\n", "level", "msgs/s", "listeners", "runs/s", "posted", "deliveries", "p50", "p99", "failures", "cpu server/db/bench/all", "verdict")
	for _, st := range r.Steps {
		verdict := "held"
		if !st.Passed {
			verdict = "failed: " + st.Why
		}
		fmt.Fprintf(w, "%5d %9.1f %9d %9.1f %8d %10d %10s %10s %8d  %-26s %s\n", st.Level, st.Messages, st.Target.Listeners, st.Runs,
			st.Posted, st.Deliveries, ms(st.P50), ms(st.P99), st.Failures,
			fmt.Sprintf("%.2f/%.2f/%.2f/%.2f of %d", st.CPU.Server, st.CPU.Database, st.CPU.Bench, st.CPU.Machine, st.CPU.Cores), verdict)
	}
	fmt.Fprintln(w)
	if r.Best == nil {
		fmt.Fprintln(w, "highest sustained: none (the first level failed)")
	} else {
		b := r.Best
		fmt.Fprintf(w, "highest sustained: %.1f messages/s to %d listeners (%d deliveries/s), %.1f runs/s, p99 %s (level %d)\n",
			b.Messages, b.Target.Listeners, int(b.Messages*float64(b.Target.Listeners)), b.Runs, ms(b.P99), b.Level)
	}
	bn := r.Bottleneck
	fmt.Fprintf(w, "first bottleneck (level %d): %s\n", bn.Level, bn.Summary)
	writeShares(w, "  server CPU by package", bn.Packages)
	writeShares(w, "  server CPU by function", bn.Top)
	if bn.Profile != "" {
		fmt.Fprintf(w, "  profile: %s\n", bn.Profile)
	}
}

// writeShares prints one line of shares, if any.
func writeShares(w io.Writer, title string, ss []Share) {
	if len(ss) == 0 {
		return
	}
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = fmt.Sprintf("%s %.0f%%", s.Name, s.Percent)
	}
	fmt.Fprintf(w, "%s: %s\n", title, strings.Join(parts, ", "))
}

// perPerson is the connections per person of n listeners over people.
func perPerson(n, people int) int {
	if people == 0 {
		return 0
	}
	return (n + people - 1) / people
}

// Summarize names the bottleneck from the CPU a step used: a machine
// whose cores are nearly all busy is bound by CPU, and the process that
// used most of it is named first; otherwise the limit is not the CPU
// (waiting: locks, the database's commits, the network).
func Summarize(c CPU) string {
	others := max(0, c.Machine-c.Server-c.Database-c.Bench)
	parts := []part{{"the server", c.Server}, {"PostgreSQL", c.Database}, {"the load generator", c.Bench}, {"other processes", others}}
	slices.SortStableFunc(parts, func(a, b part) int { return cmp.Compare(b.cores, a.cores) })
	used := fmt.Sprintf("%s %.2f cores, %s %.2f, %s %.2f, %s %.2f; machine %.2f of %d cores busy, load average %.1f",
		parts[0].name, parts[0].cores, parts[1].name, parts[1].cores, parts[2].name, parts[2].cores, parts[3].name, parts[3].cores, c.Machine, c.Cores, c.Load1)
	if c.Cores > 0 && c.Machine >= 0.85*float64(c.Cores) {
		return "CPU: the cores are saturated, most by " + parts[0].name + " (" + used + ")"
	}
	return "not CPU-bound (" + used + "): waiting on commits, locks or the network"
}

// part is a process's CPU in a summary.
type part struct {
	name  string
	cores float64
}
