package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gantryhq/gantry/jobs"
)

// Checkpoint is a stateful session's whole live state as gVisor saved it
// (docs/ARCHITECTURE.md, "Live state"): one object in the object store,
// restorable where the image, runsc and platform are the same. Sessions
// (to restore it: paused, forked, made from a snapshot, or lost since) and
// snapshots name checkpoints; one nothing names is deleted by the sweeper.
type Checkpoint struct {
	ID       string
	TenantID string
	Key      string
	Bytes    int64
	// Image and Runtime are what it restores on ("runsc <version>
	// <platform>").
	Image   string
	Runtime string
	// Version is the workspace version it holds.
	Version   int64
	CreatedAt time.Time
}

const checkpointColumns = `id, tenant_id, key, bytes, image, runtime, version, created_at`

func scanCheckpoint(row pgx.Row) (Checkpoint, error) {
	var c Checkpoint
	err := row.Scan(&c.ID, &c.TenantID, &c.Key, &c.Bytes, &c.Image, &c.Runtime, &c.Version, &c.CreatedAt)
	return c, notFound(err)
}

func insertCheckpoint(ctx context.Context, q pgx.Tx, cp Checkpoint) error {
	_, err := q.Exec(ctx, `INSERT INTO checkpoints (id, tenant_id, key, bytes, image, runtime, version)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, cp.ID, cp.TenantID, cp.Key, cp.Bytes, cp.Image, cp.Runtime, cp.Version)
	return err
}

// GetCheckpoint reads a checkpoint; ErrNotFound if there is none.
func (s *Store) GetCheckpoint(ctx context.Context, id string) (Checkpoint, error) {
	return scanCheckpoint(s.pool.QueryRow(ctx, `SELECT `+checkpointColumns+` FROM checkpoints WHERE id = $1`, id))
}

// pausedUntil is how long a paused session is kept after its pause: its
// timeout then closes it, as any session's.
const pausedUntil = `now() + make_interval(secs => ` + pausedTTLSeconds + `)`

// pausedTTLSeconds is jobs.PausedTTL in seconds, for SQL.
const pausedTTLSeconds = "604800"

// PauseSession records that the owner paused the session: its live state is
// cp now (the sandbox that held it is gone), until its next job restores
// it. ErrNotFound if the owner no longer owns the active session.
func (s *Store) PauseSession(ctx context.Context, sessionID, owner string, cp Checkpoint) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		if err := insertCheckpoint(ctx, tx, cp); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `UPDATE sessions SET paused = true, live_id = NULL, live_lost = NULL, checkpoint_id = $3,
				expires_at = greatest(expires_at, `+pausedUntil+`)
			WHERE id = $1 AND owner = $2 AND status = 'active'`, sessionID, owner, cp.ID)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return ErrNotFound
		}
		return nil
	})
}

// PauseIdle pauses an active stateful session that holds no live sandbox
// (its live state, if it had any, is its checkpoint, or was lost): nothing
// is left to save. ErrNotFound if it is not so.
func (s *Store) PauseIdle(ctx context.Context, tenantID, sessionID string) error {
	tag, err := s.pool.Exec(ctx, `UPDATE sessions SET paused = true, expires_at = greatest(expires_at, `+pausedUntil+`)
		WHERE id = $1 AND tenant_id = $2 AND status = 'active' AND stateful AND live_id IS NULL`, sessionID, tenantID)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// PauseLost pauses an active stateful session whose live sandbox live was
// lost with its runner (reason): its checkpoint, if it has one, is its
// live state now.
func (s *Store) PauseLost(ctx context.Context, sessionID, live, reason string) error {
	_, err := s.pool.Exec(ctx, `UPDATE sessions SET paused = true, live_id = NULL, live_lost = $3,
			expires_at = greatest(expires_at, `+pausedUntil+`)
		WHERE id = $1 AND live_id = $2 AND status = 'active'`, sessionID, live, reason)
	return err
}

// PauseRef is a session to pause at its timeout.
type PauseRef struct {
	ID, TenantID string
	// Live is its live sandbox ("" for none).
	Live string
}

// ExpiredToPause lists up to limit active stateful sessions past their
// timeout that pause on it (and are not paused yet).
func (s *Store) ExpiredToPause(ctx context.Context, limit int) ([]PauseRef, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, tenant_id, coalesce(live_id, '') FROM sessions
		WHERE status = 'active' AND expires_at <= now() AND stateful AND on_timeout = 'pause' AND NOT paused
		ORDER BY expires_at LIMIT $1`, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (PauseRef, error) {
		var r PauseRef
		err := row.Scan(&r.ID, &r.TenantID, &r.Live)
		return r, err
	})
}

