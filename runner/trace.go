package runner

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/gantryhq/gantry/agent/wire"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/tracing"
)

// A runner's spans for a job are in the job's trace. Each delivery of a
// plain job's message is a job.process span, the child of the span that
// published the message (its headers): job.claim, then for an attempt
// job.acquire, job.start (the sandbox being made), job.run (the program),
// job.collect (its artifacts) and job.record. Each job a session's owner
// runs is a job.process span under the span that queued that job (its
// row), linked to the message that woke the owner, with job.restore for
// the session's workspace and job.snapshot before job.record. So every
// attempt, retried or handed back, is a span of its own under one trace.

// tracerName names the runner's spans' instrumentation scope.
const tracerName = "github.com/gantryhq/gantry/runner"

// tracer is the runner's tracer: a no-op one for a Runner not made by New.
func (r *Runner) tracer() trace.Tracer {
	if r.traces == nil {
		return tracing.Tracer(nil, tracerName)
	}
	return r.traces
}

// processMessage starts the span of one delivery of a plain job's message.
func (r *Runner) processMessage(ctx context.Context, msg jetstream.Msg, meta *jetstream.MsgMetadata, rm queue.RunMessage) (context.Context, trace.Span) {
	attrs := append(tracing.Process(msg.Subject(), meta.NumDelivered),
		tracing.JobID.String(rm.JobID), tracing.TenantID.String(rm.TenantID), tracing.RunnerID.String(r.cfg.ID))
	return r.tracer().Start(queue.TraceContext(ctx, msg.Headers()), "job.process",
		trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...))
}

// processSessionJob starts the span of a session job's attempt: a child of
// the span that queued the job, linked to the message that woke the
// session's owner (the remote span in ctx, when it is another).
func (r *Runner) processSessionJob(ctx context.Context, sessionID string, sj store.SessionJob) (context.Context, trace.Span) {
	woke := trace.SpanContextFromContext(ctx)
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
		tracing.JobID.String(sj.JobID), tracing.TenantID.String(sj.Claim.TenantID), tracing.SessionID.String(sessionID),
		tracing.RunnerID.String(r.cfg.ID), tracing.Attempt.Int(sj.Attempt), tracing.Language.String(sj.Claim.Spec.Language))}
	parent := tracing.SpanContextOf(sj.Claim.TraceParent)
	if woke.IsValid() && !woke.Equal(parent) {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: woke}))
	}
	if parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	} else {
		// Queued with tracing off: not in another job's trace.
		opts = append(opts, trace.WithNewRoot())
	}
	return r.tracer().Start(ctx, "job.process", opts...)
}

// claimed notes on the attempt's span what the claim gave it.
func claimed(ctx context.Context, c store.Claim) {
	trace.SpanFromContext(ctx).SetAttributes(tracing.Attempt.Int(c.Attempt), tracing.Language.String(c.Spec.Language))
}

// finished notes the result recorded on the attempt's span.
func finished(ctx context.Context, res jobs.Result) {
	span := trace.SpanFromContext(ctx)
	span.SetAttributes(tracing.Status.String(string(res.Status)))
	if res.Status == jobs.StatusError {
		span.SetStatus(codes.Error, "gantry could not run the job")
	}
}

// stage starts the span of a step of an attempt; end ends it, failed when
// err is not nil.
func (r *Runner) stage(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, func(err error)) {
	ctx, span := r.tracer().Start(ctx, name, trace.WithAttributes(attrs...))
	return ctx, func(err error) { tracing.End(span, err) }
}

// traceRun records, once the agent's run is over, the sandbox's start
// (from began until the agent said the first sandbox existed), a compile
// step's build, and the program's run (from when the agent said its
// sandbox existed until ended), as spans made from those times.
func (a *attempt) traceRun(ctx context.Context, began, ended time.Time, rr wire.RunResult, err error) {
	tr := a.r.tracer()
	first := rr.StartedAt
	if c := rr.Compile; c != nil && !c.StartedAt.IsZero() {
		first = c.StartedAt
	}
	if first.IsZero() {
		_, span := tr.Start(ctx, "job.start", trace.WithTimestamp(began))
		span.SetStatus(codes.Error, "the program's sandbox was not made")
		span.End(trace.WithTimestamp(ended))
		return
	}
	_, start := tr.Start(ctx, "job.start", trace.WithTimestamp(began))
	if l := rr.Exit.Live; l != nil && l.Fresh {
		// A session's new sandbox: made ahead (a spare), or for this job.
		start.SetAttributes(attribute.Bool("gantry.live.spare", l.Spare))
	}
	start.End(trace.WithTimestamp(first))
	cause := context.Cause(ctx)
	if c := rr.Compile; c != nil {
		_, compile := tr.Start(ctx, "job.compile", trace.WithTimestamp(first))
		switch {
		case c.Exit.TimedOut || errors.Is(cause, errCompileTimeout):
			compile.SetAttributes(tracing.Outcome.String("timed_out"))
		case c.Exit.Started:
			compile.SetAttributes(attribute.Int("process.exit.code", c.Exit.Code))
		}
		compile.End(trace.WithTimestamp(c.EndedAt))
	}
	if rr.StartedAt.IsZero() {
		return // the compile step failed: nothing ran
	}
	_, run := tr.Start(ctx, "job.run", trace.WithTimestamp(rr.StartedAt))
	switch {
	case err == nil && rr.Exit.TimedOut:
		run.SetAttributes(tracing.Outcome.String("timed_out"))
	case err == nil && rr.Exit.Started:
		run.SetAttributes(attribute.Int("process.exit.code", rr.Exit.Code))
	case errors.Is(cause, errTimeout):
		run.SetAttributes(tracing.Outcome.String("timed_out"))
	case errors.Is(cause, errCancelled):
		run.SetAttributes(tracing.Outcome.String("cancelled"))
	case err != nil:
		run.SetStatus(codes.Error, "the sandbox broke while the program ran")
	}
	run.End(trace.WithTimestamp(ended))
}

// handedBack notes on the attempt's span that its message went back to
// the queue, and why.
func handedBack(ctx context.Context, cause string) {
	trace.SpanFromContext(ctx).AddEvent("handed back", trace.WithAttributes(tracing.Outcome.String(cause)))
}
