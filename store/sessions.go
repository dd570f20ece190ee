package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gantryhq/gantry/jobs"
)

// ErrSessionNotFound is a job naming a session that does not exist (or is
// closing) for the tenant.
var ErrSessionNotFound = errors.New("session not found")

// sessionQueued counts a sessions row's queued jobs. It is derived, never
// kept: a queued job can leave that state in many ways (run, cancelled,
// closed with its session, given up).
const sessionQueued = `(SELECT count(*) FROM jobs WHERE jobs.session_id = sessions.id AND jobs.status = 'queued')::integer`

const sessionColumns = `id, status, language, ttl_seconds, disk_mb, created_at, last_used_at, expires_at,
	last_job_id, version, snapshot_bytes, ` + sessionQueued + `, metadata, environment, stateful, coalesce(live_id, ''), env, network,
	paused, on_timeout, coalesce(checkpoint_id, ''), public_traffic, durable, coalesce(snapshot_key, '')`

func scanSession(row pgx.Row) (jobs.Session, error) {
	var s jobs.Session
	var meta, network []byte
	var paused bool
	err := row.Scan(&s.ID, &s.Status, &s.Language, &s.TTLSeconds, &s.DiskMB, &s.CreatedAt, &s.LastUsedAt, &s.ExpiresAt,
		&s.LastJobID, &s.Version, &s.Bytes, &s.Queued, &meta, &s.Environment, &s.Stateful, &s.Live, &s.SealedEnv, &network,
		&paused, &s.OnTimeout, &s.Checkpoint, &s.PublicTraffic, &s.Durable, &s.WorkspaceKey)
	if err != nil {
		return s, err
	}
	if s.Network, err = decodeNetwork(network); err != nil {
		return s, err
	}
	s.State = jobs.SessionRunning
	if paused {
		s.State = jobs.SessionPaused
	}
	if s.Environment == "" {
		s.Environment = jobs.DefaultEnvironment
	}
	if err := json.Unmarshal(meta, &s.Metadata); err != nil {
		return s, err
	}
	s.CreatedAt, s.LastUsedAt, s.ExpiresAt = s.CreatedAt.UTC(), s.LastUsedAt.UTC(), s.ExpiresAt.UTC()
	return s, nil
}

// ErrTooManyLive means the tenant has as many stateful sessions as it may.
var ErrTooManyLive = errors.New("too many stateful sessions")

