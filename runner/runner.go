// Package runner pulls jobs from JetStream and runs each in a hardened
// Docker sandbox: a container bound to the job's tenant (reused for that
// tenant's later jobs, never for another's) whose agent runs the program in
// a fresh bubblewrap sandbox of its own. It streams the output live over
// NATS, uploads the artifacts to the object store, records the result in
// Postgres and only then acks the message.
//
// Runners keep no state that outlives a job but warm containers: kill one
// and JetStream redelivers its jobs to another.
package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gantryhq/gantry/blob"
	"github.com/gantryhq/gantry/codemode"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/pii"
	"github.com/gantryhq/gantry/secret"
	"github.com/gantryhq/gantry/store"
)

// Config is a runner's own configuration.
type Config struct {
	// ID names this runner. It must be stable across restarts on one
	// Docker host, so that a restarted runner removes the containers its
	// previous life left behind, and unique among live runners.
	ID string
	// Slots is how many jobs run at once.
	Slots int
	// Queue shapes the stream and consumer.
	Queue jobs.QueueConfig
	// Artifacts caps what a job may hand back.
	Artifacts ArtifactLimits
	// DrainTimeout is how long Run waits for running jobs after its
	// context ends before it kills them and hands them back to the queue.
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
}

// WithDefaults fills in zero fields.
func (c Config) WithDefaults() Config {
	if c.Slots == 0 {
		c.Slots = 2
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
	c.Fleet = c.Fleet.WithDefaults(c.Slots)
	c.TenantLimits = c.TenantLimits.Or(jobs.DefaultTenantLimits())
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
}

// Runner runs jobs from the queue.
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

	// stopping closes when Run is asked to stop: session owners finish
	// their current job and hand the rest back.
	stopping <-chan struct{}

	mu      sync.Mutex
	running map[string]*execution
}

// New makes a runner. Nothing is started until Run.
// Metrics are registered with reg (nil: none are kept).
func New(cfg Config, log *slog.Logger, nc *nats.Conn, st Store, blobs Blobs, sb *Sandbox, reg prometheus.Registerer) (*Runner, error) {
	cfg = cfg.WithDefaults()
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
	}
	r.fleet = newFleet(cfg.Fleet, sb, r.skills, r.log, newFleetMetrics(reg))
	r.fleet.liveLost = func(sessionID, live, reason string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := r.sessions.LoseLive(ctx, sessionID, live, reason); err != nil {
			r.log.Warn("record a session's lost live state", "session_id", sessionID, "err", err)
		}
	}
	return r, nil
}

// execution is one job attempt in progress on this runner.
type execution struct {
	// private: the tenant has privacy tokens on, so output is not shared
	// before it is tokenized.
	private bool
	jobID   string
	attempt int
	stdout  *output
	stderr  *output
	cancel  context.CancelCauseFunc
}

// Check verifies the runner's dependencies: Docker, the sandbox image,
// and an agent that can make sandboxes on this host.
func (r *Runner) Check(ctx context.Context) error { return r.sandbox.Check(ctx) }

