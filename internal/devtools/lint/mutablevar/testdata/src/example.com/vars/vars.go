package vars

import "errors"

// Table is an exported map.
var Table = map[string]int{"a": 1} // want `exported package variable Table is a mutable map`

// Names is an exported slice.
var Names = []string{"Alex", "Sam"} // want `exported package variable Names is a mutable slice`

// Grouped declarations are read too.
var (
	Routes []string // want `exported package variable Routes is a mutable slice`
	routes []string
)

// Levels is a named map type.
type Levels map[string]int

// Named is an exported variable of a named map type.
var Named = Levels{} // want `exported package variable Named is a mutable map`

var table = map[string]int{}

// ErrGone is an error value, not a table.
var ErrGone = errors.New("gone")

// Limit is a number.
var Limit = 3

// Max is a constant.
const Max = 4

// Lookup reads the unexported tables.
func Lookup(k string) int { _ = routes; return table[k] }