// CreateSession creates an empty session. A stateful one past the tenant's
// cap (req.MaxLive) fails with ErrTooManyLive.
func (s *Store) CreateSession(ctx context.Context, tenantID string, req jobs.SessionRequest) (jobs.Session, error) {
	meta, _ := json.Marshal(orEmpty(req.Metadata))
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return jobs.Session{}, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	if req.Stateful && req.MaxLive > 0 {
		// The tenant's stateful creations take turns from here to commit,
		// so that the count stays true until this session is in it.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, "live:"+tenantID); err != nil {
			return jobs.Session{}, err
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM sessions WHERE tenant_id = $1 AND stateful AND status = 'active' AND expires_at > now()`,
			tenantID).Scan(&n); err != nil {
			return jobs.Session{}, err
		}
		if n >= req.MaxLive {
			return jobs.Session{}, fmt.Errorf("the tenant has %d stateful sessions, its limit: %w", n, ErrTooManyLive)
		}
	}
	id := req.ID
	if id == "" {
		id = jobs.NewID("ses")
	}
	onTimeout := req.OnTimeout
	if onTimeout == "" {
		onTimeout = jobs.OnTimeoutKill
	}
	// A session made from a snapshot starts at its workspace (version 1,
	// a copy the caller made at req.Workspace) and its live state (the
	// snapshot's checkpoint, which its first job restores).
	var version int64
	var wsKey *string
	if req.Workspace != nil {
		version, wsKey = 1, &req.Workspace.Key
	}
	sess, err := scanSession(tx.QueryRow(ctx, `
		INSERT INTO sessions (id, tenant_id, language, ttl_seconds, disk_mb, metadata, environment, expires_at, stateful, env,
			on_timeout, checkpoint_id, version, snapshot_key, snapshot_bytes, network, public_traffic, durable)
		VALUES ($1, $2, $3, $4, $5, $6, $7, now() + make_interval(secs => $4::integer), $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
		RETURNING `+sessionColumns,
		id, tenantID, req.Language, req.TTLSeconds, req.DiskMB, meta, req.Environment, req.Stateful, req.SealedEnv,
		onTimeout, nilIfEmpty(req.Checkpoint), version, wsKey, workspaceBytes(req.Workspace), networkJSON(req.Network),
		req.PublicTraffic == nil || *req.PublicTraffic, req.Stateful && req.IsDurable()))
	if err != nil {
		return sess, err
	}
	return sess, tx.Commit(ctx)
}

func workspaceBytes(w *jobs.WorkspaceCopy) int64 {
	if w == nil {
		return 0
	}
	return w.Bytes
}

// GetSession returns the tenant's active session, or ErrNotFound (also for
// one that is closing or has expired).
func (s *Store) GetSession(ctx context.Context, tenantID, id string) (jobs.Session, error) {
	sess, err := scanSession(s.pool.QueryRow(ctx, `SELECT `+sessionColumns+` FROM sessions
		WHERE id = $1 AND tenant_id = $2 AND status = 'active' AND expires_at > now()`, id, tenantID))
	return sess, notFound(err)
}

// SetSessionTTL changes the tenant's active session's idle timeout and
// makes it expire that long from now, or ErrNotFound. Its tokens, if one
// was handed out, then open it until that expiry (sooner or later than
// before).
func (s *Store) SetSessionTTL(ctx context.Context, tenantID, id string, ttlSeconds int) (jobs.Session, error) {
	sess, err := scanSession(s.pool.QueryRow(ctx, `UPDATE sessions
		SET ttl_seconds = $3, expires_at = now() + make_interval(secs => $3::integer),
			token_until = CASE WHEN token_until IS NULL THEN NULL ELSE now() + make_interval(secs => $3::integer) END
		WHERE id = $1 AND tenant_id = $2 AND status = 'active' AND expires_at > now()
		RETURNING `+sessionColumns, id, tenantID, ttlSeconds))
	return sess, notFound(err)
}

// ListSessions lists the tenant's active sessions, newest first.
func (s *Store) ListSessions(ctx context.Context, tenantID string, limit int, before string) ([]jobs.Session, string, error) {
	args := []any{tenantID, limit + 1}
	cond := ""
	if before != "" {
		args = append(args, before)
		cond = " AND id < $3"
	}
	rows, err := s.pool.Query(ctx, `SELECT `+sessionColumns+` FROM sessions
		WHERE tenant_id = $1 AND status = 'active' AND expires_at > now()`+cond+` ORDER BY id DESC LIMIT $2`, args...)
	if err != nil {
		return nil, "", err
	}
	defer rows.Close()
	out := []jobs.Session{}
	for rows.Next() {
		sess, err := scanSession(rows)
		if err != nil {
			return nil, "", err
		}
		out = append(out, sess)
	}
	if err := rows.Err(); err != nil {
		return nil, "", err
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		next = out[len(out)-1].ID
	}
	return out, next, nil
}

// SessionRef identifies a session's objects and running jobs while it is
// being closed.
type SessionRef struct {
	ID          string
	TenantID    string
	RunningJobs []string
}

// CloseSession starts closing the tenant's session: it stops accepting jobs
// and files, its queued jobs are cancelled and its running job flagged for
// cancellation. The closing is finished by FinishClosing once its objects
// are gone. ErrNotFound if there is no such active session.
func (s *Store) CloseSession(ctx context.Context, tenantID, id string) (SessionRef, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return SessionRef{}, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	tag, err := tx.Exec(ctx, `UPDATE sessions SET status = 'closing', closing_since = now()
		WHERE id = $1 AND tenant_id = $2 AND status = 'active'`, id, tenantID)
	if err != nil {
		return SessionRef{}, err
	}
	if tag.RowsAffected() == 0 {
		return SessionRef{}, ErrNotFound
	}
	ref, err := closeSessionJobs(ctx, tx, id)
	if err != nil {
		return SessionRef{}, err
	}
	ref.TenantID = tenantID
	return ref, tx.Commit(ctx)
}

// closeSessionJobs cancels a closing session's queued jobs and flags its
// running ones.
func closeSessionJobs(ctx context.Context, tx pgx.Tx, sessionID string) (SessionRef, error) {
	ref := SessionRef{ID: sessionID}
	if _, err := tx.Exec(ctx, `UPDATE jobs SET status = 'cancelled', finished_at = now(), cancel_requested = true,
			error_code = 'cancelled', error_message = 'the session was closed before the job started'
		WHERE session_id = $1 AND status = 'queued'`, sessionID); err != nil {
		return ref, err
	}
	rows, err := tx.Query(ctx, `UPDATE jobs SET cancel_requested = true WHERE session_id = $1 AND status = 'running' RETURNING id`, sessionID)
	if err != nil {
		return ref, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	ref.RunningJobs = ids
	return ref, err
}

// ExpireSessions marks up to limit sessions idle past their expiry as
// closing and returns them. Several sweepers may run at once: rows another
// one is handling are skipped.
func (s *Store) ExpireSessions(ctx context.Context, limit int) ([]SessionRef, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	// A stateful session that pauses on its timeout is paused, not closed
	// (ExpiredToPause); paused, it expires PausedTTL later.
	rows, err := tx.Query(ctx, `
		UPDATE sessions SET status = 'closing', closing_since = now()
		WHERE id IN (SELECT id FROM sessions WHERE status = 'active' AND expires_at <= now()
		               AND NOT (stateful AND on_timeout = 'pause' AND NOT paused)
		             ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED)
		RETURNING id, tenant_id`, limit)
	if err != nil {
		return nil, err
	}
	refs, err := collectRefs(rows)
	if err != nil {
		return nil, err
	}
	for i := range refs {
		r, err := closeSessionJobs(ctx, tx, refs[i].ID)
		if err != nil {
			return nil, err
		}
		refs[i].RunningJobs = r.RunningJobs
	}
	return refs, tx.Commit(ctx)
}

// ClosingSessions lists sessions left closing for longer than age (their
// closer died): the sweeper finishes them.
func (s *Store) ClosingSessions(ctx context.Context, age time.Duration, limit int) ([]SessionRef, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, tenant_id FROM sessions
		WHERE status = 'closing' AND closing_since < now() - make_interval(secs => $1) LIMIT $2`, age.Seconds(), limit)
	if err != nil {
		return nil, err
	}
	return collectRefs(rows)
}

// FinishClosing deletes a closing session's row once nobody runs its jobs
// any more. done is false while an owner still holds it.
func (s *Store) FinishClosing(ctx context.Context, id string) (done bool, err error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM sessions WHERE id = $1 AND status = 'closing'
		AND (owner IS NULL OR owner_until < now())`, id)
	if err != nil {
		return false, err
	}
	if tag.RowsAffected() == 1 {
		return true, nil
	}
	var exists bool
	err = s.pool.QueryRow(ctx, `SELECT true FROM sessions WHERE id = $1`, id).Scan(&exists)
	if errors.Is(err, pgx.ErrNoRows) {
		return true, nil
	}
	return false, err
}

// SessionState is what the owner of a session needs to run its jobs.
type SessionState struct {
	TenantID    string
	Language    string
	DiskMB      int
	TTLSeconds  int
	Version     int64
	SnapshotKey string
	Queued      int
	// Environment is the one its jobs run in ("": the runner's own image).
	Environment string
	// Stateful sessions keep a live sandbox: LiveID names the one the
	// session's live state is in ("" for none), LiveLost says why the
	// last one was lost (when its runner knew).
	Stateful bool
	LiveID   string
	LiveLost string
	// Durable: the stateful session's live state outlives its sandbox
	// (jobs.Session.Durable): it runs under gVisor where the runner can.
	Durable bool
	// Paused: the session was paused; Checkpoint (its ID set) is the live
	// state to restore where there is no live sandbox.
	Paused     bool
	Checkpoint Checkpoint
}

// AcquireSession makes owner the session's only runner of jobs until
// lease passes (renewed with ExtendSession). ok is false if someone else
// holds it; ErrNotFound if it is gone or closing.
func (s *Store) AcquireSession(ctx context.Context, id, owner string, lease time.Duration) (st SessionState, ok bool, err error) {
	var key, liveID, liveLost, cpID, cpTenant, cpKey, cpImage, cpRuntime *string
	var cpBytes, cpVersion *int64
	var cpAt *time.Time
	err = s.pool.QueryRow(ctx, `
		WITH s AS (
			UPDATE sessions SET owner = $2, owner_until = now() + make_interval(secs => $3)
			WHERE id = $1 AND status = 'active' AND (owner IS NULL OR owner_until < now())
			RETURNING tenant_id, language, disk_mb, ttl_seconds, version, snapshot_key, `+sessionQueued+` AS queued, environment, stateful,
				live_id, live_lost, paused, checkpoint_id, durable)
		SELECT s.tenant_id, s.language, s.disk_mb, s.ttl_seconds, s.version, s.snapshot_key, s.queued, s.environment, s.stateful,
			s.live_id, s.live_lost, s.paused, s.durable, c.id, c.tenant_id, c.key, c.bytes, c.image, c.runtime, c.version, c.created_at
		FROM s LEFT JOIN checkpoints c ON c.id = s.checkpoint_id`,
		id, owner, lease.Seconds()).
		Scan(&st.TenantID, &st.Language, &st.DiskMB, &st.TTLSeconds, &st.Version, &key, &st.Queued, &st.Environment, &st.Stateful,
			&liveID, &liveLost, &st.Paused, &st.Durable, &cpID, &cpTenant, &cpKey, &cpBytes, &cpImage, &cpRuntime, &cpVersion, &cpAt)
	if errors.Is(err, pgx.ErrNoRows) {
		var status string
		if err := s.pool.QueryRow(ctx, `SELECT status FROM sessions WHERE id = $1`, id).Scan(&status); err != nil || status != "active" {
			return st, false, ErrNotFound
		}
		return st, false, nil
	}
	st.SnapshotKey, st.LiveID, st.LiveLost = deref(key), deref(liveID), deref(liveLost)
	if cpID != nil {
		st.Checkpoint = Checkpoint{ID: *cpID, TenantID: deref(cpTenant), Key: deref(cpKey), Bytes: deref0(cpBytes),
			Image: deref(cpImage), Runtime: deref(cpRuntime), Version: deref0(cpVersion), CreatedAt: deref0(cpAt)}
	}
	return st, err == nil, err
}

// ExtendSession renews the owner's lease. ErrNotFound if the owner lost the
// session (it expired, was taken over, or is closing).
func (s *Store) ExtendSession(ctx context.Context, id, owner string, lease time.Duration) error {
	tag, err := s.pool.Exec(ctx, `UPDATE sessions SET owner_until = now() + make_interval(secs => $3)
		WHERE id = $1 AND owner = $2 AND status = 'active'`, id, owner, lease.Seconds())
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// ReleaseSession lets go of a session. It succeeds only when no job is
// queued: otherwise the owner keeps it and must run them (released=false).
// With force, it lets go regardless and returns how many jobs wait, so the
// caller can hand them to another owner.
func (s *Store) ReleaseSession(ctx context.Context, id, owner string, force bool) (released bool, queued int, err error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return false, 0, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	var cur *string
	var status string
	err = tx.QueryRow(ctx, `SELECT owner, status FROM sessions WHERE id = $1 FOR UPDATE`, id).Scan(&cur, &status)
	if errors.Is(err, pgx.ErrNoRows) || err == nil && (cur == nil || *cur != owner) {
		return true, 0, nil // gone, or not ours (any more)
	}
	if err != nil {
		return false, 0, err
	}
	// Holding the row, no submission to the session is half done (EnqueueJob
	// locks it too), and this statement's snapshot, taken after the lock,
	// sees every job that was queued before: none can slip past the count.
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE session_id = $1 AND status = 'queued'`, id).Scan(&queued); err != nil {
		return false, 0, err
	}
	if !force && queued > 0 && status != "closing" {
		return false, queued, nil
	}
	if _, err := tx.Exec(ctx, `UPDATE sessions SET owner = NULL, owner_until = NULL WHERE id = $1`, id); err != nil {
		return false, 0, err
	}
	return true, queued, tx.Commit(ctx)
}

