package store

import (
	"context"
	"time"
)

// A session token (the ingress's, E2B's envdAccessToken) opens one session
// for the key that asked for it, until the session's token_until: the
// store keeps that deadline, which only callers with an API key move
// (OpenSessionTokens, SetSessionTTL), never the session's jobs.

// OpenSessionTokens records that a token for the tenant's active session
// is handed out now: tokens then open it until at least its current
// expiry. It returns the deadline, or ErrNotFound.
func (s *Store) OpenSessionTokens(ctx context.Context, tenantID, id string) (time.Time, error) {
	var until time.Time
	err := s.pool.QueryRow(ctx, `UPDATE sessions SET token_until = greatest(token_until, expires_at)
		WHERE id = $1 AND tenant_id = $2 AND status = 'active' AND expires_at > now()
		RETURNING token_until`, id, tenantID).Scan(&until)
	return until.UTC(), notFound(err)
}

// TokenGrant is what a session token presents, checked against the store:
// its key's principal, and until when tokens open its session.
type TokenGrant struct {
	Principal Principal
	// Until is the session's token_until (while it is paused, at least
	// its expiry); zero when the session is not active (closed, expired,
	// never a token handed out).
	Until time.Time
}

// SessionTokenGrant checks that the key a token names is the tenant's and
// not revoked (ErrNotFound otherwise: its tokens died with it, as they do
// when the tenant is deleted), and reads the session's token deadline.
func (s *Store) SessionTokenGrant(ctx context.Context, keyID, tenantID, sessionID string) (TokenGrant, error) {
	g := TokenGrant{Principal: Principal{TenantID: tenantID, KeyID: keyID}}
	var until *time.Time
	// While a session is paused, its tokens open it until its expiry: a
	// pause (at its timeout, say) does not end the sandbox for them, and
	// the caller decides whether a call to it resumes it.
	err := s.pool.QueryRow(ctx, `SELECT `+limitColumns+`,
			CASE WHEN s.paused AND s.token_until IS NOT NULL THEN greatest(s.token_until, s.expires_at) ELSE s.token_until END
		FROM api_keys k JOIN tenants t ON t.id = k.tenant_id
		LEFT JOIN sessions s ON s.id = $3 AND s.tenant_id = k.tenant_id AND s.status = 'active' AND s.expires_at > now()
		WHERE k.id = $1 AND k.tenant_id = $2 AND k.revoked_at IS NULL`, keyID, tenantID, sessionID).
		Scan(append(limitDest(&g.Principal.Limits), &until)...)
	if until != nil {
		g.Until = until.UTC()
	}
	return g, notFound(err)
}
