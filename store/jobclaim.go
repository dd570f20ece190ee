package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gantryhq/gantry/jobs"
)

// Claim is a job a runner has taken.
type Claim struct {
	TenantID string
	Spec     jobs.Spec
	// Attempt numbers this run of the job (1 for the first). Attempts are
	// counted in the row, by the claims that took the job, not by
	// JetStream's deliveries: a message handed back while Postgres was
	// unreachable spends nothing.
	Attempt         int
	CancelRequested bool
	// Private: the tenant has privacy tokens on (read with the claim, so
	// the runner needs no extra query per job).
	Private bool
	// KeyEpoch counts the revocations of the tenant's keys, read with the
	// claim: a runner retires containers bound to the tenant under an
	// older epoch.
	KeyEpoch int64
	// EgressAllow is the tenant's egress allow-list as it is when the job
	// is claimed (empty: no network).
	EgressAllow []string
	// SessionNetwork is the network of the job's session as it is when the
	// job is claimed (nil: none, or no session).
	SessionNetwork *jobs.Network
	// TraceParent is the traceparent of the span that queued the job (""
	// with tracing off, or for a job queued before it was on).
	TraceParent string
}

// tenantClaim selects what a claim carries of a jobs row's tenant (its
// privacy switch, key epoch and egress allow-list) and of its session (its
// network).
const tenantClaim = `(SELECT pii_tokens FROM tenants t WHERE t.id = jobs.tenant_id),
	(SELECT key_epoch FROM tenants t WHERE t.id = jobs.tenant_id),
	(SELECT egress_allow FROM tenants t WHERE t.id = jobs.tenant_id),
	(SELECT network FROM sessions s WHERE s.id = jobs.session_id)`

// ClaimRequest is a runner asking for the job a message names.
type ClaimRequest struct {
	JobID string
	// MsgSeq is the stream sequence of the message being handled (0: not
	// known, not checked).
	MsgSeq   uint64
	RunnerID string
	// MaxAttempts bounds the runs of a job whose runners keep getting
	// lost.
	MaxAttempts int
	// Alive: a running job whose runner's heartbeat is younger than this
	// still has that runner.
	Alive time.Duration
}

// ClaimOutcome says what ClaimJob made of a message.
type ClaimOutcome int

// The outcomes of ClaimJob.
const (
	// Claimed: the job is the runner's to run, as Claim.Attempt.
	Claimed ClaimOutcome = iota
	// ClaimDone: the job is finished or cancelled; the message is spent.
	ClaimDone
	// ClaimStale: the message is not the job's current one (the
	// reconciler published another): drop it.
	ClaimStale
	// ClaimBusy: another runner runs the job and was alive moments ago:
	// leave the message for later.
	ClaimBusy
	// ClaimGaveUp: the job's runners were lost as many times as it may be
	// tried; ClaimJob has ended it as error.
	ClaimGaveUp
)

// jobLock names the advisory lock a job's enqueue holds until it commits.
func jobLock(id string) string { return "job:" + id }

// GaveUpMessage is the error of a job whose runners were lost attempts
// times.
func GaveUpMessage(attempts int) string {
	return fmt.Sprintf("gantry gave up after %d attempts: each time, the runner running the job stopped responding (crashed, was killed or lost its connection)", attempts)
}

// ClaimJob marks the job running as its next attempt and returns its spec.
// A running job is taken over only when its runner is gone (a redelivered
// message and no recent heartbeat), and given up as error once it has
// been tried MaxAttempts times. err is ErrNotFound when there is no such
// job.
func (s *Store) ClaimJob(ctx context.Context, req ClaimRequest) (c Claim, out ClaimOutcome, err error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return c, 0, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	var (
		status  string
		attempt int
		seq     *int64
		alive   bool
	)
	// The message may come before its row's commit (EnqueueJob publishes
	// first, holding the job's lock until it commits): wait for that lock,
	// then look, in one round trip (the look's snapshot is taken after
	// the wait).
	var b pgx.Batch
	b.Queue(`SELECT pg_advisory_xact_lock_shared(hashtextextended($1, 0))`, jobLock(req.JobID))
	b.Queue(`SELECT status, attempt, msg_seq, coalesce(heartbeat_at > now() - make_interval(secs => $2), false)
		FROM jobs WHERE id = $1 FOR UPDATE`, req.JobID, req.Alive.Seconds())
	br := tx.SendBatch(ctx, &b)
	if _, err = br.Exec(); err == nil {
		err = br.QueryRow().Scan(&status, &attempt, &seq, &alive)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return c, 0, notFound(err)
	}
	running := jobs.Status(status) == jobs.StatusRunning
	switch {
	case jobs.Status(status).Terminal():
		return c, ClaimDone, nil
	case seq != nil && req.MsgSeq != 0 && uint64(*seq) != req.MsgSeq:
		return c, ClaimStale, nil
	case running && alive:
		return c, ClaimBusy, nil
	case running && attempt >= req.MaxAttempts:
		if _, err := tx.Exec(ctx, `UPDATE jobs SET status = 'error', finished_at = now(),
			error_code = 'infrastructure', error_message = $2 WHERE id = $1`, req.JobID, GaveUpMessage(attempt)); err != nil {
			return c, 0, fmt.Errorf("give up job: %w", err)
		}
		return c, ClaimGaveUp, tx.Commit(ctx)
	}
	var spec, network []byte
	err = tx.QueryRow(ctx, `
		UPDATE jobs SET status = 'running', attempt = attempt + 1, runner_id = $2, started_at = now(), heartbeat_at = now()
		WHERE id = $1
		RETURNING attempt, tenant_id, spec, cancel_requested, coalesce(trace_parent, ''), `+tenantClaim, req.JobID, req.RunnerID).
		Scan(&c.Attempt, &c.TenantID, &spec, &c.CancelRequested, &c.TraceParent, &c.Private, &c.KeyEpoch, &c.EgressAllow, &network)
	if err != nil {
		return Claim{}, 0, fmt.Errorf("claim job: %w", err)
	}
	if c.SessionNetwork, err = decodeNetwork(network); err != nil {
		return Claim{}, 0, err
	}
	if err := json.Unmarshal(spec, &c.Spec); err != nil {
		return Claim{}, 0, fmt.Errorf("decode spec of job %s: %w", req.JobID, err)
	}
	return c, Claimed, tx.Commit(ctx)
}