// SessionJob is the next job an owner should run.
type SessionJob struct {
	JobID   string
	Attempt int
	Claim   Claim
}

// NextSessionJob claims the session's oldest unfinished job for the owner:
// a job left running by a lost owner is run again, then queued ones in
// submission order. A job already tried maxAttempts times is ended as an
// error and skipped. ok is false when nothing is left to run.
func (s *Store) NextSessionJob(ctx context.Context, sessionID, owner, runnerID string, maxAttempts int) (sj SessionJob, ok bool, err error) {
	for {
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			return sj, false, err
		}
		sj, ok, retry, err := nextSessionJob(ctx, tx, sessionID, owner, runnerID, maxAttempts)
		if err != nil {
			tx.Rollback(ctx) //nolint:errcheck
			return sj, false, err
		}
		if err := tx.Commit(ctx); err != nil {
			return sj, false, err
		}
		if !retry {
			return sj, ok, nil
		}
	}
}

func nextSessionJob(ctx context.Context, tx pgx.Tx, sessionID, owner, runnerID string, maxAttempts int) (sj SessionJob, ok, retry bool, err error) {
	var held bool
	if err := tx.QueryRow(ctx, `SELECT owner = $2 AND status = 'active' FROM sessions WHERE id = $1 FOR UPDATE`, sessionID, owner).Scan(&held); err != nil {
		return sj, false, false, notFound(err)
	}
	if !held {
		return sj, false, false, ErrNotFound
	}
	var status string
	var attempt int
	var tenantID string
	var spec []byte
	var cancelReq, private bool
	var keyEpoch int64
	var traceParent string
	var egressAllow []string
	var network []byte
	err = tx.QueryRow(ctx, `SELECT id, status, attempt, tenant_id, spec, cancel_requested, coalesce(trace_parent, ''), `+tenantClaim+` FROM jobs
		WHERE session_id = $1 AND status IN ('queued', 'running') ORDER BY session_seq LIMIT 1 FOR UPDATE OF jobs`, sessionID).
		Scan(&sj.JobID, &status, &attempt, &tenantID, &spec, &cancelReq, &traceParent, &private, &keyEpoch, &egressAllow, &network)
	if errors.Is(err, pgx.ErrNoRows) {
		return sj, false, false, nil // nothing left
	}
	if err != nil {
		return sj, false, false, err
	}
	if attempt >= maxAttempts {
		_, err := tx.Exec(ctx, `UPDATE jobs SET status = 'error', finished_at = now(), error_code = 'infrastructure',
			error_message = $2 WHERE id = $1`, sj.JobID, GaveUpMessage(attempt))
		return sj, false, true, err
	}
	sj.Attempt = attempt + 1
	if _, err := tx.Exec(ctx, `UPDATE jobs SET status = 'running', attempt = $2, runner_id = $3, started_at = now() WHERE id = $1`,
		sj.JobID, sj.Attempt, runnerID); err != nil {
		return sj, false, false, err
	}
	sj.Claim = Claim{Attempt: sj.Attempt, TenantID: tenantID, CancelRequested: cancelReq, Private: private, KeyEpoch: keyEpoch, EgressAllow: egressAllow}
	if sj.Claim.SessionNetwork, err = decodeNetwork(network); err != nil {
		return sj, false, false, err
	}
	sj.Claim.TraceParent = traceParent
	if err := json.Unmarshal(spec, &sj.Claim.Spec); err != nil {
		return sj, false, false, fmt.Errorf("decode spec of job %s: %w", sj.JobID, err)
	}
	return sj, true, false, nil
}

