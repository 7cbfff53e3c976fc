package server

import (
	"net/http"

	"bothy.example.com/bothy/internal/platform/httpx"
	"bothy.example.com/bothy/internal/ratelimit"
)

// meterRateLimit gives every request it wraps a ratelimit.Meter, into
// which the authorization door records what each token it takes leaves in
// its bucket, and writes the RateLimit-Policy and RateLimit header fields
// of the bucket with the least room left just before the answer's header
// goes out. A request that took no token (refused before authentication or
// before the door, or not metered at all) gets neither field. It wraps the
// REST routes and the HTTP path of /graphql; the REST shim runs its stored
// operation on the request's own context, so its spends land in the same
// Meter. WebSocket upgrades do not pass here: a subscription's events have
// no header to carry the fields.
func meterRateLimit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, m := ratelimit.WithMeter(r.Context())
		next.ServeHTTP(&meteredWriter{ResponseWriter: w, meter: m}, r.WithContext(ctx))
	})
}

// meteredWriter sets the rate-limit header fields when the header is
// written: every token of the request is spent by then, since both faces
// write their answer after execution.
type meteredWriter struct {
	http.ResponseWriter
	meter *ratelimit.Meter
	wrote bool
}

func (m *meteredWriter) WriteHeader(code int) {
	if !m.wrote {
		m.wrote = true
		if u, ok := m.meter.Lowest(); ok {
			httpx.RateLimitFields{Policy: string(u.Class), Quota: u.Burst, Window: u.Window,
				Remaining: u.Remaining, Reset: u.Reset}.Set(m.Header())
		}
	}
	m.ResponseWriter.WriteHeader(code)
}

func (m *meteredWriter) Write(p []byte) (int, error) {
	if !m.wrote {
		m.WriteHeader(http.StatusOK)
	}
	return m.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController (the long poll's write deadline)
// reach the connection's writer through the wrapper.
func (m *meteredWriter) Unwrap() http.ResponseWriter { return m.ResponseWriter }

// Flush lets a streaming answer flush through the wrapper.
func (m *meteredWriter) Flush() {
	if f, ok := m.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
