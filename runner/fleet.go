package runner

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
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
	// used of the tenant holding the most of them loses its live state
	// (or, under gVisor, is paused). 0: as many as MemoryMB admits by the
	// pool's limits, less one per slot (New), at least max(2 × slots, 16).
	LiveMax int
	// MemoryMB is the host memory the runner's containers may take
	// together, by their limits (memory.go); 0: no bound.
	MemoryMB int64
	// Warming bounds the containers made at once for stateful sessions,
	// each counted until its warm interpreter has loaded (about a second of
	// CPU); 0: the host's CPUs, at least 2.
	Warming int
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
	if c.Warming == 0 {
		c.Warming = max(runtime.NumCPU(), 2)
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
	// mem admits containers against the host's memory (nil: no bound).
	mem *memBudget

	mu     sync.Mutex
	pool   *pool
	idle   idleSet
	parked *parkedSessions
	// idled is closed and replaced whenever a container goes idle, waking
	// attempts waiting for memory.
	idled chan struct{}
	// making counts containers being made for jobs (not the pool's).
	making int
	// warming holds a token per container being made for a stateful
	// session until its warm interpreter has loaded (createSession);
	// warmed is closed and replaced whenever one is given back.
	warming chan struct{}
	warmed  chan struct{}
	// promised is memory counted on for jobs taken that have no
	// container yet (memory.go).
	promised int64
	busy     int              // containers in state busy (setLocked keeps it)
	epochs   map[string]int64 // the newest key epoch seen per tenant
	closed   bool
	loops    startstop.Loops // the upkeep (reaper.go), from start to stop
	// pending holds the background makes, cleans and removals, which stop
	// starts too (it retires what the fleet holds) and waits for.
	pending sync.WaitGroup
	// liveLost, when set, is told when a parked stateful session's
	// container is retired between the session's jobs: its live state is
	// lost, for this reason.
	liveLost func(sessionID, live, reason string)
	// letGo, when set, is told when a closed session lets go of its parked
	// container, before the container may serve its tenant's next session:
	// nothing may reach the closed session's sandbox through it any more.
	letGo func(sessionID string, c *Container)
	// gv, when set, runs stateful sessions' containers under gVisor
	// (gvisor.go); pauseLive is then asked first to pause a parked live
	// container the fleet lets go (it takes it, reporting true).
	gv        *gvisor
	pauseLive func(sessionID string, c *Container, why string) bool
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
	ctrParked:   {ctrBusy, ctrCleaning, ctrRetired},
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
	f := &fleet{
		cfg: cfg, sb: sb, skills: skills, log: log.With("component", "fleet"), m: m,
		pool: newPool(cfg), idle: idleSet{}, parked: newParkedSessions(cfg.LiveMax), idled: make(chan struct{}),
		warming: make(chan struct{}, max(cfg.Warming, 1)), warmed: make(chan struct{}),
		epochs: map[string]int64{},
	}
	if cfg.MemoryMB > 0 {
		f.mem = newMemBudget(cfg.MemoryMB)
	}
	return f
}

// tryAdmit reserves the memory of a container made for lim if it is free,
// and otherwise retires idle containers for it (their memory is free once
// they are removed): ok says whether it reserved. A container larger than
// the whole budget is refused (errTooLarge).
func (f *fleet) tryAdmit(lim jobs.Limits) (mb int64, ok bool, err error) {
	if f.mem == nil {
		return 0, true, nil
	}
	mb = f.sb.memoryMB(lim)
	if mb > f.mem.total {
		return 0, false, &errTooLarge{need: mb, budget: f.mem.total}
	}
	if f.mem.tryReserve(mb) {
		return mb, true, nil
	}
	f.evictFor(mb)
	return mb, f.mem.tryReserve(mb), nil
}

// awaitMemory waits until memory is released, a container goes idle
// (idled, from f.idled), a second passes or ctx ends.
func (f *fleet) awaitMemory(ctx context.Context, idled <-chan struct{}) error {
	_, freed := f.mem.state()
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-freed:
	case <-idled:
	case <-t.C:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	return nil
}

// unadmit gives back what admit reserved for a container that was not made.
func (f *fleet) unadmit(mb int64) {
	if f.mem != nil {
		f.mem.release(mb)
	}
}

