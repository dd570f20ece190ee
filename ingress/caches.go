package ingress

import (
	"crypto/sha256"
	"sync"
	"time"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store"
)

// authCache remembers recent key lookups for a few seconds, so that busy
// clients (pollers, log streams) do not cost a database query per request.
// Entries are keyed by the key's SHA-256, never the key; a revoked key stops
// working within the TTL.
type authCache struct {
	ttl time.Duration
	max int

	mu sync.Mutex
	m  map[[32]byte]authEntry
}

type authEntry struct {
	p       store.Principal
	expires time.Time
}

func newAuthCache(ttl time.Duration, max int) *authCache {
	return &authCache{ttl: ttl, max: max, m: map[[32]byte]authEntry{}}
}

func (c *authCache) get(key string) (store.Principal, bool) {
	h := sha256.Sum256([]byte(key))
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[h]
	if !ok || time.Now().After(e.expires) {
		return store.Principal{}, false
	}
	return e.p, true
}

func (c *authCache) put(key string, p store.Principal) {
	h := sha256.Sum256([]byte(key))
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		for k, e := range c.m { // drop expired entries, else start over
			if now.After(e.expires) {
				delete(c.m, k)
			}
		}
		if len(c.m) >= c.max {
			c.m = map[[32]byte]authEntry{}
		}
	}
	c.m[h] = authEntry{p: p, expires: now.Add(c.ttl)}
}

// doneJobs keeps recently read finished jobs: a finished job never changes,
// so polls of it need no database query. It holds at most maxBytes of
// output in all (a job's output can be megabytes).
type doneJobs struct {
	maxBytes int

	mu    sync.Mutex
	m     map[string]jobs.Job // key: tenant id + job id
	bytes int
}

func (c *doneJobs) get(tenantID, id string) (jobs.Job, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	j, ok := c.m[tenantID+"/"+id]
	return j, ok
}

func (c *doneJobs) put(tenantID string, j jobs.Job) {
	if !j.Status.Terminal() {
		return
	}
	size := len(j.Stdout) + len(j.Stderr) + 1024
	if size > c.maxBytes/64 {
		return // big outputs are read from the store each time
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || c.bytes+size > c.maxBytes {
		c.m, c.bytes = map[string]jobs.Job{}, 0
	}
	key := tenantID + "/" + j.ID
	if _, ok := c.m[key]; !ok {
		c.m[key] = j
		c.bytes += size
	}
}
