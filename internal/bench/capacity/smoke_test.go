package capacity

import (
	"strings"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/localserver"
	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/platform/pgtest"
	"bothy.example.com/bothy/internal/world"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestCapacitySmoke runs `bothy bench capacity` briefly (a ramp of two
// levels of one second) against a real server with the example world and
// checks the report: its configuration, a step per level, every posted
// message delivered to every listener and every run answered, and a
// bottleneck named. Whether a level held depends on the machine, so it
// is not asserted.
func TestCapacitySmoke(t *testing.T) {
	t.Parallel()
	settings := localserver.Unmetered()
	settings[config.WebsocketMaxConnections] = "100"
	srv, err := localserver.Start(t.Context(), localserver.Options{Dir: t.TempDir(), DatabaseURL: pgtest.URL(t), Settings: settings})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	w, err := world.Build(t.Context(), world.Of(srv.Server.Modules()))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(t.Context(), Options{Server: srv.URL, World: w, Base: Step{Messages: 4, Listeners: 4, Runs: 2},
		MaxLevel: 2, StepDuration: time.Second, Grace: 15 * time.Second, P99Limit: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	rep.Write(&text)
	t.Log("\n" + text.String())
	if len(rep.Steps) != 2 || rep.Steps[0].Level != 1 || rep.Steps[1].Level != 2 {
		t.Fatalf("steps %+v, want levels 1 and 2", rep.Steps)
	}
	for _, s := range rep.Steps {
		wantStepComplete(t, s)
	}
	if rep.Best == nil || rep.Best.Level != 2 || rep.Bottleneck.Level != 2 || rep.Bottleneck.Summary == "" {
		t.Errorf("best %+v, bottleneck %+v; want level 2 held (limit one minute) and named", rep.Best, rep.Bottleneck)
	}
	for _, want := range []string{"configuration: writer posts messages in Support/Allgemein; alex asks lotse there",
		"(1 connections per person)", "1 events subscription(s) per connection", "highest sustained: ", "first bottleneck (level 2): "} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the report lacks %q", want)
		}
	}
}

// wantStepComplete checks one step of TestCapacitySmoke's report: every
// posted message delivered to every listener, every run asked answered
// without a failure, and latencies measured.
func wantStepComplete(t *testing.T, s StepResult) {
	t.Helper()
	subs := s.Target.Listeners
	if s.Posted == 0 || s.Deliveries != s.Posted*subs || s.Lost != 0 {
		t.Errorf("level %d: posted %d, %d deliveries to %d listeners, %d lost; want every message at every listener", s.Level, s.Posted, s.Deliveries, subs, s.Lost)
	}
	if s.RunsAsked == 0 || s.RunsAnswered != s.RunsAsked || s.Failures != 0 {
		t.Errorf("level %d: %d runs asked, %d answered, %d failures (%s)", s.Level, s.RunsAsked, s.RunsAnswered, s.Failures, s.FirstFailure)
	}
	if s.P99 <= 0 || s.P99 < s.P50 {
		t.Errorf("level %d: p50 %v p99 %v", s.Level, s.P50, s.P99)
	}
}
