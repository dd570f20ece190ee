package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gantryhq/gantry/jobs"
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
	value, live_state, live_state_reason, displays, exception, egress, tests`

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
	// The job's message is published before this commits: a runner's
	// claim waits on this lock (ClaimJob) for the row to be there rather
	// than finding none and looking again.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, jobLock(id)); err != nil {
		return jobs.Job{}, false, err
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

// WithdrawJob cancels the tenant's job only if it has not started: a
// queued job is cancelled, and withdrawn is true; a job a runner took (or
// that finished) is left alone, and withdrawn is false. ErrNotFound when
// there is no such job. A runner never starts a withdrawn job: taking a
// job needs it queued.
func (s *Store) WithdrawJob(ctx context.Context, tenantID, id string) (withdrawn bool, err error) {
	tag, err := s.pool.Exec(ctx, `
		UPDATE jobs SET status = 'cancelled', finished_at = now(), cancel_requested = true, error_code = 'cancelled',
			error_message = 'withdrawn before it started'
		WHERE id = $1 AND tenant_id = $2 AND status = 'queued'`, id, tenantID)
	if err != nil {
		return false, err
	}
	if tag.RowsAffected() == 1 {
		return true, nil
	}
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT true FROM jobs WHERE id = $1 AND tenant_id = $2`, id, tenantID).Scan(&exists); err != nil {
		return false, notFound(err)
	}
	return false, nil
}

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
