// Package runner pulls jobs from JetStream and runs each in a hardened
// Docker sandbox: a container bound to the job's tenant (reused for that
// tenant's later jobs, never for another's) whose agent runs the program in
// a fresh bubblewrap sandbox of its own. It streams the output live over
// NATS, uploads the artifacts to the object store, records the result in
// Postgres and only then acks the message.
//
// Runners keep no state that outlives a job but warm containers: kill one
// and JetStream redelivers its jobs to another.
//
// A runner is a producer, an executor and a completer, a file each: the
// queue loop (runner.go, with the tenants' queues in queues.go) takes a
// message per free slot; claim.go claims its job and keeps the message and
// the claim alive; execute.go runs the attempt (attempt.go, its program's
// run in programrun.go; a session's jobs through session.go) in a container
// the fleet owns (fleet.go, with its pool, idle set and parked sessions in
// pool.go, idle.go and parked.go, and its upkeep in reaper.go); and
// complete.go records the result and acks the message, or hands it back.
package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/gantryhq/gantry/codemode"
	"github.com/gantryhq/gantry/internal/clock"
	"github.com/gantryhq/gantry/internal/startstop"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/pii"
	"github.com/gantryhq/gantry/queue"
	"github.com/gantryhq/gantry/secret"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/tracing"
	"github.com/gantryhq/gantry/tunnel"
)

// Config is a runner's own configuration.
type Config struct {
	// ID names this runner. It must be stable across restarts on one
	// Docker host, so that a restarted runner removes the containers its
	// previous life left behind, and unique among live runners.
	ID string
	// Slots is how many jobs run at once, at least (the base).
	Slots int
	// MaxSlots is how many run at once under a burst: a job that has
	// waited BurstWait in the queue while the base slots are busy gets a
	// slot of its own when the host's memory allows (Fleet.MemoryMB); up
	// to MaxSlots at once (default Slots: no burst slots).
	MaxSlots int
	// BurstWait is how long a job waits for a base slot before it may
	// take a burst slot (default 1 s).
	BurstWait time.Duration
	// Queue shapes the stream and consumer.
	Queue queue.Config
	// Artifacts caps what a job may hand back.
	Artifacts ArtifactLimits
	// DrainTimeout is how long Stop waits for running jobs before it
	// kills them and hands them back to the queue.
	DrainTimeout time.Duration
	// Fleet sizes the warm pool and says how long containers serve.
	Fleet FleetConfig
	// CodeMode, when set, gives every job a bridge to its tenant's
	// upstream MCP servers (code mode).
	CodeMode *codemode.Registry
	// Privacy, when set, tokenizes personal data for tenants that turned
	// privacy tokens on (see privacy.go).
	Privacy *pii.Tokenizer
	// Box opens the env values the ingress sealed under
	// GANTRY_SECRET_KEY (nil: no key; a job with a sealed env fails).
	Box *secret.Box
	// Egress is the operator's word on jobs' egress.
	Egress EgressConfig
	// TenantLimits are the quotas of tenants the operator set none for
	// (the runner uses the cap on running jobs when it makes a tenant's
	// queue).
	TenantLimits jobs.TenantLimits
	// Tracer makes the spans of each attempt at a job, in the job's trace
	// (nil: none).
	Tracer trace.TracerProvider
	// Live says how stateful sessions' live state outlives containers.
	Live LiveConfig
	// Ports bounds the connections to stateful sessions' ports.
	Ports PortConfig
	// Builds bounds the compiled programs the runner keeps (buildcache.go).
	Builds BuildCacheConfig
}

// WithDefaults fills in zero fields.
func (c Config) WithDefaults() Config {
	if c.Slots == 0 {
		c.Slots = 2
	}
	if c.MaxSlots < c.Slots {
		c.MaxSlots = c.Slots
	}
	if c.BurstWait == 0 {
		c.BurstWait = time.Second
	}
	c.Queue = c.Queue.WithDefaults()
	if c.Artifacts.MaxFiles == 0 {
		c.Artifacts.MaxFiles = 100
	}
	if c.Artifacts.MaxFileBytes == 0 {
		c.Artifacts.MaxFileBytes = 100 << 20
	}
	if c.Artifacts.MaxTotal == 0 {
		c.Artifacts.MaxTotal = 256 << 20
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = 30 * time.Second
	}
	// Burst slots' containers are kept idle too (memory admission retires
	// them when memory is wanted).
	if c.Fleet.IdleMax == 0 {
		c.Fleet.IdleMax = max(2*c.Slots, 4, c.MaxSlots)
	}
	c.Fleet = c.Fleet.WithDefaults(c.Slots)
	c.Live = c.Live.WithDefaults()
	c.Ports = c.Ports.WithDefaults()
	c.TenantLimits = c.TenantLimits.Or(jobs.DefaultTenantLimits())
	c.Builds = c.Builds.WithDefaults()
	return c
}

