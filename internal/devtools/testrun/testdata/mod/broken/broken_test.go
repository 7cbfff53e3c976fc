package broken

import "testing"

// TestBroken does not compile.
func TestBroken(t *testing.T) { undefinedName() }
