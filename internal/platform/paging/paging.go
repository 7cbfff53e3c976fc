// Package paging holds the two rules every keyset-paged list of ids
// shares: what a page request may ask for, and how one row more than the
// page tells whether more follow.
package paging

import (
	"strconv"

	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/platform/problem"
)

// Check validates a request for a page of at most first items after the
// item with id after (empty for the first page).
//
// Errors: invalid with out_of_range at "first" for a size outside 1 to
// max, and invalid_cursor at "after" for an after that is no id.
func Check(first, max int, after string) error {
	var fields []problem.FieldError
	if first < 1 || first > max {
		fields = append(fields, problem.FieldError{Pointer: "first", Code: "out_of_range", Detail: "must lie between 1 and " + strconv.Itoa(max)})
	}
	if after != "" && !ids.Valid(after) {
		fields = append(fields, problem.FieldError{Pointer: "after", Code: "invalid_cursor"})
	}
	if len(fields) > 0 {
		return problem.Invalid(fields...)
	}
	return nil
}

// Cut returns the page of a list read with one row more than limit, and
// whether that row was there (more items follow the page).
func Cut[T any](list []T, limit int) ([]T, bool) {
	if len(list) > limit {
		return list[:limit], true
	}
	return list, false
}
