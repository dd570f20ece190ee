package ingress_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/gantryhq/gantry/ingress"
	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/queue"
	"github.com/gantryhq/gantry/store/storetest"
	"github.com/gantryhq/gantry/tracing"
)

// TestReconcilerKeepsTheJobsTrace: the new message the reconciler publishes
// for a stranded job is published under job.republish, in the job's trace
// (the span that queued it, from its row), and carries that trace to the
// runner that takes it.
func TestReconcilerKeepsTheJobsTrace(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	h := newHarness(t, func(h *harness, cfg *ingress.Config) {
		h.maint.Interval = 100 * time.Millisecond
		h.maint.Tracer = tp
		cfg.Tracer = tp
	})
	ctx := context.Background()
	stream, err := h.js.Stream(ctx, queue.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	r := h.do(t, h.keyA, "POST", "/v1/jobs", `{"language":"python","code":"print(1)"}`)
	job := r.job(t)
	if r.status != 202 || len(job.TraceID) != 32 {
		t.Fatalf("submit: %d %s", r.status, r.body)
	}
	m, err := stream.GetLastMsgForSubject(ctx, queue.TenantSubject(h.tenantA))
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Header.Get("traceparent"); !strings.Contains(got, job.TraceID) {
		t.Errorf("the run message's traceparent %q is not in the job's trace %s", got, job.TraceID)
	}
	if err := stream.DeleteMsg(ctx, m.Sequence); err != nil {
		t.Fatal(err)
	}
	if err := storetest.Exec(h.st, `UPDATE jobs SET created_at = now() - interval '5 minutes' WHERE id = $1`, job.ID); err != nil {
		t.Fatal(err)
	}
	var again *jetstream.RawStreamMsg
	eventually.True(t, 20*time.Second, "a new message for the stranded job", func() bool {
		again, err = stream.GetLastMsgForSubject(ctx, queue.TenantSubject(h.tenantA))
		return err == nil && again.Sequence != m.Sequence
	})
	var enqueue, republish sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		switch s.Name() {
		case "job.enqueue":
			enqueue = s
		case "job.republish":
			republish = s
		}
	}
	if enqueue == nil || republish == nil || republish.Parent().SpanID() != enqueue.SpanContext().SpanID() ||
		republish.SpanContext().TraceID().String() != job.TraceID {
		t.Fatalf("job.republish is not under the job's job.enqueue: %v %v", enqueue, republish)
	}
	want := "00-" + job.TraceID + "-" + republish.SpanContext().SpanID().String() + "-01"
	if got := again.Header.Get("traceparent"); got != want {
		t.Errorf("the new message's traceparent = %q, want %q", got, want)
	}
	if tracing.SampledTraceID(again.Header.Get("traceparent")) != job.TraceID {
		t.Errorf("the new message is not in the job's trace")
	}
}
