// Package tracingtest is an in-process OpenTelemetry collector for tests:
// an OTLP/HTTP traces receiver that decodes what Bothy exports (protobuf,
// gzip or not) into plain spans a test can assert on.
package tracingtest

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, its ids in lower-case hex as in traceparent.
type Span struct {
	TraceID      string
	SpanID       string
	ParentSpanID string // empty for a root span
	Name         string
	Kind         tracepb.Span_SpanKind
	// Error is true when the span's status is an error.
	Error bool
	// Attributes are the span's attributes, every value as text.
	Attributes map[string]string
	// Resource are the attributes of the span's resource (service.name).
	Resource map[string]string
	// Scope is the instrumentation scope's name.
	Scope string
}

// Receiver is the receiver; URL is its base URL, the value for
// tracing.otlp_endpoint. It accepts POST /v1/traces only; any other
// request, and a body it cannot decode, counts in Rejected.
type Receiver struct {
	URL string

	mu       sync.Mutex
	spans    []Span
	posts    int
	rejected []string
}

// NewReceiver starts a receiver that stops when t ends.
func NewReceiver(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

// Spans returns every span received so far, in the order received.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Posts returns how many exports were accepted.
func (r *Receiver) Posts() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.posts
}

// Rejected describes every request that was not a decodable export.
func (r *Receiver) Rejected() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.rejected...)
}

func (r *Receiver) reject(w http.ResponseWriter, status int, format string, args ...any) {
	r.mu.Lock()
	r.rejected = append(r.rejected, fmt.Sprintf(format, args...))
	r.mu.Unlock()
	http.Error(w, http.StatusText(status), status)
}

// serve decodes one export as an OTLP/HTTP collector does.
func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		r.reject(w, http.StatusNotFound, "%s %s", req.Method, req.URL.Path)
		return
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		r.reject(w, http.StatusUnsupportedMediaType, "content type %q", ct)
		return
	}
	var body io.Reader = req.Body
	switch enc := req.Header.Get("Content-Encoding"); enc {
	case "":
	case "gzip":
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			r.reject(w, http.StatusBadRequest, "gzip: %v", err)
			return
		}
		defer zr.Close()
		body = zr
	default:
		r.reject(w, http.StatusUnsupportedMediaType, "content encoding %q", enc)
		return
	}
	data, err := io.ReadAll(body)
	if err != nil {
		r.reject(w, http.StatusBadRequest, "read: %v", err)
		return
	}
	var export coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(data, &export); err != nil {
		r.reject(w, http.StatusBadRequest, "decode: %v", err)
		return
	}
	var got []Span
	for _, rs := range export.GetResourceSpans() {
		res := attributes(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				got = append(got, Span{
					TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					ParentSpanID: hex.EncodeToString(s.GetParentSpanId()), Name: s.GetName(), Kind: s.GetKind(),
					Error:      s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR,
					Attributes: attributes(s.GetAttributes()), Resource: res, Scope: ss.GetScope().GetName(),
				})
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.posts++
	r.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// attributes renders OTLP attributes as text.
func attributes(kvs []*commonpb.KeyValue) map[string]string {
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch x := v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			out[kv.GetKey()] = x.StringValue
		case *commonpb.AnyValue_IntValue:
			out[kv.GetKey()] = strconv.FormatInt(x.IntValue, 10)
		case *commonpb.AnyValue_BoolValue:
			out[kv.GetKey()] = strconv.FormatBool(x.BoolValue)
		case *commonpb.AnyValue_DoubleValue:
			out[kv.GetKey()] = strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
		default:
			out[kv.GetKey()] = fmt.Sprint(v)
		}
	}
	return out
}
