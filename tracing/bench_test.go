package tracing

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// BenchmarkJobSpans is what tracing costs one job: the ingress's spans,
// the traceparent its row keeps and its message carries, and a runner's
// spans under it. Off is what every gantry without a collector pays.
func BenchmarkJobSpans(b *testing.B) {
	for _, tc := range []struct {
		name string
		tp   trace.TracerProvider
	}{
		{"off", Off()},
		{"on", sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))},
		{"on, not sampled", sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()), sdktrace.WithBatcher(tracetest.NewNoopExporter()))},
	} {
		b.Run(tc.name, func(b *testing.B) {
			tr := Tracer(tc.tp, "bench")
			b.ReportAllocs()
			for b.Loop() {
				ctx, req := tr.Start(context.Background(), "POST /v1/jobs", trace.WithAttributes(TenantID.String("ten_x")))
				ctx, submit := tr.Start(ctx, "job.submit", trace.WithAttributes(JobID.String("job_x"), Language.String("python")))
				ctx, enqueue := tr.Start(ctx, "job.enqueue", trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(Publish("gantry.jobs.tenant.ten_x")...))
				stored := Traceparent(ctx)
				h := propagation.HeaderCarrier{}
				Inject(ctx, h)
				enqueue.End()
				submit.End()
				req.End()

				ctx, process := tr.Start(Extract(context.Background(), h), "job.process", trace.WithSpanKind(trace.SpanKindConsumer),
					trace.WithAttributes(Process("gantry.jobs.tenant.ten_x", 1)...))
				_ = LogAttrs(ctx)
				for _, stage := range []string{"job.claim", "job.acquire", "job.start", "job.run", "job.collect", "job.record"} {
					_, s := tr.Start(ctx, stage)
					s.End()
				}
				process.SetAttributes(Attempt.Int(1), Status.String("succeeded"))
				process.End()
				_ = SampledTraceID(stored)
			}
		})
	}
}