// CountLive counts the tenant's active stateful sessions.
func (s *Store) CountLive(ctx context.Context, tenantID string) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM sessions WHERE tenant_id = $1 AND stateful AND status = 'active' AND expires_at > now()`,
		tenantID).Scan(&n)
	return n, err
}

// KeepCheckpoint records cp, taken while the session went on, as the live
// state to restore should its sandbox live be lost. It applies only while
// live still holds the session's live state (false otherwise: cp is
// recorded, for the sweeper to delete).
func (s *Store) KeepCheckpoint(ctx context.Context, sessionID, live string, cp Checkpoint) (bool, error) {
	applied := false
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := insertCheckpoint(ctx, tx, cp); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `UPDATE sessions SET checkpoint_id = $3
			WHERE id = $1 AND live_id = $2 AND status = 'active'`, sessionID, live, cp.ID)
		applied = err == nil && tag.RowsAffected() == 1
		return err
	})
	return applied, err
}

// SnapshotRef is where a snapshot's contents are.
type SnapshotRef struct {
	Checkpoint   Checkpoint
	WorkspaceKey string
}

// CreateSnapshot records a snapshot of a session: cp and the copy of its
// workspace at workspaceKey.
func (s *Store) CreateSnapshot(ctx context.Context, snap jobs.Snapshot, cp Checkpoint, workspaceKey string) (jobs.Snapshot, error) {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := insertCheckpoint(ctx, tx, cp); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `INSERT INTO snapshots (id, tenant_id, name, session_id, checkpoint_id, workspace_key,
				language, environment, disk_mb, bytes)
			VALUES ($1, $2, nullif($3, ''), nullif($4, ''), $5, nullif($6, ''), $7, $8, $9, $10) RETURNING created_at`,
			snap.ID, cp.TenantID, snap.Name, snap.SessionID, cp.ID, workspaceKey, snap.Language, snap.Environment,
			snap.DiskMB, snap.Bytes).Scan(&snap.CreatedAt)
	})
	return snap, err
}

// SnapshotFromCheckpoint records a snapshot whose live state is an
// existing checkpoint (a paused session's) and whose workspace is the
// copy at workspaceKey. snap.Bytes counts the workspace copy; the
// checkpoint's size is added.
func (s *Store) SnapshotFromCheckpoint(ctx context.Context, snap jobs.Snapshot, checkpointID, workspaceKey string) (jobs.Snapshot, error) {
	err := s.pool.QueryRow(ctx, `INSERT INTO snapshots (id, tenant_id, name, session_id, checkpoint_id, workspace_key,
			language, environment, disk_mb, bytes)
		SELECT $1, c.tenant_id, nullif($3, ''), nullif($4, ''), c.id, nullif($5, ''), $6, $7, $8, $9 + c.bytes
		FROM checkpoints c WHERE c.id = $2
		RETURNING created_at, bytes`,
		snap.ID, checkpointID, snap.Name, snap.SessionID, workspaceKey, snap.Language, snap.Environment, snap.DiskMB, snap.Bytes).
		Scan(&snap.CreatedAt, &snap.Bytes)
	return snap, notFound(err)
}

const snapshotColumns = `s.id, coalesce(s.name, ''), coalesce(s.session_id, ''), s.language, s.environment, s.disk_mb, s.bytes,
	s.created_at, coalesce(s.workspace_key, ''), c.id, c.tenant_id, c.key, c.bytes, c.image, c.runtime, c.version, c.created_at`

func scanSnapshot(row pgx.Row) (jobs.Snapshot, SnapshotRef, error) {
	var snap jobs.Snapshot
	var ref SnapshotRef
	c := &ref.Checkpoint
	err := row.Scan(&snap.ID, &snap.Name, &snap.SessionID, &snap.Language, &snap.Environment, &snap.DiskMB, &snap.Bytes,
		&snap.CreatedAt, &ref.WorkspaceKey, &c.ID, &c.TenantID, &c.Key, &c.Bytes, &c.Image, &c.Runtime, &c.Version, &c.CreatedAt)
	if snap.Environment == "" {
		snap.Environment = jobs.DefaultEnvironment
	}
	snap.CreatedAt = snap.CreatedAt.UTC()
	return snap, ref, notFound(err)
}

// GetSnapshot reads the tenant's snapshot; ErrNotFound for another
// tenant's or none.
func (s *Store) GetSnapshot(ctx context.Context, tenantID, id string) (jobs.Snapshot, SnapshotRef, error) {
	return scanSnapshot(s.pool.QueryRow(ctx, `SELECT `+snapshotColumns+` FROM snapshots s JOIN checkpoints c ON c.id = s.checkpoint_id
		WHERE s.id = $1 AND s.tenant_id = $2`, id, tenantID))
}

// ListSnapshots lists the tenant's snapshots, newest first, limit at a
// time after the cursor before ("" for the first page).
func (s *Store) ListSnapshots(ctx context.Context, tenantID string, limit int, before string) ([]jobs.Snapshot, string, error) {
	args := []any{tenantID, limit + 1}
	cond := ""
	if before != "" {
		args = append(args, before)
		cond = " AND s.id < $3"
	}
	rows, err := s.pool.Query(ctx, `SELECT `+snapshotColumns+` FROM snapshots s JOIN checkpoints c ON c.id = s.checkpoint_id
		WHERE s.tenant_id = $1`+cond+` ORDER BY s.id DESC LIMIT $2`, args...)
	if err != nil {
		return nil, "", err
	}
	defer rows.Close()
	var out []jobs.Snapshot
	for rows.Next() {
		snap, _, err := scanSnapshot(rows)
		if err != nil {
			return nil, "", err
		}
		out = append(out, snap)
	}
	if err := rows.Err(); err != nil {
		return nil, "", err
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		next = out[limit-1].ID
	}
	return out, next, nil
}

// DeleteSnapshot deletes the tenant's snapshot (its checkpoint goes with
// the sweeper once nothing names it) and returns its workspace copy's key
// for the caller to delete. ErrNotFound for another tenant's or none.
func (s *Store) DeleteSnapshot(ctx context.Context, tenantID, id string) (string, error) {
	var key *string
	err := s.pool.QueryRow(ctx, `DELETE FROM snapshots WHERE id = $1 AND tenant_id = $2 RETURNING workspace_key`, id, tenantID).Scan(&key)
	return deref(key), notFound(err)
}

// SnapshotBytes is what the tenant's snapshots hold in the object store.
func (s *Store) SnapshotBytes(ctx context.Context, tenantID string) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT coalesce(sum(bytes), 0) FROM snapshots WHERE tenant_id = $1`, tenantID).Scan(&n)
	return n, err
}

