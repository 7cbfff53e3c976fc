// Package authz stands in for Bothy's authz: it may compare its own levels.
package authz

// Level is a rights level.
type Level int

// The levels.
const (
	None Level = iota
	Read
)

// AtLeastRead compares inside the package: allowed.
func AtLeastRead(l Level) bool { return l >= Read }