// Run pulls and runs jobs until ctx ends, then drains: it waits up to
// DrainTimeout for running jobs, then kills the rest and gives them back to
// the queue for another runner.
func (r *Runner) Run(ctx context.Context) error {
	if err := r.sandbox.CheckImage(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // asked to stop before it started
		}
		return err
	}
	r.stopping = ctx.Done()
	if n, err := r.sandbox.RemoveLeftovers(ctx); err != nil {
		return err
	} else if n > 0 {
		r.log.Info("removed leftover containers from an earlier run", "count", n)
	}
	if _, err := jobs.EnsureQueue(ctx, r.js, r.cfg.Queue); err != nil {
		return err
	}
	stream, err := r.js.Stream(ctx, jobs.StreamName)
	if err != nil {
		return err
	}
	queues := newPicker(r.js, stream, r.cfg.Queue, r.log, r.tenantMaxRunning)
	readySub, err := r.nc.Subscribe(jobs.ReadySubject, func(m *nats.Msg) { queues.hint(string(m.Data)) })
	if err != nil {
		return err
	}
	defer readySub.Unsubscribe() //nolint:errcheck
	fleetCtx, stopFleet := context.WithCancel(context.WithoutCancel(ctx))
	fleetDone := make(chan struct{})
	go func() { r.fleet.run(fleetCtx); close(fleetDone) }()
	// Stopped after the drain below (defers run last-in first-out): it
	// retires every container it holds.
	defer func() { stopFleet(); <-fleetDone }()
	cancelSub, err := r.nc.Subscribe(jobs.CancelSubjectAll, r.onCancel)
	if err != nil {
		return err
	}
	defer cancelSub.Unsubscribe() //nolint:errcheck
	backlogSub, err := r.nc.Subscribe("gantry.job.*.backlog", r.onBacklog)
	if err != nil {
		return err
	}
	defer backlogSub.Unsubscribe() //nolint:errcheck
	closedSub, err := r.nc.Subscribe(jobs.SessionClosedAll, func(m *nats.Msg) {
		sid := sessionIDFromSubject(m.Subject)
		if sid == "" {
			return
		}
		go func() {
			r.fleet.dropSession(sid)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := r.sandbox.RemoveSession(ctx, sid); err != nil {
				r.log.Warn("remove containers of a closed session", "session_id", sid, "err", err)
			}
		}()
	})
	if err != nil {
		return err
	}
	defer closedSub.Unsubscribe() //nolint:errcheck
	if r.cfg.CodeMode != nil && r.cfg.CodeMode.Config().Launcher != nil {
		// The ingresses have no sandbox to start a stdio MCP server in:
		// they ask a runner for its tools.
		stopTools, err := codemode.ServeTools(ctx, r.nc, r.cfg.CodeMode, r.log)
		if err != nil {
			return err
		}
		defer stopTools()
	}

	r.log.Info("runner started", "slots", r.cfg.Slots, "ack_wait", r.cfg.Queue.AckWait, "isolation", r.sandbox.Isolation())
	// jobCtx outlives ctx by the drain timeout so that running jobs can
	// finish after the runner is asked to stop.
	jobCtx, cancelJobs := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelJobs(nil)
	slots := make(chan struct{}, r.cfg.Slots)
	var wg sync.WaitGroup
	for ctx.Err() == nil {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			continue
		}
		// One message per free slot, from the tenants' queues in turn, and
		// no prefetch: a job waits in the stream, where any runner can take
		// it, until a slot is free here.
		msg, err := queues.next(ctx)
		if err != nil {
			<-slots
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			r.handle(jobCtx, msg)
			queues.done(msg)
		}()
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
	r.log.Info("runner stopped")
	return nil
}

