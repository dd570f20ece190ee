package runner

import (
	"context"
	"sync"
	"time"

	"github.com/gantryhq/gantry/jobs"
)

// warmSession is a session container a runner keeps after a job, so that
// the session's next job here can skip restoring the workspace. The
// snapshot in the object store stays the truth: a warm container is used
// only when it holds the session's current version.
type warmSession struct {
	ctr      *Container
	version  int64
	limits   jobs.Limits
	lastUsed time.Time
}

// warmCache holds at most max warm session containers, dropping the least
// recently used ones beyond that and any idle longer than idle.
type warmCache struct {
	max  int
	idle time.Duration

	mu sync.Mutex
	m  map[string]*warmSession
}

func newWarmCache(max int, idle time.Duration) *warmCache {
	return &warmCache{max: max, idle: idle, m: map[string]*warmSession{}}
}

// take removes and returns the session's container, if any: the caller
// owns it from then on.
func (c *warmCache) take(sessionID string) *warmSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.m[sessionID]
	delete(c.m, sessionID)
	return w
}

func (c *warmCache) put(sessionID string, w *warmSession) {
	w.lastUsed = time.Now()
	c.mu.Lock()
	if old := c.m[sessionID]; old != nil && old.ctr != w.ctr {
		go old.ctr.Remove(context.Background()) //nolint:errcheck
	}
	c.m[sessionID] = w
	var evict []*warmSession
	for len(c.m) > c.max {
		oldestID := ""
		for id, s := range c.m {
			if oldestID == "" || s.lastUsed.Before(c.m[oldestID].lastUsed) {
				oldestID = id
			}
		}
		evict = append(evict, c.m[oldestID])
		delete(c.m, oldestID)
	}
	c.mu.Unlock()
	for _, w := range evict {
		w.ctr.Remove(context.Background()) //nolint:errcheck
	}
}

// drop removes the session's container, if this runner keeps one.
func (c *warmCache) drop(sessionID string) {
	if w := c.take(sessionID); w != nil {
		w.ctr.Remove(context.Background()) //nolint:errcheck
	}
}

// sweep removes containers idle for too long.
func (c *warmCache) sweep() {
	c.mu.Lock()
	var stale []*warmSession
	for id, w := range c.m {
		if time.Since(w.lastUsed) > c.idle {
			stale = append(stale, w)
			delete(c.m, id)
		}
	}
	c.mu.Unlock()
	for _, w := range stale {
		w.ctr.Remove(context.Background()) //nolint:errcheck
	}
}

// closeAll removes every container.
func (c *warmCache) closeAll() {
	c.mu.Lock()
	all := c.m
	c.m = map[string]*warmSession{}
	c.mu.Unlock()
	for _, w := range all {
		w.ctr.Remove(context.Background()) //nolint:errcheck
	}
}
