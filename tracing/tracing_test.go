package tracing

import (
	"context"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// withEnv makes env read vars for the rest of the test.
func withEnv(t *testing.T, vars map[string]string) {
	t.Helper()
	old := env
	env = func(k string) string { return vars[k] }
	t.Cleanup(func() { env = old })
}

func TestEnabled(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		vars map[string]string
		want bool
	}{
		{"nothing set", Config{}, nil, false},
		{"gantry's setting", Config{Endpoint: "http://c:4318"}, nil, true},
		{"OTEL endpoint", Config{}, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, true},
		{"OTEL traces endpoint", Config{}, map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, true},
		{"SDK disabled", Config{Endpoint: "http://c:4318"}, map[string]string{"OTEL_SDK_DISABLED": "true"}, false},
		{"exporter none", Config{}, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			withEnv(t, tc.vars)
			if got := tc.cfg.Enabled(); got != tc.want {
				t.Errorf("Enabled() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestValidateNamesTheVariable(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		vars map[string]string
		want string // "" for valid
	}{
		{Config{Endpoint: "collector:4318"}, nil, "GANTRY_OTLP_ENDPOINT"},
		{Config{Endpoint: "http://collector:4318"}, map[string]string{"OTEL_TRACES_SAMPLER": "sometimes"}, "OTEL_TRACES_SAMPLER"},
		{Config{Endpoint: "http://collector:4318"}, map[string]string{"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, "OTEL_TRACES_SAMPLER_ARG"},
		{Config{Endpoint: "http://collector:4318"}, map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{Config{Endpoint: "http://collector:4318"}, map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER"},
		{Config{}, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"}, "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{Config{Endpoint: "http://collector:4318"}, map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25"}, ""},
		// With tracing off, the OTEL_* variables are not gantry's concern.
		{Config{}, map[string]string{"OTEL_TRACES_SAMPLER": "sometimes"}, ""},
	} {
		withEnv(t, tc.vars)
		errs := tc.cfg.Validate()
		switch {
		case tc.want == "" && len(errs) > 0:
			t.Errorf("%+v %v: unexpected %q", tc.cfg, tc.vars, errs)
		case tc.want != "" && (len(errs) != 1 || !strings.HasPrefix(errs[0], tc.want)):
			t.Errorf("%+v %v: got %q, want one error naming %s", tc.cfg, tc.vars, errs, tc.want)
		}
	}
}

func TestOffRecordsNothing(t *testing.T) {
	withEnv(t, nil)
	p, err := New(context.Background(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, span := p.Tracer("t").Start(context.Background(), "s")
	defer span.End()
	if span.IsRecording() || span.SpanContext().IsValid() {
		t.Errorf("tracing off made a span: recording %v, context %v", span.IsRecording(), span.SpanContext())
	}
	if tp := Traceparent(ctx); tp != "" {
		t.Errorf("Traceparent with tracing off = %q", tp)
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
}

// A job's row keeps the traceparent of the span that queued it; a runner
// continues from it, and the job shows the trace id only when it was
// sampled.
func TestTraceparentRoundTrip(t *testing.T) {
	for _, sampled := range []bool{true, false} {
		sampler := sdktrace.AlwaysSample()
		if !sampled {
			sampler = sdktrace.NeverSample()
		}
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler), sdktrace.WithSpanProcessor(rec))
		ctx, span := tp.Tracer("t").Start(context.Background(), "job.enqueue")
		stored := Traceparent(ctx)
		span.End()
		if !strings.HasPrefix(stored, "00-"+span.SpanContext().TraceID().String()+"-"+span.SpanContext().SpanID().String()) {
			t.Fatalf("Traceparent = %q, span %v", stored, span.SpanContext())
		}

		_, child := tp.Tracer("t").Start(FromTraceparent(context.Background(), stored), "job.process")
		child.End()
		if child.SpanContext().TraceID() != span.SpanContext().TraceID() {
			t.Errorf("sampled=%v: the runner's span is in trace %v, not the job's %v", sampled, child.SpanContext().TraceID(), span.SpanContext().TraceID())
		}
		if child.SpanContext().IsSampled() != sampled {
			t.Errorf("sampled=%v: the runner's span sampled %v: the decision must follow the job's", sampled, child.SpanContext().IsSampled())
		}
		want := ""
		if sampled {
			want = span.SpanContext().TraceID().String()
			if got := rec.Ended(); len(got) != 2 || got[1].Parent().SpanID() != span.SpanContext().SpanID() {
				t.Errorf("the runner's span's parent is not the queueing span: %v", got)
			}
		}
		if got := SampledTraceID(stored); got != want {
			t.Errorf("SampledTraceID(%q) = %q, want %q", stored, got, want)
		}
		if got := TraceID(trace.ContextWithSpan(context.Background(), child)); got != want {
			t.Errorf("TraceID = %q, want %q", got, want)
		}
	}
	for _, bad := range []string{"", "00-zz-yy-01", "not a traceparent"} {
		if got := SampledTraceID(bad); got != "" {
			t.Errorf("SampledTraceID(%q) = %q", bad, got)
		}
		if ctx := FromTraceparent(context.Background(), bad); trace.SpanContextFromContext(ctx).IsValid() {
			t.Errorf("FromTraceparent(%q) made a parent", bad)
		}
	}
}

func FuzzSampledTraceID(f *testing.F) {
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")
	f.Add("ff-00000000000000000000000000000000-0000000000000000-01")
	f.Fuzz(func(t *testing.T, tp string) {
		id := SampledTraceID(tp)
		if id != "" && (len(id) != 32 || !strings.Contains(tp, id)) {
			t.Errorf("SampledTraceID(%q) = %q", tp, id)
		}
	})
}