func (r *Runner) handle(ctx context.Context, msg jetstream.Msg) {
	meta, err := msg.Metadata()
	if err != nil {
		r.log.Error("job message without metadata", "err", err)
		_ = msg.Term()
		return
	}
	var rm jobs.RunMessage
	if err := json.Unmarshal(msg.Data(), &rm); err != nil || !(jobs.ValidID("job", rm.JobID) || jobs.ValidID("ses", rm.SessionID)) {
		r.log.Error("malformed job message dropped", "data_len", len(msg.Data()))
		_ = msg.TermWithReason("malformed job message")
		return
	}
	if rm.SessionID != "" {
		r.handleSession(ctx, msg, rm)
		return
	}
	log := r.log.With("job_id", rm.JobID)

	// The message is held from here until it is acked or handed back,
	// whatever Postgres does meanwhile.
	stopHolding := r.hold(msg)
	defer stopHolding()

	claim, outcome, err := r.claim(ctx, log, rm.JobID, meta.Sequence.Stream)
	switch {
	case errors.Is(err, store.ErrNotFound):
		// The ingress publishes before it commits: give a young message
		// time for its row to appear, drop an old one (the commit failed).
		if time.Since(meta.Timestamp) > 30*time.Second {
			log.Warn("dropping message for a job that does not exist")
			_ = msg.TermWithReason("job not found")
		} else {
			r.handBack(msg, rm.TenantID, 500*time.Millisecond, "uncommitted")
		}
		return
	case err != nil:
		// Handing the message back spends no attempt (those are counted
		// by claims): it comes back when Postgres may answer again.
		log.Error("claim job; handing it back to the queue", "err", err)
		r.handBack(msg, rm.TenantID, 2*time.Second, "database")
		return
	}
	switch outcome {
	case store.ClaimDone:
		_ = msg.Ack() // finished or cancelled while queued
		return
	case store.ClaimStale:
		log.Info("dropping a message that is not the job's current one")
		_ = msg.Ack()
		return
	case store.ClaimBusy:
		// Redelivered while its runner still beats: look again later.
		r.handBack(msg, rm.TenantID, max(r.cfg.Queue.AckWait/2, time.Second), "busy")
		return
	case store.ClaimGaveUp:
		log.Warn("job abandoned: its runner was lost on every attempt", "max_attempts", r.cfg.Queue.MaxAttempts)
		r.publishStatus(rm.JobID, jobs.StatusError)
		_ = msg.Ack()
		return
	}
	log = log.With("attempt", claim.Attempt, "tenant_id", claim.TenantID, "language", claim.Spec.Language)

	ex := &execution{jobID: rm.JobID, attempt: claim.Attempt}
	execCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ex.cancel = cancel
	r.track(ex)
	defer r.untrack(ex)
	if claim.CancelRequested {
		cancel(errCancelled)
	}
	log.Info("job started")
	r.publishStatus(rm.JobID, jobs.StatusRunning)
	if r.metrics != nil {
		r.metrics.queueLatency(meta.Timestamp)
	}

	hbDone := make(chan struct{})
	defer close(hbDone)
	go r.heartbeat(ex, hbDone)
	a := &attempt{r: r, log: log, ex: ex, claim: claim, jobCtx: ctx}
	res, _, err := r.runAttempt(execCtx, log, a)

	if errors.Is(err, errS3Held) {
		// Held for S3 until the runner stopped: the attempt is not spent.
		log.Warn("job given back to the queue unspent: the object store stayed unavailable", "err", err)
		if err := r.store.ReleaseJob(context.WithoutCancel(ctx), rm.JobID, claim.Attempt); err != nil {
			log.Error("give back job", "err", err)
		}
		r.handBack(msg, rm.TenantID, time.Second, "object_store")
		return
	}
	if err != nil {
		if errors.Is(context.Cause(execCtx), errShutdown) || claim.Attempt < r.cfg.Queue.MaxAttempts {
			log.Warn("job attempt abandoned; returning it to the queue", "err", err)
			if err := r.store.RequeueJob(context.WithoutCancel(ctx), rm.JobID, claim.Attempt); err != nil {
				log.Error("requeue job", "err", err)
			}
			r.handBack(msg, rm.TenantID, time.Second, retryCause(execCtx))
			return
		}
		res = jobs.Result{Status: jobs.StatusError, Error: &jobs.ErrorInfo{
			Code:    jobs.ErrCodeInfrastructure,
			Message: fmt.Sprintf("gantry could not run the job (attempt %d of %d): %v", claim.Attempt, r.cfg.Queue.MaxAttempts, err),
		}}
	}

	recordStart := time.Now()
	applied, err := r.record(ctx, log, func(ctx context.Context) (bool, error) {
		return r.store.FinishJob(ctx, rm.JobID, claim.Attempt, res)
	})
	r.metrics.stage("record", recordStart)
	if err != nil && ctx.Err() == nil {
		// Not an outage (those are waited out): say so in the job rather
		// than run the program again.
		log.Error("record result", "err", err)
		res = jobs.Result{Status: jobs.StatusError, Error: &jobs.ErrorInfo{Code: jobs.ErrCodeInfrastructure,
			Message: fmt.Sprintf("the program ran, but gantry could not record its result: %v", err)}}
		applied, err = r.store.FailJob(context.WithoutCancel(ctx), rm.JobID, claim.Attempt, res.Error.Message)
	}
	if err != nil {
		// Stopped past the drain timeout with the result unrecorded: the
		// job runs again elsewhere. If it was S3 that kept it (Postgres
		// answers), the attempt is not spent.
		log.Error("result not recorded; the job will run again", "err", err)
		if blob.Unavailable(err) {
			if err := r.store.ReleaseJob(context.WithoutCancel(ctx), rm.JobID, claim.Attempt); err != nil {
				log.Error("give back job", "err", err)
			}
		}
		r.handBack(msg, rm.TenantID, time.Second, "unrecorded")
		return
	}
	if !applied {
		log.Warn("result discarded: the job moved on without this attempt")
	}
	ackCtx, cancelAck := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancelAck()
	if err := msg.DoubleAck(ackCtx); err != nil {
		log.Warn("ack job", "err", err)
	}
	if applied {
		r.publishStatus(rm.JobID, res.Status)
		if r.metrics != nil {
			r.metrics.observe(claim.Spec.Language, claim.TenantID, res)
		}
		log.Info("job finished", "status", res.Status, "duration_ms", res.Duration.Milliseconds())
	}
}

