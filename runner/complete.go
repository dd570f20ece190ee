package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gantryhq/gantry/blob"
	"github.com/gantryhq/gantry/internal/clock"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
	"github.com/gantryhq/gantry/store"
)

// complete ends a plain job's attempt: it records the result and acks the
// message, or, when the attempt did not run the job (err) or its result
// could not be recorded, gives the job back to the queue. cause is why
// the attempt's context ended (errShutdown: the runner gave up on it).
func (r *Runner) complete(ctx context.Context, log *slog.Logger, msg jetstream.Msg, rm queue.RunMessage, claim store.Claim, cause error, res jobs.Result, err error) {
	if errors.Is(err, errS3Held) {
		// Held for S3 until the runner stopped: the attempt is not spent.
		log.Warn("job given back to the queue unspent: the object store stayed unavailable", "err", err)
		if err := r.store.ReleaseJob(context.WithoutCancel(ctx), rm.JobID, claim.Attempt); err != nil {
			log.Error("give back job", "err", err)
		}
		r.handBack(ctx, msg, rm.TenantID, time.Second, "object_store")
		return
	}
	if err != nil {
		if errors.Is(cause, errShutdown) || claim.Attempt < r.cfg.Queue.MaxAttempts {
			log.Warn("job attempt abandoned; returning it to the queue", "err", err)
			if err := r.store.RequeueJob(context.WithoutCancel(ctx), rm.JobID, claim.Attempt); err != nil {
				log.Error("requeue job", "err", err)
			}
			r.handBack(ctx, msg, rm.TenantID, time.Second, retryCause(cause))
			return
		}
		res = jobs.Result{Status: jobs.StatusError, Error: &jobs.ErrorInfo{
			Code:    jobs.ErrCodeInfrastructure,
			Message: fmt.Sprintf("gantry could not run the job (attempt %d of %d): %v", claim.Attempt, r.cfg.Queue.MaxAttempts, err),
		}}
	}

	recordStart := time.Now()
	recordCtx, endRecord := r.stage(ctx, "job.record")
	applied, err := r.record(recordCtx, log, func(ctx context.Context) (bool, error) {
		return r.store.FinishJob(ctx, rm.JobID, claim.Attempt, res)
	})
	endRecord(err)
	r.metrics.stage("record", recordStart)
	if err != nil && ctx.Err() == nil {
		// Not an outage (those are waited out): say so in the job rather
		// than run the program again.
		log.Error("record result", "err", err)
		res = jobs.Result{Status: jobs.StatusError, Error: &jobs.ErrorInfo{Code: jobs.ErrCodeInfrastructure,
			Message: fmt.Sprintf("the program ran, but gantry could not record its result: %v", err)}}
		applied, err = r.store.FailJob(context.WithoutCancel(ctx), rm.JobID, claim.Attempt, res.Error.Message)
	}
	if err != nil {
		// Stopped past the drain timeout with the result unrecorded: the
		// job runs again elsewhere. If it was S3 that kept it (Postgres
		// answers), the attempt is not spent.
		log.Error("result not recorded; the job will run again", "err", err)
		if blob.Unavailable(err) {
			if err := r.store.ReleaseJob(context.WithoutCancel(ctx), rm.JobID, claim.Attempt); err != nil {
				log.Error("give back job", "err", err)
			}
		}
		r.handBack(ctx, msg, rm.TenantID, time.Second, "unrecorded")
		return
	}
	if !applied {
		log.Warn("result discarded: the job moved on without this attempt")
	}
	ackCtx, cancelAck := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancelAck()
	if err := msg.DoubleAck(ackCtx); err != nil {
		log.Warn("ack job", "err", err)
	}
	if applied {
		finished(ctx, res)
		r.publishStatus(rm.JobID, res.Status)
		if r.metrics != nil {
			r.metrics.observe(claim.Spec.Language, claim.TenantID, res)
		}
		log.Info("job finished", "status", res.Status, "duration_ms", res.Duration.Milliseconds())
	}
}

// retryCause names why an attempt that did not finish went back to the
// queue, from why its context ended: the runner stopping, or a failure
// before its program started.
func retryCause(cause error) string {
	if errors.Is(cause, errShutdown) {
		return "shutdown"
	}
	return "not_started"
}

// record stores what finish writes, retrying until it is stored: a program
// that ran is never run again because Postgres was away when it ended.
// While Postgres is unreachable the result waits here, in memory, with its
// message held. Other errors are retried twice. Only ctx ending (the
// runner stopped past its drain timeout) gives up on an outage.
func (r *Runner) record(ctx context.Context, log *slog.Logger, finish func(ctx context.Context) (bool, error)) (applied bool, err error) {
	retry := newBackoff()
	failures, waiting := 0, false
	for {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		applied, err = finish(cctx)
		cancel()
		if err == nil {
			if waiting {
				log.Info("result recorded after the wait")
			}
			return applied, nil
		}
		switch {
		case store.Unavailable(err):
			if !waiting {
				log.Warn("database unavailable; keeping the result until it is back", "err", err)
				waiting = true
			}
		case blob.Unavailable(err):
			// A long output goes to S3 as it is recorded (history).
			if !waiting {
				log.Warn("object store unavailable; keeping the result until it is back", "err", err)
				waiting = true
				r.metrics.s3Hold()
			}
		default:
			if failures++; failures == 3 {
				return false, err
			}
		}
		if !clock.Sleep(ctx, retry.next()) {
			return false, err
		}
	}
}

// backoff paces retries against an unreachable Postgres: 250 ms, doubling
// to a second, so that work resumes within a second of its return.
type backoff struct{ d time.Duration }

func newBackoff() *backoff { return &backoff{d: 250 * time.Millisecond} }

func (b *backoff) next() time.Duration {
	d := b.d
	b.d = min(2*b.d, time.Second)
	return d
}

// handBack returns a message to its queue, to be delivered again after d,
// and announces it then, so that an idle runner takes it at once (unless
// this runner has stopped by then). cause says why, for
// gantry_job_handbacks_total and the span in ctx.
func (r *Runner) handBack(ctx context.Context, msg jetstream.Msg, tenantID string, d time.Duration, cause string) {
	r.metrics.handBack(cause)
	handedBack(ctx, cause)
	_ = msg.NakWithDelay(d)
	if tenantID == "" || r.nc == nil {
		return
	}
	r.goBackground(func(quit <-chan struct{}) {
		t := time.NewTimer(d + 20*time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
			_ = r.nc.Publish(queue.ReadySubject, []byte(tenantID))
		case <-quit: // stopped: nobody here takes it
		}
	})
}

func (r *Runner) publishStatus(jobID string, s jobs.Status) {
	data, _ := json.Marshal(queue.StatusEvent{JobID: jobID, Status: s})
	if err := r.nc.Publish(queue.StatusSubject(jobID), data); err != nil {
		r.log.Warn("publish status", "job_id", jobID, "err", err)
	}
}
