// Package bad compares levels outside authz in every way the check knows.
package bad

import "example.com/levelcheck/authz"

var grants = []authz.Level{authz.Read, authz.None} // data, not a comparison

func constant(l authz.Level) bool {
	return l >= authz.Read // want `compares authorization levels outside internal/authz`
}

func variables(a, b authz.Level) bool {
	return a != b // want `compares authorization levels`
}

func element() bool {
	return grants[0] < grants[1] // want `compares authorization levels`
}

func switched(l authz.Level) int {
	switch l { // want `switches on an authorization level`
	case authz.Read:
		return 1
	}
	return 0
}

func ints(a, b int) bool { return a > b } // not levels