// retryCause names why an attempt that did not finish went back to the
// queue: the runner stopping, or a failure before its program started.
func retryCause(ctx context.Context) string {
	if errors.Is(context.Cause(ctx), errShutdown) {
		return "shutdown"
	}
	return "not_started"
}

// maxHold is how long a runner holds a message it cannot claim because
// Postgres is unreachable before handing it back, in case only this
// runner has lost Postgres.
const maxHold = time.Minute

// claim claims the job a message names. It waits a little for a row that
// is not there yet (the ingress publishes before it commits), and holds
// the message while Postgres is unreachable, so that the job starts as
// soon as Postgres is back and the outage spends none of its attempts.
func (r *Runner) claim(ctx context.Context, log *slog.Logger, jobID string, seq uint64) (store.Claim, store.ClaimOutcome, error) {
	req := store.ClaimRequest{JobID: jobID, MsgSeq: seq, RunnerID: r.cfg.ID, MaxAttempts: r.cfg.Queue.MaxAttempts,
		Alive: r.cfg.Queue.AckWait / 2}
	wait, retry := 5*time.Millisecond, newBackoff()
	start := time.Now()
	held := false
	for {
		c, out, err := r.store.ClaimJob(ctx, req)
		var pause time.Duration
		switch {
		case errors.Is(err, store.ErrNotFound) && wait <= time.Second:
			pause, wait = wait, wait*2
		case err != nil && store.Unavailable(err) && time.Since(start) < maxHold && !r.isStopping():
			if !held {
				log.Warn("database unavailable; holding the job's message until it is back", "err", err)
				held = true
			}
			pause = retry.next()
		default:
			if held && err == nil {
				log.Info("database back: job claimed", "held", time.Since(start).Round(time.Millisecond))
			}
			return c, out, err
		}
		if !sleep(ctx, pause) {
			return c, out, err
		}
	}
}

