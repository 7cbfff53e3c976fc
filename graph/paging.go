package graph

import (
	"errors"
	"strconv"

	"bothy.example.com/bothy/graph/model"
	"bothy.example.com/bothy/internal/platform/problem"
)

// Every list that pages answers edges (cursor and node), nodes and
// pageInfo, and takes first and after (docs/clients.md#lists). The helpers
// here build that shape from a module's page; the modules keep their own
// cursors (a seq, a thread_seq, a principal's cursor, a token's id).

// pageInfo is the PageInfo of a page whose last element has cursor last
// ("" for an empty page, which ends where it began: after), with more
// saying whether elements followed it.
func pageInfo(last string, after *string, more bool) *model.PageInfo {
	end := after
	if last != "" {
		end = &last
	}
	return &model.PageInfo{EndCursor: end, HasNextPage: more}
}

// edgesOf returns the edges and nodes of items, each edge with the cursor
// cursorOf gives its item.
func edgesOf[N any, E any](items []N, cursorOf func(i int) string, edge func(cursor string, node N) E) ([]E, []N) {
	edges := make([]E, len(items))
	for i, n := range items {
		edges[i] = edge(cursorOf(i), n)
	}
	return edges, items
}

// sizeArgument resolves a list's page size from first and its deprecated
// twin limit, in the form the modules take: 0 for absent (their default),
// -1 for a value below 1 (refused as out_of_range by the module). The
// pointer of a module's refusal of the size is named renamed to what the
// caller sent (renameSize).
//
// Errors: both first and limit given answers validation_failed.
func sizeArgument(first, limit *int) (int, string, error) {
	if first != nil && limit != nil {
		return 0, "", problem.Invalid(problem.FieldError{Pointer: "first", Code: "exclusive", Detail: "give first or limit (deprecated), not both"})
	}
	v, name := limit, "limit"
	if first != nil {
		v, name = first, "first"
	}
	if v == nil {
		return 0, name, nil
	}
	if *v < 1 {
		return -1, name, nil
	}
	return *v, name, nil
}

// sizePointer is sizeArgument for a module that takes the size as a
// pointer (nil for its default): the one of first and limit given, and its
// name for renameSize.
//
// Errors: both given answers validation_failed.
func sizePointer(first, limit *int) (*int, string, error) {
	if _, _, err := sizeArgument(first, limit); err != nil {
		return nil, "", err
	}
	if first != nil {
		return first, "first", nil
	}
	return limit, "limit", nil
}

// renameSize names the caller's size argument in a refusal whose field
// error points at the module's "limit".
func renameSize(err error, name string) error {
	var p *problem.Error
	if name == "limit" || !errors.As(err, &p) {
		return err
	}
	for i, f := range p.Fields {
		if f.Pointer == "limit" {
			p.Fields[i].Pointer = name
		}
	}
	return err
}

// threadSeqCursor parses a cursor of a thread's history: a thread_seq in
// decimal, as the history's edges carry it.
//
// Errors: anything else answers validation_failed invalid_cursor.
func threadSeqCursor(after *string) (int64, error) {
	if after == nil {
		return 0, nil
	}
	n, err := strconv.ParseInt(*after, 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != *after {
		return 0, problem.Invalid(problem.FieldError{Pointer: "after", Code: "invalid_cursor"})
	}
	return n, nil
}

// listSize is the page size of a list whose first defaults to 50: the
// value given (a module refuses one outside its bounds), or 50.
func listSize(first *int) int {
	if first == nil {
		return 50
	}
	return *first
}

// idConnection maps a module's page to a connection whose cursors are the
// nodes' ids: its edges, its nodes and where it ends (after is the
// request's, more whether items follow).
func idConnection[T any, N any, E any](items []T, node func(T) N, id func(N) string, edge func(cursor string, node N) E,
	after *string, more bool) ([]E, []N, *model.PageInfo) {
	nodes := make([]N, len(items))
	for i, x := range items {
		nodes[i] = node(x)
	}
	edges, nodes := edgesOf(nodes, func(i int) string { return id(nodes[i]) }, edge)
	last := ""
	if n := len(nodes); n > 0 {
		last = id(nodes[n-1])
	}
	return edges, nodes, pageInfo(last, after, more)
}
