package ingress

import (
	"fmt"
	"math"
	"net/http"
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

// allow takes a token from the tenant's bucket; when there is none it
// says how long until there is.
func (rl *rateLimits) allow(tenantID string, perSecond float64) (bool, time.Duration) {
	limit, burst := rate.Limit(perSecond), max(1, int(math.Ceil(2*perSecond)))
	rl.mu.Lock()
	b, ok := rl.buckets.Get(tenantID)
	switch {
	case !ok:
		b = rate.NewLimiter(limit, burst)
		rl.buckets.Add(tenantID, b)
	case b.Limit() != limit:
		b.SetLimit(limit)
		b.SetBurst(burst)
	}
	rl.mu.Unlock()
	r := b.Reserve()
	if d := r.Delay(); d > 0 {
		r.Cancel()
		return false, d
	}
	return true, 0
}

// limits returns the tenant's quotas with the operator's defaults filled in.
func (s *Server) limits(p store.Principal) jobs.TenantLimits { return p.Limits.Or(s.cfg.TenantLimits) }

// admitRate answers 429 when the tenant went past its request rate.
func (s *Server) admitRate(p store.Principal) error {
	l := s.limits(p)
	ok, wait := s.rates.allow(p.TenantID, l.RequestsPerSecond)
	if ok {
		return nil
	}
	return &APIError{Status: http.StatusTooManyRequests, Code: CodeRateLimited, RetryAfter: int(math.Ceil(wait.Seconds())),
		Message: fmt.Sprintf("too many requests: this tenant may make %g per second; retry after the time in Retry-After", l.RequestsPerSecond)}
}
