package feed_test

import (
	"os"
	"testing"

	"bothy.example.com/bothy/internal/platform/pgtest"
)

// TestMain runs the tests, or, started by BenchmarkFanout with the
// listeners' variables set, the benchmark's listeners' process.
func TestMain(m *testing.M) {
	if os.Getenv(listenersURLEnv) != "" {
		os.Exit(listenersProcess())
	}
	pgtest.Main(m)
}
