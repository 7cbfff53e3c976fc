package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler/transport"

	"bothy.example.com/bothy/internal/platform/answerbuf"
)

// rawDataPOST is gqlgen's POST transport without its second pass over the
// answer: gqlgen encodes the response envelope with encoding/json, which
// validates and compacts the data member (json.RawMessage) byte by byte
// once more although the executor has just written it compactly. Here the
// executor's data is kept aside while gqlgen encodes the envelope around a
// short marker, and the data is put in the marker's place when the
// envelope is written. Everything else (content negotiation, status codes,
// errors, extensions) stays gqlgen's own.
type rawDataPOST struct {
	transport.POST
}

var _ graphql.Transport = rawDataPOST{}

// dataMarker stands in for the data member while gqlgen encodes the
// envelope. A JSON string holding a NUL character can only come out of
// the encoder escaped, so the marker never occurs in encoded content.
var dataMarker = json.RawMessage(`"\u0000bothy-data"`)

// Do runs the request with gqlgen's POST transport on an executor whose
// answers leave their data aside.
func (t rawDataPOST) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	sw := &spliceWriter{ResponseWriter: w}
	t.POST.Do(sw, r, spliceExecutor{GraphExecutor: exec, w: sw})
}

// spliceExecutor moves the data of the operation's answer into its writer.
type spliceExecutor struct {
	graphql.GraphExecutor
	w *spliceWriter
}

// DispatchOperation runs the operation; its single answer (queries and
// mutations have one) leaves its data with the writer.
func (e spliceExecutor) DispatchOperation(ctx context.Context, rc *graphql.OperationContext) (graphql.ResponseHandler, context.Context) {
	next, ctx := e.GraphExecutor.DispatchOperation(ctx, rc)
	return func(ctx context.Context) *graphql.Response {
		resp := next(ctx)
		if resp != nil && len(resp.Data) > 0 && e.w.data == nil {
			e.w.data, resp.Data = resp.Data, dataMarker
		}
		return resp
	}, ctx
}

// spliceWriter puts the kept data in the marker's place.
type spliceWriter struct {
	http.ResponseWriter
	data json.RawMessage
}

// Write writes p with the marker replaced by the data (gqlgen writes the
// envelope in one call).
func (s *spliceWriter) Write(p []byte) (int, error) {
	if s.data == nil {
		return s.ResponseWriter.Write(p)
	}
	i := bytes.Index(p, dataMarker)
	if i < 0 {
		return s.ResponseWriter.Write(p)
	}
	data := s.data
	s.data = nil
	// The whole answer's length is known here: an answer written through
	// (overHTTP passes 200 answers on) still carries its Content-Length.
	s.Header().Set("Content-Length", strconv.Itoa(len(p)-len(dataMarker)+len(data)))
	if _, err := s.ResponseWriter.Write(p[:i]); err != nil {
		return 0, err
	}
	_, err := s.ResponseWriter.Write(data)
	// The data is written (every writer below copies or writes through)
	// and was the executor's alone: its array goes back for the next
	// large answer (answerbuf). The REST shim releases the arrays of its
	// own answers likewise.
	answerbuf.Release(data)
	if err != nil {
		return 0, err
	}
	if _, err := s.ResponseWriter.Write(p[i+len(dataMarker):]); err != nil {
		return 0, err
	}
	return len(p), nil
}