// Snapshot is a new version of a session's workspace.
type Snapshot struct {
	Version int64
	Key     string
	Bytes   int64
}

// Live is where a stateful session's live state is after one of its jobs:
// the sandbox it is in (ID), or none ("") and why it was lost (Lost).
type Live struct {
	ID   string
	Lost string
	// Fresh: the live sandbox was made new (nothing of an earlier live
	// state is in it): the session's checkpoint, of that earlier state, is
	// no longer its to restore.
	Fresh bool
}

// FinishSessionJob records a session job's result and, if snap is set, the
// workspace version it left (and, if live is set, where the session's live
// state is now), in one transaction. It returns whether the result applied
// and, when the snapshot was recorded, the key of the snapshot it replaced
// (for deletion). If the session is closing or the owner lost it, the
// result is still recorded but the snapshot is not (snapshotApplied=false):
// the caller deletes the object it uploaded. Long output is kept as
// FinishJob keeps it.
func (s *Store) FinishSessionJob(ctx context.Context, jobID string, attempt int, r jobs.Result, sessionID, owner string, snap *Snapshot, live *Live) (applied, snapshotApplied bool, replaced string, err error) {
	m, err := s.moveOutput(ctx, jobID, attempt, r)
	if err != nil {
		return false, false, "", err
	}
	defer func() {
		if err == nil && !applied {
			s.forget(ctx, m.keys)
		}
	}()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return false, false, "", err
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	applied, err = finishJob(ctx, tx, jobID, attempt, m)
	if err != nil {
		return false, false, "", err
	}
	if snap != nil && applied {
		replaced, err = setSnapshot(ctx, tx, sessionID, owner, *snap, jobID)
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return false, false, "", err
		default:
			snapshotApplied = true
		}
	} else if applied {
		_, err = tx.Exec(ctx, `UPDATE sessions SET last_job_id = $2, last_used_at = now(),
			expires_at = now() + make_interval(secs => ttl_seconds) WHERE id = $1 AND status = 'active'`, sessionID, jobID)
		if err != nil {
			return false, false, "", err
		}
	}
	if live != nil && applied {
		// A live sandbox found or made: the session runs (a pause's
		// checkpoint, restored, stays named until the next one, the live
		// state to fall back on).
		_, err = tx.Exec(ctx, `UPDATE sessions SET live_id = $3, live_lost = $4, paused = paused AND $3::text IS NULL,
				checkpoint_id = CASE WHEN $5 THEN NULL ELSE checkpoint_id END
			WHERE id = $1 AND owner = $2 AND status = 'active'`, sessionID, owner, nilIfEmpty(live.ID), nilIfEmpty(live.Lost), live.Fresh)
		if err != nil {
			return false, false, "", err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return false, false, "", err
	}
	return applied, snapshotApplied, replaced, nil
}

