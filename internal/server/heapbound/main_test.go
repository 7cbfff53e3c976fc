// Package heapbound_test measures the heap a whole server keeps after
// large documents. It is a package of its own because the measurement
// cannot run beside other tests of its process: in internal/server it held
// back every parallel test of the package for its whole run.
package heapbound_test

import (
	"testing"

	"bothy.example.com/bothy/internal/platform/pgtest"
)

// TestMain starts the shared PostgreSQL cluster of the tests.
func TestMain(m *testing.M) { pgtest.Main(m) }
