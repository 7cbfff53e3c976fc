// Package bad compares levels outside authz in every way the check knows.
package bad

import "example.com/levelcheck/authz"

var grants = []authz.Level{authz.Read, authz.None} // data, not a comparison

func constant(l authz.Level) bool {
	return l >= authz.Read
}
func variables(a, b authz.Level) bool {
	return a != b
}
func element() bool {
	return grants[0] < grants[1]
}
func switched(l authz.Level) int {
	switch l {
	case authz.Read:
		return 1
	}
	return 0
}
func ints(a, b int) bool { return a > b } // not levels
