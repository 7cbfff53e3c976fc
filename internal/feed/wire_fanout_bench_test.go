package feed_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/platform/config"
)

// BenchmarkFanout posts messages in Support/Allgemein while 1, 10 or 100
// WebSocket connections of three people listen to the events, and waits
// for each message at every listener. It reports the statements per
// posted message (the post and its delivery to all listeners) and the wall
// time per delivered event; client and server share the process, so the
// time includes the clients' reading (docs/performance.md "Fan-out").
func BenchmarkFanout(b *testing.B) {
	for _, n := range fanoutListeners() {
		b.Run(fmt.Sprintf("listeners=%d", n), func(b *testing.B) {
			counter := &apitest.StatementCounter{}
			env := apitest.Start(b, apitest.Options{Tracer: counter, Config: map[string]string{
				config.WebsocketMaxConnections: "10000", config.RateMessagePerMinute: "100000", config.RateMessageBurst: "100000",
				config.RateReadPerMinute: "1000000", config.RateReadBurst: "100000"}})
			people := []string{"alex", "sam", "robin"}
			ls := make([]*listener, n)
			for i := range ls {
				ls[i] = listen(b, env, env.World.Token(people[i%len(people)]))
			}
			allgemein := env.Main("Support/Allgemein")
			post := func(key string) {
				m := env.MustPost("writer", allgemein, key, "for everybody listening")
				for _, l := range ls {
					l.until(m["id"].(string))
				}
			}
			post("warm")
			before := counter.Count()
			b.ResetTimer()
			start, cpu := time.Now(), processCPU(b)
			for i := 0; i < b.N; i++ {
				post(fmt.Sprintf("bench-%d", i))
			}
			elapsed, cpu := time.Since(start), processCPU(b)-cpu
			b.StopTimer()
			b.ReportMetric(float64(counter.Count()-before)/float64(b.N), "statements/msg")
			b.ReportMetric(float64(elapsed.Microseconds())/float64(b.N*n), "µs/delivery")
			// The process's CPU (user and system) per delivered event: the
			// server's and the listeners' together, so an upper bound of
			// the server's own.
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*n), "cpu-µs/delivery")
		})
	}
}

// processCPU is the CPU time (user and system) this process used so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// fanoutListeners are the listener counts of BenchmarkFanout:
// BOTHY_BENCH_LISTENERS (comma-separated) replaces the default 1, 10, 100,
// 1000 and 5000, to run one size alone.
func fanoutListeners() []int {
	out := []int{1, 10, 100, 1000, 5000}
	if v := os.Getenv("BOTHY_BENCH_LISTENERS"); v != "" {
		out = nil
		for _, f := range strings.Split(v, ",") {
			if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n > 0 {
				out = append(out, n)
			}
		}
	}
	return out
}
