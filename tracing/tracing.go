// Package tracing is gantry's OpenTelemetry tracing: the tracer provider
// made from the environment (OTLP over HTTP, off unless a collector is
// named), the W3C trace context a job carries from the ingress to the
// runners (in NATS headers, and in the job's row), and the attributes the
// spans of both sides share.
//
// A job is one trace: the request that submitted it, its publish, and each
// runner's attempt at it down to the recorded result (docs/ARCHITECTURE.md,
// "Traces"). With tracing off every part is given a no-op provider: no
// exporter runs, nothing is recorded, no header is sent.
package tracing

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// The attributes of gantry's spans. Their values are ids and small
// enumerations: never code, env values, file contents or keys.
const (
	JobID     = attribute.Key("gantry.job.id")
	TenantID  = attribute.Key("gantry.tenant.id")
	SessionID = attribute.Key("gantry.session.id")
	Language  = attribute.Key("gantry.job.language")
	Attempt   = attribute.Key("gantry.job.attempt")
	Status    = attribute.Key("gantry.job.status")
	RunnerID  = attribute.Key("gantry.runner.id")
	// Outcome says what became of a step that may end more ways than
	// done or failed: a claim (claimed, busy, stale, …), a container's
	// source (idle, pool, new), a hand-back's cause.
	Outcome = attribute.Key("gantry.outcome")
)

// Config is what gantry's own settings say about tracing; the rest comes
// from the standard OTEL_* variables, read by the SDK.
type Config struct {
	// Endpoint is the collector's OTLP/HTTP base URL
	// (GANTRY_OTLP_ENDPOINT; /v1/traces is added). "" leaves it to
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT;
	// with none of them set, tracing is off.
	Endpoint string
	// Version is reported as service.version.
	Version string
	// Log receives what the exporter cannot send (nil: discarded).
	Log *slog.Logger
}

// env is the environment the standard variables are read from.
var env = os.Getenv

// Enabled says whether traces are exported: a collector is named, and
// neither OTEL_SDK_DISABLED nor OTEL_TRACES_EXPORTER=none turned them off.
func (c Config) Enabled() bool {
	if strings.EqualFold(strings.TrimSpace(env("OTEL_SDK_DISABLED")), "true") ||
		strings.EqualFold(strings.TrimSpace(env("OTEL_TRACES_EXPORTER")), "none") {
		return false
	}
	return c.Endpoint != "" || env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || env("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
}

// Validate names each setting that would stop traces from being made or
// sent as the operator meant, one message per variable. The SDK itself
// would only log them, and fall back to its defaults.
func (c Config) Validate() []string {
	var errs []string
	badURL := func(v string) bool {
		u, err := url.Parse(v)
		return err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == ""
	}
	if c.Endpoint != "" && badURL(c.Endpoint) {
		errs = append(errs, fmt.Sprintf("GANTRY_OTLP_ENDPOINT=%q: want the collector's OTLP/HTTP base URL, such as http://collector:4318", c.Endpoint))
	}
	if !c.Enabled() {
		return errs
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		if v := env(name); v != "" && badURL(v) {
			errs = append(errs, fmt.Sprintf("%s=%q: want an http:// or https:// URL, such as http://collector:4318", name, v))
		}
	}
	switch v := strings.ToLower(strings.TrimSpace(env("OTEL_TRACES_EXPORTER"))); v {
	case "", "otlp":
	default:
		errs = append(errs, fmt.Sprintf("OTEL_TRACES_EXPORTER=%q: gantry exports traces over OTLP (otlp) or not at all (none)", v))
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		switch v := strings.TrimSpace(env(name)); v {
		case "", "http/protobuf", "http/json":
		default:
			errs = append(errs, fmt.Sprintf("%s=%q: gantry sends OTLP over HTTP: http/protobuf or http/json", name, v))
		}
	}
	sampler := strings.ToLower(strings.TrimSpace(env("OTEL_TRACES_SAMPLER")))
	switch sampler {
	case "", "always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio":
	default:
		errs = append(errs, fmt.Sprintf("OTEL_TRACES_SAMPLER=%q: want always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio", sampler))
	}
	if arg := strings.TrimSpace(env("OTEL_TRACES_SAMPLER_ARG")); arg != "" && strings.HasSuffix(sampler, "traceidratio") {
		if r, err := strconv.ParseFloat(arg, 64); err != nil || r < 0 || r > 1 {
			errs = append(errs, fmt.Sprintf("OTEL_TRACES_SAMPLER_ARG=%q: want a ratio from 0 to 1", arg))
		}
	}
	return errs
}

// Provider is the tracer provider every part of a gantry process is
// given: the SDK's, exporting over OTLP, or a no-op one when tracing is
// off.
type Provider struct {
	trace.TracerProvider
	shutdown func(context.Context) error
}

// Off is a provider that records nothing.
func Off() *Provider { return &Provider{TracerProvider: noop.NewTracerProvider()} }

// With is a provider made by the caller (a test's, with an in-memory
// exporter); Shutdown leaves it alone.
func With(tp trace.TracerProvider) *Provider { return &Provider{TracerProvider: tp} }

// New makes the process's provider. With tracing off (Config.Enabled) it
// is Off(). Otherwise spans are batched and sent to the collector over
// OTLP/HTTP; the sampler, batching, limits, headers, timeouts, TLS and
// resource attributes follow the standard OTEL_* variables.
func New(ctx context.Context, cfg Config) (*Provider, error) {
	if !cfg.Enabled() {
		return Off(), nil
	}
	if errs := cfg.Validate(); len(errs) > 0 {
		return nil, errors.New(strings.Join(errs, "; "))
	}
	var opts []otlptracehttp.Option
	if cfg.Endpoint != "" && env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		opts = append(opts, otlptracehttp.WithEndpointURL(strings.TrimSuffix(cfg.Endpoint, "/")+"/v1/traces"))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	// service.name is gantry unless OTEL_SERVICE_NAME or
	// OTEL_RESOURCE_ATTRIBUTES say otherwise (the later detector wins).
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName("gantry"), semconv.ServiceVersion(cfg.Version)),
		resource.WithTelemetrySDK(),
		resource.WithHost(),
		resource.WithFromEnv(),
	)
	if err != nil {
		return nil, fmt.Errorf("trace resource (OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME): %w", err)
	}
	if cfg.Log != nil {
		log := cfg.Log
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("traces", "err", err) }))
	}
	// The sampler comes from OTEL_TRACES_SAMPLER (parent-based, always on
	// by default): a request that arrives with a sampled traceparent is
	// traced, one that arrives with an unsampled one is not.
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Provider{TracerProvider: tp, shutdown: tp.Shutdown}, nil
}