// evictFor retires idle containers, least recently used first (the pool's
// first), until mb would be free once they are removed.
func (f *fleet) evictFor(mb int64) {
	f.mu.Lock()
	free, _ := f.mem.state()
	var out []*Container
	for free < mb {
		c := f.evictableLocked()
		if c == nil {
			break
		}
		out = append(out, c)
		free += c.memMB
	}
	f.gaugesLocked()
	f.mu.Unlock()
	f.retireAll(out, "memory")
}

// evictableLocked takes out the container that goes first when memory is
// short: the oldest in the pool, else the least recently used idle one or
// parked session's that holds only a workspace; nil when there is none.
// Stateful sessions' live sandboxes are kept.
func (f *fleet) evictableLocked() *Container {
	if c, ok := f.pool.popOldest(); ok {
		return c
	}
	return f.takeLeastUsedLocked()
}

// takeLeastUsedLocked takes out the least recently used waiting container
// that holds no live sandbox: an idle one, or a parked session's that
// holds only a workspace; nil when there is none.
func (f *fleet) takeLeastUsedLocked() *Container {
	c, key := f.idle.oldest()
	sid, pc := f.parked.oldestIdle()
	if pc != nil && (c == nil || pc.lastUsed.Before(c.lastUsed)) {
		f.parked.take(sid)
		return pc
	}
	if c != nil {
		f.idle.dropOldest(key)
	}
	return c
}

// room reports whether a container of mb could be admitted now without
// waiting: free memory, or idle containers to retire for it.
func (f *fleet) room(mb int64) bool {
	if f.mem == nil {
		return true
	}
	free, _ := f.mem.state()
	f.mu.Lock()
	defer f.mu.Unlock()
	free -= f.promised
	if free >= mb {
		return true
	}
	for _, c := range f.pool.unbound {
		free += c.memMB
	}
	for _, list := range f.idle {
		for _, c := range list {
			free += c.memMB
		}
	}
	for _, p := range f.parked.m {
		if !p.live {
			free += p.ctr.memMB
		}
	}
	return free >= mb
}

// makingForJobs is how many containers are being made for jobs now.
func (f *fleet) makingForJobs() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.making
}

// create makes a container for cs once its memory is admitted, waiting
// for memory until ctx ends.
func (f *fleet) create(ctx context.Context, cs ContainerSpec) (*Container, error) {
	for {
		f.mu.Lock()
		idled := f.idled
		f.mu.Unlock()
		mb, ok, err := f.tryAdmit(cs.Limits)
		if err != nil {
			return nil, err
		}
		if ok {
			return f.createAdmitted(ctx, cs, mb)
		}
		if err := f.awaitMemory(ctx, idled); err != nil {
			return nil, err
		}
	}
}

// createAdmitted makes a container for cs, whose memory mb is reserved.
func (f *fleet) createAdmitted(ctx context.Context, cs ContainerSpec, mb int64) (*Container, error) {
	f.mu.Lock()
	f.making++
	f.mu.Unlock()
	var c *Container
	var err error
	if cs.Durable && f.gv != nil {
		c, err = f.gv.start(ctx, cs, cs.RestoreFrom)
	} else {
		c, err = f.sb.Create(ctx, cs)
	}
	f.mu.Lock()
	f.making--
	f.mu.Unlock()
	if err != nil {
		f.unadmit(mb)
		return nil, err
	}
	c.memMB = mb
	return c, nil
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
	defer promiseFrom(ctx).settle()
	// Until memory is free for a new container (admit), a container of
	// the tenant's that goes idle meanwhile serves as well.
	for {
		l, idled := f.takeIdle(tenant, epoch, key)
		if l != nil {
			return l, "tenant", nil
		}
		if image == "" {
			if c, ok := f.take(ctx, key.limits); ok {
				f.mu.Lock()
				f.claimLocked(c, tenant, epoch)
				f.mu.Unlock()
				f.m.acquired.WithLabelValues("pool").Inc()
				return f.lease(c), "pool", nil
			}
		}
		mb, ok, err := f.tryAdmit(key.limits)
		if err != nil {
			return nil, "", err
		}
		if !ok {
			if err := f.awaitMemory(ctx, idled); err != nil {
				return nil, "", err
			}
			continue
		}
		c, err := f.createAdmitted(ctx, ContainerSpec{Limits: key.limits, Image: image}, mb)
		if err != nil {
			return nil, "", err
		}
		f.mu.Lock()
		f.claimLocked(c, tenant, epoch)
		f.mu.Unlock()
		f.m.acquired.WithLabelValues("cold").Inc()
		return f.lease(c), "cold", nil
	}
}

