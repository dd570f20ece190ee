package store

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gantryhq/gantry/pii"
)

var piiKindRE = regexp.MustCompile(`^[A-Z]{1,32}$`)

// SetTenantPII turns privacy tokens on or off for a tenant.
func (s *Store) SetTenantPII(ctx context.Context, tenantID string, on bool) error {
	tag, err := s.pool.Exec(ctx, `UPDATE tenants SET pii_tokens = $2 WHERE id = $1`, tenantID, on)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// TenantPII reports whether a tenant has privacy tokens on.
func (s *Store) TenantPII(ctx context.Context, tenantID string) (bool, error) {
	var on bool
	err := s.pool.QueryRow(ctx, `SELECT pii_tokens FROM tenants WHERE id = $1`, tenantID).Scan(&on)
	return on, notFound(err)
}

// touchPIIToken finds the tenant's token for valueHash and makes it live
// for at least ttl from now (an expired token not yet deleted comes back).
const touchPIIToken = `UPDATE pii_tokens SET expires_at = greatest(expires_at, now() + $3 * interval '1 microsecond')
	WHERE tenant_id = $1 AND value_hash = $2 RETURNING kind, n`

// PIIToken returns the number of the tenant's token for a value: the
// existing one for valueHash, its expiry extended to at least now+ttl, or
// else the next number for (tenant, kind), stored with the sealed value.
// Concurrent calls for one value get one number; for different values,
// different numbers. Numbers are never reused, even after their tokens
// expire and are deleted. A valueHash already used for another kind gives
// ErrConflict; an unknown tenant ErrNotFound.
func (s *Store) PIIToken(ctx context.Context, tenantID, kind string, valueHash, sealed []byte, ttl time.Duration) (int, error) {
	if !piiKindRE.MatchString(kind) {
		return 0, fmt.Errorf("pii kind %q: use 1-32 uppercase letters", kind)
	}
	if len(valueHash) == 0 || len(sealed) == 0 {
		return 0, errors.New("pii token needs a value hash and a sealed value")
	}
	if ttl <= 0 {
		return 0, fmt.Errorf("pii token ttl must be positive, got %s", ttl)
	}
	us := ttl.Microseconds()
	touch := func(q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}) (int, bool, error) {
		var k string
		var n int
		err := q.QueryRow(ctx, touchPIIToken, tenantID, valueHash, us).Scan(&k, &n)
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, false, nil
		}
		if err != nil {
			return 0, false, err
		}
		if k != kind {
			return 0, false, fmt.Errorf("pii value hash is a %s token, not %s: %w", k, kind, ErrConflict)
		}
		return n, true, nil
	}

	// Fast path: a value seen before.
	if n, ok, err := touch(s.pool); err != nil || ok {
		return n, err
	}

	// New value: allocate under a lock per tenant and kind, checking again
	// in case a concurrent call stored it first.
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, "pii:"+tenantID+":"+kind); err != nil {
		return 0, err
	}
	n, ok, err := touch(tx)
	if err != nil {
		return 0, err
	}
	if !ok {
		err = tx.QueryRow(ctx, `
			INSERT INTO pii_counters (tenant_id, kind, last_n) VALUES ($1, $2, 1)
			ON CONFLICT (tenant_id, kind) DO UPDATE SET last_n = pii_counters.last_n + 1
			RETURNING last_n`, tenantID, kind).Scan(&n)
		if err == nil {
			_, err = tx.Exec(ctx, `
				INSERT INTO pii_tokens (tenant_id, kind, n, value_hash, value_sealed, expires_at)
				VALUES ($1, $2, $3, $4, $5, now() + $6 * interval '1 microsecond')`,
				tenantID, kind, n, valueHash, sealed, us)
		}
		if err != nil {
			var pgErr *pgconn.PgError
			switch {
			case errors.As(err, &pgErr) && pgErr.Code == "23503":
				return 0, fmt.Errorf("tenant %s: %w", tenantID, ErrNotFound)
			case isUniqueViolation(err):
				// Only a hash collision across kinds gets here: the lock
				// serialises writers of one kind.
				return 0, fmt.Errorf("pii value hash is taken by another kind: %w", ErrConflict)
			}
			return 0, fmt.Errorf("store pii token: %w", err)
		}
	}
	return n, tx.Commit(ctx)
}

// PIIValues returns the sealed values of the tenant's unexpired tokens
// among refs. Refs that are unknown, expired or another tenant's are
// absent from the map.
func (s *Store) PIIValues(ctx context.Context, tenantID string, refs []pii.Ref) (map[pii.Ref][]byte, error) {
	out := make(map[pii.Ref][]byte, len(refs))
	if len(refs) == 0 {
		return out, nil
	}
	kinds := make([]string, len(refs))
	ns := make([]int32, len(refs))
	for i, r := range refs {
		if r.N <= 0 || r.N > 1<<31-1 {
			continue // cannot exist; kinds[i] "" matches nothing
		}
		kinds[i], ns[i] = r.Kind, int32(r.N)
	}
	rows, err := s.pool.Query(ctx, `
		SELECT t.kind, t.n, t.value_sealed FROM pii_tokens t
		JOIN (SELECT DISTINCT * FROM unnest($2::text[], $3::int[])) r (kind, n) ON t.kind = r.kind AND t.n = r.n
		WHERE t.tenant_id = $1 AND t.expires_at > now()`, tenantID, kinds, ns)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var r pii.Ref
		var sealed []byte
		if err := rows.Scan(&r.Kind, &r.N, &sealed); err != nil {
			return nil, err
		}
		out[r] = sealed
	}
	return out, rows.Err()
}

// DeleteExpiredPII deletes up to limit expired tokens (limit <= 0: 1000)
// and returns how many it deleted. Sweepers on several replicas may run it
// at once.
func (s *Store) DeleteExpiredPII(ctx context.Context, limit int) (int, error) {
	if limit <= 0 {
		limit = 1000
	}
	tag, err := s.pool.Exec(ctx, `
		DELETE FROM pii_tokens WHERE (tenant_id, kind, n) IN (
			SELECT tenant_id, kind, n FROM pii_tokens WHERE expires_at <= now()
			ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED)
		AND expires_at <= now()`, limit)
	if err != nil {
		return 0, err
	}
	return int(tag.RowsAffected()), nil
}
