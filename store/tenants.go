package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/gantryhq/gantry/jobs"
)

// Tenant is an isolated customer of gantry: every job, session and skill
// belongs to exactly one.
type Tenant struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
	// Limits are the quotas the operator set for the tenant (zero fields:
	// the operator's defaults).
	Limits jobs.TenantLimits `json:"limits"`
}

// limitColumns selects a tenants row's quotas, NULL as zero.
const limitColumns = `coalesce(requests_per_second, 0), coalesce(max_queued, 0), coalesce(max_running, 0), coalesce(max_live_sessions, 0),
	coalesce(max_snapshot_mb, 0)`

func limitDest(l *jobs.TenantLimits) []any {
	return []any{&l.RequestsPerSecond, &l.MaxQueued, &l.MaxRunning, &l.MaxLiveSessions, &l.MaxSnapshotMB}
}

// APIKey describes an API key. The key itself is shown once, at creation,
// and never stored.
type APIKey struct {
	ID        string     `json:"id"`
	TenantID  string     `json:"tenant_id"`
	Name      string     `json:"name"`
	Prefix    string     `json:"prefix"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

// Principal is who an authenticated request acts for.
type Principal struct {
	TenantID string
	KeyID    string
	// Limits are the tenant's quotas as set (zero: the default), read
	// with the key.
	Limits jobs.TenantLimits
}

// KeyPrefix starts every gantry API key, so keys are easy to recognise in
// secret scanners.
const KeyPrefix = "gk_"

var tenantNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// CreateTenant creates a tenant. Names are lowercase letters, digits, '.',
// '_' and '-'; a taken name gives ErrConflict.
func (s *Store) CreateTenant(ctx context.Context, name string) (Tenant, error) {
	if !tenantNameRE.MatchString(name) {
		return Tenant{}, fmt.Errorf("tenant name %q: use 1-63 lowercase letters, digits, '.', '_' or '-'", name)
	}
	t := Tenant{ID: jobs.NewID("ten"), Name: name}
	err := s.pool.QueryRow(ctx,
		`INSERT INTO tenants (id, name) VALUES ($1, $2) RETURNING created_at`, t.ID, name).Scan(&t.CreatedAt)
	if isUniqueViolation(err) {
		return Tenant{}, fmt.Errorf("tenant %q: %w", name, ErrConflict)
	}
	return t, err
}

// TenantByName finds a tenant by its name.
func (s *Store) TenantByName(ctx context.Context, name string) (Tenant, error) {
	var t Tenant
	err := s.pool.QueryRow(ctx, `SELECT id, name, created_at, `+limitColumns+` FROM tenants WHERE name = $1`, name).
		Scan(append([]any{&t.ID, &t.Name, &t.CreatedAt}, limitDest(&t.Limits)...)...)
	return t, notFound(err)
}

// EnsureTenant returns the tenant with this name, creating it if needed.
func (s *Store) EnsureTenant(ctx context.Context, name string) (Tenant, error) {
	t, err := s.CreateTenant(ctx, name)
	if err == nil {
		return t, nil
	}
	if t, err2 := s.TenantByName(ctx, name); err2 == nil {
		return t, nil
	}
	return Tenant{}, err
}

// ListTenants lists every tenant by name.
func (s *Store) ListTenants(ctx context.Context) ([]Tenant, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, name, created_at, `+limitColumns+` FROM tenants ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Tenant
	for rows.Next() {
		var t Tenant
		if err := rows.Scan(append([]any{&t.ID, &t.Name, &t.CreatedAt}, limitDest(&t.Limits)...)...); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// NewAPIKey returns a fresh random API key.
func NewAPIKey() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return KeyPrefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// CreateAPIKey makes a new key for the tenant and returns it with its
// description. The key is not recoverable afterwards.
func (s *Store) CreateAPIKey(ctx context.Context, tenantID, name string) (string, APIKey, error) {
	key := NewAPIKey()
	k, err := s.AddAPIKey(ctx, tenantID, name, key)
	return key, k, err
}

// AddAPIKey registers a key chosen by the caller (gantry dev uses it for
// GANTRY_DEV_API_KEY). Adding a key that already exists for the same tenant
// is a no-op; for another tenant it is ErrConflict.
func (s *Store) AddAPIKey(ctx context.Context, tenantID, name, key string) (APIKey, error) {
	if len(key) < 16 || len(key) > 256 || strings.ContainsAny(key, " \t\r\n") {
		return APIKey{}, fmt.Errorf("api key must be 16-256 characters without whitespace")
	}
	sum := sha256.Sum256([]byte(key))
	k := APIKey{ID: jobs.NewID("key"), TenantID: tenantID, Name: name, Prefix: keyPrefix(key)}
	err := s.pool.QueryRow(ctx, `
		INSERT INTO api_keys (id, tenant_id, name, prefix, hash) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (hash) DO UPDATE SET revoked_at = NULL WHERE api_keys.tenant_id = EXCLUDED.tenant_id
		RETURNING id, created_at`,
		k.ID, tenantID, name, k.Prefix, sum[:]).Scan(&k.ID, &k.CreatedAt)
	if err != nil {
		if notFound(err) == ErrNotFound {
			return APIKey{}, fmt.Errorf("api key belongs to another tenant: %w", ErrConflict)
		}
		return APIKey{}, fmt.Errorf("add api key: %w", err)
	}
	return k, nil
}

// RevokedKey is an API key just revoked.
type RevokedKey struct {
	ID       string
	TenantID string
	// KeyEpoch is the tenant's count of key revocations, this one included.
	KeyEpoch int64
}

// RevokeAPIKey revokes a key by id; requests with it fail from then on. In
// the same statement it moves the tenant's key epoch on, which runners read
// with each claim to retire the tenant's warm containers. ErrNotFound if no
// active key has this id.
func (s *Store) RevokeAPIKey(ctx context.Context, id string) (RevokedKey, error) {
	k := RevokedKey{ID: id}
	err := s.pool.QueryRow(ctx, `
		WITH k AS (UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL RETURNING tenant_id)
		UPDATE tenants SET key_epoch = key_epoch + 1 FROM k WHERE tenants.id = k.tenant_id
		RETURNING tenants.id, tenants.key_epoch`, id).Scan(&k.TenantID, &k.KeyEpoch)
	return k, notFound(err)
}

// ListAPIKeys lists a tenant's keys (without the keys themselves).
func (s *Store) ListAPIKeys(ctx context.Context, tenantID string) ([]APIKey, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT id, tenant_id, name, prefix, created_at, revoked_at FROM api_keys
		WHERE tenant_id = $1 ORDER BY created_at`, tenantID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []APIKey
	for rows.Next() {
		var k APIKey
		if err := rows.Scan(&k.ID, &k.TenantID, &k.Name, &k.Prefix, &k.CreatedAt, &k.RevokedAt); err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// Authenticate resolves an API key to its tenant. An unknown or revoked key
// gives ErrNotFound.
func (s *Store) Authenticate(ctx context.Context, key string) (Principal, error) {
	sum := sha256.Sum256([]byte(key))
	var p Principal
	err := s.pool.QueryRow(ctx, `SELECT k.tenant_id, k.id, `+limitColumns+`
		FROM api_keys k JOIN tenants t ON t.id = k.tenant_id WHERE k.hash = $1 AND k.revoked_at IS NULL`, sum[:]).
		Scan(append([]any{&p.TenantID, &p.KeyID}, limitDest(&p.Limits)...)...)
	return p, notFound(err)
}

// TenantLimits returns the quotas set for the tenant (zero fields: the
// defaults). ErrNotFound if there is no such tenant.
func (s *Store) TenantLimits(ctx context.Context, tenantID string) (jobs.TenantLimits, error) {
	var l jobs.TenantLimits
	err := s.pool.QueryRow(ctx, `SELECT `+limitColumns+` FROM tenants WHERE id = $1`, tenantID).Scan(limitDest(&l)...)
	return l, notFound(err)
}

// LimitsUpdate changes some of a tenant's quotas: a nil field is left as
// it is, a zero one goes back to the operator's default.
type LimitsUpdate struct {
	RequestsPerSecond *float64
	MaxQueued         *int
	MaxRunning        *int
	MaxLiveSessions   *int
	MaxSnapshotMB     *int
}

// SetTenantLimits applies u to the tenant's quotas and returns them.
// ErrNotFound if there is no such tenant.
func (s *Store) SetTenantLimits(ctx context.Context, tenantID string, u LimitsUpdate) (jobs.TenantLimits, error) {
	var l jobs.TenantLimits
	err := s.pool.QueryRow(ctx, `UPDATE tenants SET
			requests_per_second = CASE WHEN $2 THEN nullif($3::double precision, 0) ELSE requests_per_second END,
			max_queued = CASE WHEN $4 THEN nullif($5::integer, 0) ELSE max_queued END,
			max_running = CASE WHEN $6 THEN nullif($7::integer, 0) ELSE max_running END,
			max_live_sessions = CASE WHEN $8 THEN nullif($9::integer, 0) ELSE max_live_sessions END,
			max_snapshot_mb = CASE WHEN $10 THEN nullif($11::integer, 0) ELSE max_snapshot_mb END
		WHERE id = $1 RETURNING `+limitColumns, tenantID,
		u.RequestsPerSecond != nil, deref0(u.RequestsPerSecond), u.MaxQueued != nil, deref0(u.MaxQueued),
		u.MaxRunning != nil, deref0(u.MaxRunning), u.MaxLiveSessions != nil, deref0(u.MaxLiveSessions),
		u.MaxSnapshotMB != nil, deref0(u.MaxSnapshotMB)).Scan(limitDest(&l)...)
	return l, notFound(err)
}

func deref0[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// keyPrefix is the part of a key safe to show to identify it.
func keyPrefix(key string) string {
	if len(key) > 10 {
		return key[:10]
	}
	return key[:len(key)/2]
}
