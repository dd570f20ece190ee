package runner

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/moby/moby/client"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gantryhq/gantry/jobs"
)

// LabelPool marks containers made ahead of demand by the warm pool.
const LabelPool = "dev.gantry.pool"

// PoolConfig sizes the warm pool.
type PoolConfig struct {
	// Min is how many started containers the pool keeps ready; 0 turns the
	// pool off. After misses it grows toward Max, and shrinks back when idle.
	Min, Max int
	// Limits is the profile pooled containers are made with: jobs asking
	// for other limits start a container of their own (the cold path).
	Limits jobs.Limits
	// MaxAge retires pooled containers; with the longest job timeout it
	// bounds how long a pooled container may live.
	MaxAge time.Duration
	// MaxJobTimeout is the longest timeout a job may have.
	MaxJobTimeout time.Duration
}

// pool keeps hardened containers created and started ahead of demand, so
// that a job only needs an exec. A pooled container serves exactly one job
// and is then destroyed: no state ever passes between jobs or tenants.
type pool struct {
	cfg    PoolConfig
	sb     *Sandbox
	skills *skillCache
	log    *slog.Logger

	size   prometheus.Gauge
	hits   prometheus.Counter
	misses *prometheus.CounterVec

	mu       sync.Mutex
	idle     []pooled
	target   int
	lastMiss time.Time
	wake     chan struct{}
}

type pooled struct {
	ctr  *Container
	born time.Time
}

func newPool(cfg PoolConfig, sb *Sandbox, skills *skillCache, log *slog.Logger, reg prometheus.Registerer) *pool {
	if cfg.Max < cfg.Min {
		cfg.Max = cfg.Min
	}
	if cfg.MaxAge == 0 {
		cfg.MaxAge = 30 * time.Minute
	}
	p := &pool{
		cfg: cfg, sb: sb, skills: skills, log: log.With("component", "pool"), target: cfg.Min, wake: make(chan struct{}, 1),
		size: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gantry_pool_size", Help: "Started containers waiting in the warm pool."}),
		hits: prometheus.NewCounter(prometheus.CounterOpts{Name: "gantry_pool_hits_total", Help: "Jobs that got a pooled container."}),
		misses: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gantry_pool_misses_total",
			Help: "Jobs that had to start a container (cold start), by reason: empty pool or limits unlike the pool's."}, []string{"reason"}),
	}
	if reg != nil {
		reg.MustRegister(p.size, p.hits, p.misses)
	}
	return p
}

// take returns a ready container for a job with these limits, or false
// (a cold start) when the pool is empty or the limits differ.
func (p *pool) take(lim jobs.Limits) (*Container, bool) {
	if lim != p.cfg.Limits {
		p.misses.WithLabelValues("limits").Inc()
		return nil, false
	}
	p.mu.Lock()
	n := len(p.idle)
	if n == 0 {
		p.lastMiss = time.Now()
		p.target = min(p.target+1, p.cfg.Max)
		p.mu.Unlock()
		p.misses.WithLabelValues("empty").Inc()
		p.poke()
		return nil, false
	}
	c := p.idle[n-1]
	p.idle = p.idle[:n-1]
	p.size.Set(float64(len(p.idle)))
	p.mu.Unlock()
	p.hits.Inc()
	p.poke()
	return c.ctr, true
}

func (p *pool) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run keeps the pool filled until ctx ends, then removes what it holds.
func (p *pool) run(ctx context.Context) {
	defer p.drain()
	check := time.NewTicker(5 * time.Second)
	defer check.Stop()
	for {
		p.fill(ctx)
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		case <-check.C:
			p.prune(ctx)
		}
	}
}

// fill creates containers until the pool holds its target.
func (p *pool) fill(ctx context.Context) {
	for ctx.Err() == nil {
		p.mu.Lock()
		need := p.target - len(p.idle)
		p.mu.Unlock()
		if need <= 0 {
			return
		}
		ctr, err := p.sb.Create(ctx, ContainerSpec{Pool: true, Limits: p.cfg.Limits, Lifetime: p.cfg.MaxAge + p.cfg.MaxJobTimeout + 5*time.Minute})
		if err != nil {
			if ctx.Err() == nil {
				p.log.Warn("warm a container", "err", err)
				select { // Docker is unwell: do not spin
				case <-time.After(2 * time.Second):
				case <-ctx.Done():
				}
			}
			return
		}
		// Mount the built-in skills now, off the path of the job: a tenant
		// with no skills of its own then needs nothing more.
		if stamp, files, err := p.skills.get(ctx, ""); err == nil && ctr.PutFiles(ctx, files) == nil {
			ctr.skills = stamp
		}
		p.mu.Lock()
		p.idle = append(p.idle, pooled{ctr: ctr, born: time.Now()})
		p.size.Set(float64(len(p.idle)))
		p.mu.Unlock()
	}
}

// prune drops containers that died (a Docker restart kills them all) or
// grew old, and shrinks the target back toward Min after a quiet minute.
func (p *pool) prune(ctx context.Context) {
	res, err := p.sb.docker.ContainerList(ctx, client.ContainerListOptions{
		Filters: make(client.Filters).
			Add("label", LabelPool+"=true").
			Add("label", LabelRunner+"="+p.sb.runnerID).
			Add("status", "running"),
	})
	if err != nil {
		return
	}
	running := map[string]bool{}
	for _, c := range res.Items {
		running[c.ID] = true
	}
	var gone []pooled
	p.mu.Lock()
	kept := p.idle[:0]
	for _, c := range p.idle {
		if running[c.ctr.id] && time.Since(c.born) < p.cfg.MaxAge {
			kept = append(kept, c)
		} else {
			gone = append(gone, c)
		}
	}
	p.idle = kept
	if time.Since(p.lastMiss) > time.Minute && p.target > p.cfg.Min {
		p.target--
	}
	p.size.Set(float64(len(p.idle)))
	p.mu.Unlock()
	for _, c := range gone {
		c.ctr.Remove(context.WithoutCancel(ctx)) //nolint:errcheck
	}
}

func (p *pool) drain() {
	p.mu.Lock()
	all := p.idle
	p.idle = nil
	p.size.Set(0)
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for _, c := range all {
		wg.Add(1)
		go func() { defer wg.Done(); c.ctr.Remove(ctx) }() //nolint:errcheck
	}
	wg.Wait()
}
