package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/tracing"
)

// NewJob is a validated job about to be queued.
type NewJob struct {
	// ID is the job's id (jobs.NewID("job")), chosen by the caller when
	// something is bound to it before it is stored (its sealed env); ""
	// for a new one.
	ID             string
	TenantID       string
	Spec           jobs.Spec
	SessionID      *string
	IdempotencyKey string
	RequestHash    []byte
	Metadata       map[string]string
	// BatchID is the batch the job was submitted in ("" for none).
	BatchID string
	// WebhookURL is the request's webhook ("" for the tenant's default).
	WebhookURL string
	// MaxQueued caps the tenant's queued jobs (0: no cap): a submission
	// beyond it fails with ErrTooManyQueued.
	MaxQueued int
	// TraceParent is the W3C traceparent of the span that queues the job
	// ("" with tracing off): runners' spans for the job are its children.
	TraceParent string
}

// ErrTooManyQueued means the tenant has as many queued jobs as it may.
var ErrTooManyQueued = errors.New("too many queued jobs")

const jobColumns = `id, status, language, session_id, attempt, trace_parent, created_at, started_at, finished_at,
	exit_code, duration_ms, stdout, stderr, stdout_truncated, stderr_truncated, artifacts,
	error_code, error_message, metadata, tool_calls, stdout_key, stderr_key, batch_id, webhook_url,
	cpu_time_ms, peak_memory_kb, compile, compile_output,
	(SELECT to_jsonb(d) - 'job_id' - 'tenant_id' FROM webhook_deliveries d WHERE d.job_id = jobs.id),
	value, live_state, live_state_reason, displays, exception, egress`

