package runner

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gantryhq/gantry/agent/wire"
	"github.com/gantryhq/gantry/internal/startstop"
	"github.com/gantryhq/gantry/jobs"
)

// FleetConfig sizes a runner's containers.
type FleetConfig struct {
	// Min is how many unbound containers the pool keeps started; 0 turns
	// the pool off. After misses it grows toward Max, and shrinks back
	// when quiet.
	Min, Max int
	// Limits is the profile pooled containers are made with: jobs asking
	// for other limits start a container of their own (the cold path).
	Limits jobs.Limits
	// MaxAge replaces pooled containers that waited this long.
	MaxAge time.Duration
	// MaxJobs retires a container after it served this many jobs.
	MaxJobs int
	// Idle retires a bound container (a tenant's or a session's) left
	// unused this long.
	Idle time.Duration
	// IdleMax bounds how many bound containers wait for work at once; the
	// least recently used goes first.
	IdleMax int
	// LiveMax bounds how many stateful sessions' containers wait for their
	// next job at once (apart from IdleMax: each holds a live sandbox,
	// kept for as long as its session lives); past it the least recently
	// used of the tenant holding the most of them loses its live state.
	LiveMax int
}

// WithDefaults fills in zero fields.
func (c FleetConfig) WithDefaults(slots int) FleetConfig {
	if c.Max < c.Min {
		c.Max = c.Min
	}
	if c.MaxAge == 0 {
		c.MaxAge = 30 * time.Minute
	}
	if c.MaxJobs == 0 {
		c.MaxJobs = 1000
	}
	if c.Idle == 0 {
		c.Idle = 5 * time.Minute
	}
	if c.IdleMax == 0 {
		c.IdleMax = max(2*slots, 4)
	}
	if c.LiveMax == 0 {
		c.LiveMax = max(2*slots, 16)
	}
	return c
}

// bindKey is what a container is bound to: one tenant, one limits
// profile and one image (its environment's; "" for the sandbox image) for
// its whole life.
type bindKey struct {
	tenant string
	limits jobs.Limits
	image  string
}

// fleet owns a runner's containers between jobs. A container is
//
//	unbound: made ahead of demand, bound to nobody yet (the pool: pool.go);
//	busy: owned by one attempt, through a lease (lease.go);
//	idle: bound to a tenant and limits profile, waiting for that tenant's
//	      next job (its workspace emptied, no process of a job left:
//	      idle.go);
//	parked: a session's container, holding its workspace, waiting for the
//	      session's next job (a stateful session's also holds its live
//	      sandbox, and waits for as long as the session lives: parked.go);
//	retired: being removed, never used again.
//
// The fleet is the one owner of that state machine, as nomad's docker
// driver keeps each task's container in one handle and its clean-up of
// dangling containers apart (reaper.go). The pool, the idle set and the
// parked sessions are the fleet's books, kept under its one lock; a
// container moves between them only here, and every move is checked
// against the container's state (setLocked): a container released twice,
// or parked when it is not busy, panics. A container bound to a tenant
// never serves another tenant, and one made for a session serves only that
// session. Removals run in the background, off the jobs' path, in
// goroutines stop waits for.
type fleet struct {
	cfg    FleetConfig
	sb     *Sandbox
	skills *skillCache
	log    *slog.Logger
	m      *fleetMetrics

	mu     sync.Mutex
	pool   *pool
	idle   idleSet
	parked *parkedSessions
	busy   int              // containers in state busy (setLocked keeps it)
	epochs map[string]int64 // the newest key epoch seen per tenant
	closed bool
	loops  startstop.Loops // the upkeep (reaper.go), from start to stop
	// pending holds the background makes, cleans and removals, which stop
	// starts too (it retires what the fleet holds) and waits for.
	pending sync.WaitGroup
	// liveLost, when set, is told when a parked stateful session's
	// container is retired between the session's jobs: its live state is
	// lost, for this reason.
	liveLost func(sessionID, live, reason string)
}

// ctrState is where a container is in its life. Only setLocked changes
// it, under the fleet's lock.
type ctrState int

const (
	ctrNew      ctrState = iota // made, not yet the fleet's
	ctrUnbound                  // in the pool
	ctrBusy                     // owned by one attempt
	ctrCleaning                 // released; its workspace being emptied
	ctrIdle                     // bound, waiting for its tenant's next job
	ctrParked                   // a session's, waiting for its next job
	ctrRetired                  // being removed; never used again
)