// ForkChild is one of a fork's new sessions: its id, the copy of the
// parent's workspace that is its version 1, and (when the runner that
// forked it restored it at once) its live sandbox.
type ForkChild struct {
	ID        string
	Workspace jobs.WorkspaceCopy
	Live      string
}

// ForkSession makes a stateful session's fork: the children, each a copy of
// the parent (language, environment, disk, env, metadata, on_timeout,
// network, public traffic; the TTL ttlSeconds, or the parent's when 0)
// whose live state is cp (or the live sandbox restored from it). The owner
// must own the active parent. A cp without an ID records children that
// have no checkpoint yet (each lives in its sandbox): ForkCheckpoint gives
// them theirs once it is stored.
func (s *Store) ForkSession(ctx context.Context, parentID, owner string, cp Checkpoint, ttlSeconds int, children []ForkChild) ([]jobs.Session, error) {
	var out []jobs.Session
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var ok bool
		if err := tx.QueryRow(ctx, `SELECT true FROM sessions WHERE id = $1 AND owner = $2 AND status = 'active' AND stateful FOR UPDATE`,
			parentID, owner).Scan(&ok); err != nil {
			return notFound(err)
		}
		if cp.ID != "" {
			if err := insertCheckpoint(ctx, tx, cp); err != nil {
				return err
			}
		}
		for _, c := range children {
			sess, err := scanSession(tx.QueryRow(ctx, `
				INSERT INTO sessions (id, tenant_id, language, ttl_seconds, disk_mb, metadata, environment, expires_at, stateful, env,
					on_timeout, checkpoint_id, version, snapshot_key, snapshot_bytes, live_id, network, public_traffic, durable)
				SELECT $2, tenant_id, language, ttl, disk_mb, metadata, environment, now() + make_interval(secs => ttl), true, env,
					on_timeout, nullif($3, ''), 1, $4, $5, nullif($6, ''), network, public_traffic, true
				FROM (SELECT *, CASE WHEN $7::integer > 0 THEN $7::integer ELSE ttl_seconds END AS ttl FROM sessions WHERE id = $1) p
				RETURNING `+sessionColumns, parentID, c.ID, cp.ID, c.Workspace.Key, c.Workspace.Bytes, c.Live, ttlSeconds))
			if err != nil {
				return err
			}
			out = append(out, sess)
		}
		return nil
	})
	return out, err
}

