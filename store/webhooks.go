package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/webhook"
)

// A finished job's webhook delivery is written into webhook_deliveries by a
// trigger on the statement that finishes the job (migration 00008), so it
// commits with the result whichever path finished the job.

func decodeDelivery(data []byte) (*jobs.WebhookDelivery, error) {
	var d jobs.WebhookDelivery
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("decode webhook delivery: %w", err)
	}
	d.CreatedAt = d.CreatedAt.UTC()
	utc(d.NextAttemptAt)
	utc(d.FinishedAt)
	if d.Attempts == nil {
		d.Attempts = []jobs.WebhookAttempt{}
	}
	for i := range d.Attempts {
		d.Attempts[i].At = d.Attempts[i].At.UTC()
	}
	return &d, nil
}

// TenantWebhookURL is the tenant's default webhook URL ("" for none).
func (s *Store) TenantWebhookURL(ctx context.Context, tenantID string) (string, error) {
	var u *string
	err := s.pool.QueryRow(ctx, `SELECT webhook_url FROM tenants WHERE id = $1`, tenantID).Scan(&u)
	return deref(u), notFound(err)
}

// SetTenantWebhookURL sets the tenant's default webhook URL ("" removes it).
// It applies to jobs that finish from now on without a URL of their own.
func (s *Store) SetTenantWebhookURL(ctx context.Context, tenantID, url string) error {
	tag, err := s.pool.Exec(ctx, `UPDATE tenants SET webhook_url = $2 WHERE id = $1`, tenantID, nilIfEmpty(url))
	if err == nil && tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return err
}

const webhookSecretColumns = `webhook_secret, webhook_secret_previous, webhook_secret_previous_until`

func scanSecrets(row pgx.Row) (webhook.SealedSecrets, error) {
	var w webhook.SealedSecrets
	err := row.Scan(&w.Current, &w.Previous, &w.PreviousUntil)
	if w.PreviousUntil != nil && !w.PreviousUntil.After(time.Now()) {
		w.Previous, w.PreviousUntil = nil, nil
	}
	utc(w.PreviousUntil)
	return w, notFound(err)
}

// WebhookSecrets returns the tenant's signing secrets.
func (s *Store) WebhookSecrets(ctx context.Context, tenantID string) (webhook.SealedSecrets, error) {
	return scanSecrets(s.pool.QueryRow(ctx, `SELECT `+webhookSecretColumns+` FROM tenants WHERE id = $1`, tenantID))
}

// InitWebhookSecret stores sealed as the tenant's signing secret unless it
// has one, and returns the secrets it has then: callers racing to make the
// first secret all get the one that won.
func (s *Store) InitWebhookSecret(ctx context.Context, tenantID string, sealed []byte) (webhook.SealedSecrets, error) {
	if _, err := s.pool.Exec(ctx, `UPDATE tenants SET webhook_secret = $2 WHERE id = $1 AND webhook_secret IS NULL`, tenantID, sealed); err != nil {
		return webhook.SealedSecrets{}, err
	}
	return s.WebhookSecrets(ctx, tenantID)
}

// RotateWebhookSecret makes sealed the tenant's signing secret; the one it
// replaces goes on signing for overlap, so receivers can switch over.
func (s *Store) RotateWebhookSecret(ctx context.Context, tenantID string, sealed []byte, overlap time.Duration) (webhook.SealedSecrets, error) {
	return scanSecrets(s.pool.QueryRow(ctx, `
		UPDATE tenants SET webhook_secret_previous = webhook_secret,
			webhook_secret_previous_until = CASE WHEN webhook_secret IS NULL THEN NULL ELSE now() + make_interval(secs => $3) END,
			webhook_secret = $2
		WHERE id = $1 RETURNING `+webhookSecretColumns, tenantID, sealed, overlap.Seconds()))
}

// ClaimWebhooks takes up to limit deliveries that are due, for lease: they
// are not due again until it ends, so another ingress takes one over only
// if this one died trying. Ingresses claiming at once skip each other's
// rows.
func (s *Store) ClaimWebhooks(ctx context.Context, limit int, lease time.Duration) ([]webhook.DueDelivery, error) {
	rows, err := s.pool.Query(ctx, `
		UPDATE webhook_deliveries d SET next_attempt_at = now() + make_interval(secs => $2)
		WHERE d.id IN (SELECT id FROM webhook_deliveries
			WHERE status = 'pending' AND next_attempt_at <= now()
			ORDER BY next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED)
		RETURNING d.id, d.tenant_id, d.job_id, d.url, d.created_at, jsonb_array_length(d.attempts),
			coalesce((SELECT trace_parent FROM jobs j WHERE j.id = d.job_id), '')`, limit, lease.Seconds())
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (webhook.DueDelivery, error) {
		var w webhook.DueDelivery
		err := row.Scan(&w.ID, &w.TenantID, &w.JobID, &w.URL, &w.CreatedAt, &w.Attempts, &w.TraceParent)
		return w, err
	})
}

// RecordWebhookAttempt appends an attempt to a pending delivery and sets
// what comes next: status pending with the time of the next attempt, or
// delivered or failed for good.
func (s *Store) RecordWebhookAttempt(ctx context.Context, id string, a jobs.WebhookAttempt, status string, next time.Time) error {
	attempt, err := json.Marshal([]jobs.WebhookAttempt{a})
	if err != nil {
		return err
	}
	var nextAt *time.Time
	if status == jobs.WebhookPending {
		nextAt = &next
	}
	_, err = s.pool.Exec(ctx, `
		UPDATE webhook_deliveries SET attempts = attempts || $2::jsonb, status = $3, next_attempt_at = $4,
			finished_at = CASE WHEN $3 = 'pending' THEN NULL ELSE now() END
		WHERE id = $1 AND status = 'pending'`, id, attempt, status, nextAt)
	return err
}