// EnqueueJob records a new job and hands it to publish inside the same
// transaction: the row commits only after publish returned nil, with the
// stream sequence of the message publish returns, so a job is never left
// queued without a message. (If the commit itself fails after publishing,
// the runner finds no row and drops the message.)
//
// With an idempotency key already used by the tenant, it returns the
// existing job and created=false without publishing; if the earlier request
// differed, it returns ErrConflict.
func (s *Store) EnqueueJob(ctx context.Context, nj NewJob, publish func(ctx context.Context, jobID string) (seq uint64, err error)) (job jobs.Job, created bool, err error) {
	spec, err := jobs.MarshalSpec(nj.Spec)
	if err != nil {
		return jobs.Job{}, false, err
	}
	meta, err := json.Marshal(orEmpty(nj.Metadata))
	if err != nil {
		return jobs.Job{}, false, err
	}
	var key *string
	if nj.IdempotencyKey != "" {
		key = &nj.IdempotencyKey
	}

	if key != nil {
		// A retry must not count as a second job of its session.
		if j, created, err := s.jobByIdempotencyKey(ctx, nj.TenantID, *key, nj.RequestHash); err == nil || errors.Is(err, ErrConflict) {
			return j, created, err
		}
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return jobs.Job{}, false, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit

	if nj.MaxQueued > 0 {
		// The tenant's submissions take turns from here to commit, so that
		// the count stays true until this job is in it.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, "queued:"+nj.TenantID); err != nil {
			return jobs.Job{}, false, err
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE tenant_id = $1 AND status = 'queued'`, nj.TenantID).Scan(&n); err != nil {
			return jobs.Job{}, false, err
		}
		if n >= nj.MaxQueued {
			return jobs.Job{}, false, fmt.Errorf("the tenant has %d queued jobs, its limit: %w", n, ErrTooManyQueued)
		}
	}
	// A session's row is locked from here to commit: its jobs are numbered
	// in the order their submissions commit.
	var seq *int64
	if nj.SessionID != nil {
		var n int64
		err := tx.QueryRow(ctx, `
			UPDATE sessions SET seq = seq + 1, last_used_at = now(),
				expires_at = now() + make_interval(secs => ttl_seconds)
			WHERE id = $1 AND tenant_id = $2 AND status = 'active' AND expires_at > now()
			RETURNING seq`, *nj.SessionID, nj.TenantID).Scan(&n)
		if errors.Is(err, pgx.ErrNoRows) {
			return jobs.Job{}, false, ErrSessionNotFound
		}
		if err != nil {
			return jobs.Job{}, false, fmt.Errorf("queue in session: %w", err)
		}
		seq = &n
	}
	id := nj.ID
	if id == "" {
		id = jobs.NewID("job")
	}
	row := tx.QueryRow(ctx, `
		INSERT INTO jobs (id, tenant_id, status, language, session_id, session_seq, spec, metadata, idempotency_key, request_hash,
			batch_id, webhook_url, trace_parent)
		VALUES ($1, $2, 'queued', $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
		ON CONFLICT (tenant_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
		RETURNING `+jobColumns,
		id, nj.TenantID, nj.Spec.Language, nj.SessionID, seq, spec, meta, key, nj.RequestHash,
		nilIfEmpty(nj.BatchID), nilIfEmpty(nj.WebhookURL), nilIfEmpty(nj.TraceParent))
	r, err := scanJob(row)
	if errors.Is(err, pgx.ErrNoRows) && key != nil {
		_ = tx.Rollback(ctx)
		return s.jobByIdempotencyKey(ctx, nj.TenantID, *key, nj.RequestHash)
	}
	if err != nil {
		return jobs.Job{}, false, fmt.Errorf("insert job: %w", err)
	}
	job = r.job // new: all its output (none) is in the row
	seqNo, err := publish(ctx, job.ID)
	if err != nil {
		return jobs.Job{}, false, err
	}
	if _, err := tx.Exec(ctx, `UPDATE jobs SET msg_seq = $2 WHERE id = $1`, job.ID, int64(seqNo)); err != nil {
		return jobs.Job{}, false, fmt.Errorf("record message of job: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return jobs.Job{}, false, fmt.Errorf("commit job: %w", err)
	}
	return job, true, nil
}

func (s *Store) jobByIdempotencyKey(ctx context.Context, tenantID, key string, hash []byte) (jobs.Job, bool, error) {
	var stored []byte
	row := s.pool.QueryRow(ctx, `SELECT request_hash, `+jobColumns+` FROM jobs WHERE tenant_id = $1 AND idempotency_key = $2`, tenantID, key)
	r, err := scanJobWith(row, &stored)
	if err != nil {
		return jobs.Job{}, false, fmt.Errorf("find job by idempotency key: %w", notFound(err))
	}
	if !bytes.Equal(stored, hash) {
		return jobs.Job{}, false, fmt.Errorf("idempotency key %q was used for a different request (job %s): %w", key, r.job.ID, ErrConflict)
	}
	job, err := s.loadOne(ctx, r)
	return job, false, err
}

// GetJob returns the tenant's job, or ErrNotFound.
func (s *Store) GetJob(ctx context.Context, tenantID, id string) (jobs.Job, error) {
	r, err := scanJob(s.pool.QueryRow(ctx, `SELECT `+jobColumns+` FROM jobs WHERE id = $1 AND tenant_id = $2`, id, tenantID))
	if err != nil {
		return jobs.Job{}, notFound(err)
	}
	return s.loadOne(ctx, r)
}

// JobFilter narrows a job listing. Every field set must hold.
type JobFilter struct {
	// Statuses: any of these (none: every status).
	Statuses []jobs.Status
	// Languages: any of these (none: every language).
	Languages []string
	SessionID string
	BatchID   string
	// CreatedAfter and CreatedBefore bound created_at: at or after the
	// first, strictly before the second (zero: unbounded).
	CreatedAfter  time.Time
	CreatedBefore time.Time
	// Metadata: every pair must be in the job's metadata.
	Metadata map[string]string
	// Before lists jobs older than this job id (the cursor).
	Before string
	Limit  int
}

// ListJobs lists the tenant's jobs newest first. It returns one page and the
// cursor for the next one ("" at the end).
func (s *Store) ListJobs(ctx context.Context, tenantID string, f JobFilter) ([]jobs.Job, string, error) {
	where := []string{"tenant_id = $1"}
	args := []any{tenantID}
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	// One value is an equality, so that the planner can walk the
	// (tenant, column, id) index in order; several are an ANY.
	switch len(f.Statuses) {
	case 0:
	case 1:
		add("status = $%d", string(f.Statuses[0]))
	default:
		list := make([]string, len(f.Statuses))
		for i, st := range f.Statuses {
			list[i] = string(st)
		}
		add("status = ANY($%d)", list)
	}
	switch len(f.Languages) {
	case 0:
	case 1:
		add("language = $%d", f.Languages[0])
	default:
		add("language = ANY($%d)", f.Languages)
	}
	if f.SessionID != "" {
		add("session_id = $%d", f.SessionID)
	}
	if f.BatchID != "" {
		add("batch_id = $%d", f.BatchID)
	}
	if !f.CreatedAfter.IsZero() {
		add("created_at >= $%d", f.CreatedAfter)
	}
	if !f.CreatedBefore.IsZero() {
		add("created_at < $%d", f.CreatedBefore)
	}
	if len(f.Metadata) > 0 {
		meta, err := json.Marshal(f.Metadata)
		if err != nil {
			return nil, "", err
		}
		add("metadata @> $%d::jsonb", meta)
	}
	if f.Before != "" {
		add("id < $%d", f.Before)
	}
	args = append(args, f.Limit+1)
	q := fmt.Sprintf(`SELECT %s FROM jobs WHERE %s ORDER BY id DESC LIMIT $%d`, jobColumns, strings.Join(where, " AND "), len(args))
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, "", err
	}
	defer rows.Close()
	page := make([]row, 0, f.Limit)
	for rows.Next() {
		r, err := scanJob(rows)
		if err != nil {
			return nil, "", err
		}
		page = append(page, r)
	}
	if err := rows.Err(); err != nil {
		return nil, "", err
	}
	rows.Close()
	next := ""
	if len(page) > f.Limit {
		page = page[:f.Limit]
		next = page[len(page)-1].job.ID
	}
	out, err := s.load(ctx, page...)
	return out, next, err
}

// jobSpecView selects what the API shows of a jobs row's spec, computed in
// Postgres so that file contents and env values never leave it: the spec
// without files and env, the files' paths and sizes, and the env's names.
const jobSpecView = `spec - 'files' - 'env' - 'sealed_env',
	(SELECT coalesce(jsonb_agg(jsonb_build_object('path', f->>'path',
			'size', coalesce(octet_length(decode(f->>'content', 'base64')), 0)) ORDER BY n), '[]')
		FROM jsonb_array_elements(CASE WHEN jsonb_typeof(spec->'files') = 'array' THEN spec->'files' ELSE '[]' END)
			WITH ORDINALITY AS x(f, n)),
	coalesce(spec->'sealed_env'->'names',
		(SELECT jsonb_agg(k ORDER BY k) FROM jsonb_object_keys(CASE WHEN jsonb_typeof(spec->'env') = 'object' THEN spec->'env' ELSE '{}' END) AS k),
		'[]')`

// JobSpecs returns what the tenant's jobs of ids ran (jobs.JobSpec: env
// names, never values), by job id. Ids of other tenants' jobs, or of none,
// are left out.
func (s *Store) JobSpecs(ctx context.Context, tenantID string, ids []string) (map[string]jobs.JobSpec, error) {
	out := make(map[string]jobs.JobSpec, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT id, `+jobSpecView+` FROM jobs WHERE tenant_id = $1 AND id = ANY($2)`, tenantID, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id                    string
			rest, files, envNames []byte
		)
		if err := rows.Scan(&id, &rest, &files, &envNames); err != nil {
			return nil, err
		}
		var sp jobs.Spec
		if err := json.Unmarshal(rest, &sp); err != nil {
			return nil, fmt.Errorf("decode spec of job %s: %w", id, err)
		}
		v := sp.View()
		if err := json.Unmarshal(files, &v.Files); err != nil {
			return nil, fmt.Errorf("decode files of job %s: %w", id, err)
		}
		if err := json.Unmarshal(envNames, &v.EnvNames); err != nil {
			return nil, fmt.Errorf("decode env names of job %s: %w", id, err)
		}
		out[id] = v
	}
	return out, rows.Err()
}

// SealPlainEnv seals the env of up to limit jobs whose spec holds it in the
// clear (written before env was sealed, or by a gantry without a key): seal
// rewrites a spec in place, and each row is updated with what it made.
// Rows another caller holds are skipped. It returns how many it sealed.
func (s *Store) SealPlainEnv(ctx context.Context, limit int, seal func(tenantID, jobID string, spec *jobs.Spec) error) (int, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	rows, err := tx.Query(ctx, `SELECT id, tenant_id, spec FROM jobs WHERE spec ? 'env' ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED`, limit)
	if err != nil {
		return 0, err
	}
	type plain struct {
		id, tenantID string
		spec         []byte
	}
	var batch []plain
	for rows.Next() {
		var p plain
		if err := rows.Scan(&p.id, &p.tenantID, &p.spec); err != nil {
			rows.Close()
			return 0, err
		}
		batch = append(batch, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	for _, p := range batch {
		var sp jobs.Spec
		if err := json.Unmarshal(p.spec, &sp); err != nil {
			return 0, fmt.Errorf("decode spec of job %s: %w", p.id, err)
		}
		if err := seal(p.tenantID, p.id, &sp); err != nil {
			return 0, fmt.Errorf("seal env of job %s: %w", p.id, err)
		}
		data, err := jobs.MarshalSpec(sp)
		if err != nil {
			return 0, err
		}
		if _, err := tx.Exec(ctx, `UPDATE jobs SET spec = $2 WHERE id = $1`, p.id, data); err != nil {
			return 0, fmt.Errorf("store sealed env of job %s: %w", p.id, err)
		}
	}
	return len(batch), tx.Commit(ctx)
}

// CancelOutcome says what CancelJob did.
type CancelOutcome int

// The outcomes of CancelJob.
const (
	// CancelledQueued: the job had not started and is now cancelled.
	CancelledQueued CancelOutcome = iota
	// CancelRequested: the job is running; its runner must be told to kill it.
	CancelRequested
	// AlreadyFinished: nothing to do.
	AlreadyFinished
	// CancelledOrphan: the job was running but no runner had shown itself
	// alive for longer than the staleness bound (a session's job: its
	// session had no owner); it is now cancelled.
	CancelledOrphan
)

// orphaned is true of a running jobs row that no runner holds now: its
// runner's heartbeat is older than $3 seconds (for a session's job: the
// session has no owner with a live lease).
const orphaned = `CASE WHEN session_id IS NULL
		THEN coalesce(heartbeat_at, started_at, created_at) < now() - make_interval(secs => $3)
		ELSE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.id = jobs.session_id AND s.owner IS NOT NULL AND s.owner_until > now())
	END`

// CancelJob cancels a queued job at once, or flags a running one for its
// runner to kill. A running job whose runner is gone (no heartbeat for
// stale) is cancelled at once too: nobody else would ever end it. It is
// idempotent.
func (s *Store) CancelJob(ctx context.Context, tenantID, id string, stale time.Duration) (CancelOutcome, error) {
	var status string
	err := s.pool.QueryRow(ctx, `
		WITH old AS (SELECT id, status FROM jobs WHERE id = $1 AND tenant_id = $2 FOR UPDATE)
		UPDATE jobs SET status = 'cancelled', finished_at = now(), cancel_requested = true, error_code = 'cancelled',
			error_message = CASE WHEN old.status = 'queued' THEN 'cancelled before it started'
				ELSE 'cancelled; the runner that was running it had stopped responding' END
		FROM old WHERE jobs.id = old.id AND (old.status = 'queued' OR old.status = 'running' AND `+orphaned+`)
		RETURNING old.status`, id, tenantID, stale.Seconds()).Scan(&status)
	switch {
	case err == nil && status == string(jobs.StatusQueued):
		return CancelledQueued, nil
	case err == nil:
		return CancelledOrphan, nil
	case !errors.Is(err, pgx.ErrNoRows):
		return 0, err
	}
	tag, err := s.pool.Exec(ctx, `
		UPDATE jobs SET cancel_requested = true
		WHERE id = $1 AND tenant_id = $2 AND status = 'running'`, id, tenantID)
	if err != nil {
		return 0, err
	}
	if tag.RowsAffected() == 1 {
		return CancelRequested, nil
	}
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT true FROM jobs WHERE id = $1 AND tenant_id = $2`, id, tenantID).Scan(&exists); err != nil {
		return 0, notFound(err)
	}
	return AlreadyFinished, nil
}

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
	// TraceParent is the traceparent of the span that queued the job (""
	// with tracing off, or for a job queued before it was on).
	TraceParent string
}

// tenantClaim selects what a claim carries of a jobs row's tenant: its
// privacy switch, key epoch and egress allow-list.
const tenantClaim = `(SELECT pii_tokens FROM tenants t WHERE t.id = jobs.tenant_id),
	(SELECT key_epoch FROM tenants t WHERE t.id = jobs.tenant_id),
	(SELECT egress_allow FROM tenants t WHERE t.id = jobs.tenant_id)`

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
	err = tx.QueryRow(ctx, `SELECT status, attempt, msg_seq, coalesce(heartbeat_at > now() - make_interval(secs => $2), false)
		FROM jobs WHERE id = $1 FOR UPDATE`, req.JobID, req.Alive.Seconds()).Scan(&status, &attempt, &seq, &alive)
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
	var spec []byte
	err = tx.QueryRow(ctx, `
		UPDATE jobs SET status = 'running', attempt = attempt + 1, runner_id = $2, started_at = now(), heartbeat_at = now()
		WHERE id = $1
		RETURNING attempt, tenant_id, spec, cancel_requested, coalesce(trace_parent, ''), `+tenantClaim, req.JobID, req.RunnerID).
		Scan(&c.Attempt, &c.TenantID, &spec, &c.CancelRequested, &c.TraceParent, &c.Private, &c.KeyEpoch, &c.EgressAllow)
	if err != nil {
		return Claim{}, 0, fmt.Errorf("claim job: %w", err)
	}
	if err := json.Unmarshal(spec, &c.Spec); err != nil {
		return Claim{}, 0, fmt.Errorf("decode spec of job %s: %w", req.JobID, err)
	}
	return c, Claimed, tx.Commit(ctx)
}

// FinishJob records the result of an attempt. It applies only if the job is
// still running this attempt, so a runner that lost its job to a
// redelivery cannot overwrite the newer attempt; applied says whether it did.
//
// Output longer than the inline maximum is put in the output store first
// (KeepOutput); if the result does not apply, it is deleted again.
func (s *Store) FinishJob(ctx context.Context, id string, attempt int, r jobs.Result) (applied bool, err error) {
	m, err := s.moveOutput(ctx, id, attempt, r)
	if err != nil {
		return false, err
	}
	applied, err = finishJob(ctx, s.pool, id, attempt, m)
	if err == nil && !applied {
		s.forget(ctx, m.keys)
	}
	return applied, err
}

// execer is a pool or a transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func finishJob(ctx context.Context, db execer, id string, attempt int, r movedResult) (bool, error) {
	arts, err := json.Marshal(storedArtifacts(r.Artifacts, r.ArtifactsOmitted))
	if err != nil {
		return false, err
	}
	calls := r.ToolCalls
	if calls == nil {
		calls = []jobs.ToolCall{}
	}
	callsJSON, err := json.Marshal(calls)
	if err != nil {
		return false, err
	}
	var code, msg *string
	if r.Error != nil {
		c := string(r.Error.Code)
		code, msg = &c, &r.Error.Message
	}
	var cpuMS, peakKB *int64
	if r.Usage != nil {
		ms, kb := r.Usage.CPUTimeMS(), r.Usage.PeakMemoryKB
		cpuMS, peakKB = &ms, &kb
	}
	var compile []byte
	if r.Compile != nil {
		if compile, err = json.Marshal(r.Compile); err != nil {
			return false, err
		}
	}
	var value, displays, exception []byte
	if r.Value != nil {
		if value, err = json.Marshal(r.Value); err != nil {
			return false, err
		}
	}
	if len(r.Displays) > 0 {
		if displays, err = json.Marshal(r.Displays); err != nil {
			return false, err
		}
	}
	if r.Exception != nil {
		if exception, err = json.Marshal(r.Exception); err != nil {
			return false, err
		}
	}
	var egress []byte
	if r.Egress != nil || r.EgressOmitted > 0 {
		if egress, err = json.Marshal(storedEgress{Connections: r.Egress, Omitted: r.EgressOmitted}); err != nil {
			return false, err
		}
	}
	tag, err := db.Exec(ctx, `
		UPDATE jobs SET status = $3, finished_at = now(), exit_code = $4, duration_ms = $5,
			stdout = $6, stderr = $7, stdout_truncated = $8, stderr_truncated = $9,
			artifacts = $10, error_code = $11, error_message = $12, tool_calls = $13,
			stdout_key = $14, stderr_key = $15,
			cpu_time_ms = $16, peak_memory_kb = $17, compile = $18, compile_output = $19,
			value = $20, live_state = $21, live_state_reason = $22, displays = $23, exception = $24, egress = $25
		WHERE id = $1 AND attempt = $2 AND status = 'running'`,
		id, attempt, string(r.Status), r.ExitCode, r.Duration.Milliseconds(),
		nonNil(r.Stdout), nonNil(r.Stderr), r.StdoutTruncated, r.StderrTruncated,
		arts, code, msg, callsJSON, nilIfEmpty(r.stdoutKey), nilIfEmpty(r.stderrKey),
		cpuMS, peakKB, compile, nonNil(r.CompileOutput),
		value, nilIfEmpty(string(r.LiveState)), nilIfEmpty(r.LiveStateReason), displays, exception, egress)
	if err != nil {
		return false, fmt.Errorf("record result: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// RequeueJob puts a running attempt back to queued when the runner gives the
// job back (shutdown, Docker failure) so it shows as waiting for redelivery.
func (s *Store) RequeueJob(ctx context.Context, id string, attempt int) error {
	_, err := s.pool.Exec(ctx,
		`UPDATE jobs SET status = 'queued' WHERE id = $1 AND attempt = $2 AND status = 'running'`, id, attempt)
	return err
}

// ReleaseJob gives a running job back to the queue without spending the
// attempt its runner claimed: the runner held it through an outage of
// gantry's own (the object store) and stopped before it could finish it.
// It applies only while the job is still running that attempt.
func (s *Store) ReleaseJob(ctx context.Context, id string, attempt int) error {
	_, err := s.pool.Exec(ctx,
		`UPDATE jobs SET status = 'queued', attempt = attempt - 1 WHERE id = $1 AND attempt = $2 AND status = 'running'`, id, attempt)
	return err
}

// FailJob ends an unfinished job as status error with the given message:
// used when gantry gives up on it. applied is false if it had finished.
func (s *Store) FailJob(ctx context.Context, id string, attempt int, message string) (applied bool, err error) {
	tag, err := s.pool.Exec(ctx, `
		UPDATE jobs SET status = 'error', finished_at = now(), attempt = GREATEST(attempt, $2),
			error_code = 'infrastructure', error_message = $3
		WHERE id = $1 AND status IN ('queued', 'running')`, id, attempt, message)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// storedEgress is a job's egress record as the egress column holds it.
type storedEgress struct {
	Connections []jobs.EgressConnection `json:"connections"`
	Omitted     int                     `json:"omitted,omitempty"`
}

func scanJob(r pgx.Row) (row, error) { return scanJobWith(r) }

// scanJobWith reads a jobs row (jobColumns, after extra). The job's moved
// output is still to be read (Store.load).
func scanJobWith(r pgx.Row, extra ...any) (row, error) {
	var (
		j                jobs.Job
		status           string
		stdout, stderr   []byte
		arts, meta       []byte
		calls, webhook   []byte
		errCode, errMsg  *string
		outKey, errKey   *string
		compile, compOut []byte
		value, egress    []byte
		live, liveWhy    *string
		displays, exc    []byte
	)
	var traceParent *string
	dest := append(extra, &j.ID, &status, &j.Language, &j.SessionID, &j.Attempt, &traceParent, &j.CreatedAt, &j.StartedAt, &j.FinishedAt,
		&j.ExitCode, &j.DurationMS, &stdout, &stderr, &j.StdoutTruncated, &j.StderrTruncated, &arts,
		&errCode, &errMsg, &meta, &calls, &outKey, &errKey, &j.BatchID, &j.WebhookURL,
		&j.CPUTimeMS, &j.PeakMemoryKB, &compile, &compOut, &webhook,
		&value, &live, &liveWhy, &displays, &exc, &egress)
	if err := r.Scan(dest...); err != nil {
		return row{}, err
	}
	j.Status = jobs.Status(status)
	j.TraceID = tracing.SampledTraceID(deref(traceParent))
	j.Stdout, j.Stderr, j.CompileOutput = text(stdout), text(stderr), text(compOut)
	var err error
	if compile != nil {
		if err := json.Unmarshal(compile, &j.Compile); err != nil {
			return row{}, fmt.Errorf("decode compile: %w", err)
		}
	}
	if j.Artifacts, j.ArtifactsOmitted, err = loadArtifacts(arts); err != nil {
		return row{}, fmt.Errorf("decode artifacts: %w", err)
	}
	if err := json.Unmarshal(meta, &j.Metadata); err != nil {
		return row{}, fmt.Errorf("decode metadata: %w", err)
	}
	if err := json.Unmarshal(calls, &j.ToolCalls); err != nil {
		return row{}, fmt.Errorf("decode tool calls: %w", err)
	}
	if errCode != nil {
		j.Error = &jobs.ErrorInfo{Code: jobs.ErrorCode(*errCode), Message: deref(errMsg)}
	}
	if webhook != nil {
		if j.Webhook, err = decodeDelivery(webhook); err != nil {
			return row{}, err
		}
	}
	if value != nil {
		j.Value = new(jobs.Value)
		if err := json.Unmarshal(value, j.Value); err != nil {
			return row{}, fmt.Errorf("decode value: %w", err)
		}
	}
	if displays != nil {
		if err := json.Unmarshal(displays, &j.Displays); err != nil {
			return row{}, fmt.Errorf("decode displays: %w", err)
		}
	}
	if exc != nil {
		j.Exception = new(jobs.Exception)
		if err := json.Unmarshal(exc, j.Exception); err != nil {
			return row{}, fmt.Errorf("decode exception: %w", err)
		}
	}
	j.LiveState, j.LiveStateReason = jobs.LiveState(deref(live)), deref(liveWhy)
	if egress != nil {
		var e storedEgress
		if err := json.Unmarshal(egress, &e); err != nil {
			return row{}, fmt.Errorf("decode egress: %w", err)
		}
		j.Egress, j.EgressOmitted = e.Connections, e.Omitted
	}
	j.CreatedAt = j.CreatedAt.UTC()
	utc(j.StartedAt)
	utc(j.FinishedAt)
	return row{job: j, stdoutKey: deref(outKey), stderrKey: deref(errKey)}, nil
}

// text turns program output into a JSON-safe string: invalid UTF-8 becomes
// U+FFFD. The stored bytes are kept as the program wrote them.
func text(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

func utc(t *time.Time) {
	if t != nil {
		*t = t.UTC()
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// storedArtifact is one entry of a job's artifacts column: an artifact, or
// (with Omitted set) a matching file left out over a cap. One column keeps
// both, in the order the runner found them.
type storedArtifact struct {
	jobs.Artifact
	Omitted string `json:"omitted,omitempty"`
}

func storedArtifacts(kept []jobs.Artifact, omitted []jobs.OmittedArtifact) []storedArtifact {
	out := make([]storedArtifact, 0, len(kept)+len(omitted))
	for _, a := range kept {
		out = append(out, storedArtifact{Artifact: a})
	}
	for _, o := range omitted {
		out = append(out, storedArtifact{Artifact: jobs.Artifact{Path: o.Path, Size: o.Size}, Omitted: o.Reason})
	}
	return out
}

func loadArtifacts(data []byte) ([]jobs.Artifact, []jobs.OmittedArtifact, error) {
	var all []storedArtifact
	if err := json.Unmarshal(data, &all); err != nil {
		return nil, nil, err
	}
	kept := make([]jobs.Artifact, 0, len(all))
	var omitted []jobs.OmittedArtifact
	for _, a := range all {
		if a.Omitted != "" {
			omitted = append(omitted, jobs.OmittedArtifact{Path: a.Path, Size: a.Size, Reason: a.Omitted})
		} else {
			kept = append(kept, a.Artifact)
		}
	}
	return kept, omitted, nil
}