var ctrStates = [...]string{"new", "unbound", "busy", "cleaning", "idle", "parked", "retired"}

func (s ctrState) String() string { return ctrStates[s] }

// ctrMoves are the transitions a container may make, from each state.
var ctrMoves = [...][]ctrState{
	ctrNew:      {ctrUnbound, ctrBusy, ctrRetired},
	ctrUnbound:  {ctrBusy, ctrRetired},
	ctrBusy:     {ctrCleaning, ctrParked},
	ctrCleaning: {ctrIdle, ctrRetired},
	ctrIdle:     {ctrBusy, ctrRetired},
	ctrParked:   {ctrBusy, ctrRetired},
	ctrRetired:  nil,
}

// setLocked moves c to state to, keeping the count of busy containers. A
// move its state does not allow (a second release, a park of a container
// no attempt owns, a use after retirement) is a bug that would hand one
// container to two owners: it panics, after unlocking the fleet.
func (f *fleet) setLocked(c *Container, to ctrState) {
	if !slices.Contains(ctrMoves[c.state], to) {
		f.mu.Unlock()
		panic(fmt.Sprintf("runner: container %s moved from %s to %s", shortID(c.id), c.state, to))
	}
	if c.state == ctrBusy {
		f.busy--
	}
	if to == ctrBusy {
		f.busy++
	}
	c.state = to
}

func newFleet(cfg FleetConfig, sb *Sandbox, skills *skillCache, log *slog.Logger, m *fleetMetrics) *fleet {
	return &fleet{
		cfg: cfg, sb: sb, skills: skills, log: log.With("component", "fleet"), m: m,
		pool: newPool(cfg), idle: idleSet{}, parked: newParkedSessions(cfg.LiveMax), epochs: map[string]int64{},
	}
}

// reusable reports whether containers serve more than one job: not when
// programs run directly in them (the Container isolation).
func (f *fleet) reusable() bool { return f.sb.Isolation() == wire.Namespaces }

// acquire returns a container bound to the tenant, limits and image ("":
// the sandbox image), leased to the caller until it releases it: the
// tenant's idle one used last, else a pooled one (the pool holds the
// sandbox image only), else a new one. source says which.
func (f *fleet) acquire(ctx context.Context, tenant string, epoch int64, lim jobs.Limits, image string) (l *lease, source string, err error) {
	key := bindKey{tenant: tenant, limits: lim.Container(), image: image}
	f.mu.Lock()
	stale := f.noteEpoch(tenant, epoch)
	if c := f.idle.pop(key); c != nil {
		f.claimLocked(c, tenant, epoch)
		f.mu.Unlock()
		f.retireAll(stale, "key revoked")
		f.m.acquired.WithLabelValues("tenant").Inc()
		return f.lease(c), "tenant", nil
	}
	f.mu.Unlock()
	f.retireAll(stale, "key revoked")

	if image == "" {
		if c, ok := f.take(ctx, key.limits); ok {
			f.mu.Lock()
			f.claimLocked(c, tenant, epoch)
			f.mu.Unlock()
			f.m.acquired.WithLabelValues("pool").Inc()
			return f.lease(c), "pool", nil
		}
	}
	c, err := f.sb.Create(ctx, ContainerSpec{Limits: key.limits, Image: image})
	if err != nil {
		return nil, "", err
	}
	f.mu.Lock()
	f.claimLocked(c, tenant, epoch)
	f.mu.Unlock()
	f.m.acquired.WithLabelValues("cold").Inc()
	return f.lease(c), "cold", nil
}

// noteEpoch records the tenant's key epoch; when it moved on, the tenant's
// idle containers (bound under a revoked key) are taken out to be retired.
func (f *fleet) noteEpoch(tenant string, epoch int64) []*Container {
	if epoch <= f.epochs[tenant] {
		return nil
	}
	f.epochs[tenant] = epoch
	stale := f.idle.takeTenant(tenant)
	f.gaugesLocked()
	return stale
}

func (f *fleet) claimLocked(c *Container, tenant string, epoch int64) {
	f.setLocked(c, ctrBusy)
	c.tenant, c.epoch = tenant, epoch
	c.jobs++
	c.lastUsed = time.Now()
	f.gaugesLocked()
}

