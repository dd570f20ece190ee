package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gantryhq/gantry/jobs"
)

// A job is alive while someone will end it: a runner that writes its
// heartbeat, or a run message in the stream that JetStream will deliver.
// A job with neither (its runner died and its message is gone) is
// stranded: the reconciler finds it and publishes a new message or ends it.

// Heartbeat records that the runner running this attempt of the job is
// alive, and reports whether a cancel was asked for. ErrNotFound means the
// attempt no longer runs the job: it finished, was cancelled for good, or
// another attempt took it over.
func (s *Store) Heartbeat(ctx context.Context, id string, attempt int) (cancelRequested bool, err error) {
	err = s.pool.QueryRow(ctx, `UPDATE jobs SET heartbeat_at = now()
		WHERE id = $1 AND attempt = $2 AND status = 'running' RETURNING cancel_requested`, id, attempt).Scan(&cancelRequested)
	return cancelRequested, notFound(err)
}

// Unfinished is a queued or running job the reconciler looks at: nothing
// in Postgres says it is alive.
type Unfinished struct {
	ID       string
	TenantID string
	Status   jobs.Status
	Attempt  int
	// MsgSeq is the stream sequence of the job's run message.
	MsgSeq uint64
	// TraceParent is the traceparent of the span that queued the job ("":
	// none): a new message for it continues its trace.
	TraceParent string
}

// Repair is what the reconciler decided for an Unfinished job.
type Repair struct {
	// Republished is the sequence of the new run message published for
	// the job (0: none).
	Republished uint64
	// Fail, if set, ends the job as error with this message.
	Fail string
}

// ReconcileOptions bound what ReconcileJobs looks at.
type ReconcileOptions struct {
	// Stale: a running job whose heartbeat is older has no live runner.
	Stale time.Duration
	// Recheck: a job is looked at again at most this often (and not
	// before it is this old).
	Recheck time.Duration
	// Limit caps the jobs looked at per call.
	Limit int
}

// ReconcileJobs hands repair the unfinished jobs (not a session's: the
// session sweeper sees to those) that show no sign of life in Postgres —
// queued, or running without a recent heartbeat — checked longest ago
// first, and applies what it decides. Each job's row is locked while
// repair runs; rows another caller holds are skipped, so every ingress
// replica may reconcile at once. It returns how many jobs were repaired.
// An error from repair stops the pass; what was decided before it stands.
func (s *Store) ReconcileJobs(ctx context.Context, opt ReconcileOptions, repair func(context.Context, Unfinished) (Repair, error)) (int, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	rows, err := tx.Query(ctx, `
		SELECT id, tenant_id, status, attempt, msg_seq, coalesce(trace_parent, '') FROM jobs
		WHERE status IN ('queued', 'running') AND session_id IS NULL AND msg_seq IS NOT NULL
		  AND coalesce(checked_at, created_at) < now() - make_interval(secs => $2)
		  AND (status = 'queued' OR coalesce(heartbeat_at, started_at, created_at) < now() - make_interval(secs => $1))
		ORDER BY coalesce(checked_at, created_at) LIMIT $3
		FOR UPDATE SKIP LOCKED`, opt.Stale.Seconds(), opt.Recheck.Seconds(), opt.Limit)
	if err != nil {
		return 0, err
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Unfinished, error) {
		var u Unfinished
		var status string
		var seq int64
		err := row.Scan(&u.ID, &u.TenantID, &status, &u.Attempt, &seq, &u.TraceParent)
		u.Status, u.MsgSeq = jobs.Status(status), uint64(seq)
		return u, err
	})
	if err != nil {
		return 0, err
	}
	repaired := 0
	var repairErr error
	for _, u := range list {
		rp, err := repair(ctx, u)
		if err != nil {
			repairErr = fmt.Errorf("reconcile job %s: %w", u.ID, err)
			break
		}
		switch {
		case rp.Fail != "":
			_, err = tx.Exec(ctx, `UPDATE jobs SET status = 'error', finished_at = now(), checked_at = now(),
				error_code = 'infrastructure', error_message = $2 WHERE id = $1`, u.ID, rp.Fail)
			repaired++
		case rp.Republished != 0:
			_, err = tx.Exec(ctx, `UPDATE jobs SET msg_seq = $2, checked_at = now() WHERE id = $1`, u.ID, int64(rp.Republished))
			repaired++
		default:
			_, err = tx.Exec(ctx, `UPDATE jobs SET checked_at = now() WHERE id = $1`, u.ID)
		}
		if err != nil {
			return 0, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, err
	}
	return repaired, repairErr
}
