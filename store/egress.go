package store

import "context"

// TenantEgress returns the hosts the tenant's jobs may reach through the
// egress proxy (none: no network).
func (s *Store) TenantEgress(ctx context.Context, tenantID string) ([]string, error) {
	var allow []string
	err := s.pool.QueryRow(ctx, `SELECT egress_allow FROM tenants WHERE id = $1`, tenantID).Scan(&allow)
	return allow, notFound(err)
}

// SetTenantEgress replaces the tenant's egress allow-list (empty: none).
func (s *Store) SetTenantEgress(ctx context.Context, tenantID string, allow []string) error {
	if allow == nil {
		allow = []string{}
	}
	tag, err := s.pool.Exec(ctx, `UPDATE tenants SET egress_allow = $2 WHERE id = $1`, tenantID, allow)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}
