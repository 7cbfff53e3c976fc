package exits

import (
	"os"
	"testing"
)

// TestMain fails the package after its tests passed, as a leak check does.
func TestMain(m *testing.M) {
	m.Run()
	os.Exit(3)
}

// TestPasses passes.
func TestPasses(t *testing.T) {}
