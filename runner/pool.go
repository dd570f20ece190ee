package runner

import (
	"context"
	"errors"
	"time"

	"github.com/gantryhq/gantry/jobs"
)

// pool is the fleet's unbound containers: started ahead of demand with the
// pool's limits profile and the built-in skills in place, bound to nobody
// yet. Its target grows toward Max after misses and shrinks back toward
// Min when quiet. It is one of the fleet's books, kept under the fleet's
// lock; a container joins it and leaves it only through the fleet (make,
// take), whose setLocked checks the move.
type pool struct {
	unbound  []*Container
	creating int
	target   int
	lastMiss time.Time
	// ready is closed and replaced whenever a container joins the pool,
	// waking attempts waiting for one.
	ready chan struct{}
	// wake pokes the upkeep loop to fill the pool.
	wake chan struct{}
}

func newPool(cfg FleetConfig) *pool {
	return &pool{target: cfg.Min, ready: make(chan struct{}), wake: make(chan struct{}, 1)}
}

// pop takes the container made last, if any.
func (p *pool) pop() (*Container, bool) {
	n := len(p.unbound)
	if n == 0 {
		return nil, false
	}
	c := p.unbound[n-1]
	p.unbound = p.unbound[:n-1]
	return c, true
}

// popOldest takes the container made first, if any: the one memory
// admission retires first.
func (p *pool) popOldest() (*Container, bool) {
	if len(p.unbound) == 0 {
		return nil, false
	}
	c := p.unbound[0]
	p.unbound = p.unbound[1:]
	return c, true
}

// add puts c in the pool and wakes the attempts waiting for one.
func (p *pool) add(c *Container) {
	p.unbound = append(p.unbound, c)
	close(p.ready)
	p.ready = make(chan struct{})
}

// drain takes every container out, for retirement.
func (p *pool) drain() []*Container {
	all := p.unbound
	p.unbound = nil
	return all
}

// expire takes out the containers that died and those that waited past
// maxAge.
func (p *pool) expire(now time.Time, maxAge time.Duration, dead func(*Container) bool) (died, old []*Container) {
	kept := p.unbound[:0]
	for _, c := range p.unbound {
		switch {
		case dead(c):
			died = append(died, c)
		case now.Sub(c.born) > maxAge:
			old = append(old, c)
		default:
			kept = append(kept, c)
		}
	}
	p.unbound = kept
	return died, old
}

func (p *pool) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// take returns an unbound container made with these limits, or false (a
// cold start) when the limits differ from the pool's or the pool stays
// empty for a second. When containers are being made, waiting for one is
// faster than making another: both need the same CPU.
func (f *fleet) take(ctx context.Context, lim jobs.Limits) (*Container, bool) {
	if f.cfg.Min == 0 || lim != f.cfg.Limits.Container() {
		return nil, false
	}
	deadline := time.NewTimer(time.Second)
	defer deadline.Stop()
	p := f.pool
	for {
		f.mu.Lock()
		if c, ok := p.pop(); ok {
			f.gaugesLocked()
			f.mu.Unlock()
			p.poke()
			return c, true
		}
		p.lastMiss = time.Now()
		p.target = min(p.target+1, f.cfg.Max)
		ready, creating := p.ready, p.creating
		f.mu.Unlock()
		p.poke()
		if creating == 0 {
			return nil, false
		}
		select {
		case <-ready:
		case <-deadline.C:
			return nil, false
		case <-ctx.Done():
			return nil, false
		}
	}
}

// fillers bounds how many containers the pool makes at once.
const fillers = 3

// fill starts making containers until the pool (with what is being made)
// holds its target.
func (f *fleet) fill(ctx context.Context) {
	p := f.pool
	for ctx.Err() == nil {
		f.mu.Lock()
		if f.cfg.Min == 0 || p.creating >= fillers || len(p.unbound)+p.creating >= p.target {
			f.mu.Unlock()
			return
		}
		// The pool takes only memory that is free: it never waits for
		// memory, nor has anything retired for it.
		mb := f.sb.memoryMB(f.cfg.Limits.Container())
		if f.mem != nil && !f.mem.tryReserve(mb) {
			f.mu.Unlock()
			return
		}
		if f.mem == nil {
			mb = 0
		}
		p.creating++
		f.mu.Unlock()
		f.pending.Go(func() { f.make(ctx, mb) })
	}
}

// make makes one container for the pool, whose memory mb is reserved.
func (f *fleet) make(ctx context.Context, mb int64) {
	c, err := f.sb.Create(ctx, ContainerSpec{Pool: true, Limits: f.cfg.Limits.Container()})
	if err != nil {
		f.unadmit(mb)
	} else {
		c.memMB = mb
	}
	if err == nil {
		// The built-in skills go in now, off the path of the job: a tenant
		// with no skills of its own then needs nothing more.
		if stamp, files, err := f.skills.get(ctx, ""); err == nil && c.conn.Skills(ctx, files) == nil {
			c.skills = stamp
		}
	}
	f.mu.Lock()
	f.pool.creating--
	if err == nil {
		if f.closed || ctx.Err() != nil {
			f.mu.Unlock()
			f.retire(c, "shutdown")
			return
		}
		f.setLocked(c, ctrUnbound)
		f.pool.add(c)
		f.gaugesLocked()
	}
	f.mu.Unlock()
	if errors.Is(err, errWarmFailed) {
		// Counted as a retirement: the zygote's health, on the dashboard.
		f.m.retired.WithLabelValues("warm interpreter failed").Inc()
	}
	if err != nil && ctx.Err() == nil {
		f.log.Warn("warm a container", "err", err)
		select { // Docker is unwell: do not spin
		case <-time.After(2 * time.Second):
		case <-ctx.Done():
		}
	}
	f.pool.poke()
}

// shrink moves the pool's target back toward Min after a quiet minute.
func (p *pool) shrink(now time.Time, minSize int) {
	if now.Sub(p.lastMiss) > time.Minute && p.target > minSize {
		p.target--
	}
}
