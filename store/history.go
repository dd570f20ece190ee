package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gantryhq/gantry/jobs"
)

// ExpiredJob is a finished job the retention sweep deletes, with what it
// left in the object store.
type ExpiredJob struct {
	ID       string
	TenantID string
	// Attempt is the job's last attempt.
	Attempt int
	// Artifacts are the files the job stored.
	Artifacts []jobs.Artifact
	// StdoutKey and StderrKey are its moved output ("" if kept in the row).
	StdoutKey, StderrKey string
}

// DeleteFinishedBefore deletes up to limit jobs that finished before
// cutoff, oldest first, and returns how many it deleted. In one
// transaction it locks them (FOR UPDATE SKIP LOCKED: replicas sweeping at
// the same moment take different jobs, and nobody waits), hands them to
// drop, which deletes their objects, and deletes the rows only if drop
// succeeded, so no row outlives its objects' deletion unnoticed and no
// object is left without its row but for a failed drop, retried next time.
func (s *Store) DeleteFinishedBefore(ctx context.Context, cutoff time.Time, limit int, drop func(ctx context.Context, batch []ExpiredJob) error) (int, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	rows, err := tx.Query(ctx, `
		SELECT id, tenant_id, attempt, artifacts, stdout_key, stderr_key FROM jobs
		WHERE finished_at < $1 ORDER BY finished_at LIMIT $2 FOR UPDATE SKIP LOCKED`, cutoff, limit)
	if err != nil {
		return 0, fmt.Errorf("select expired jobs: %w", err)
	}
	batch, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ExpiredJob, error) {
		var j ExpiredJob
		var arts []byte
		var outKey, errKey *string
		if err := row.Scan(&j.ID, &j.TenantID, &j.Attempt, &arts, &outKey, &errKey); err != nil {
			return j, err
		}
		j.StdoutKey, j.StderrKey = deref(outKey), deref(errKey)
		return j, json.Unmarshal(arts, &j.Artifacts)
	})
	if err != nil || len(batch) == 0 {
		return 0, err
	}
	if err := drop(ctx, batch); err != nil {
		return 0, err
	}
	ids := make([]string, len(batch))
	for i, j := range batch {
		ids[i] = j.ID
	}
	tag, err := tx.Exec(ctx, `DELETE FROM jobs WHERE id = ANY($1)`, ids)
	if err != nil {
		return 0, fmt.Errorf("delete expired jobs: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, err
	}
	return int(tag.RowsAffected()), nil
}

// JobTenant returns the tenant a job belongs to, or ErrNotFound.
func (s *Store) JobTenant(ctx context.Context, id string) (string, error) {
	var tenantID string
	err := s.pool.QueryRow(ctx, `SELECT tenant_id FROM jobs WHERE id = $1`, id).Scan(&tenantID)
	return tenantID, notFound(err)
}
