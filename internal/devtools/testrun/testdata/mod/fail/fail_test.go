package fail

import "testing"

// TestPasses passes.
func TestPasses(t *testing.T) {}

// TestFails fails.
func TestFails(t *testing.T) { t.Fatal("Sam's check failed") }