// Store is what the runner needs of the job store.
type Store interface {
	// Ping tells an unreachable Postgres from other failures.
	Ping(ctx context.Context) error
	ClaimJob(ctx context.Context, req store.ClaimRequest) (store.Claim, store.ClaimOutcome, error)
	Heartbeat(ctx context.Context, id string, attempt int) (cancelRequested bool, err error)
	FinishJob(ctx context.Context, id string, attempt int, r jobs.Result) (bool, error)
	RequeueJob(ctx context.Context, id string, attempt int) error
	ReleaseJob(ctx context.Context, id string, attempt int) error
	FailJob(ctx context.Context, id string, attempt int, message string) (bool, error)
	TenantLimits(ctx context.Context, tenantID string) (jobs.TenantLimits, error)
	SessionStore
	SkillStore
	EnvironmentStore
	EgressStore
}

// Runner runs jobs from the queue, from Start until Stop.
type Runner struct {
	cfg      Config
	log      *slog.Logger
	nc       *nats.Conn
	js       jetstream.JetStream
	store    Store
	sessions SessionStore
	blobs    Blobs
	sandbox  *Sandbox
	metrics  *Metrics
	skills   *skillCache
	envs     *environments
	fleet    *fleet
	builds   *buildCache
	// live answers the live operations of the stateful sessions whose
	// sandboxes its containers hold (liveops.go).
	live   *liveServer
	traces trace.Tracer // see tracer()
	// handed bounds the sessions other runners handed to this one (their
	// live sandboxes are here) that run at once, beside the slots.
	handed chan struct{}
	// gv runs stateful sessions' containers under gVisor, and checkpoints
	// keeps their checkpoints on disk (livestate.go); nil where live state
	// stays in memory.
	gv          *gvisor
	checkpoints *checkpointCache
	// cas holds the tenants' egress CAs and the images' CA bundles.
	cas caCache

	// loops is the runner's lifecycle (startstop): the queue loop, which
	// drains when Stop ends it; the background work beside the jobs
	// (hand-back announcements, session clean-ups, sessions handed over),
	// which runs through the drain; and the clean-ups of what Start set up.
	loops startstop.Loops

	mu      sync.Mutex
	running map[string]*execution
}

