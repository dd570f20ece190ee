package ingress

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"
)

// Invalid API keys are throttled per source address, so that guessing keys
// costs time and cannot keep Postgres busy: each address may present
// failedKeysPerSecond keys that do not check out, in bursts of twice that;
// past it, keys this ingress has not seen valid lately are answered 429
// without a lookup. A key found valid in the last KeyCacheTTL still passes,
// so a client behind the same address (a proxy, a NAT) is not locked out
// by another's guessing for longer than that.
const failedKeysPerSecond = 5

// keySource is the address a request's key attempts are counted against:
// the peer's, or behind a trusted proxy (GANTRY_TRUSTED_PROXIES) the
// nearest address in X-Forwarded-For that is not one of the proxies.
func (s *Server) keySource(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil || !s.trusted(addr) {
		return host
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		hop, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break
		}
		if !s.trusted(hop) {
			return hop.String()
		}
	}
	return host
}

func (s *Server) trusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range s.cfg.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// keyThrottled answers 429 when the source has presented too many invalid
// keys; it takes nothing from the source's allowance.
func (s *Server) keyThrottled(source string) error {
	if wait := s.badKeys.wait(source, failedKeysPerSecond); wait > 0 {
		return &APIError{Status: http.StatusTooManyRequests, Code: CodeRateLimited, RetryAfter: int(math.Ceil(wait.Seconds())),
			Message: fmt.Sprintf("too many invalid API keys from this address (at most %d a second); retry after the time in Retry-After", failedKeysPerSecond)}
	}
	return nil
}

// keyFailed counts an invalid key against its source.
func (s *Server) keyFailed(source string) { s.badKeys.allow(source, failedKeysPerSecond) }

// wait is how long until the bucket of key has a token, without taking
// one (0: it has one now).
func (rl *rateLimits) wait(key string, perSecond float64) time.Duration {
	rl.mu.Lock()
	b, ok := rl.buckets.Get(key)
	rl.mu.Unlock()
	if !ok {
		return 0
	}
	now := time.Now()
	if tokens := b.TokensAt(now); tokens < 1 {
		return time.Duration((1 - tokens) / perSecond * float64(time.Second))
	}
	return 0
}
