package feed_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/platform/config"
)

// BenchmarkFanout posts messages in Support/Allgemein while 1 to 5,000
// WebSocket connections of three people listen to the events, and waits
// for each message at every listener. It reports the statements per
// posted message (the post and its delivery to all listeners), the wall
// time per delivered event, and the CPU per delivered event of the server
// and of the listeners apart: the listeners run in a process of their own
// (this test binary again, listenersApart), so that the benchmark's own
// process CPU is the server's (docs/performance.md "Fan-out").
func BenchmarkFanout(b *testing.B) {
	for _, n := range fanoutListeners() {
		b.Run(fmt.Sprintf("listeners=%d", n), func(b *testing.B) {
			counter := &apitest.StatementCounter{}
			env := apitest.Start(b, apitest.Options{Tracer: counter, Config: map[string]string{
				config.WebsocketMaxConnections: "10000", config.RateMessagePerMinute: "100000", config.RateMessageBurst: "100000",
				config.RateReadPerMinute: "1000000", config.RateReadBurst: "100000"}})
			var tokens []string
			for _, who := range []string{"alex", "sam", "robin"} {
				tokens = append(tokens, env.World.Token(who))
			}
			ls := startListenersApart(b, env, tokens, n)
			allgemein := env.Main("Support/Allgemein")
			post := func(key string) time.Duration {
				m := env.MustPost("writer", allgemein, key, "for everybody listening")
				return ls.deliver(b, m["id"].(string))
			}
			// A post answers the listeners' CPU after its delivery.
			listenersFrom := post("warm")
			before := counter.Count()
			b.ResetTimer()
			start, cpu := time.Now(), processCPU(b)
			var listenersTo time.Duration
			for i := 0; i < b.N; i++ {
				listenersTo = post(fmt.Sprintf("bench-%d", i))
			}
			elapsed, cpu, listenersCPU := time.Since(start), processCPU(b)-cpu, listenersTo-listenersFrom
			b.StopTimer()
			b.ReportMetric(float64(counter.Count()-before)/float64(b.N), "statements/msg")
			b.ReportMetric(float64(elapsed.Microseconds())/float64(b.N*n), "µs/delivery")
			// The server's process CPU (user and system) per delivered
			// event, the post's own work included, and the listeners'.
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*n), "cpu-µs/delivery")
			b.ReportMetric(float64(listenersCPU.Microseconds())/float64(b.N*n), "listener-cpu-µs/delivery")
		})
	}
}

// The listeners of BenchmarkFanout run in a process of their own: the
// test binary started again with these variables set (TestMain hands it
// to listenersProcess). The process connects the listeners and answers
// "ready"; then, for each message id it reads on its input, it waits until
// every listener got the message and answers "ok" and its CPU so far.
const (
	listenersURLEnv    = "BOTHY_FANOUT_LISTENERS_URL"
	listenersTokensEnv = "BOTHY_FANOUT_LISTENERS_TOKENS"
	listenersCountEnv  = "BOTHY_FANOUT_LISTENERS_COUNT"
	listenersAfterEnv  = "BOTHY_FANOUT_LISTENERS_AFTER"
)

// listenersApart is the listeners' process, seen from the benchmark.
type listenersApart struct {
	in  io.WriteCloser
	out *bufio.Scanner
}

// startListenersApart starts n listeners, the tokens round robin, in a
// process of their own, subscribed after the end of env's event log.
func startListenersApart(b *testing.B, env *apitest.Env, tokens []string, n int) *listenersApart {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), listenersURLEnv+"="+env.URL, listenersTokensEnv+"="+strings.Join(tokens, ","),
		listenersCountEnv+"="+strconv.Itoa(n), listenersAfterEnv+"="+fmt.Sprint(env.Count(`SELECT coalesce(max(seq), 0)::int FROM event_log`)))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		in.Close()
		_ = cmd.Wait()
	})
	p := &listenersApart{in: in, out: bufio.NewScanner(out)}
	if line := p.line(b); line != "ready" {
		b.Fatalf("the listeners' process said %q, want ready", line)
	}
	return p
}

// line reads the process's next answer.
func (p *listenersApart) line(b *testing.B) string {
	b.Helper()
	if !p.out.Scan() {
		b.Fatalf("the listeners' process ended: %v", p.out.Err())
	}
	return p.out.Text()
}

// deliver waits until message id reached every listener and returns the
// listeners' process CPU so far.
func (p *listenersApart) deliver(b *testing.B, id string) time.Duration {
	b.Helper()
	if _, err := fmt.Fprintln(p.in, id); err != nil {
		b.Fatal(err)
	}
	var cpu int64
	if _, err := fmt.Sscanf(p.line(b), "ok %d", &cpu); err != nil {
		b.Fatalf("the listeners' process: %v", err)
	}
	return time.Duration(cpu)
}

// listenersProcess is the listeners' process (see listenersApart); it
// answers the process's exit status.
func listenersProcess() int {
	tb := processTB{}
	n, _ := strconv.Atoi(os.Getenv(listenersCountEnv))
	tokens := strings.Split(os.Getenv(listenersTokensEnv), ",")
	ls := make([]*listener, n)
	for i := range ls {
		ls[i] = listenAt(tb, os.Getenv(listenersURLEnv), tokens[i%len(tokens)], os.Getenv(listenersAfterEnv))
	}
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		for _, l := range ls {
			l.until(in.Text())
		}
		fmt.Printf("ok %d\n", processCPU(tb))
	}
	return 0
}

// processTB is the testing.TB of the listeners' process: a failure ends
// the process, which the benchmark sees as its end.
type processTB struct{ testing.TB }

func (processTB) Helper()        {}
func (processTB) Cleanup(func()) {}
func (processTB) Fatal(args ...any) {
	fmt.Fprintln(os.Stderr, args...)
	os.Exit(2)
}
func (processTB) Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(2)
}

// processCPU is the CPU time (user and system) this process used so far.
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
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