// setSnapshot makes snap the session's workspace if owner still holds the
// active session, returning the key it replaces (ErrNotFound otherwise).
func setSnapshot(ctx context.Context, tx pgx.Tx, sessionID, owner string, snap Snapshot, jobID string) (string, error) {
	var prev *string
	err := tx.QueryRow(ctx, `SELECT snapshot_key FROM sessions WHERE id = $1 AND owner = $2 AND status = 'active' FOR UPDATE`,
		sessionID, owner).Scan(&prev)
	if err != nil {
		return "", notFound(err)
	}
	_, err = tx.Exec(ctx, `UPDATE sessions SET version = $2, snapshot_key = $3, snapshot_bytes = $4,
			last_job_id = coalesce($5, last_job_id), last_used_at = now(), expires_at = now() + make_interval(secs => ttl_seconds)
		WHERE id = $1`, sessionID, snap.Version, snap.Key, snap.Bytes, nilIfEmpty(jobID))
	if err != nil || prev == nil {
		return "", err
	}
	return *prev, nil
}

func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// LoseLive records that a stateful session's live state, if it is still
// in the sandbox named live, was lost, and why (its runner retired the
// container between the session's jobs).
func (s *Store) LoseLive(ctx context.Context, sessionID, live, reason string) error {
	_, err := s.pool.Exec(ctx, `UPDATE sessions SET live_id = NULL, live_lost = $3 WHERE id = $1 AND live_id = $2`,
		sessionID, live, reason)
	return err
}

