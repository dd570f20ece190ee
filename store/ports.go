package store

import (
	"context"
	"encoding/json"
	"time"
)

// PortRoute is what the ingress needs to route a request to a session's
// port, read by the session's id alone (the request may carry no
// credential: a session's ports are public unless it says otherwise).
type PortRoute struct {
	// Principal is the session's tenant, with its quotas (no key).
	Principal Principal
	Stateful  bool
	// Live names the live sandbox holding the session's live state (""
	// for none); Paused, and Checkpoint the live state a job would restore.
	Live       string
	Paused     bool
	Checkpoint string
	// PublicTraffic: anyone with the URL may reach the ports.
	PublicTraffic bool
	TTLSeconds    int
	ExpiresAt     time.Time
	// Metadata are the session's.
	Metadata map[string]string
}

// PortRoute reads the route to an active session's ports, or ErrNotFound
// (no such session, closed, or expired).
func (s *Store) PortRoute(ctx context.Context, sessionID string) (PortRoute, error) {
	var r PortRoute
	var meta []byte
	err := s.pool.QueryRow(ctx, `SELECT s.tenant_id, `+limitColumns+`, s.stateful, coalesce(s.live_id, ''), s.paused,
			coalesce(s.checkpoint_id, ''), s.public_traffic, s.ttl_seconds, s.expires_at, s.metadata
		FROM sessions s JOIN tenants t ON t.id = s.tenant_id
		WHERE s.id = $1 AND s.status = 'active' AND s.expires_at > now()`, sessionID).
		Scan(append(append([]any{&r.Principal.TenantID}, limitDest(&r.Principal.Limits)...),
			&r.Stateful, &r.Live, &r.Paused, &r.Checkpoint, &r.PublicTraffic, &r.TTLSeconds, &r.ExpiresAt, &meta)...)
	if err != nil {
		return r, notFound(err)
	}
	r.ExpiresAt = r.ExpiresAt.UTC()
	return r, json.Unmarshal(meta, &r.Metadata)
}

// TouchSession extends an active, running session as its traffic keeps
// it: it expires no sooner than its timeout from now (as after a job).
// Its tokens' deadline is not moved. ErrNotFound if it is not active.
func (s *Store) TouchSession(ctx context.Context, tenantID, sessionID string) (time.Time, error) {
	var until time.Time
	err := s.pool.QueryRow(ctx, `UPDATE sessions SET last_used_at = now(),
			expires_at = greatest(expires_at, now() + make_interval(secs => ttl_seconds))
		WHERE id = $1 AND tenant_id = $2 AND status = 'active' AND expires_at > now() AND NOT paused
		RETURNING expires_at`, sessionID, tenantID).Scan(&until)
	return until.UTC(), notFound(err)
}
