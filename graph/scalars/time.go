// Package scalars holds the custom GraphQL scalars of Bothy.
package scalars

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/99designs/gqlgen/graphql"
)

// Layout is the wire form of every timestamp: RFC 3339 with milliseconds, UTC.
const Layout = "2006-01-02T15:04:05.000Z07:00"

// MarshalTime writes t in UTC with milliseconds.
func MarshalTime(t time.Time) graphql.Marshaler {
	return graphql.WriterFunc(func(w io.Writer) {
		io.WriteString(w, strconv.Quote(t.UTC().Format(Layout)))
	})
}

// UnmarshalTime reads an RFC 3339 string; anything else is an error.
func UnmarshalTime(v any) (time.Time, error) {
	s, ok := v.(string)
	if !ok {
		return time.Time{}, fmt.Errorf("Time must be an RFC 3339 string")
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("Time must be an RFC 3339 string")
	}
	return t.UTC(), nil
}
