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
	// MaxAge retires pooled containers that waited this long.
	MaxAge time.Duration
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
	creating int
	target   int
	lastMiss time.Time
	wake     chan struct{}
	// ready is closed and replaced whenever a container joins the pool,
	// waking jobs waiting for one.
	ready chan struct{}
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
		ready: make(chan struct{}),
		size:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "gantry_pool_size", Help: "Started containers waiting in the warm pool."}),
		hits:  prometheus.NewCounter(prometheus.CounterOpts{Name: "gantry_pool_hits_total", Help: "Jobs that got a pooled container."}),
		misses: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gantry_pool_misses_total",
			Help: "Jobs that had to start a container (cold start), by reason: empty pool or limits unlike the pool's."}, []string{"reason"}),
	}
	if reg != nil {
		reg.MustRegister(p.size, p.hits, p.misses)
	}
	return p
}

// take returns a ready container for a job with these limits, or false
// (a cold start) when the limits differ or the pool stays empty for
// maxWait. When containers are being made, waiting for one is faster than
// making another: both need the same CPU.
func (p *pool) take(ctx context.Context, lim jobs.Limits, maxWait time.Duration) (*Container, bool) {
	if lim.Container() != p.cfg.Limits.Container() {
		p.misses.WithLabelValues("limits").Inc()
		return nil, false
	}
	deadline := time.NewTimer(maxWait)
	defer deadline.Stop()
	for {
		p.mu.Lock()
		if n := len(p.idle); n > 0 {
			c := p.idle[n-1]
			p.idle = p.idle[:n-1]
			p.size.Set(float64(len(p.idle)))
			p.mu.Unlock()
			p.hits.Inc()
			p.poke()
			return c.ctr, true
		}
		p.lastMiss = time.Now()
		p.target = min(p.target+1, p.cfg.Max)
		ready, creating := p.ready, p.creating
		p.mu.Unlock()
		p.poke()
		if creating == 0 {
			p.misses.WithLabelValues("empty").Inc()
			return nil, false
		}
		select {
		case <-ready:
		case <-deadline.C:
			p.misses.WithLabelValues("empty").Inc()
			return nil, false
		case <-ctx.Done():
			return nil, false
		}
	}
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

// fillers bounds how many containers the pool makes at once.
const fillers = 3

// fill starts making containers until the pool (with what is being made)
// holds its target.
func (p *pool) fill(ctx context.Context) {
	for ctx.Err() == nil {
		p.mu.Lock()
		if p.creating >= fillers || len(p.idle)+p.creating >= p.target {
			p.mu.Unlock()
			return
		}
		p.creating++
		p.mu.Unlock()
		go p.make(ctx)
	}
}

func (p *pool) make(ctx context.Context) {
	ctr, err := p.sb.Create(ctx, ContainerSpec{Pool: true, Limits: p.cfg.Limits})
	if err == nil {
		// Mount the built-in skills now, off the path of the job: a tenant
		// with no skills of its own then needs nothing more.
		if stamp, files, err := p.skills.get(ctx, ""); err == nil && ctr.PutSkills(ctx, files) == nil {
			ctr.skills = stamp
		}
	}
	p.mu.Lock()
	p.creating--
	if err == nil {
		if ctx.Err() != nil {
			p.mu.Unlock()
			ctr.Remove(context.WithoutCancel(ctx)) //nolint:errcheck
			return
		}
		p.idle = append(p.idle, pooled{ctr: ctr, born: time.Now()})
		p.size.Set(float64(len(p.idle)))
		close(p.ready)
		p.ready = make(chan struct{})
	}
	p.mu.Unlock()
	if err != nil && ctx.Err() == nil {
		p.log.Warn("warm a container", "err", err)
		select { // Docker is unwell: do not spin
		case <-time.After(2 * time.Second):
		case <-ctx.Done():
		}
	}
	p.poke()
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
