package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gantryhq/gantry/internal/clock"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/tracing"
)

// execution is one job attempt in progress on this runner.
type execution struct {
	// private: the tenant has privacy tokens on, so output is not shared
	// before it is tokenized.
	private bool
	jobID   string
	attempt int
	stdout  *output
	stderr  *output
	cancel  context.CancelCauseFunc
}

// runJob runs a plain job's message: claim the job, run the attempt,
// record the result and ack the message (or hand it back).
func (r *Runner) runJob(ctx context.Context, msg jetstream.Msg, meta *jetstream.MsgMetadata, rm queue.RunMessage) {
	ctx, span := r.processMessage(ctx, msg, meta, rm)
	defer span.End()
	log := r.log.With("job_id", rm.JobID).With(tracing.LogAttrs(ctx)...)
	// The message is held from here until it is acked or handed back,
	// whatever Postgres does meanwhile.
	stopHolding := r.hold(msg)
	defer stopHolding()
	claim, ok := r.claimFor(ctx, log, msg, meta, rm)
	if !ok {
		return
	}
	claimed(ctx, claim)
	log = log.With("attempt", claim.Attempt, "tenant_id", claim.TenantID, "language", claim.Spec.Language)
	a, execCtx, end := r.begin(ctx, log, rm.JobID, claim, nil)
	defer end()
	if r.metrics != nil {
		r.metrics.queueLatency(meta.Timestamp)
	}
	stopBeating := r.heartbeat(a.ex)
	defer stopBeating()
	res, _, err := r.runAttempt(execCtx, log, a)
	r.complete(ctx, log, msg, rm, claim, context.Cause(execCtx), res, err)
}

// begin starts an attempt at a job, plain or a session's (work set): it is
// tracked (for cancel and backlog requests) and shown running. The
// attempt runs under the returned context, which a cancel request ends;
// end untracks it.
func (r *Runner) begin(ctx context.Context, log *slog.Logger, jobID string, claim store.Claim, work *sessionWork) (a *attempt, execCtx context.Context, end func()) {
	ex := &execution{jobID: jobID, attempt: claim.Attempt}
	execCtx, cancel := context.WithCancelCause(ctx)
	ex.cancel = cancel
	r.track(ex)
	if claim.CancelRequested {
		cancel(errCancelled)
	}
	if work != nil {
		log.Info("session job started")
	} else {
		log.Info("job started")
	}
	r.publishStatus(jobID, jobs.StatusRunning)
	a = &attempt{r: r, log: log, ex: ex, claim: claim, session: work, jobCtx: ctx}
	return a, execCtx, func() { r.untrack(ex); cancel(nil) }
}

// runAttempt runs the attempt and waits out Postgres outages. An attempt
// that failed before its program started because Postgres was unreachable
// (loading the tenant's skills, code-mode servers or privacy tokens) is
// run again, as the same attempt, once Postgres answers; a result whose
// privacy tokens could not be made is tokenized again. The program never
// runs twice for it.
func (r *Runner) runAttempt(ctx context.Context, log *slog.Logger, a *attempt) (jobs.Result, *lease, error) {
	blips := 0
	for {
		res, ctr, err := a.run(ctx)
		if err == nil || !store.Unavailable(err) {
			return res, ctr, err
		}
		if res.Status != "" {
			// The program ran (run returns a result only then): only the
			// privacy tokens of its result are missing.
			_, err = r.record(a.jobCtx, log, func(ctx context.Context) (bool, error) {
				return true, r.tokenizeResult(ctx, a.claim.TenantID, &res)
			})
			if err != nil && a.jobCtx.Err() == nil {
				// Never store output that was not tokenized.
				return jobs.Result{Status: jobs.StatusError, Duration: res.Duration, ExitCode: res.ExitCode, Error: &jobs.ErrorInfo{
					Code: jobs.ErrCodeInfrastructure, Message: fmt.Sprintf("the program ran, but gantry could not tokenize its output: %v", err),
				}}, ctr, nil
			}
			return res, ctr, err
		}
		waited, ok := r.waitForStore(ctx, log)
		if !ok {
			return res, ctr, err
		}
		if !waited {
			// Postgres answers now: a blip, or not Postgres at all (a
			// network error from Docker looks the same). Once more only.
			if blips++; blips > 1 {
				return res, ctr, err
			}
		}
		log.Info("database back: running the attempt again; its program had not started")
	}
}

// waitForStore waits until Postgres answers. waited says whether it had to;
// ok is false when ctx ended first.
func (r *Runner) waitForStore(ctx context.Context, log *slog.Logger) (waited, ok bool) {
	retry := newBackoff()
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := r.store.Ping(pctx)
		cancel()
		if err == nil {
			return waited, true
		}
		if !waited {
			log.Warn("database unavailable; the job waits for it", "err", err)
			waited = true
		}
		if !clock.Sleep(ctx, retry.next()) {
			return waited, false
		}
	}
}

func (r *Runner) track(ex *execution) {
	r.mu.Lock()
	r.running[ex.jobID] = ex
	r.mu.Unlock()
	if r.metrics != nil {
		r.metrics.busy.Inc()
	}
}

func (r *Runner) untrack(ex *execution) {
	r.mu.Lock()
	if r.running[ex.jobID] == ex {
		delete(r.running, ex.jobID)
	}
	r.mu.Unlock()
	if r.metrics != nil {
		r.metrics.busy.Dec()
	}
}

func (r *Runner) lookup(jobID string) *execution {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running[jobID]
}

func (r *Runner) onCancel(m *nats.Msg) {
	if ex := r.lookup(queue.JobIDFromSubject(m.Subject)); ex != nil {
		ex.cancel(errCancelled)
	}
}

// onBacklog answers with the output so far of a job running here; runners
// not running the job stay silent.
func (r *Runner) onBacklog(m *nats.Msg) {
	if m.Reply == "" {
		return
	}
	r.mu.Lock()
	ex := r.running[queue.JobIDFromSubject(m.Subject)]
	var stdout, stderr *output
	if ex != nil && !ex.private {
		stdout, stderr = ex.stdout, ex.stderr
	}
	r.mu.Unlock()
	if ex == nil {
		return
	}
	var b queue.Backlog
	if stdout != nil {
		b.Stdout, _ = stdout.snapshot()
		b.Stderr, _ = stderr.snapshot()
	}
	data, _ := json.Marshal(b)
	_ = m.Respond(data)
}
