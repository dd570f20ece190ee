package runner

import (
	"context"
	"time"
)

// The fleet's upkeep runs apart from the jobs' path, as nomad's docker
// driver reconciles dangling containers apart from its task handles: one
// loop (run) fills the pool when poked, tidies the fleet's books every 5 s
// (the containers that died or waited too long are retired) and, every
// reapAge, removes the gantry containers any runner left stopped on this
// Docker host (Sandbox.Reap).

// tidyEvery is how often the fleet looks for containers that died or
// waited too long.
const tidyEvery = 5 * time.Second

func (f *fleet) run(ctx context.Context) {
	tidy := time.NewTicker(tidyEvery)
	defer tidy.Stop()
	reap := time.NewTicker(reapAge)
	defer reap.Stop()
	for {
		f.fill(ctx)
		select {
		case <-ctx.Done():
			return
		case <-f.pool.wake:
		case <-tidy.C:
			f.tidy(ctx)
		case <-reap.C:
			if n, err := f.sb.Reap(ctx); err != nil {
				f.log.Warn("reap stopped containers", "err", err)
			} else if n > 0 {
				f.log.Info("removed stopped containers left by runners", "count", n)
			}
		}
	}
}

// tidy retires containers that died (a Docker restart kills them all),
// unbound ones that waited too long, bound ones idle too long and stateful
// sessions' whose session expired, and shrinks the pool's target back
// toward Min after a quiet minute.
func (f *fleet) tidy(ctx context.Context) {
	listed := time.Now()
	running, err := f.sb.running(ctx)
	if err != nil {
		return
	}
	if f.gv != nil {
		gvRunning, err := f.gv.running()
		if err != nil {
			return
		}
		for id := range gvRunning {
			running[id] = true
		}
	}
	// A container made after the list was asked for is missing from it
	// without being dead.
	dead := func(c *Container) bool { return !running[c.id] && c.born.Before(listed) }
	now := time.Now()
	f.mu.Lock()
	died, old := f.pool.expire(now, f.cfg.MaxAge, dead)
	diedIdle, idle := f.idle.expire(now, f.cfg.Idle, dead)
	parked := f.parked.expire(now, f.cfg.Idle, dead)
	f.pool.shrink(now, f.cfg.Min)
	f.gaugesLocked()
	f.mu.Unlock()
	f.retireAll(append(append(died, diedIdle...), parked.died...), "died")
	f.retireAll(old, "max age")
	f.retireAll(append(idle, parked.idle...), "idle")
	f.retireLive(parked.expired, "idle", "its session was idle past its TTL")
	f.retireLive(parked.deadLive, "died", "its container stopped")
}