// runAttempt runs the attempt and waits out Postgres outages. An attempt
// that failed before its program started because Postgres was unreachable
// (loading the tenant's skills, code-mode servers or privacy tokens) is
// run again, as the same attempt, once Postgres answers; a result whose
// privacy tokens could not be made is tokenized again. The program never
// runs twice for it.
func (r *Runner) runAttempt(ctx context.Context, log *slog.Logger, a *attempt) (jobs.Result, *Container, error) {
	blips := 0
	for {
		res, ctr, err := a.run(ctx)
		if err == nil || !store.Unavailable(err) {
			return res, ctr, err
		}
		if res.Status != "" {
			// The program ran (run returns a result only then): only the
			// privacy tokens of its result are missing.
			_, err = r.record(a.jobCtx, log, func(ctx context.Context) (bool, error) {
				return true, r.tokenizeResult(ctx, a.claim.TenantID, &res)
			})
			if err != nil && a.jobCtx.Err() == nil {
				// Never store output that was not tokenized.
				return jobs.Result{Status: jobs.StatusError, Duration: res.Duration, ExitCode: res.ExitCode, Error: &jobs.ErrorInfo{
					Code: jobs.ErrCodeInfrastructure, Message: fmt.Sprintf("the program ran, but gantry could not tokenize its output: %v", err),
				}}, ctr, nil
			}
			return res, ctr, err
		}
		waited, ok := r.waitForStore(ctx, log)
		if !ok {
			return res, ctr, err
		}
		if !waited {
			// Postgres answers now: a blip, or not Postgres at all (a
			// network error from Docker looks the same). Once more only.
			if blips++; blips > 1 {
				return res, ctr, err
			}
		}
		log.Info("database back: running the attempt again; its program had not started")
	}
}

// waitForStore waits until Postgres answers. waited says whether it had to;
// ok is false when ctx ended first.
func (r *Runner) waitForStore(ctx context.Context, log *slog.Logger) (waited, ok bool) {
	retry := newBackoff()
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := r.store.Ping(pctx)
		cancel()
		if err == nil {
			return waited, true
		}
		if !waited {
			log.Warn("database unavailable; the job waits for it", "err", err)
			waited = true
		}
		if !sleep(ctx, retry.next()) {
			return waited, false
		}
	}
}

// record stores what finish writes, retrying until it is stored: a program
// that ran is never run again because Postgres was away when it ended.
// While Postgres is unreachable the result waits here, in memory, with its
// message held. Other errors are retried twice. Only ctx ending (the
// runner stopped past its drain timeout) gives up on an outage.
func (r *Runner) record(ctx context.Context, log *slog.Logger, finish func(ctx context.Context) (bool, error)) (applied bool, err error) {
	retry := newBackoff()
	failures, waiting := 0, false
	for {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		applied, err = finish(cctx)
		cancel()
		if err == nil {
			if waiting {
				log.Info("result recorded after the wait")
			}
			return applied, nil
		}
		switch {
		case store.Unavailable(err):
			if !waiting {
				log.Warn("database unavailable; keeping the result until it is back", "err", err)
				waiting = true
			}
		case blob.Unavailable(err):
			// A long output goes to S3 as it is recorded (history).
			if !waiting {
				log.Warn("object store unavailable; keeping the result until it is back", "err", err)
				waiting = true
				r.metrics.s3Hold()
			}
		default:
			if failures++; failures == 3 {
				return false, err
			}
		}
		if !sleep(ctx, retry.next()) {
			return false, err
		}
	}
}

// backoff paces retries against an unreachable Postgres: 250 ms, doubling
// to a second, so that work resumes within a second of its return.
type backoff struct{ d time.Duration }

func newBackoff() *backoff { return &backoff{d: 250 * time.Millisecond} }

func (b *backoff) next() time.Duration {
	d := b.d
	b.d = min(2*b.d, time.Second)
	return d
}

