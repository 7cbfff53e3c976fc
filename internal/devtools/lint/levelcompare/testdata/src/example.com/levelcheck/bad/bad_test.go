package bad

import "example.com/levelcheck/authz"

// A test may compare levels: it checks what the door decided.
func compareInTest(l authz.Level) bool { return l == authz.Read }
