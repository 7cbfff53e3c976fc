// Package pass has a test that passes.
package pass

// Greeting is what the test checks.
func Greeting() string { return "Hello, Alex" }