// release takes back a container from the attempt that owned it (its
// lease's release). A container that may serve again has its workspace
// emptied (in the background) and waits for its tenant's next job; any
// other is retired.
func (f *fleet) release(c *Container, reusable bool, reason string) {
	f.mu.Lock()
	f.setLocked(c, ctrCleaning)
	f.gaugesLocked()
	switch {
	case !reusable:
	case !f.reusable():
		reason = "one job per container"
	case f.closed:
		reason = "shutdown"
	case c.jobs >= f.cfg.MaxJobs:
		reason = "served its jobs"
	case c.epoch < f.epochs[c.tenant]:
		reason = "key revoked"
	default:
		reason = ""
	}
	if reason != "" {
		f.mu.Unlock()
		f.retire(c, reason)
		return
	}
	f.pending.Add(1)
	f.mu.Unlock()
	go func() {
		defer f.pending.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := c.conn.Clean(ctx)
		cancel()
		if err != nil {
			f.log.Warn("emptying a workspace failed; retiring the container", "container", shortID(c.id), "err", err)
			f.retire(c, "clean failed")
			return
		}
		f.mu.Lock()
		if f.closed || c.epoch < f.epochs[c.tenant] {
			f.mu.Unlock()
			f.retire(c, "shutdown")
			return
		}
		f.setLocked(c, ctrIdle)
		c.lastUsed = time.Now()
		f.idle.push(c)
		evicted := f.overflowLocked()
		f.gaugesLocked()
		f.mu.Unlock()
		f.retireAll(evicted, "idle limit")
	}()
}

// createSession makes a container for a session's job (never pooled: it
// carries the session's label and disk size), leased to the caller.
func (f *fleet) createSession(ctx context.Context, sessionID, tenant string, lim jobs.Limits, image string) (*lease, error) {
	c, err := f.sb.Create(ctx, ContainerSpec{SessionID: sessionID, Limits: lim, Image: image})
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.claimLocked(c, tenant, f.epochs[tenant])
	f.mu.Unlock()
	f.m.acquired.WithLabelValues("session").Inc()
	return f.lease(c), nil
}

// unpark returns the session's parked container, leased to the caller,
// and the version its workspace holds, or nil.
func (f *fleet) unpark(sessionID string) (*lease, int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.parked.take(sessionID)
	if p == nil {
		return nil, 0
	}
	f.setLocked(p.ctr, ctrBusy)
	p.ctr.jobs++
	p.ctr.lastUsed = time.Now()
	f.gaugesLocked()
	return f.lease(p.ctr), p.version
}

// holdsLive reports whether the session's container parked here holds
// its live sandbox live.
func (f *fleet) holdsLive(sessionID, live string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.parked.holdsLive(sessionID, live)
}

// park keeps a session's container, holding workspace version, for the
// session's next job on this runner (its lease's park). A container
// holding a stateful session's live sandbox (c.live set) is kept until the
// session would expire (ttl from now), whatever the isolation and however
// many jobs it served: it is the session's state.
func (f *fleet) park(sessionID string, c *Container, version int64, ttl time.Duration) {
	live := c.live != ""
	f.mu.Lock()
	f.setLocked(c, ctrParked)
	if f.closed || !live && (c.jobs >= f.cfg.MaxJobs || !f.reusable()) {
		f.gaugesLocked()
		f.mu.Unlock()
		f.retire(c, "not kept")
		return
	}
	c.lastUsed = time.Now()
	var evicted []*Container
	if old := f.parked.put(sessionID, &parkedSession{ctr: c, version: version, live: live, until: c.lastUsed.Add(ttl)}); old != nil {
		evicted = append(evicted, old)
	}
	evicted = append(evicted, f.overflowLocked()...)
	lost := f.parked.liveOverflow()
	f.gaugesLocked()
	f.mu.Unlock()
	f.retireAll(evicted, "idle limit")
	f.retireLive(lost, "live limit", "the runner holding it kept too many live sessions (GANTRY_SESSION_LIVE_MAX); its tenant held the most of them there, and this one had waited longest")
}

// touch marks the session's parked container c as just used (a live
// operation), and with keep holds it at least d from now.
func (f *fleet) touch(sessionID string, c *Container, d time.Duration, keep bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.parked.touch(sessionID, c, d, keep)
}

