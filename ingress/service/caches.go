package service

import (
	"crypto/sha256"
	"encoding/json"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"github.com/nats-io/nats.go"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
	"github.com/gantryhq/gantry/store"
)

// KeyCacheTTL is how long an ingress trusts a key lookup it made. A revoked
// key is dropped from every ingress's cache at once when the revocation is
// announced on NATS (gantry keys revoke does); if the announcement is lost,
// the key keeps working on an ingress that cached it for up to this long.
const KeyCacheTTL = 5 * time.Second

// authCache remembers recent key lookups, so that busy clients (pollers,
// log streams) do not cost a database query per request, and recent
// session token checks (sessiontoken.go) likewise. Entries are keyed by the
// key's (or token's) SHA-256, never the key. When full, the least recently
// used entry makes room: a burst of new keys costs one lookup each, not a
// stampede of every client at once. A token's entry carries the key that
// issued it, so that revoking the key drops its tokens too.
type authCache struct {
	lru *expirable.LRU[[32]byte, authEntry]
}

// authEntry is a cached lookup: the principal, and for a session token
// until when it opens its session.
type authEntry struct {
	p     store.Principal
	until time.Time
}

func newAuthCache(ttl time.Duration, size int) *authCache {
	return &authCache{lru: expirable.NewLRU[[32]byte, authEntry](size, nil, ttl)}
}

func (c *authCache) get(key string) (store.Principal, bool) {
	e, ok := c.lru.Get(sha256.Sum256([]byte(key)))
	return e.p, ok
}

func (c *authCache) put(key string, p store.Principal) {
	c.lru.Add(sha256.Sum256([]byte(key)), authEntry{p: p})
}

// getToken is a cached session token check: the principal it acts as,
// and until when it opens its session.
func (c *authCache) getToken(token string) (authEntry, bool) {
	return c.lru.Get(sha256.Sum256([]byte(sessionTokenCacheKey + token)))
}

func (c *authCache) putToken(token string, e authEntry) {
	c.lru.Add(sha256.Sum256([]byte(sessionTokenCacheKey+token)), e)
}

// onRevoked drops a revoked key from the cache at once, so that it stops
// working on this ingress now rather than when its cache entry expires.
func (c *authCache) onRevoked(log *slog.Logger) nats.MsgHandler {
	return func(m *nats.Msg) {
		var ev queue.KeyRevoked
		if err := json.Unmarshal(m.Data, &ev); err != nil || ev.KeyID == "" {
			log.Warn("malformed key revocation message", "err", err)
			return
		}
		c.dropKey(ev.KeyID)
		log.Info("API key revoked", "key_id", ev.KeyID, "tenant_id", ev.TenantID)
	}
}

// dropKey forgets every lookup that resolved to the key with this id, and
// every token it issued.
func (c *authCache) dropKey(keyID string) {
	for _, h := range c.lru.Keys() {
		if e, ok := c.lru.Peek(h); ok && e.p.KeyID == keyID {
			c.lru.Remove(h)
		}
	}
}

// doneJobs keeps recently read finished jobs: a finished job never changes,
// so polls of it need no database query. It holds at most maxBytes of
// output in all (a job's output can be megabytes), evicting the least
// recently read job first.
type doneJobs struct {
	maxBytes int64
	ttl      time.Duration
	// history is how long finished jobs are kept (0: forever): a job the
	// retention sweep deletes within ttl is not cached, so no replica
	// serves a deleted job from its cache.
	history time.Duration
	lru     *expirable.LRU[string, jobs.Job] // key: tenant id + job id

	mu    sync.Mutex // orders check-then-add and trimming
	bytes atomic.Int64
}

func newDoneJobs(maxBytes int64, ttl time.Duration) *doneJobs {
	c := &doneJobs{maxBytes: maxBytes, ttl: ttl}
	c.lru = expirable.NewLRU(0, func(_ string, j jobs.Job) { c.bytes.Add(-jobSize(j)) }, ttl)
	return c
}

func jobSize(j jobs.Job) int64 { return int64(len(j.Stdout) + len(j.Stderr) + 1024) }

func (c *doneJobs) get(tenantID, id string) (jobs.Job, bool) {
	return c.lru.Get(tenantID + "/" + id)
}

func (c *doneJobs) put(tenantID string, j jobs.Job) {
	size := jobSize(j)
	if !j.Status.Terminal() || size > c.maxBytes/64 {
		return // big outputs are read from the store each time
	}
	if j.Webhook != nil && !j.Webhook.Settled() {
		return // its webhook's attempts are still to come
	}
	if c.history > 0 && (j.FinishedAt == nil || j.FinishedAt.Add(c.history).Before(time.Now().Add(c.ttl))) {
		return // it may be deleted while cached
	}
	key := tenantID + "/" + j.ID
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lru.Contains(key) {
		return
	}
	c.lru.Add(key, j)
	c.bytes.Add(size)
	for c.bytes.Load() > c.maxBytes {
		if _, _, ok := c.lru.RemoveOldest(); !ok {
			break
		}
	}
}
