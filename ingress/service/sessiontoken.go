package service

import (
	"context"
	"crypto/hmac"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store"
)

// A session token is a bearer credential for one session only: it lets its
// holder use the session's live sandbox and files as the tenant that made
// it, and nothing else (no other session, no job history, no settings).
// E2B's SDKs call it the sandbox's access token (envdAccessToken) and send
// it on every call inside the sandbox, where they send no API key.
//
// It is derived, not stored: "gst_", the tenant id in base64url, ".", and
// an HMAC of the tenant and session ids under GANTRY_SECRET_KEY. The same
// session always has the same token; it stops working when the session is
// closed or expires (the session is no longer found), and a token for one
// session proves nothing about any other.
const sessionTokenPrefix = "gst_"

// sessionTokenCacheKey prefixes a token's entry in the key cache: a token
// is never an API key (lookupKey refuses what lacks store.KeyPrefix).
const sessionTokenCacheKey = "session\x00"

// SessionToken is the caller's token for one of its sessions (which must
// exist). It needs GANTRY_SECRET_KEY.
func (sb *Sandboxes) SessionToken(ctx context.Context, p Principal, sessionID string) (string, error) {
	if _, err := sb.s.Session(ctx, p, sessionID); err != nil {
		return "", err
	}
	mac, err := sb.sessionMAC(p.TenantID, sessionID)
	if err != nil {
		return "", err
	}
	return sessionTokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(p.TenantID)) + "." +
		base64.RawURLEncoding.EncodeToString(mac), nil
}

// SessionTokens says whether this server can issue session tokens (it has
// GANTRY_SECRET_KEY).
func (sb *Sandboxes) SessionTokens() bool { return sb.s.cfg.Box.Enabled() }

func (sb *Sandboxes) sessionMAC(tenantID, sessionID string) ([]byte, error) {
	s := sb.s
	if !s.cfg.Box.Enabled() {
		return nil, &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable,
			Message: "session tokens need GANTRY_SECRET_KEY, which this server was started without"}
	}
	return s.cfg.Box.Hash([]byte(tenantID+"/"+sessionID), "session-token")
}

// AuthenticateSessionToken checks a session token for the session it was
// presented with and admits the request under the tenant's rate, as
// Authenticate does for keys. A token that is malformed, forged, or made
// for another session is an Error with CodeUnauthenticated; the session
// itself is not looked up here (the operation that follows finds it, or
// not).
func (sb *Sandboxes) AuthenticateSessionToken(ctx context.Context, token, sessionID, source string) (Principal, error) {
	s := sb.s
	bad := &Error{Status: http.StatusUnauthorized, Code: CodeUnauthenticated, Message: "invalid access token for this sandbox"}
	if token == "" {
		return Principal{}, &Error{Status: http.StatusUnauthorized, Code: CodeUnauthenticated, Message: "missing access token"}
	}
	if err := keyThrottled(s.badKeys, source); err != nil {
		return Principal{}, err
	}
	tenantID, ok := parseSessionToken(token)
	if !ok || !jobs.ValidID("ses", sessionID) {
		s.badKeys.allow(source, failedKeysPerSecond)
		return Principal{}, bad
	}
	want, err := sb.sessionMAC(tenantID, sessionID)
	if err != nil {
		return Principal{}, err
	}
	got, _ := base64.RawURLEncoding.DecodeString(token[strings.LastIndexByte(token, '.')+1:])
	if !hmac.Equal(got, want) {
		s.badKeys.allow(source, failedKeysPerSecond)
		return Principal{}, bad
	}
	// The tenant's quotas, cached like a key's lookup (a token names no
	// key: revoking keys leaves it working until its session ends).
	p, ok := s.auth.get(sessionTokenCacheKey + token)
	if !ok {
		limits, err := s.store.TenantLimits(ctx, tenantID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return Principal{}, bad
		case err != nil:
			return Principal{}, Unavailable("cannot check the access token: the database is unavailable")
		}
		p = Principal{TenantID: tenantID, Limits: limits}
		s.auth.put(sessionTokenCacheKey+token, p)
	}
	bindMeter(ctx, p)
	return p, s.rates.admit(p.TenantID, s.Limits(p))
}

// parseSessionToken returns the tenant id a token names, if it has the
// token's form.
func parseSessionToken(token string) (string, bool) {
	rest, ok := strings.CutPrefix(token, sessionTokenPrefix)
	if !ok || len(rest) > 256 {
		return "", false
	}
	enc, _, ok := strings.Cut(rest, ".")
	if !ok {
		return "", false
	}
	tenant, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil || !jobs.ValidID("ten", string(tenant)) {
		return "", false
	}
	return string(tenant), true
}
