package ports

import (
	"math"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"golang.org/x/time/rate"
)

// limits bound one ingress's traffic to sandboxes' ports: requests in
// progress (a WebSocket counts as long as it is open) and requests per
// second, per sandbox and per tenant. The runner holding a sandbox bounds
// its connections again, across every ingress.
type limits struct {
	cfg Config

	mu    sync.Mutex
	conns map[string]int // by "s:"+session and "t:"+tenant

	rates *expirable.LRU[string, *rate.Limiter]
}

func newLimits(cfg Config) *limits {
	return &limits{cfg: cfg, conns: map[string]int{}, rates: expirable.NewLRU[string, *rate.Limiter](20000, nil, 10*time.Minute)}
}

// refusal says which bound a request met.
type refusal struct {
	sandbox bool // the sandbox's (else the tenant's)
	conns   bool // connections (else the rate)
	limit   float64
	wait    time.Duration
}

// admit takes a request to the session's port, or says which bound it
// met; done gives its connection back.
func (l *limits) admit(sessionID, tenantID string) (done func(), ref *refusal) {
	if d := l.take("s:"+sessionID, l.cfg.SandboxRate); d > 0 {
		return nil, &refusal{sandbox: true, limit: l.cfg.SandboxRate, wait: d}
	}
	if d := l.take("t:"+tenantID, l.cfg.TenantRate); d > 0 {
		return nil, &refusal{limit: l.cfg.TenantRate, wait: d}
	}
	s, t := "s:"+sessionID, "t:"+tenantID
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.conns[s] >= l.cfg.SandboxConns:
		return nil, &refusal{sandbox: true, conns: true, limit: float64(l.cfg.SandboxConns)}
	case l.conns[t] >= l.cfg.TenantConns:
		return nil, &refusal{conns: true, limit: float64(l.cfg.TenantConns)}
	}
	l.conns[s]++
	l.conns[t]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			for _, k := range []string{s, t} {
				if l.conns[k]--; l.conns[k] <= 0 {
					delete(l.conns, k)
				}
			}
		})
	}, nil
}

// take takes a token from key's bucket (perSecond, a burst of twice
// that): 0, or how long until there is one.
func (l *limits) take(key string, perSecond float64) time.Duration {
	b, ok := l.rates.Get(key)
	if !ok {
		b = rate.NewLimiter(rate.Limit(perSecond), max(1, int(math.Ceil(2*perSecond))))
		l.rates.Add(key, b)
	}
	r := b.Reserve()
	if d := r.Delay(); d > 0 {
		r.Cancel()
		return d
	}
	return 0
}

// open counts the requests in progress.
func (l *limits) open() (sandboxes, total int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, n := range l.conns {
		if k[0] == 's' {
			sandboxes++
			total += n
		}
	}
	return sandboxes, total
}