// takeIdle takes one of the tenant's idle containers for key, noting the
// tenant's key epoch; with none it returns nil and the channel that is
// closed when one goes idle.
func (f *fleet) takeIdle(tenant string, epoch int64, key bindKey) (*lease, chan struct{}) {
	f.mu.Lock()
	stale := f.noteEpoch(tenant, epoch)
	c, idled := f.idle.pop(key), f.idled
	if c != nil {
		f.claimLocked(c, tenant, epoch)
	}
	f.mu.Unlock()
	f.retireAll(stale, "key revoked")
	if c == nil {
		return nil, idled
	}
	f.m.acquired.WithLabelValues("tenant").Inc()
	return f.lease(c), nil
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
		c.egress.set("", nil, nil) // a session's, kept between its runs
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
		// Clean ended the session sandbox it held, if any.
		c.live, c.restored = "", ""
		f.setLocked(c, ctrIdle)
		c.lastUsed = time.Now()
		f.idle.push(c)
		close(f.idled)
		f.idled = make(chan struct{})
		evicted := f.overflowLocked()
		f.gaugesLocked()
		f.mu.Unlock()
		f.retireAll(evicted, "idle limit")
	}()
}

// createSession gives a session's job a container, leased to the caller.
// Where containers serve one tenant's jobs one after another (Namespaces)
// a session takes one as a job does (acquire): one of its tenant's idle
// containers, the pool's, else a new one; its sandbox, made in it by its
// first job, is the session's own, and a closed session's container goes
// back to its tenant (dropSession). A durable session's under gVisor is a
// new container of its own, which its checkpoints are taken of.
//
// A stateful session needs its container's warm interpreter loaded (its
// sandbox is a fork of it), about a second of CPU in each new container:
// a burst of sessions that made a container each would have them all
// loading at once, none ready for seconds (on 2 cores, 20 of them past a
// minute), while the containers the burst's first sessions give back would
// have served sooner. So at most Warming containers are made at once for
// stateful sessions, each counted until its interpreter has loaded; past
// that a session waits for one of its tenant's containers to be given
// back, the pool, or its turn to make one. Nothing is refused.
func (f *fleet) createSession(ctx context.Context, sessionID, tenant string, lim jobs.Limits, image string, durable, stateful bool) (*lease, error) {
	if f.reusable() && !(durable && f.gv != nil) {
		f.mu.Lock()
		epoch := f.epochs[tenant]
		f.mu.Unlock()
		if !stateful {
			l, _, err := f.acquire(ctx, tenant, epoch, lim, image)
			return l, err
		}
		return f.acquireWarm(ctx, tenant, epoch, lim, image)
	}
	c, err := f.create(ctx, ContainerSpec{SessionID: sessionID, Limits: lim, Image: image, Durable: durable})
	if err != nil {
		return nil, err
	}
	return f.adopt(c, tenant), nil
}

// acquireWarm is acquire for a stateful session: a new container is made
// only with one of the Warming tokens, held until its warm interpreter has
// loaded; without one it waits for a container of the tenant's to go idle,
// a token to be given back or a second, and looks again.
func (f *fleet) acquireWarm(ctx context.Context, tenant string, epoch int64, lim jobs.Limits, image string) (*lease, error) {
	key := bindKey{tenant: tenant, limits: lim.Container(), image: image}
	for {
		l, idled := f.takeIdle(tenant, epoch, key)
		if l == nil && image == "" {
			l = f.takePooled(tenant, epoch, key.limits)
		}
		if l != nil {
			return l, nil
		}
		f.mu.Lock()
		warmed := f.warmed
		f.mu.Unlock()
		select {
		case f.warming <- struct{}{}:
		default:
			t := time.NewTimer(time.Second)
			select {
			case <-idled:
			case <-warmed:
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil, context.Cause(ctx)
			}
			t.Stop()
			continue
		}
		l, source, err := f.acquire(ctx, tenant, epoch, lim, image)
		if err == nil && source == "cold" {
			err = l.awaitWarm(ctx)
			if err != nil {
				l.release(false, "warm interpreter failed")
				l = nil
			}
		}
		f.unwarm()
		return l, err
	}
}

