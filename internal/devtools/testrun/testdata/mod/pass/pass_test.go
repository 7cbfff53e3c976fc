package pass

import (
	"os"
	"testing"
)

// TestGreeting passes, and checks that it runs in its package's folder.
func TestGreeting(t *testing.T) {
	if Greeting() != "Hello, Alex" {
		t.Fatal(Greeting())
	}
	if _, err := os.Stat("pass.go"); err != nil {
		t.Fatal("not run in the package's folder:", err)
	}
}