// New makes a runner. Nothing is started until Start.
// Metrics are registered with reg (nil: none are kept).
func New(cfg Config, log *slog.Logger, nc *nats.Conn, st Store, blobs Blobs, sb *Sandbox, reg prometheus.Registerer) (*Runner, error) {
	autoLive := cfg.Fleet.LiveMax == 0
	cfg = cfg.WithDefaults()
	if autoLive && cfg.Fleet.MemoryMB > 0 && sb != nil {
		// The machine's: as many live sandboxes' containers as the
		// runner's memory admits by their limits, less one per slot for
		// jobs.
		per := max(sb.memoryMB(cfg.Fleet.Limits.Container()), 1)
		cfg.Fleet.LiveMax = max(cfg.Fleet.LiveMax, int(cfg.Fleet.MemoryMB/per)-cfg.Slots)
	}
	if cfg.ID == "" {
		return nil, errors.New("runner id is required")
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	var m *Metrics
	if reg != nil {
		m = NewMetrics(reg)
	}
	r := &Runner{
		cfg: cfg, log: log.With("runner", cfg.ID), nc: nc, js: js, store: st, sessions: st, blobs: blobs,
		sandbox: sb, metrics: m, running: map[string]*execution{}, skills: newSkillCache(st), envs: &environments{st: st, sb: sb},
		handed: make(chan struct{}, cfg.Slots),
		traces: tracing.Tracer(cfg.Tracer, tracerName),
	}
	r.fleet = newFleet(cfg.Fleet, sb, r.skills, r.log, newFleetMetrics(reg))
	r.builds = newBuildCache(cfg.Builds, blobs, r.log.With("component", "builds"), reg)
	r.live = newLiveServer(nc, r.log, r.fleet, r.onTake, r.onControl)
	r.live.renetwork = r.renetwork
	r.live.metrics = r.metrics
	r.live.ports = cfg.Ports
	r.fleet.letGo = r.live.drop
	// Stop's clean-ups run last registered first, once the queue loop and
	// the background work have returned (Start adds what it sets up): the
	// live sessions the runner holds are paused, not lost (where they run
	// under gVisor); then the fleet retires every container it holds.
	r.loops.Cleanup(func() { r.log.Info("runner stopped") })
	r.loops.Cleanup(func() {
		if r.gv != nil {
			r.gv.Close()
		}
	})
	r.loops.Cleanup(r.fleet.stop)
	r.loops.Cleanup(r.pauseAll)
	r.loops.Cleanup(r.live.stop)
	r.fleet.liveLost = func(sessionID, live, reason string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := r.sessions.LoseLive(ctx, sessionID, live, reason); err != nil {
			r.log.Warn("record a session's lost live state", "session_id", sessionID, "err", err)
		}
	}
	return r, nil
}

// Check verifies the runner's dependencies: Docker, the sandbox image,
// and an agent that can make sandboxes on this host.
func (r *Runner) Check(ctx context.Context) error { return r.sandbox.Check(ctx) }

// Start checks the sandbox image, removes the containers an earlier life of
// this runner left, makes sure the job stream exists, subscribes to cancels,
// backlog requests and closed sessions, and starts the fleet and the queue
// loop, which pulls and runs jobs until Stop (see startstop). A runner
// starts at most once; Stop is not called while Start runs. A Start that
// fails undoes what it did, as Stop does.
func (r *Runner) Start(ctx context.Context) (err error) {
	if err := r.loops.Start(ctx); err != nil {
		return fmt.Errorf("runner: %w", err)
	}
	defer func() {
		if err != nil {
			r.loops.Stop()
		}
	}()
	if err := r.sandbox.CheckImage(ctx); err != nil {
		return err
	}
	if n, err := r.sandbox.RemoveLeftovers(ctx); err != nil {
		return err
	} else if n > 0 {
		r.log.Info("removed leftover containers from an earlier run", "count", n)
	}
	if err := queue.Ensure(ctx, r.js, r.cfg.Queue); err != nil {
		return err
	}
	stream, err := r.js.Stream(ctx, queue.StreamName)
	if err != nil {
		return err
	}
	queues := newPicker(r.js, stream, r.cfg.Queue, r.log, r.tenantMaxRunning)
	for subject, handler := range map[string]nats.MsgHandler{
		queue.ReadySubject:      func(m *nats.Msg) { queues.hint(string(m.Data)) },
		queue.CancelSubjectAll:  r.onCancel,
		queue.BacklogSubjectAll: r.onBacklog,
		queue.SessionClosedAll:  r.onSessionClosed,
	} {
		sub, err := r.nc.Subscribe(subject, handler)
		if err != nil {
			return err
		}
		r.loops.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	if r.cfg.CodeMode != nil && r.cfg.CodeMode.Config().Launcher != nil {
		// The ingresses have no sandbox to start a stdio MCP server in:
		// they ask a runner for its tools.
		// Requests in flight run until Stop, which cancels them.
		toolsCtx, cancelTools := context.WithCancel(context.WithoutCancel(ctx))
		stop, err := codemode.ServeTools(toolsCtx, r.nc, r.cfg.CodeMode, r.log)
		if err != nil {
			cancelTools()
			return err
		}
		r.loops.Cleanup(func() { cancelTools(); stop() })
	}
	if r.live.tunnels, err = tunnel.New(r.nc, tunnel.Config{}); err != nil {
		return err
	}
	// Every connection to a port ends before the live sessions do.
	r.loops.Cleanup(r.live.tunnels.Close)
	if err := r.startLive(ctx); err != nil {
		return err
	}
	if err := r.fleet.start(ctx); err != nil {
		return err
	}
	r.loops.Go(func(ctx context.Context) { r.consume(ctx, queues) })
	r.loops.Go(r.sweepBuilds)
	r.log.Info("runner started", "slots", r.cfg.Slots, "max_slots", r.cfg.MaxSlots, "memory_mb", r.cfg.Fleet.MemoryMB, "live_max", r.cfg.Fleet.LiveMax, "ack_wait", r.cfg.Queue.AckWait, "isolation", r.sandbox.Isolation())
	return nil
}

// Stop stops taking jobs and drains: it waits up to DrainTimeout for
// running jobs, then kills the rest and gives them back to the queue for
// another runner. It returns once every goroutine the runner started has
// returned and every container it held is removed. It is safe to call
// more than once, at once, and without Start.
func (r *Runner) Stop() { r.loops.Stop() }

// goBackground runs f in a goroutine Stop waits for, with a channel that
// closes when Stop no longer waits for what f waits for (once the queue
// loop drained); after that it runs nothing.
func (r *Runner) goBackground(f func(quit <-chan struct{})) {
	r.loops.Background(func(ctx context.Context) { f(ctx.Done()) })
}

// slotCount counts the jobs running, with a channel that closes when one
// ends.
type slotCount struct {
	mu    sync.Mutex
	n     int
	ended chan struct{}
}

func (s *slotCount) get() (int, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n, s.ended
}

func (s *slotCount) add(d int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n += d
	if d < 0 {
		close(s.ended)
		s.ended = make(chan struct{})
	}
}

// consume is the queue loop: one message per free slot, from the tenants'
// queues in turn, until ctx ends; then it drains. Beyond the base slots it
// takes a job only when it has waited BurstWait and the host's memory has
// room for another sandbox (burst slots, up to MaxSlots): jobs' limits are
// wall-clock time, so a job left in the queue is time its client loses,
// while one more sandbox sharing the CPUs only runs slower.
func (r *Runner) consume(ctx context.Context, queues *picker) {
	// jobCtx outlives ctx by the drain timeout so that running jobs can
	// finish after the runner is asked to stop.
	jobCtx, cancelJobs := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelJobs(nil)
	slots := &slotCount{ended: make(chan struct{})}
	var wg sync.WaitGroup
	burstMB := r.sandbox.memoryMB(r.cfg.Fleet.Limits.Container())
	for ctx.Err() == nil {
		n, ended := slots.get()
		var msg jetstream.Msg
		switch {
		case n > 0 && !r.fleet.room(burstMB):
			// The host's memory is taken: jobs wait in the queue, where
			// another runner may take them, until a sandbox goes. (With
			// none running a job is taken all the same: its session's
			// parked container may hold what it needs.)
			var freed <-chan struct{}
			if r.fleet.mem != nil {
				_, freed = r.fleet.mem.state()
			}
			select {
			case <-ended:
			case <-freed:
			case <-time.After(time.Second):
			case <-ctx.Done():
			}
			continue
		case n < r.cfg.Slots:
			// No prefetch: a job waits in the stream, where any runner
			// can take it, until a slot is free here.
			m, err := queues.next(ctx)
			if err != nil {
				continue
			}
			msg = m
		case n >= r.cfg.MaxSlots:
			select {
			case <-ended:
			case <-ctx.Done():
			}
			continue
		case r.fleet.makingForJobs() >= fillers:
			// Burst slots grow as fast as containers can be made: a job
			// taken sooner would wait for its container, unstarted,
			// where its client cannot see it wait.
			select {
			case <-ended:
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
			}
			continue
		default:
			msg = r.burstJob(ctx, queues, ended)
			if msg == nil {
				continue
			}
		}
		var p *promise
		if r.fleet.mem != nil {
			need := r.needMB(msg)
			if n > 0 {
				r.admitMessage(ctx, msg, need, slots)
			}
			p = r.fleet.promise(need)
		}
		slots.add(1)
		wg.Go(func() {
			defer slots.add(-1)
			defer p.settle()
			r.handle(withPromise(jobCtx, p), msg)
			queues.done(msg)
		})
	}

	drained := make(chan struct{})
	go func() { wg.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(r.cfg.DrainTimeout):
		r.log.Warn("drain timeout: killing running jobs and returning them to the queue")
		cancelJobs(errShutdown)
		<-drained
	}
}

// admitMessage holds a message whose job's sandbox does not fit in the
// host's memory now (others run), unclaimed (its job stays queued) and
// alive (InProgress), until it fits or ctx ends: nothing more is taken
// meanwhile. The job is then claimed, and its container made, at once.
func (r *Runner) admitMessage(ctx context.Context, msg jetstream.Msg, need int64, slots *slotCount) {
	if r.fleet.room(need) {
		return
	}
	stop := r.hold(msg)
	defer stop()
	for ctx.Err() == nil {
		n, ended := slots.get()
		if n == 0 || r.fleet.room(need) {
			return
		}
		_, freed := r.fleet.mem.state()
		select {
		case <-ended:
		case <-freed:
		case <-time.After(time.Second):
		case <-ctx.Done():
		}
	}
}

// needMB is the memory of the sandbox the message's job needs (the
// default limits' when the message does not say).
func (r *Runner) needMB(msg jetstream.Msg) int64 {
	lim := r.cfg.Fleet.Limits.Container()
	var rm queue.RunMessage
	if json.Unmarshal(msg.Data(), &rm) == nil && rm.MemoryMB > 0 {
		lim.MemoryMB = rm.MemoryMB
	}
	return r.sandbox.memoryMB(lim)
}

// burstJob takes a message for a burst slot: one that has waited
// BurstWait since it was queued (held until then, unless a slot frees
// first). nil when a slot freed while none came, or ctx ended.
func (r *Runner) burstJob(ctx context.Context, queues *picker, ended <-chan struct{}) jetstream.Msg {
	fctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-ended:
			cancel()
		case <-fctx.Done():
		}
	}()
	msg, err := queues.next(fctx)
	cancel()
	if err != nil {
		return nil
	}
	if meta, err := msg.Metadata(); err == nil {
		if wait := r.cfg.BurstWait - time.Since(meta.Timestamp); wait > 0 {
			t := time.NewTimer(wait)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ended:
			case <-ctx.Done():
			}
		}
	}
	return msg
}