// Shutdown sends the spans not sent yet and stops the exporter; with
// tracing off it does nothing.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil || p.shutdown == nil {
		return nil
	}
	return p.shutdown(ctx)
}

// Tracer returns a tracer named after the part of gantry that makes the
// spans, from tp (nil: a no-op tracer).
func Tracer(tp trace.TracerProvider, name string) trace.Tracer {
	if tp == nil {
		return noop.NewTracerProvider().Tracer(name)
	}
	return tp.Tracer(name)
}

// propagator is how gantry carries a trace between processes: W3C trace
// context, in HTTP and NATS headers and in the job's row.
var propagator = propagation.TraceContext{}

// Inject writes the trace context of the span in ctx into carrier (nothing
// when ctx has no valid span, as with tracing off).
func Inject(ctx context.Context, carrier propagation.TextMapCarrier) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return // tracing off: nothing to carry
	}
	propagator.Inject(ctx, carrier)
}

// Extract returns ctx with the remote span a carrier names as its parent
// (ctx as it is when the carrier names none, or a malformed one).
func Extract(ctx context.Context, carrier propagation.TextMapCarrier) context.Context {
	return propagator.Extract(ctx, carrier)
}

const traceparent = "traceparent"

// Traceparent is the W3C traceparent of the span in ctx, as a job's row
// keeps it ("" when ctx has no valid span).
func Traceparent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	return c[traceparent]
}

// FromTraceparent returns ctx with the span a stored traceparent names as
// its remote parent (ctx as it is for "" or a malformed one).
func FromTraceparent(ctx context.Context, tp string) context.Context {
	if tp == "" {
		return ctx
	}
	return propagator.Extract(ctx, propagation.MapCarrier{traceparent: tp})
}

// SpanContextOf is the span context a stored traceparent names (invalid
// for "" or a malformed one).
func SpanContextOf(tp string) trace.SpanContext {
	return trace.SpanContextFromContext(FromTraceparent(context.Background(), tp))
}

// SampledTraceID is the trace id a stored traceparent names when that
// trace was sampled, and so is exported ("" otherwise): what a job shows
// as its trace_id.
func SampledTraceID(tp string) string {
	sc := SpanContextOf(tp)
	if !sc.IsValid() || !sc.IsSampled() {
		return ""
	}
	id := sc.TraceID()
	return hex.EncodeToString(id[:])
}

// TraceID is the id of the sampled trace ctx is in ("" when it is in none,
// or in one that is not exported).
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsSampled() {
		return ""
	}
	id := sc.TraceID()
	return hex.EncodeToString(id[:])
}

// LogAttrs are the attributes that tie a log line to the sampled trace
// ctx is in: trace_id, or nothing. Loggers about a job are narrowed with
// them (log.With(tracing.LogAttrs(ctx)...)).
func LogAttrs(ctx context.Context) []any {
	if id := TraceID(ctx); id != "" {
		return []any{"trace_id", id}
	}
	return nil
}

// End ends span, marking it failed with err first when err is not nil.
func End(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// Publish are the attributes of a span that publishes a run message on
// subject (OpenTelemetry's messaging conventions).
func Publish(subject string) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String("messaging.system", "nats"),
		attribute.String("messaging.operation.type", "send"),
		attribute.String("messaging.destination.name", subject),
	}
}

// Process are the attributes of a span that processes a run message
// delivered from subject for the nth time.
func Process(subject string, delivery uint64) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String("messaging.system", "nats"),
		attribute.String("messaging.operation.type", "process"),
		attribute.String("messaging.destination.name", subject),
		attribute.Int64("messaging.nats.message.delivery_count", int64(delivery)),
	}
}
