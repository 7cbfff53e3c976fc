package graph_test

import (
	"testing"

	"bothy.example.com/bothy/internal/platform/pgtest"
)

// TestMain starts the shared PostgreSQL cluster of the integration tests
// (connections_test.go) when one of them asks for a database.
func TestMain(m *testing.M) { pgtest.Main(m) }
