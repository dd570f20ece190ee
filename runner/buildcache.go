package runner

import (
	"bytes"
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gantryhq/gantry/agent/wire"
	"github.com/gantryhq/gantry/blob"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store"
)

// Compile once. A compiled language's program is built once and its build
// kept, so that the same program called again (verl sends one call per test
// case, a judge one submission per test) runs without compiling: the build
// goes to the agent with the run (agent.Request.Build).
//
// A build's key is its content: the image (the toolchain's version), the
// language's compile command (its flags), the program's files, its
// workspace files (the compiler reads them) and its environment. The cache
// is the tenant's: a tenant never gets another's build, nor learns from
// the time of a call what another compiled. Each runner keeps builds in
// memory, bounded in bytes (and each tenant to a share of it), least
// recently used out first, one at a time; successful builds are also put
// in the object store, where every runner finds them (blob.BuildKey). A
// build that failed because the compiler said so (it exited non-zero by
// itself) is kept too, on this runner only, under a key that adds the
// memory limit it failed in: its inputs are its key, so it is answered
// only for the very same inputs. A compile killed (time, memory, signal)
// is never kept.

// BuildCacheConfig bounds a runner's builds.
type BuildCacheConfig struct {
	// MaxBytes bounds the builds a runner keeps in memory (0: the default;
	// negative: none are kept, nor read from or put in the object store).
	MaxBytes int64
	// TenantBytes bounds one tenant's share of them (default: a quarter).
	TenantBytes int64
	// TTL is how long a build stays in the object store (default 24 h):
	// the runners sweep older ones.
	TTL time.Duration
}

// WithDefaults fills in zero fields.
func (c BuildCacheConfig) WithDefaults() BuildCacheConfig {
	if c.MaxBytes == 0 {
		c.MaxBytes = 256 << 20
	}
	if c.TenantBytes == 0 || c.TenantBytes > c.MaxBytes {
		c.TenantBytes = max(c.MaxBytes/4, 1)
	}
	if c.TTL == 0 {
		c.TTL = 24 * time.Hour
	}
	return c
}