// takePooled takes an unbound container of the pool for the tenant, if
// one is ready now (take waits for one being made).
func (f *fleet) takePooled(tenant string, epoch int64, lim jobs.Limits) *lease {
	if f.cfg.Min == 0 || lim != f.cfg.Limits.Container() {
		return nil
	}
	f.mu.Lock()
	c, ok := f.pool.pop()
	if ok {
		f.gaugesLocked()
		f.claimLocked(c, tenant, epoch)
	}
	f.mu.Unlock()
	if !ok {
		return nil
	}
	f.pool.poke()
	f.m.acquired.WithLabelValues("pool").Inc()
	return f.lease(c)
}

// unwarm gives back a Warming token and wakes the sessions waiting for one.
func (f *fleet) unwarm() {
	<-f.warming
	f.mu.Lock()
	close(f.warmed)
	f.warmed = make(chan struct{})
	f.mu.Unlock()
}

// adopt makes a container made for a session (created, or restored from a
// checkpoint) the fleet's, leased to the caller.
func (f *fleet) adopt(c *Container, tenant string) *lease {
	f.mu.Lock()
	f.claimLocked(c, tenant, f.epochs[tenant])
	f.mu.Unlock()
	f.m.acquired.WithLabelValues("session").Inc()
	return f.lease(c)
}

// reclaim leases a parked container the fleet has already taken out of
// its parked sessions (to pause it) to the caller.
func (f *fleet) reclaim(c *Container) *lease {
	f.mu.Lock()
	f.setLocked(c, ctrBusy)
	f.gaugesLocked()
	f.mu.Unlock()
	return f.lease(c)
}

// evictLive lets go of every parked live session's container, each paused
// (pauseLive) or retired, for why; it returns how many were paused.
func (f *fleet) evictLive(why string) int {
	f.mu.Lock()
	live := f.parked.takeLive()
	f.gaugesLocked()
	f.mu.Unlock()
	n := 0
	for sid, p := range live {
		if f.pauseLive != nil && f.pauseLive(sid, p.ctr, why) {
			n++
			continue
		}
		f.retireLive(map[string]*parkedSession{sid: p}, "shutdown", why)
	}
	return n
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

// tenantOf is the tenant c is bound to ("" while unbound).
func (f *fleet) tenantOf(c *Container) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return c.tenant
}

// touch marks the session's parked container c as just used (a live
// operation), and with keep holds it at least d from now.
func (f *fleet) touch(sessionID string, c *Container, d time.Duration, keep bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.parked.touch(sessionID, c, d, keep)
}

// dropSession lets go of the session's parked container, if any: a
// Docker container where containers are reused goes back to its tenant
// once its session's sandbox ended and its workspace was emptied
// (release); any other is retired.
func (f *fleet) dropSession(sessionID string) {
	f.mu.Lock()
	p := f.parked.take(sessionID)
	f.gaugesLocked()
	f.mu.Unlock()
	if p != nil && f.letGo != nil {
		f.letGo(sessionID, p.ctr)
	}
	switch {
	case p == nil:
	case f.reusable() && p.ctr.host == containerHost(f.sb):
		f.release(p.ctr, true, "session closed")
	default:
		f.retire(p.ctr, "session closed")
	}
}

// overflowLocked takes out the least recently used waiting containers
// beyond IdleMax: the idle ones and the parked ones without a live sandbox
// count together.
func (f *fleet) overflowLocked() []*Container {
	var out []*Container
	for f.idleCountLocked() > f.cfg.IdleMax {
		out = append(out, f.takeLeastUsedLocked())
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
		f.unadmit(c.memMB) // its memory is the host's again
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
		if reason != "shutdown" && f.pauseLive != nil && f.pauseLive(sid, p.ctr, why) {
			continue // paused, not lost
		}
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