// ForkCheckpoint records cp, a fork's checkpoint stored after its children
// were recorded, as the live state of those of them that have none yet
// (one paused, or checkpointed after a job, meanwhile keeps its own; a
// closed one takes none). It says how many took it.
func (s *Store) ForkCheckpoint(ctx context.Context, cp Checkpoint, children []string) (int, error) {
	var n int
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := insertCheckpoint(ctx, tx, cp); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `UPDATE sessions SET checkpoint_id = $1
			WHERE id = ANY($2) AND checkpoint_id IS NULL AND status = 'active'`, cp.ID, children)
		n = int(tag.RowsAffected())
		return err
	})
	return n, err
}

// UnusedCheckpoints lists up to limit checkpoints older than age that no
// session or snapshot names (the caller deletes their objects, then them).
func (s *Store) UnusedCheckpoints(ctx context.Context, age time.Duration, limit int) ([]Checkpoint, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+checkpointColumns+` FROM checkpoints c
		WHERE created_at < now() - make_interval(secs => $1)
		  AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.checkpoint_id = c.id)
		  AND NOT EXISTS (SELECT 1 FROM snapshots n WHERE n.checkpoint_id = c.id)
		ORDER BY created_at LIMIT $2`, age.Seconds(), limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Checkpoint, error) { return scanCheckpoint(row) })
}

// DeleteCheckpoint deletes the row of a checkpoint nothing names (false if
// something named it meanwhile: it stays).
func (s *Store) DeleteCheckpoint(ctx context.Context, id string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM checkpoints c WHERE id = $1
		AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.checkpoint_id = c.id)
		AND NOT EXISTS (SELECT 1 FROM snapshots n WHERE n.checkpoint_id = c.id)`, id)
	if err != nil {
		var pgErr interface{ SQLState() string }
		if errors.As(err, &pgErr) && pgErr.SQLState() == "23503" { // named meanwhile
			return false, nil
		}
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// inTx runs f in a transaction, committed if f returns nil.
func (s *Store) inTx(ctx context.Context, f func(pgx.Tx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	if err := f(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