// handBack returns a message to its queue, to be delivered again after d,
// and announces it then, so that an idle runner takes it at once. cause
// says why, for gantry_job_handbacks_total.
func (r *Runner) handBack(msg jetstream.Msg, tenantID string, d time.Duration, cause string) {
	r.metrics.handBack(cause)
	_ = msg.NakWithDelay(d)
	if tenantID != "" && r.nc != nil {
		time.AfterFunc(d+20*time.Millisecond, func() { _ = r.nc.Publish(jobs.ReadySubject, []byte(tenantID)) })
	}
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

// sleep waits d, or less if ctx ends first; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (r *Runner) isStopping() bool {
	select {
	case <-r.stopping:
		return true
	default:
		return false
	}
}

// hold keeps a message from being redelivered while this runner has it,
// with InProgress every ack_wait/3, until the returned func is called.
// It needs nothing of Postgres: a job waiting out an outage stays here.
func (r *Runner) hold(msg jetstream.Msg) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(max(r.cfg.Queue.AckWait/3, 100*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if err := msg.InProgress(); err != nil {
					r.log.Warn("extend job ack deadline", "err", err)
				}
			}
		}
	}()
	return func() { close(done) }
}

// heartbeat tells the store, every ack_wait/3, that this runner still runs
// the attempt, and picks up a cancel it might have missed. A heartbeat
// that failed (Postgres away) is retried every second, so the job shows
// alive again as soon as Postgres is back. If the attempt no longer has
// the job (cancelled because its runner looked gone, or taken over), the
// run is stopped.
func (r *Runner) heartbeat(ex *execution, done <-chan struct{}) {
	every := max(r.cfg.Queue.AckWait/3, 100*time.Millisecond)
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		cancelReq, err := r.store.Heartbeat(ctx, ex.jobID, ex.attempt)
		cancel()
		switch {
		case errors.Is(err, store.ErrNotFound) || err == nil && cancelReq:
			ex.cancel(errCancelled)
			t.Reset(every)
		case err != nil:
			t.Reset(min(time.Second, every))
		default:
			t.Reset(every)
		}
	}
}

func (r *Runner) track(ex *execution) {
	r.mu.Lock()
	r.running[ex.jobID] = ex
	r.mu.Unlock()
	if r.metrics != nil {
		r.metrics.busy.Inc()
	}
}

func (r *Runner) untrack(ex *execution) {
	r.mu.Lock()
	if r.running[ex.jobID] == ex {
		delete(r.running, ex.jobID)
	}
	r.mu.Unlock()
	if r.metrics != nil {
		r.metrics.busy.Dec()
	}
}

func (r *Runner) lookup(jobID string) *execution {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running[jobID]
}

func (r *Runner) onCancel(m *nats.Msg) {
	if ex := r.lookup(jobs.JobIDFromSubject(m.Subject)); ex != nil {
		ex.cancel(errCancelled)
	}
}

// onBacklog answers with the output so far of a job running here; runners
// not running the job stay silent.
func (r *Runner) onBacklog(m *nats.Msg) {
	if m.Reply == "" {
		return
	}
	r.mu.Lock()
	ex := r.running[jobs.JobIDFromSubject(m.Subject)]
	var stdout, stderr *output
	if ex != nil && !ex.private {
		stdout, stderr = ex.stdout, ex.stderr
	}
	r.mu.Unlock()
	if ex == nil {
		return
	}
	var b jobs.Backlog
	if stdout != nil {
		b.Stdout, _ = stdout.snapshot()
		b.Stderr, _ = stderr.snapshot()
	}
	data, _ := json.Marshal(b)
	_ = m.Respond(data)
}

func (r *Runner) publishStatus(jobID string, s jobs.Status) {
	data, _ := json.Marshal(jobs.StatusEvent{JobID: jobID, Status: s})
	if err := r.nc.Publish(jobs.StatusSubject(jobID), data); err != nil {
		r.log.Warn("publish status", "job_id", jobID, "err", err)
	}
}

// sessionIDFromSubject returns the id in gantry.session.<id>.closed.
func sessionIDFromSubject(subject string) string {
	rest, ok := strings.CutPrefix(subject, "gantry.session.")
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, ".")
	return id
}
