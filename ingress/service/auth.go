package service

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/time/rate"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store"
)

// rateLimits keeps a token bucket per tenant: each ingress lets a tenant
// make its RequestsPerSecond API requests, in bursts of up to twice that.
// With several ingresses behind a balancer, a tenant gets that rate from
// each. The least recently seen tenant's bucket makes room when full (a
// tenant whose bucket was dropped starts again with a full one).
type rateLimits struct {
	mu      sync.Mutex
	buckets *lru.Cache[string, *rate.Limiter]
}

func newRateLimits(size int) *rateLimits {
	c, _ := lru.New[string, *rate.Limiter](size)
	return &rateLimits{buckets: c}
}

// reserve takes a token from the tenant's bucket, now or when one comes if
// that is within maxWait, and says how long to wait for it; ok is false
// (and nothing is taken) when it would come later.
func (rl *rateLimits) reserve(tenantID string, perSecond float64, maxWait time.Duration) (wait time.Duration, ok bool) {
	r := rl.bucket(tenantID, perSecond).Reserve()
	d := r.Delay()
	if d > maxWait {
		r.Cancel()
		return 0, false
	}
	return d, true
}

// bucket is the tenant's token bucket, made or set to the tenant's rate.
func (rl *rateLimits) bucket(tenantID string, perSecond float64) *rate.Limiter {
	limit, burst := rate.Limit(perSecond), max(1, int(math.Ceil(2*perSecond)))
	rl.mu.Lock()
	defer rl.mu.Unlock()
	b, ok := rl.buckets.Get(tenantID)
	switch {
	case !ok:
		b = rate.NewLimiter(limit, burst)
		rl.buckets.Add(tenantID, b)
	case b.Limit() != limit:
		b.SetLimit(limit)
		b.SetBurst(burst)
	}
	return b
}

// allow takes a token from the tenant's bucket; when there is none it
// says how long until there is.
func (rl *rateLimits) allow(tenantID string, perSecond float64) (bool, time.Duration) {
	r := rl.bucket(tenantID, perSecond).Reserve()
	if d := r.Delay(); d > 0 {
		r.Cancel()
		return false, d
	}
	return true, 0
}

// Authenticate resolves an API key to its tenant, and admits the request
// under the tenant's rate limit. Lookups are cached for KeyCacheTTL (a
// revoked key is dropped at once when the revocation is announced). A key
// that is missing, unknown or revoked is an Error with CodeUnauthenticated;
// a tenant past its rate, CodeRateLimited. source is where the request
// came from (its address): a source that presents many invalid keys is
// throttled (CodeRateLimited) without a lookup.
func (s *Service) Authenticate(ctx context.Context, key, source string) (Principal, error) {
	p, err := s.lookupKey(ctx, key, source)
	if err != nil {
		return p, err
	}
	return p, s.rates.admit(p.TenantID, s.Limits(p))
}

// AuthenticateWaiting is Authenticate for clients that do not handle 429
// (the compatible APIs: RL harnesses and judges send bursts and retry only
// what their original server answered under load): a tenant past its
// request rate waits for its turn, up to maxWait, instead of being
// refused. It still answers CodeRateLimited when the wait would be longer,
// and ctx's error when ctx ends first.
func (s *Service) AuthenticateWaiting(ctx context.Context, key, source string, maxWait time.Duration) (Principal, error) {
	p, err := s.lookupKey(ctx, key, source)
	if err != nil {
		return p, err
	}
	l := s.Limits(p)
	wait, ok := s.rates.reserve(p.TenantID, l.RequestsPerSecond, maxWait)
	if !ok {
		return p, s.rates.admit(p.TenantID, l)
	}
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return p, ctx.Err()
		}
	}
	return p, nil
}

// lookupKey resolves a key to its tenant.
func (s *Service) lookupKey(ctx context.Context, key, source string) (Principal, error) {
	if key == "" {
		return Principal{}, &Error{Status: http.StatusUnauthorized, Code: CodeUnauthenticated,
			Message: "missing API key: send the header Authorization: Bearer <key>"}
	}
	if !strings.HasPrefix(key, store.KeyPrefix) {
		if err := keyThrottled(s.badKeys, source); err != nil {
			return Principal{}, err
		}
		s.badKeys.allow(source, failedKeysPerSecond)
		return Principal{}, &Error{Status: http.StatusUnauthorized, Code: CodeUnauthenticated, Message: "invalid or revoked API key"}
	}
	if p, ok := s.auth.get(key); ok {
		bindMeter(ctx, p)
		return p, nil
	}
	if err := keyThrottled(s.badKeys, source); err != nil {
		return Principal{}, err
	}
	p, err := s.store.Authenticate(ctx, key)
	if err == nil {
		s.auth.put(key, p)
	}
	if errors.Is(err, store.ErrNotFound) {
		s.badKeys.allow(source, failedKeysPerSecond)
		return Principal{}, &Error{Status: http.StatusUnauthorized, Code: CodeUnauthenticated, Message: "invalid or revoked API key"}
	}
	if err != nil {
		return Principal{}, Unavailable("cannot check the API key: the database is unavailable")
	}
	bindMeter(ctx, p)
	return p, nil
}

// Limits are the caller's tenant's quotas, the operator's defaults filled
// in.
func (s *Service) Limits(p Principal) jobs.TenantLimits { return p.Limits.Or(s.cfg.TenantLimits) }

// limits returns the tenant's quotas with the operator's defaults filled in.

// admit answers 429 when the tenant went past its request rate.
func (rl *rateLimits) admit(tenantID string, l jobs.TenantLimits) error {
	ok, wait := rl.allow(tenantID, l.RequestsPerSecond)
	if ok {
		return nil
	}
	return &Error{Status: http.StatusTooManyRequests, Code: CodeRateLimited, RetryAfter: int(math.Ceil(wait.Seconds())),
		Message: fmt.Sprintf("too many requests: this tenant may make %g per second; retry after the time in Retry-After", l.RequestsPerSecond)}
}

type principalKey struct{}

// WithPrincipal is ctx carrying the caller, for an adapter that serves a
// request its transport authenticated (MCP, behind the HTTP API's key
// check).
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom is the caller ctx carries (WithPrincipal).
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// Invalid API keys are throttled per source address, so that guessing keys
// costs time and cannot keep Postgres busy: each address may present
// failedKeysPerSecond keys that do not check out, in bursts of twice that;
// past it, keys this ingress has not seen valid lately are answered 429
// without a lookup. A key found valid in the last KeyCacheTTL still passes,
// so a client behind the same address (a proxy, a NAT) is not locked out
// by another's guessing for longer than that.
const failedKeysPerSecond = 5

// keyThrottled answers 429 when the source has presented too many invalid
// keys; it takes nothing from the source's allowance.
func keyThrottled(bad *rateLimits, source string) error {
	if wait := bad.wait(source, failedKeysPerSecond); wait > 0 {
		return &Error{Status: http.StatusTooManyRequests, Code: CodeRateLimited, RetryAfter: int(math.Ceil(wait.Seconds())),
			Message: fmt.Sprintf("too many invalid API keys from this address (at most %d a second); retry after the time in Retry-After", failedKeysPerSecond)}
	}
	return nil
}

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
