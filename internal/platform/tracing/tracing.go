// Package tracing owns Bothy's OpenTelemetry traces: the tracer provider
// that exports spans over OTLP/HTTP to the collector named by the config
// key tracing.otlp_endpoint, and the helper every instrumented layer
// starts its span with (the request, the GraphQL operation, the door's
// decision, each statement).
//
// Tracing is off unless the key is set. Off, no provider exists: the
// request layer starts no span, and every inner layer finds no recording
// span in its context, so Start hands out a span that does nothing and
// costs one context lookup. On, each inner span is made by the provider of
// the span in its context (trace.Span.TracerProvider), not by a global
// one, so that several servers in one process (the tests) keep their
// traces apart, and work outside a request (sweeps, retention, the LISTEN
// connection) exports nothing.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"bothy.example.com/bothy/internal/platform/config"
)

// ScopeName is the instrumentation scope of every span Bothy makes.
const ScopeName = "bothy.example.com/bothy"

// TracesPath is the path of the OTLP/HTTP traces receiver below the
// collector's base URL (OTLP specification, like OTEL_EXPORTER_OTLP_ENDPOINT).
const TracesPath = "/v1/traces"

// Options are what New needs to know.
type Options struct {
	// Endpoint is the collector's base URL (tracing.otlp_endpoint); empty
	// turns tracing off.
	Endpoint string
	// ServiceName is the service.name resource attribute
	// (tracing.service_name).
	ServiceName string
	// Version is the service.version resource attribute (the binary's
	// version).
	Version string
	// Log receives failed exports (default: slog.Default()).
	Log *slog.Logger
}

// OptionsFrom returns the tracing options of cfg for a binary of version.
func OptionsFrom(cfg *config.Config, version string, log *slog.Logger) Options {
	return Options{Endpoint: cfg.String(config.TracingOTLPEndpoint), ServiceName: cfg.String(config.TracingServiceName),
		Version: version, Log: log}
}

// Enabled reports whether cfg turns tracing on (tracing.otlp_endpoint is
// set). The pool's statement tracer is registered only then.
func Enabled(cfg *config.Config) bool { return cfg.String(config.TracingOTLPEndpoint) != "" }

// Provider is the tracer provider of one server. The zero value and the
// provider New returns for an empty endpoint are off: Enabled is false and
// Shutdown does nothing.
type Provider struct {
	sdk *sdktrace.TracerProvider
	// URL is where spans are posted (empty when off).
	URL string
}

// New returns the provider o asks for. With an empty o.Endpoint it returns
// a provider that is off and starts nothing. Otherwise it builds a batching
// OTLP/HTTP exporter (gzip, protobuf) that posts to o.Endpoint plus
// TracesPath; it connects to nothing before the first batch. The
// exporter's standard environment variables (OTEL_EXPORTER_OTLP_HEADERS,
// OTEL_EXPORTER_OTLP_CERTIFICATE, OTEL_EXPORTER_OTLP_TIMEOUT, ...) and the
// SDK's (OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG, OTEL_BSP_*) apply;
// the endpoint is always the key's.
//
// Errors: the endpoint is not an http or https URL with a host, carries
// credentials, a query or a fragment, or the service name is empty; each
// error names the key to fix.
func New(o Options) (*Provider, error) {
	if o.Endpoint == "" {
		return &Provider{}, nil
	}
	target, err := tracesURL(o.Endpoint)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(o.ServiceName) == "" {
		return nil, errors.New("config key tracing.service_name: empty while tracing.otlp_endpoint is set")
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(target),
		otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
	if err != nil {
		return nil, fmt.Errorf("tracing exporter: %w", err)
	}
	res := resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(o.ServiceName), semconv.ServiceVersion(o.Version))
	// No sampler option: the SDK's default (parent-based, always on) or
	// the one OTEL_TRACES_SAMPLER names.
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(loggedExporter{exp, o.Log}), sdktrace.WithResource(res))
	return &Provider{sdk: tp, URL: target}, nil
}

// tracesURL checks the configured base URL and returns it with TracesPath
// appended.
func tracesURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("config key tracing.otlp_endpoint: %q is not an http or https URL such as http://collector.example.com:4318", endpoint)
	}
	if u.User != nil {
		// The exporter would drop them silently; headers carry credentials.
		return "", errors.New("config key tracing.otlp_endpoint: the URL carries credentials; pass them as OTEL_EXPORTER_OTLP_HEADERS instead")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", errors.New("config key tracing.otlp_endpoint: the URL must have no query and no fragment")
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + TracesPath
	u.RawPath = ""
	return u.String(), nil
}

// Enabled reports whether p exports spans.
func (p *Provider) Enabled() bool { return p != nil && p.sdk != nil }

// TracerProvider returns the provider request spans start from: the SDK's
// when on, a no-op one when off.
func (p *Provider) TracerProvider() trace.TracerProvider {
	if !p.Enabled() {
		return noop.NewTracerProvider()
	}
	return p.sdk
}

// ForceFlush exports every ended span now and returns when the collector
// took them or ctx ends. Off, it does nothing.
//
// Errors: ctx ended first (ctx.Err()).
func (p *Provider) ForceFlush(ctx context.Context) error {
	if !p.Enabled() {
		return nil
	}
	return p.sdk.ForceFlush(ctx)
}

// Shutdown exports the spans still queued and stops the exporter; spans
// ended later are dropped. It returns when the export finished or ctx
// ended. Off, it does nothing.
//
// Errors: ctx ended before the export finished (ctx.Err()).
func (p *Provider) Shutdown(ctx context.Context) error {
	if !p.Enabled() {
		return nil
	}
	return p.sdk.Shutdown(ctx)
}

// loggedExporter reports a failed export through Bothy's JSON logger. The
// SDK would hand the error to OpenTelemetry's global error handler, which
// prints plain text to stderr, past the logger.
type loggedExporter struct {
	sdktrace.SpanExporter
	log *slog.Logger
}

// ExportSpans exports spans and logs a failure; the spans are then lost
// (the exporter has retried already), which the log line says.
func (e loggedExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if err := e.SpanExporter.ExportSpans(ctx, spans); err != nil {
		e.log.Warn("tracing: spans not exported and dropped", "spans", len(spans), "error", err.Error())
	}
	return nil
}

// Start starts a span called name of kind as a child of the span of ctx,
// made by that span's own provider, and returns the span and a context
// carrying it; the caller ends the span. When the span of ctx does not
// record (tracing is off, the trace is not sampled, or ctx is outside any
// request) it returns ctx unchanged and a span that does nothing, without
// allocating: callers check IsRecording before they build attributes.
func Start(ctx context.Context, name string, kind trace.SpanKind) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, noop.Span{}
	}
	return parent.TracerProvider().Tracer(ScopeName).Start(ctx, name, trace.WithSpanKind(kind))
}
