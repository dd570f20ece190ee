package store

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/gantryhq/gantry/jobs"
)

// PutSecret sets a tenant's secret to sealed (made by the caller: the
// store never sees a value), belonging to sessionID when it is not "" (it
// then goes with the session). created says whether it is new.
func (s *Store) PutSecret(ctx context.Context, tenantID, name, sessionID string, sealed []byte) (sec jobs.Secret, created bool, err error) {
	var sid *string
	if sessionID != "" {
		sid = &sessionID
	}
	err = s.pool.QueryRow(ctx, `
		INSERT INTO secrets (tenant_id, name, session_id, sealed) VALUES ($1, $2, $3, $4)
		ON CONFLICT (tenant_id, name) DO UPDATE SET sealed = excluded.sealed, session_id = excluded.session_id, updated_at = now()
		RETURNING name, created_at, updated_at, created_at = updated_at`, tenantID, name, sid, sealed).
		Scan(&sec.Name, &sec.CreatedAt, &sec.UpdatedAt, &created)
	sec.CreatedAt, sec.UpdatedAt = sec.CreatedAt.UTC(), sec.UpdatedAt.UTC()
	return sec, created, err
}

// ListSecrets lists the tenant's own secrets (not its sessions'), by name.
func (s *Store) ListSecrets(ctx context.Context, tenantID string) ([]jobs.Secret, error) {
	rows, err := s.pool.Query(ctx, `SELECT name, created_at, updated_at FROM secrets
		WHERE tenant_id = $1 AND session_id IS NULL ORDER BY name`, tenantID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (jobs.Secret, error) {
		var sec jobs.Secret
		err := r.Scan(&sec.Name, &sec.CreatedAt, &sec.UpdatedAt)
		sec.CreatedAt, sec.UpdatedAt = sec.CreatedAt.UTC(), sec.UpdatedAt.UTC()
		return sec, err
	})
}

// GetSecret returns the tenant's own secret (its dates), or ErrNotFound.
func (s *Store) GetSecret(ctx context.Context, tenantID, name string) (jobs.Secret, error) {
	var sec jobs.Secret
	err := s.pool.QueryRow(ctx, `SELECT name, created_at, updated_at FROM secrets
		WHERE tenant_id = $1 AND name = $2 AND session_id IS NULL`, tenantID, name).Scan(&sec.Name, &sec.CreatedAt, &sec.UpdatedAt)
	sec.CreatedAt, sec.UpdatedAt = sec.CreatedAt.UTC(), sec.UpdatedAt.UTC()
	return sec, notFound(err)
}

// DeleteSecret deletes the tenant's own secret, or answers ErrNotFound.
func (s *Store) DeleteSecret(ctx context.Context, tenantID, name string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM secrets WHERE tenant_id = $1 AND name = $2 AND session_id IS NULL`, tenantID, name)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// MissingSecrets returns those of names the tenant has no secret by (its
// own, or sessionID's when it is not "").
func (s *Store) MissingSecrets(ctx context.Context, tenantID, sessionID string, names []string) ([]string, error) {
	if len(names) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT n FROM unnest($2::text[]) AS n
		WHERE NOT EXISTS (SELECT 1 FROM secrets WHERE tenant_id = $1 AND name = n AND (session_id IS NULL OR session_id = $3))
		ORDER BY n`, tenantID, names, sessionID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// SealedSecrets returns the sealed values of those of names the tenant has
// (its own, or sessionID's when it is not ""), by name.
func (s *Store) SealedSecrets(ctx context.Context, tenantID, sessionID string, names []string) (map[string][]byte, error) {
	out := map[string][]byte{}
	if len(names) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT name, sealed FROM secrets
		WHERE tenant_id = $1 AND name = ANY($2) AND (session_id IS NULL OR session_id = $3)`, tenantID, names, sessionID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var sealed []byte
		if err := rows.Scan(&name, &sealed); err != nil {
			return nil, err
		}
		out[name] = sealed
	}
	return out, rows.Err()
}

// DeleteSessionSecrets deletes the session's own secrets but those named
// in keep.
func (s *Store) DeleteSessionSecrets(ctx context.Context, tenantID, sessionID string, keep []string) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM secrets WHERE tenant_id = $1 AND session_id = $2 AND NOT (name = ANY($3))`,
		tenantID, sessionID, append([]string{}, keep...))
	return err
}

// SetSessionNetwork replaces the tenant's active session's network (nil:
// none) and returns the session, or ErrNotFound.
func (s *Store) SetSessionNetwork(ctx context.Context, tenantID, id string, n *jobs.Network) (jobs.Session, error) {
	sess, err := scanSession(s.pool.QueryRow(ctx, `UPDATE sessions SET network = $3
		WHERE id = $1 AND tenant_id = $2 AND status = 'active' AND expires_at > now()
		RETURNING `+sessionColumns, id, tenantID, networkJSON(n)))
	return sess, notFound(err)
}

// SessionNetwork returns a session's network (nil: none), whatever its
// state; ErrNotFound when it is gone.
func (s *Store) SessionNetwork(ctx context.Context, sessionID string) (*jobs.Network, error) {
	var raw []byte
	if err := s.pool.QueryRow(ctx, `SELECT network FROM sessions WHERE id = $1`, sessionID).Scan(&raw); err != nil {
		return nil, notFound(err)
	}
	return decodeNetwork(raw)
}

// networkJSON is a network as its column holds it (nil: NULL).
func networkJSON(n *jobs.Network) []byte {
	if n.Empty() {
		return nil
	}
	b, _ := json.Marshal(n)
	return b
}

func decodeNetwork(raw []byte) (*jobs.Network, error) {
	if raw == nil {
		return nil, nil
	}
	var n jobs.Network
	if err := json.Unmarshal(raw, &n); err != nil {
		return nil, errors.New("decode a session's network: " + err.Error())
	}
	return &n, nil
}

// TenantCA returns the tenant's egress CA (its certificate, and its key
// sealed), "" and nil while it has none.
func (s *Store) TenantCA(ctx context.Context, tenantID string) (cert string, sealedKey []byte, err error) {
	var c *string
	err = s.pool.QueryRow(ctx, `SELECT egress_ca_cert, egress_ca_key FROM tenants WHERE id = $1`, tenantID).Scan(&c, &sealedKey)
	if err != nil {
		return "", nil, notFound(err)
	}
	if c == nil {
		return "", nil, nil
	}
	return *c, sealedKey, nil
}

// SetTenantCA keeps cert and sealedKey as the tenant's egress CA unless it
// has one already, and returns the one it has then (two runners making
// one at once agree on the first).
func (s *Store) SetTenantCA(ctx context.Context, tenantID, cert string, sealedKey []byte) (string, []byte, error) {
	if _, err := s.pool.Exec(ctx, `UPDATE tenants SET egress_ca_cert = $2, egress_ca_key = $3
		WHERE id = $1 AND egress_ca_cert IS NULL`, tenantID, cert, sealedKey); err != nil {
		return "", nil, err
	}
	return s.TenantCA(ctx, tenantID)
}
