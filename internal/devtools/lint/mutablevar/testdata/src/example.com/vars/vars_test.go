package vars

// Cases is a test's table: left alone.
var Cases = []string{"a"}
