package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/tracing"
)

// reconcileRecheck is how often the reconciler looks at one unfinished
// job, and how old a job must be before it looks at all.
const reconcileRecheck = time.Minute

// reconcile finds jobs that nobody will ever end — queued or running, no
// runner's heartbeat for the ack wait, and no run message left in the
// stream (lost with a NATS node, acked by a runner that then lost the job,
// or spent by an older gantry's delivery limit) — and publishes a new
// message for each, or ends it as error when its runners were lost as
// often as it may be tried. A job whose message is still in the stream is
// left alone: JetStream will deliver it. Safe on every replica at once.
func (m *Maintenance) reconcile(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	stream, err := m.js.Stream(ctx, queue.StreamName)
	if err != nil {
		m.log.Warn("reconcile jobs: job stream unavailable", "err", err)
		return
	}
	n, err := m.store.ReconcileJobs(ctx, store.ReconcileOptions{Stale: m.cfg.Queue.AckWait, Recheck: reconcileRecheck, Limit: 200},
		func(ctx context.Context, u store.Unfinished) (store.Repair, error) {
			return m.repairJob(ctx, stream, u)
		})
	if err != nil {
		m.log.Warn("reconcile jobs", "err", err)
	}
	if n > 0 {
		m.log.Warn("reconciled stranded jobs", "count", n)
	}
}

// repairJob decides what becomes of one job that shows no sign of life in
// Postgres.
func (m *Maintenance) repairJob(ctx context.Context, stream jetstream.Stream, u store.Unfinished) (store.Repair, error) {
	_, err := stream.GetMsg(ctx, u.MsgSeq)
	switch {
	case err == nil:
		return store.Repair{}, nil // JetStream will deliver it
	case !errors.Is(err, jetstream.ErrMsgNotFound):
		return store.Repair{}, fmt.Errorf("look up message %d: %w", u.MsgSeq, err)
	}
	// The new message continues the job's trace: its runner's spans are
	// children of job.republish, a child of the span that queued the job.
	ctx, span := m.queue.tracer.Start(tracing.FromTraceparent(ctx, u.TraceParent), "job.republish",
		trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(append(tracing.Publish(queue.TenantSubject(u.TenantID)),
			tracing.JobID.String(u.ID), tracing.TenantID.String(u.TenantID), tracing.Attempt.Int(u.Attempt))...))
	defer span.End()
	log := m.log.With("job_id", u.ID, "tenant_id", u.TenantID, "status", u.Status, "attempt", u.Attempt)
	log = log.With(tracing.LogAttrs(ctx)...)
	if u.Status == jobs.StatusRunning && u.Attempt >= m.cfg.Queue.MaxAttempts {
		log.Warn("stranded job given up: its runner is gone and it has no attempt left")
		span.SetAttributes(tracing.Outcome.String("failed"))
		m.metrics.reconciled.WithLabelValues("failed").Inc()
		return store.Repair{Fail: store.GaveUpMessage(u.Attempt)}, nil
	}
	// The id names the message it replaces, so that a repair whose commit
	// failed and is done again publishes no second message.
	seq, err := m.queue.publishFor(ctx, queue.RunMessage{JobID: u.ID, TenantID: u.TenantID}, fmt.Sprintf("%s/%d", u.ID, u.MsgSeq))
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		return store.Repair{}, err
	}
	span.SetAttributes(tracing.Outcome.String("republished"))
	log.Warn("stranded job: its run message was gone; published a new one", "old_seq", u.MsgSeq, "seq", seq)
	m.metrics.reconciled.WithLabelValues("republished").Inc()
	return store.Repair{Republished: seq}, nil
}
