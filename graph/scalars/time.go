// Package scalars holds the custom GraphQL scalars of Bothy.
package scalars

import (
	"io"
	"strconv"
	"time"

	"github.com/99designs/gqlgen/graphql"

	"bothy.example.com/bothy/internal/platform/problem"
)

// Layout is the wire form of every timestamp: RFC 3339 with milliseconds, UTC.
const Layout = "2006-01-02T15:04:05.000Z07:00"

// InvalidTime is the field error code of a Time input that is not an RFC
// 3339 date-time; TimeDetail is its fixed detail.
const (
	InvalidTime = "invalid_time"
	TimeDetail  = "must be an RFC 3339 date-time between years 1 and 9999, e.g. 2026-11-30T09:00:00Z"
)

// MarshalTime writes t in UTC with milliseconds.
func MarshalTime(t time.Time) graphql.Marshaler {
	return graphql.WriterFunc(func(w io.Writer) {
		io.WriteString(w, strconv.Quote(t.UTC().Format(Layout)))
	})
}

// UnmarshalTime reads an RFC 3339 date-time. Anything else is a
// validation_failed problem with field code invalid_time, never a plain
// error: a plain error would surface as internal_error. The presenter fills
// the pointer from the GraphQL path of the input.
func UnmarshalTime(v any) (time.Time, error) {
	bad := problem.Invalid(problem.FieldError{Code: InvalidTime, Detail: TimeDetail})
	s, ok := v.(string)
	if !ok {
		return time.Time{}, bad
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	// Year 0 parses but PostgreSQL reads it as 1 BC; refuse it with the
	// rest of the out-of-range values.
	if err != nil || t.UTC().Year() < 1 || t.UTC().Year() > 9999 {
		return time.Time{}, bad
	}
	return t.UTC(), nil
}
