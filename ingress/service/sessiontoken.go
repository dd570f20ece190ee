package service

import (
	"context"
	"crypto/hmac"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store"
)

// A session token is a bearer credential for one session only: it lets its
// holder use the session's live sandbox and files as the tenant that made
// it, and nothing else (no other session, no job history, no settings).
// E2B's SDKs call it the sandbox's access token (envdAccessToken) and send
// it on every call inside the sandbox, where they send no API key.
//
// It is derived, not stored: "gst_", the tenant id and the id of the API
// key that asked for it, each in base64url, and an HMAC of the three with
// the session id under GANTRY_SECRET_KEY (the same key and session always
// have the same token). It works while all of these hold:
//   - the key that asked for it is not revoked (revoking a key drops its
//     tokens from every ingress's cache at once, with the key itself; a
//     deleted tenant's keys, and so its tokens, are gone);
//   - the session is active (not closed, not expired);
//   - the session's token deadline has not passed. Handing out a token
//     (SessionToken) opens the session to tokens until its expiry then;
//     setting its timeout (SetSessionTTL) moves the deadline to the new
//     expiry. Both need an API key. The session's jobs extend the session
//     but never the deadline, so a token cannot keep itself alive by
//     running code: it dies at the timeout a key holder last set, at most
//     jobs.MaxSessionTTL after that call.
//
// A token for one session proves nothing about any other.
const sessionTokenPrefix = "gst_"

// sessionTokenCacheKey prefixes a token's entry in the key cache: a token
// is never an API key (lookupKey refuses what lacks store.KeyPrefix).
const sessionTokenCacheKey = "session\x00"

// SessionToken is the caller's token for one of its sessions (which must
// exist), issued under the caller's API key. Tokens open the session from
// now until at least its current expiry. It needs GANTRY_SECRET_KEY.
func (sb *Sandboxes) SessionToken(ctx context.Context, p Principal, sessionID string) (string, error) {
	if !jobs.ValidID("ses", sessionID) {
		return "", NotFound("session " + strconv.Quote(sessionID))
	}
	if p.KeyID == "" {
		// Every token names the key it dies with: only a caller who
		// presented a key may be issued one.
		return "", errors.New("session token: the caller presented no API key")
	}
	mac, err := sb.sessionMAC(p.TenantID, p.KeyID, sessionID)
	if err != nil {
		return "", err
	}
	if _, err := sb.s.store.OpenSessionTokens(ctx, p.TenantID, sessionID); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return "", NotFound("session " + strconv.Quote(sessionID) + " (it may have expired or been closed)")
		}
		return "", err
	}
	enc := base64.RawURLEncoding.EncodeToString
	return sessionTokenPrefix + enc([]byte(p.TenantID)) + "." + enc([]byte(p.KeyID)) + "." + enc(mac), nil
}

// SessionTokens says whether this server can issue session tokens (it has
// GANTRY_SECRET_KEY).
func (sb *Sandboxes) SessionTokens() bool { return sb.s.cfg.Box.Enabled() }

func (sb *Sandboxes) sessionMAC(tenantID, keyID, sessionID string) ([]byte, error) {
	s := sb.s
	if !s.cfg.Box.Enabled() {
		return nil, &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable,
			Message: "session tokens need GANTRY_SECRET_KEY, which this server was started without"}
	}
	return s.cfg.Box.Hash([]byte(tenantID+"/"+keyID+"/"+sessionID), "session-token")
}

// AuthenticateSessionToken checks a session token for the session it was
// presented with and admits the request under the tenant's rate, as
// Authenticate does for keys. A token that is malformed, forged, made for
// another session, or whose key was revoked is an Error with
// CodeUnauthenticated; one whose session is past its token deadline (or
// closed, or expired) is CodeNotFound: the sandbox is gone, for its holder.
// The check is cached for KeyCacheTTL, as a key's lookup is.
func (sb *Sandboxes) AuthenticateSessionToken(ctx context.Context, token, sessionID, source string) (Principal, error) {
	s := sb.s
	bad := &Error{Status: http.StatusUnauthorized, Code: CodeUnauthenticated, Message: "invalid or revoked access token for this sandbox"}
	if token == "" {
		return Principal{}, &Error{Status: http.StatusUnauthorized, Code: CodeUnauthenticated, Message: "missing access token"}
	}
	if err := keyThrottled(s.badKeys, source); err != nil {
		return Principal{}, err
	}
	t, ok := parseSessionToken(token)
	if !ok || !jobs.ValidID("ses", sessionID) {
		s.badKeys.allow(source, failedKeysPerSecond)
		return Principal{}, bad
	}
	want, err := sb.sessionMAC(t.tenantID, t.keyID, sessionID)
	if err != nil {
		return Principal{}, err
	}
	if !hmac.Equal(t.mac, want) {
		s.badKeys.allow(source, failedKeysPerSecond)
		return Principal{}, bad
	}
	e, ok := s.auth.getToken(token)
	if !ok || !time.Now().Before(e.until) {
		// Not cached, or past the deadline it was cached with (which a
		// key holder may have moved since).
		g, err := s.store.SessionTokenGrant(ctx, t.keyID, t.tenantID, sessionID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return Principal{}, bad
		case err != nil:
			return Principal{}, Unavailable("cannot check the access token: the database is unavailable")
		}
		e = authEntry{p: g.Principal, until: g.Until}
		if !time.Now().Before(e.until) {
			return Principal{}, NotFound("session " + strconv.Quote(sessionID) +
				": its timeout ran out (running code does not extend it; setTimeout or connect with the API key does), or it was closed")
		}
		s.auth.putToken(token, e)
	}
	bindMeter(ctx, e.p)
	return e.p, s.rates.admit(e.p.TenantID, s.Limits(e.p))
}

// sessionToken is a token's parts.
type sessionToken struct {
	tenantID, keyID string
	mac             []byte
}

// parseSessionToken returns what a token names, if it has the token's
// form.
func parseSessionToken(token string) (sessionToken, bool) {
	rest, ok := strings.CutPrefix(token, sessionTokenPrefix)
	if !ok || len(rest) > 256 {
		return sessionToken{}, false
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 {
		return sessionToken{}, false
	}
	var raw [3][]byte
	for i, p := range parts {
		b, err := base64.RawURLEncoding.DecodeString(p)
		if err != nil {
			return sessionToken{}, false
		}
		raw[i] = b
	}
	t := sessionToken{tenantID: string(raw[0]), keyID: string(raw[1]), mac: raw[2]}
	if !jobs.ValidID("ten", t.tenantID) || !jobs.ValidID("key", t.keyID) || len(t.mac) == 0 {
		return sessionToken{}, false
	}
	return t, true
}
