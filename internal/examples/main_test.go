package examples_test

import (
	"testing"

	"bothy.example.com/bothy/internal/platform/pgtest"
)

// TestMain starts the shared PostgreSQL cluster of the tests.
func TestMain(m *testing.M) { pgtest.Main(m) }