// sweepBuilds deletes old builds from the object store every hour, until
// ctx ends.
func (r *Runner) sweepBuilds(ctx context.Context) {
	if !r.builds.enabled() {
		return
	}
	for clock.Sleep(ctx, time.Hour) {
		r.builds.sweep(ctx)
	}
}

// handle runs what a message asks: a job, or a session's jobs.
func (r *Runner) handle(ctx context.Context, msg jetstream.Msg) {
	meta, err := msg.Metadata()
	if err != nil {
		r.log.Error("job message without metadata", "err", err)
		_ = msg.Term()
		return
	}
	var rm queue.RunMessage
	if err := json.Unmarshal(msg.Data(), &rm); err != nil || !(jobs.ValidID("job", rm.JobID) || jobs.ValidID("ses", rm.SessionID)) {
		r.log.Error("malformed job message dropped", "data_len", len(msg.Data()))
		_ = msg.TermWithReason("malformed job message")
		return
	}
	if rm.SessionID != "" {
		r.handleSession(ctx, msg, rm)
		return
	}
	r.runJob(ctx, msg, meta, rm)
}

// onSessionClosed removes a closed session's containers, the one parked
// here and any other this runner's host holds.
func (r *Runner) onSessionClosed(m *nats.Msg) {
	sid := queue.SessionIDFromSubject(m.Subject)
	if sid == "" {
		return
	}
	r.goBackground(func(<-chan struct{}) {
		r.fleet.dropSession(sid)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := r.sandbox.RemoveSession(ctx, sid); err != nil {
			r.log.Warn("remove containers of a closed session", "session_id", sid, "err", err)
		}
	})
}

// tenantMaxRunning is the tenant's cap on running jobs, for a queue this
// runner makes (the default when Postgres does not answer).
func (r *Runner) tenantMaxRunning(ctx context.Context, tenantID string) int {
	l, err := r.store.TenantLimits(ctx, tenantID)
	if err != nil {
		r.log.Warn("read a tenant's limits; using the defaults", "tenant_id", tenantID, "err", err)
	}
	return l.Or(r.cfg.TenantLimits).MaxRunning
}

// isStopping reports whether Stop was called: session owners finish their
// current job and hand the rest back, and sessions are not taken over.
func (r *Runner) isStopping() bool { return r.loops.Stopping() }
