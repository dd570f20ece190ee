package runner

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/codes"

	"github.com/gantryhq/gantry/internal/clock"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/tracing"
)

// claimFor claims the job a message names and deals with every outcome
// but a claim: a job not there yet, gone, finished, taken or given up.
// ok says the caller has the claim and runs the attempt.
func (r *Runner) claimFor(ctx context.Context, log *slog.Logger, msg jetstream.Msg, meta *jetstream.MsgMetadata, rm queue.RunMessage) (claim store.Claim, ok bool) {
	claimCtx, span := r.tracer().Start(ctx, "job.claim")
	claim, outcome, err := r.claim(claimCtx, log, rm.JobID, meta.Sequence.Stream)
	span.SetAttributes(tracing.Outcome.String(claimOutcome(outcome, err)))
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
	switch {
	case errors.Is(err, store.ErrNotFound):
		// The ingress publishes before it commits: give a young message
		// time for its row to appear (an older ingress does not hold the
		// job's lock), drop an old one (the commit failed).
		if time.Since(meta.Timestamp) > 30*time.Second {
			log.Warn("dropping message for a job that does not exist")
			_ = msg.TermWithReason("job not found")
		} else {
			r.handBack(ctx, msg, rm.TenantID, 500*time.Millisecond, "uncommitted")
		}
		return claim, false
	case err != nil:
		// Handing the message back spends no attempt (those are counted
		// by claims): it comes back when Postgres may answer again.
		log.Error("claim job; handing it back to the queue", "err", err)
		r.handBack(ctx, msg, rm.TenantID, 2*time.Second, "database")
		return claim, false
	}
	switch outcome {
	case store.ClaimDone:
		_ = msg.Ack() // finished or cancelled while queued
		return claim, false
	case store.ClaimStale:
		log.Info("dropping a message that is not the job's current one")
		_ = msg.Ack()
		return claim, false
	case store.ClaimBusy:
		// Redelivered while its runner still beats: look again later.
		r.handBack(ctx, msg, rm.TenantID, max(r.cfg.Queue.AckWait/2, time.Second), "busy")
		return claim, false
	case store.ClaimGaveUp:
		log.Warn("job abandoned: its runner was lost on every attempt", "max_attempts", r.cfg.Queue.MaxAttempts)
		r.publishStatus(rm.JobID, jobs.StatusError)
		_ = msg.Ack()
		return claim, false
	}
	return claim, true
}

// claimOutcome names what a claim came to, for its span.
func claimOutcome(out store.ClaimOutcome, err error) string {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return "not_found"
	case err != nil:
		return "failed"
	}
	switch out {
	case store.ClaimDone:
		return "done"
	case store.ClaimStale:
		return "stale"
	case store.ClaimBusy:
		return "busy"
	case store.ClaimGaveUp:
		return "gave_up"
	}
	return "claimed"
}

// maxHold is how long a runner holds a message it cannot claim because
// Postgres is unreachable before handing it back, in case only this
// runner has lost Postgres.
const maxHold = time.Minute

// claim claims the job a message names, and holds the message while
// Postgres is unreachable, so that the job starts as soon as Postgres is
// back and the outage spends none of its attempts. A message usually
// comes a fraction of a millisecond before its row's commit (the ingress
// publishes first): ClaimJob waits for that commit on the job's lock. It
// still looks again a few times, soon at first, for a row that is not
// there (an ingress of a release before that lock, in a rolling deploy).
func (r *Runner) claim(ctx context.Context, log *slog.Logger, jobID string, seq uint64) (store.Claim, store.ClaimOutcome, error) {
	req := store.ClaimRequest{JobID: jobID, MsgSeq: seq, RunnerID: r.cfg.ID, MaxAttempts: r.cfg.Queue.MaxAttempts,
		Alive: r.cfg.Queue.AckWait / 2}
	wait, retry := time.Millisecond, newBackoff()
	start := time.Now()
	held := false
	for {
		c, out, err := r.store.ClaimJob(ctx, req)
		var pause time.Duration
		switch {
		case errors.Is(err, store.ErrNotFound) && wait <= time.Second:
			pause, wait = wait, wait*2
		case err != nil && store.Unavailable(err) && time.Since(start) < maxHold && !r.isStopping():
			if !held {
				log.Warn("database unavailable; holding the job's message until it is back", "err", err)
				held = true
			}
			pause = retry.next()
		default:
			if held && err == nil {
				log.Info("database back: job claimed", "held", time.Since(start).Round(time.Millisecond))
			}
			return c, out, err
		}
		if !clock.Sleep(ctx, pause) {
			return c, out, err
		}
	}
}

// hold keeps a message from being redelivered while this runner has it,
// with InProgress every ack_wait/3, until the returned func is called; it
// returns once the holding has stopped. It needs nothing of Postgres: a
// job waiting out an outage stays here.
func (r *Runner) hold(msg jetstream.Msg) (stop func()) {
	return r.every(max(r.cfg.Queue.AckWait/3, 100*time.Millisecond), func() time.Duration {
		if err := msg.InProgress(); err != nil {
			r.log.Warn("extend job ack deadline", "err", err)
		}
		return 0
	})
}

// heartbeat tells the store, every ack_wait/3, that this runner still runs
// the attempt, and picks up a cancel it might have missed, until the
// returned func is called. A heartbeat that failed (Postgres away) is
// retried every second, so the job shows alive again as soon as Postgres
// is back. If the attempt no longer has the job (cancelled because its
// runner looked gone, or taken over), the run is stopped.
func (r *Runner) heartbeat(ex *execution) (stop func()) {
	every := max(r.cfg.Queue.AckWait/3, 100*time.Millisecond)
	return r.every(every, func() time.Duration {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		cancelReq, err := r.store.Heartbeat(ctx, ex.jobID, ex.attempt)
		cancel()
		switch {
		case errors.Is(err, store.ErrNotFound) || err == nil && cancelReq:
			ex.cancel(errCancelled)
		case err != nil:
			return min(time.Second, every)
		}
		return 0
	})
}

// every calls beat after d, and again after what it returns (0: d), in a
// goroutine of its own, until the returned func is called; that func
// returns once the goroutine has.
func (r *Runner) every(d time.Duration, beat func() (next time.Duration)) (stop func()) {
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTimer(d)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			next := beat()
			if next == 0 {
				next = d
			}
			t.Reset(next)
		}
	}()
	return func() { close(done); <-exited }
}