// dropSession retires the session's parked container, if any.
func (f *fleet) dropSession(sessionID string) {
	f.mu.Lock()
	p := f.parked.take(sessionID)
	f.gaugesLocked()
	f.mu.Unlock()
	if p != nil {
		f.retire(p.ctr, "session closed")
	}
}

// overflowLocked takes out the least recently used waiting containers
// beyond IdleMax: the idle ones and the parked ones without a live sandbox
// count together.
func (f *fleet) overflowLocked() []*Container {
	var out []*Container
	for f.idleCountLocked() > f.cfg.IdleMax {
		c, key := f.idle.oldest()
		sid, pc := f.parked.oldestIdle()
		if pc != nil && (c == nil || pc.lastUsed.Before(c.lastUsed)) {
			f.parked.take(sid)
			out = append(out, pc)
			continue
		}
		f.idle.dropOldest(key)
		out = append(out, c)
	}
	return out
}

// idleCountLocked is how many containers wait for work and count against
// IdleMax: the idle ones and the parked ones without a live sandbox.
func (f *fleet) idleCountLocked() int { return f.idle.count() + f.parked.idleCount() }

// retire removes a container in the background; it never serves again.
func (f *fleet) retire(c *Container, reason string) {
	f.mu.Lock()
	f.setLocked(c, ctrRetired)
	f.gaugesLocked()
	f.mu.Unlock()
	f.m.retired.WithLabelValues(reason).Inc()
	f.pending.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.Remove(ctx); err != nil {
			f.log.Warn("remove container", "container", shortID(c.id), "err", err)
		}
	})
}

func (f *fleet) retireAll(cs []*Container, reason string) {
	for _, c := range cs {
		f.retire(c, reason)
	}
}

// retireLive retires parked stateful sessions' containers, telling why
// their live state was lost.
func (f *fleet) retireLive(lost map[string]*parkedSession, reason, why string) {
	for sid, p := range lost {
		if f.liveLost != nil {
			f.liveLost(sid, p.ctr.live, why)
		}
		f.retire(p.ctr, reason)
	}
}

// start starts the fleet's upkeep (reaper.go), until stop.
func (f *fleet) start(ctx context.Context) error { return f.loops.Start(ctx, f.run) }

// stop ends the upkeep, retires every container the fleet holds and
// returns once every goroutine it started (makes, cleans, removals) has
// returned. Containers still busy are retired by their attempts' release.
// It is safe to call without start.
func (f *fleet) stop() {
	f.loops.Stop()
	f.mu.Lock()
	f.closed = true
	all := f.pool.drain()
	all = append(all, f.idle.drain()...)
	parked, live := f.parked.drain()
	all = append(all, parked...)
	f.gaugesLocked()
	f.mu.Unlock()
	f.retireAll(all, "shutdown")
	f.retireLive(live, "shutdown", "the runner holding it shut down")
	f.pending.Wait()
}

func (f *fleet) gaugesLocked() {
	f.m.size.Set(float64(len(f.pool.unbound)))
	f.m.state.WithLabelValues("unbound").Set(float64(len(f.pool.unbound)))
	f.m.state.WithLabelValues("idle").Set(float64(f.idle.count()))
	f.m.state.WithLabelValues("parked").Set(float64(f.parked.len()))
	f.m.state.WithLabelValues("busy").Set(float64(f.busy))
}

// fleetMetrics are the fleet's Prometheus metrics.
type fleetMetrics struct {
	size     prometheus.Gauge
	state    *prometheus.GaugeVec
	acquired *prometheus.CounterVec
	retired  *prometheus.CounterVec
}

func newFleetMetrics(reg prometheus.Registerer) *fleetMetrics {
	m := &fleetMetrics{
		size: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gantry_pool_size", Help: "Started containers waiting in the warm pool, bound to no tenant yet."}),
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gantry_sandboxes",
			Help: "Sandbox containers by state: unbound (pool), idle (bound to a tenant, waiting), parked (a session's, waiting), busy."}, []string{"state"}),
		acquired: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gantry_sandbox_acquired_total",
			Help: "Containers handed to jobs, by source: tenant (reused), pool, cold (made for the job), session."}, []string{"source"}),
		retired: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gantry_sandbox_retired_total",
			Help: "Containers removed, by reason."}, []string{"reason"}),
	}
	if reg != nil {
		reg.MustRegister(m.size, m.state, m.acquired, m.retired)
	}
	return m
}