// build is one kept compile: what it built, or how it failed.
type build struct {
	// OK: the compiler exited 0; Tar is what it built.
	OK  bool   `json:"ok"`
	Tar []byte `json:"tar,omitempty"`
	// ExitCode is the failed compiler's exit status.
	ExitCode int `json:"exit_code,omitempty"`
	// Output is what the compiler printed (warnings too), Truncated when
	// it printed more.
	Output    []byte `json:"output,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
}

func (b *build) size() int64 { return int64(len(b.Tar) + len(b.Output) + 256) }

// buildInputs is what a build's key is made of.
type buildInputs struct {
	tenant   string
	imageID  string
	language string
	compile  []string
	files    []wire.File
	env      map[string]string
}

// key is the content key of a successful build of these inputs.
func (in buildInputs) key() string {
	h := sha256.New()
	field := func(s string) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	field("gantry-build-1")
	field(in.imageID)
	field(in.language)
	for _, a := range in.compile {
		field(a)
	}
	field("")
	files := slices.Clone(in.files)
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	for _, f := range files {
		field(f.Path)
		field(string(f.Data))
	}
	field("")
	names := make([]string, 0, len(in.env))
	for k := range in.env {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		field(k)
		field(in.env[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// failKey is the key of a failed build of a program whose successful
// build would be key, compiled within memoryMB.
func failKey(key string, memoryMB int) string { return fmt.Sprintf("%s-failed-%d", key, memoryMB) }

// BuildStore is the object store's part in the cache.
type BuildStore interface {
	PutStream(ctx context.Context, key string, r io.Reader, contentType string) (int64, error)
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	DeleteOlder(ctx context.Context, prefix string, before time.Time) (int, error)
}

// buildCache is a runner's builds: in memory, and in the object store.
type buildCache struct {
	cfg    BuildCacheConfig
	log    *slog.Logger
	shared BuildStore // nil: none
	m      *buildMetrics

	mu       sync.Mutex
	lru      *list.List // of *buildEntry, most recently used first
	entries  map[string]*list.Element
	bytes    int64
	tenants  map[string]int64         // bytes per tenant
	inflight map[string]chan struct{} // keys being compiled, closed when done
	// seen are the tenants whose builds this runner read or put in the
	// object store, and when: the ones its sweep covers.
	seen map[string]time.Time
}

type buildEntry struct {
	tenant, key string
	b           *build
}

func newBuildCache(cfg BuildCacheConfig, shared BuildStore, log *slog.Logger, reg prometheus.Registerer) *buildCache {
	if cfg.MaxBytes < 0 {
		shared = nil
	}
	return &buildCache{cfg: cfg.WithDefaults(), shared: shared, log: log, m: newBuildMetrics(reg),
		lru: list.New(), entries: map[string]*list.Element{}, tenants: map[string]int64{}, inflight: map[string]chan struct{}{}, seen: map[string]time.Time{}}
}

func (c *buildCache) enabled() bool { return c != nil && c.cfg.MaxBytes > 0 }

func memKey(tenant, key string) string { return tenant + "/" + key }

// getLocal returns the build kept in memory, or nil.
func (c *buildCache) getLocal(tenant, key string) *build {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[memKey(tenant, key)]
	if !ok {
		return nil
	}
	c.lru.MoveToFront(e)
	c.m.lookups.WithLabelValues("memory").Inc()
	return e.Value.(*buildEntry).b
}

// get returns the kept build, from memory or else the object store.
func (c *buildCache) get(ctx context.Context, tenant, key string) *build {
	if b := c.getLocal(tenant, key); b != nil {
		return b
	}
	if c.shared == nil {
		return nil
	}
	gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c.noteTenant(tenant)
	r, err := c.shared.Get(gctx, blob.BuildKey(tenant, key))
	if err != nil {
		if !errors.Is(err, blob.ErrNotFound) {
			c.log.Warn("read a build from the object store", "err", err)
		}
		return nil
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(r, 2*wire.MaxBuild+(1<<20)))
	if errors.Is(err, blob.ErrNotFound) {
		return nil // the object store reports a missing object on the first read
	}
	var b build
	if err != nil || json.Unmarshal(data, &b) != nil || !b.OK || len(b.Tar) == 0 || len(b.Tar) > wire.MaxBuild {
		c.log.Warn("a build in the object store could not be read; compiling", "err", err)
		return nil
	}
	c.keep(tenant, key, &b)
	c.m.lookups.WithLabelValues("object_store").Inc()
	return &b
}

// lookup finds the build of key (or, failing that, a failed build of it
// within memoryMB). When there is none and another attempt of this runner
// is compiling the same program, it waits for that one (until ctx ends)
// and looks again. Otherwise it returns a done func: the caller compiles,
// puts what it got, then calls done, which wakes the others.
func (c *buildCache) lookup(ctx context.Context, tenant, key string, memoryMB int) (*build, func()) {
	for {
		if b := c.get(ctx, tenant, key); b != nil {
			return b, nil
		}
		if b := c.getLocal(tenant, failKey(key, memoryMB)); b != nil {
			return b, nil
		}
		c.mu.Lock()
		wait, busy := c.inflight[memKey(tenant, key)]
		if !busy {
			ch := make(chan struct{})
			c.inflight[memKey(tenant, key)] = ch
			c.mu.Unlock()
			c.m.lookups.WithLabelValues("miss").Inc()
			var once sync.Once
			return nil, func() {
				once.Do(func() {
					c.mu.Lock()
					delete(c.inflight, memKey(tenant, key))
					c.mu.Unlock()
					close(ch)
				})
			}
		}
		c.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, func() {}
		}
	}
}

// put keeps a compile's outcome: a build in memory and in the object
// store, a failure in memory only, under failKey.
func (c *buildCache) put(ctx context.Context, tenant, key string, memoryMB int, b *build) {
	if !b.OK {
		c.keep(tenant, failKey(key, memoryMB), b)
		return
	}
	c.keep(tenant, key, b)
	if c.shared == nil {
		return
	}
	data, err := json.Marshal(b)
	if err != nil {
		return
	}
	c.noteTenant(tenant)
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if _, err := c.shared.PutStream(pctx, blob.BuildKey(tenant, key), bytes.NewReader(data), "application/json"); err != nil {
		c.log.Warn("put a build in the object store", "err", err)
	}
}

// keep puts b in memory, evicting the least recently used builds (the
// tenant's own first while it is over its share) one at a time.
func (c *buildCache) keep(tenant, key string, b *build) {
	size := b.size()
	if size > c.cfg.TenantBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	mk := memKey(tenant, key)
	if e, ok := c.entries[mk]; ok {
		c.lru.MoveToFront(e)
		return
	}
	c.entries[mk] = c.lru.PushFront(&buildEntry{tenant: tenant, key: key, b: b})
	c.bytes += size
	c.tenants[tenant] += size
	for c.tenants[tenant] > c.cfg.TenantBytes {
		c.evictLocked(func(e *buildEntry) bool { return e.tenant == tenant })
	}
	for c.bytes > c.cfg.MaxBytes {
		c.evictLocked(func(*buildEntry) bool { return true })
	}
	c.m.bytes.Set(float64(c.bytes))
}

// evictLocked drops the least recently used build that match says.
func (c *buildCache) evictLocked(match func(*buildEntry) bool) {
	for e := c.lru.Back(); e != nil; e = e.Prev() {
		be := e.Value.(*buildEntry)
		if !match(be) {
			continue
		}
		c.lru.Remove(e)
		delete(c.entries, memKey(be.tenant, be.key))
		size := be.b.size()
		c.bytes -= size
		if c.tenants[be.tenant] -= size; c.tenants[be.tenant] <= 0 {
			delete(c.tenants, be.tenant)
		}
		c.m.evicted.Inc()
		return
	}
}

func (c *buildCache) noteTenant(tenant string) {
	c.mu.Lock()
	c.seen[tenant] = time.Now()
	c.mu.Unlock()
}

// sweep deletes the object store's builds older than the TTL, of the
// tenants this runner used builds of within the TTL (every tenant's
// builds are swept by the runners that serve it).
func (c *buildCache) sweep(ctx context.Context) {
	if c.shared == nil {
		return
	}
	c.mu.Lock()
	var tenants []string
	for t, at := range c.seen {
		if time.Since(at) > c.cfg.TTL {
			delete(c.seen, t)
		}
		tenants = append(tenants, t)
	}
	c.mu.Unlock()
	for _, t := range tenants {
		n, err := c.shared.DeleteOlder(ctx, blob.BuildsPrefix(t), time.Now().Add(-c.cfg.TTL))
		if err != nil {
			c.log.Warn("sweep old builds from the object store", "tenant_id", t, "err", err)
			return
		}
		if n > 0 {
			c.log.Info("deleted old builds from the object store", "tenant_id", t, "count", n)
		}
	}
}

// buildMetrics are the cache's Prometheus metrics.
type buildMetrics struct {
	lookups *prometheus.CounterVec
	evicted prometheus.Counter
	bytes   prometheus.Gauge
}

func newBuildMetrics(reg prometheus.Registerer) *buildMetrics {
	m := &buildMetrics{
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gantry_build_cache_lookups_total",
			Help: "Compiled programs looked up before compiling, by where the build was found: memory, object_store, or miss (compiled)."}, []string{"found"}),
		evicted: prometheus.NewCounter(prometheus.CounterOpts{Name: "gantry_build_cache_evicted_total",
			Help: "Builds dropped from a runner's memory, least recently used first."}),
		bytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gantry_build_cache_bytes",
			Help: "Bytes of builds a runner keeps in memory."}),
	}
	if reg != nil {
		reg.MustRegister(m.lookups, m.evicted, m.bytes)
	}
	return m
}

// report is the job's record of a compile step it did not run: this
// kept build's.
func (b *build) report() *jobs.Compile {
	c := &jobs.Compile{Status: jobs.CompileSucceeded, ExitCode: ptr(0), OutputTruncated: b.Truncated, Cached: true}
	if !b.OK {
		c.Status, c.ExitCode = jobs.CompileFailed, ptr(b.ExitCode)
	}
	return c
}

// useBuild looks for the kept build of the job's program (a compiled
// language's code, not a session's: a session's compile reads its
// workspace). Found, the program runs from it (in.cached); a kept failure
// is the job's result (failed). Not found, the compile step is asked to
// send its build back (keepBuild keeps it). done must be called when the
// attempt is over: other attempts compiling the same program wait for it.
func (a *attempt) useBuild(ctx context.Context, claim store.Claim, in *prepared) (done func(), failed *jobs.Result) {
	done = func() {}
	if in.req.Compile == nil || a.session != nil || !a.r.builds.enabled() {
		return done, nil
	}
	image, err := a.r.envs.image(ctx, claim.TenantID, claim.Spec.Environment)
	if err != nil {
		return done, nil // obtain says why
	}
	id := a.r.sandbox.imageID(ctx, image)
	if id == "" {
		return done, nil
	}
	inputs := buildInputs{tenant: claim.TenantID, imageID: id, language: claim.Spec.Language,
		compile: in.req.Compile.Argv, files: in.req.Files, env: in.req.Env}
	key := inputs.key()
	b, finish := a.r.builds.lookup(ctx, claim.TenantID, key, claim.Spec.Limits.MemoryMB)
	switch {
	case b != nil && b.OK:
		in.req.Compile, in.req.Build, in.cached = nil, b.Tar, b
		return done, nil
	case b != nil:
		spec := claim.Spec
		return done, &jobs.Result{Status: jobs.StatusFailed, Compile: b.report(), CompileOutput: b.Output,
			Error: compileError(wire.Exit{Started: true, Code: b.ExitCode}, spec)}
	case finish == nil:
		return done, nil
	}
	in.req.Compile.SendBuild = true
	in.buildKey = key
	return finish, nil
}

// keepBuild keeps what the run's compile step built, or its refusal when
// the compiler exited non-zero by itself (not killed, not timed out).
func (a *attempt) keepBuild(ctx context.Context, in *prepared, rr wire.RunResult) {
	if in.buildKey == "" || rr.Compile == nil {
		return
	}
	rep := rr.Compile
	b := &build{OK: rep.Exit.Succeeded(), Output: rep.Output, Truncated: rep.Truncated}
	switch {
	case b.OK && len(rr.Build) > 0:
		b.Tar = rr.Build
	case !b.OK && rep.Exit.Started && !rep.Exit.TimedOut && rep.Exit.Signal == 0 && rep.Exit.OOMKills == 0 && rep.Exit.Code > 0 && rep.Exit.Code < 128:
		b.ExitCode = rep.Exit.Code
	default:
		return
	}
	a.r.builds.put(ctx, a.claim.TenantID, in.buildKey, a.claim.Spec.Limits.MemoryMB, b)
}