// WorkspaceKey is the snapshot an active session's workspace is at ("" for
// none yet); ErrNotFound for a session closed or unknown.
func (s *Store) WorkspaceKey(ctx context.Context, sessionID string) (string, error) {
	var key *string
	err := s.pool.QueryRow(ctx, `SELECT snapshot_key FROM sessions WHERE id = $1 AND status = 'active'`, sessionID).Scan(&key)
	if err != nil {
		return "", notFound(err)
	}
	return deref(key), nil
}

// CommitWorkspace records a new workspace version written outside a job
// (the files API), by the current owner. It returns the replaced key.
func (s *Store) CommitWorkspace(ctx context.Context, sessionID, owner string, snap Snapshot) (replaced string, err error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return "", err
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if replaced, err = setSnapshot(ctx, tx, sessionID, owner, snap, ""); err != nil {
		return "", err
	}
	return replaced, tx.Commit(ctx)
}

// StalledSessions lists active sessions with unfinished jobs that nobody
// owns (the message announcing them was lost, or its owner died for good).
func (s *Store) StalledSessions(ctx context.Context, limit int) ([]SessionRef, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT s.id, s.tenant_id FROM sessions s
		WHERE s.status = 'active' AND (s.owner IS NULL OR s.owner_until < now() - interval '5 seconds')
		  AND EXISTS (SELECT 1 FROM jobs j WHERE j.session_id = s.id AND j.status IN ('queued', 'running')
		              AND j.created_at < now() - interval '10 seconds')
		LIMIT $1`, limit)
	if err != nil {
		return nil, err
	}
	return collectRefs(rows)
}

// collectRefs reads (id, tenant_id) rows.
func collectRefs(rows pgx.Rows) ([]SessionRef, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (SessionRef, error) {
		var r SessionRef
		err := row.Scan(&r.ID, &r.TenantID)
		return r, err
	})
}
