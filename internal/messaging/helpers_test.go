package messaging_test

import (
	"strings"
	"testing"

	"bothy.example.com/bothy/internal/devtools/moduletest"
)

// textRows runs the query sql, whose columns are all text, and returns one
// line per row: its non-empty columns joined by single spaces. The tests
// compare what a write left in event_log or messages with these lines;
// a failed query or scan fails the test.
func textRows(t *testing.T, env *moduletest.Env, sql string, args ...any) []string {
	t.Helper()
	rows, err := env.Pool.Query(t.Context(), sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		cols := make([]string, len(rows.FieldDescriptions()))
		dest := make([]any, len(cols))
		for i := range cols {
			dest[i] = &cols[i]
		}
		if err := rows.Scan(dest...); err != nil {
			t.Fatal(err)
		}
		out = append(out, strings.Join(strings.Fields(strings.Join(cols, " ")), " "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
