// Package runner pulls jobs from JetStream and runs each in a hardened Docker
// container: it writes the job's files in, runs the program with its limits,
// streams the output live over NATS, uploads the artifacts to the object
// store, records the result in Postgres and only then acks the message.
//
// Runners keep no state that outlives a job: kill one and JetStream
// redelivers its jobs to another.
package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
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
	// Pool sizes the warm container pool (Min 0: no pool).
	Pool PoolConfig
	// CodeMode, when set, gives every job a bridge to its tenant's
	// upstream MCP servers (code mode).
	CodeMode *codemode.Registry
	// Privacy, when set, tokenizes personal data for tenants that turned
	// privacy tokens on (see privacy.go).
	Privacy *pii.Tokenizer
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
	return c
}

// Store is what the runner needs of the job store.
type Store interface {
	ClaimJob(ctx context.Context, id string, attempt int, runnerID string) (store.Claim, bool, error)
	FinishJob(ctx context.Context, id string, attempt int, r jobs.Result) (bool, error)
	RequeueJob(ctx context.Context, id string, attempt int) error
	FailJob(ctx context.Context, id string, attempt int, message string) (bool, error)
	CancelRequested(ctx context.Context, id string) (bool, error)
	SessionStore
	SkillStore
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
	warm     *warmCache
	skills   *skillCache
	pool     *pool

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
		sandbox: sb, metrics: m, running: map[string]*execution{},
		warm: newWarmCache(max(2*cfg.Slots, 4), 10*time.Minute), skills: newSkillCache(st),
	}
	if cfg.Pool.Min > 0 {
		r.pool = newPool(cfg.Pool, sb, r.skills, r.log, reg)
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

var errCancelled = errors.New("cancelled by request")

// Check verifies the runner's dependencies: Docker and the sandbox image.
func (r *Runner) Check(ctx context.Context) error { return r.sandbox.CheckImage(ctx) }

// Run pulls and runs jobs until ctx ends, then drains: it waits up to
// DrainTimeout for running jobs, then kills the rest and gives them back to
// the queue for another runner.
func (r *Runner) Run(ctx context.Context) error {
	if err := r.sandbox.CheckImage(ctx); err != nil {
		return err
	}
	r.stopping = ctx.Done()
	if n, err := r.sandbox.RemoveLeftovers(ctx); err != nil {
		return err
	} else if n > 0 {
		r.log.Info("removed leftover containers from an earlier run", "count", n)
	}
	cons, err := jobs.EnsureQueue(ctx, r.js, r.cfg.Queue)
	if err != nil {
		return err
	}
	if r.pool != nil {
		poolCtx, stopPool := context.WithCancel(context.WithoutCancel(ctx))
		poolDone := make(chan struct{})
		go func() { r.pool.run(poolCtx); close(poolDone) }()
		// Stopped after the drain below (defers run last-in first-out).
		defer func() { stopPool(); <-poolDone }()
	}
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
			r.warm.drop(sid)
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
	defer r.warm.closeAll()
	go func() {
		t := time.NewTicker(time.Minute)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				r.warm.sweep()
			}
		}
	}()

	r.log.Info("runner started", "slots", r.cfg.Slots, "ack_wait", r.cfg.Queue.AckWait)
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
		// One message per free slot and no prefetch: a job waits in the
		// stream, where any runner can take it, until a slot is free here.
		fetchCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		msg, err := cons.Next(jetstream.FetchContext(fetchCtx))
		cancel()
		if err != nil {
			<-slots
			if ctx.Err() == nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, jetstream.ErrNoMessages) {
				r.log.Warn("fetch job", "err", err)
				select {
				case <-time.After(time.Second):
				case <-ctx.Done():
				}
			}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			r.handle(jobCtx, msg)
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
	attempt := int(meta.NumDelivered)
	log := r.log.With("job_id", rm.JobID, "attempt", attempt)

	if attempt > r.cfg.Queue.MaxAttempts {
		reason := fmt.Sprintf("gantry gave up after %d attempts: each time, the runner running the job stopped responding (crashed, was killed or lost its connection)", r.cfg.Queue.MaxAttempts)
		if applied, err := r.store.FailJob(ctx, rm.JobID, attempt-1, reason); err != nil {
			log.Error("record abandoned job", "err", err)
			_ = msg.NakWithDelay(5 * time.Second)
			return
		} else if applied {
			log.Warn("job abandoned after max attempts")
			r.publishStatus(rm.JobID, jobs.StatusError)
		}
		_ = msg.Ack()
		return
	}

	ex := &execution{jobID: rm.JobID, attempt: attempt}
	execCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ex.cancel = cancel
	r.track(ex)
	defer r.untrack(ex)

	claim, ok, err := r.claim(ctx, rm.JobID, attempt)
	switch {
	case errors.Is(err, store.ErrNotFound):
		// The ingress publishes before it commits: give a young message
		// time for its row to appear, drop an old one (the commit failed).
		if time.Since(meta.Timestamp) > 30*time.Second {
			log.Warn("dropping message for a job that does not exist")
			_ = msg.TermWithReason("job not found")
		} else {
			_ = msg.NakWithDelay(500 * time.Millisecond)
		}
		return
	case err != nil:
		log.Error("claim job", "err", err)
		_ = msg.NakWithDelay(2 * time.Second)
		return
	case !ok:
		_ = msg.Ack() // finished or cancelled while queued
		return
	}
	if claim.CancelRequested {
		cancel(errCancelled)
	}
	log = log.With("tenant_id", claim.TenantID, "language", claim.Spec.Language)
	log.Info("job started")
	r.publishStatus(rm.JobID, jobs.StatusRunning)
	if r.metrics != nil {
		r.metrics.queueLatency(meta.Timestamp)
	}

	hbDone := make(chan struct{})
	go r.heartbeat(execCtx, msg, ex, hbDone)
	res, err := r.execute(execCtx, ex, claim)
	close(hbDone)

	if err != nil {
		if errors.Is(context.Cause(execCtx), errShutdown) || attempt < r.cfg.Queue.MaxAttempts {
			log.Warn("job attempt abandoned; returning it to the queue", "err", err)
			if err := r.store.RequeueJob(context.WithoutCancel(ctx), rm.JobID, attempt); err != nil {
				log.Error("requeue job", "err", err)
			}
			_ = msg.NakWithDelay(time.Second)
			return
		}
		res = jobs.Result{Status: jobs.StatusError, Error: &jobs.ErrorInfo{
			Code:    jobs.ErrCodeInfrastructure,
			Message: fmt.Sprintf("gantry could not run the job (attempt %d of %d): %v", attempt, r.cfg.Queue.MaxAttempts, err),
		}}
	}

	commitCtx, cancelCommit := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancelCommit()
	applied, err := r.store.FinishJob(commitCtx, rm.JobID, attempt, res)
	if err != nil {
		log.Error("record result; the job will be retried", "err", err)
		_ = msg.NakWithDelay(5 * time.Second)
		return
	}
	if !applied {
		log.Warn("result discarded: the job moved on without this attempt")
	}
	if err := msg.DoubleAck(commitCtx); err != nil {
		log.Warn("ack job", "err", err)
	}
	if applied {
		r.publishStatus(rm.JobID, res.Status)
		if r.metrics != nil {
			r.metrics.observe(claim.Spec.Language, res)
		}
		log.Info("job finished", "status", res.Status, "duration_ms", res.Duration.Milliseconds())
	}
}

// claim claims the job, waiting a little for its row: the ingress publishes
// before it commits, so a fast runner can see the message first.
func (r *Runner) claim(ctx context.Context, jobID string, attempt int) (store.Claim, bool, error) {
	wait := 5 * time.Millisecond
	for {
		c, ok, err := r.store.ClaimJob(ctx, jobID, attempt, r.cfg.ID)
		if !errors.Is(err, store.ErrNotFound) || wait > time.Second {
			return c, ok, err
		}
		select {
		case <-time.After(wait):
			wait *= 2
		case <-ctx.Done():
			return c, ok, err
		}
	}
}

// heartbeat keeps the message from being redelivered while the job runs,
// and polls the store for a cancel this runner might have missed.
func (r *Runner) heartbeat(ctx context.Context, msg jetstream.Msg, ex *execution, done <-chan struct{}) {
	every := max(r.cfg.Queue.AckWait/3, 100*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-t.C:
			if err := msg.InProgress(); err != nil {
				r.log.Warn("extend job ack deadline", "job_id", ex.jobID, "err", err)
			}
			if yes, err := r.store.CancelRequested(ctx, ex.jobID); err == nil && yes {
				ex.cancel(errCancelled)
			}
		}
	}
}

// execute runs one attempt. A returned error means gantry failed (Docker,
// object store), not the program.
func (r *Runner) execute(ctx context.Context, ex *execution, claim store.Claim) (jobs.Result, error) {
	spec := claim.Spec
	if ctx.Err() != nil && errors.Is(context.Cause(ctx), errCancelled) {
		return cancelledResult(0), nil
	}
	ctr, pooled := r.takePooled(ctx, spec.Limits)
	if !pooled {
		var err error
		ctr, err = r.sandbox.Create(ctx, ContainerSpec{JobID: ex.jobID, Limits: spec.Limits})
		if err != nil {
			if errors.Is(context.Cause(ctx), errCancelled) {
				return cancelledResult(0), nil
			}
			return jobs.Result{}, err
		}
	}
	// The container goes away in the background: its removal is not on
	// the path to the job's result.
	defer func() { go r.removeContainer(ctr, ex.jobID) }()
	res, err := r.runIn(ctx, ex, ctr, claim)
	if err != nil && pooled && !ctr.Alive(context.WithoutCancel(ctx)) && ctx.Err() == nil {
		// The pooled container died while waiting (a Docker restart):
		// start one of the job's own and run there.
		r.log.Warn("pooled container was dead; starting a fresh one", "job_id", ex.jobID)
		go r.removeContainer(ctr, ex.jobID)
		if ctr, err = r.sandbox.Create(ctx, ContainerSpec{JobID: ex.jobID, Limits: spec.Limits}); err != nil {
			return jobs.Result{}, err
		}
		return r.runIn(ctx, ex, ctr, claim)
	}
	return res, err
}

func (r *Runner) takePooled(ctx context.Context, lim jobs.Limits) (*Container, bool) {
	if r.pool == nil {
		return nil, false
	}
	return r.pool.take(ctx, lim, time.Second)
}

func (r *Runner) removeContainer(ctr *Container, jobID string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := ctr.Remove(ctx); err != nil {
		r.log.Warn("remove container", "job_id", jobID, "err", err)
	}
}

// runIn runs a job's program in a ready container: files in, program,
// output, artifacts out. A returned error means gantry failed, not the
// program.
func (r *Runner) runIn(ctx context.Context, ex *execution, ctr *Container, claim store.Claim) (jobs.Result, error) {
	claim, err := r.withPrivacy(ctx, claim)
	if err != nil {
		return jobs.Result{}, fmt.Errorf("privacy tokens: %w", err)
	}
	res, err := r.runClaim(ctx, ex, ctr, claim)
	if err == nil && claim.Private {
		err = r.tokenizeResult(ctx, claim.TenantID, &res)
	}
	return res, err
}

func (r *Runner) runClaim(ctx context.Context, ex *execution, ctr *Container, claim store.Claim) (jobs.Result, error) {
	spec, private := claim.Spec, claim.Private
	stamp, skillFiles, err := r.skills.get(ctx, claim.TenantID)
	if err != nil {
		return jobs.Result{}, fmt.Errorf("load skills: %w", err)
	}
	// Skills go in as root (the job must not change them), only when the
	// container holds other skills than the tenant's; the job's own files
	// and program go with the request to the agent.
	if ctr.skills != stamp {
		if err := ctr.PutSkills(ctx, skillFiles); err != nil {
			if errors.Is(context.Cause(ctx), errCancelled) {
				return cancelledResult(0), nil
			}
			return jobs.Result{}, err
		}
		ctr.skills = stamp
	}
	var jobFiles []FileEntry
	for _, f := range spec.Files {
		jobFiles = append(jobFiles, FileEntry{Path: jobs.WorkspaceDir + "/" + f.Path, Content: f.Content})
	}
	if spec.Code != "" {
		lang, _ := jobs.LookupLanguage(spec.Language)
		jobFiles = append(jobFiles, FileEntry{Path: jobs.ProgramDir + "/" + lang.File, Content: []byte(spec.Code)})
	}
	bridge, genFiles, env, err := r.codeMode(ctx, claim)
	if err != nil {
		return jobs.Result{}, fmt.Errorf("prepare code mode: %w", err)
	}
	jobFiles = append(jobFiles, genFiles...)
	var handler BridgeHandler
	if bridge != nil {
		if private {
			bridge.Detokenize = func(ctx context.Context, s string) (string, error) {
				return r.cfg.Privacy.Detokenize(ctx, claim.TenantID, s)
			}
		}
		handler = bridge
	}

	publish := func(stream string, offset int, chunk []byte) {
		if private {
			return
		}
		m := nats.NewMsg(jobs.LogSubject(ex.jobID))
		m.Header.Set(jobs.HeaderStream, stream)
		m.Header.Set(jobs.HeaderOffset, strconv.Itoa(offset))
		m.Data = chunk
		_ = r.nc.PublishMsg(m)
	}
	stdout := newOutput("stdout", spec.Limits.OutputBytes, publish)
	stderr := newOutput("stderr", spec.Limits.OutputBytes, publish)
	r.mu.Lock()
	ex.stdout, ex.stderr, ex.private = stdout, stderr, private
	r.mu.Unlock()

	runCtx, cancelRun := context.WithTimeoutCause(ctx, spec.Timeout(), errTimeout)
	defer cancelRun()
	start := time.Now()
	exit, listing, err := ctr.runAgent(runCtx, jobFiles, spec.Argv(), env, spec, stdout, stderr, handler)
	code := exit.Code
	res := jobs.Result{Duration: time.Since(start), ToolCalls: toolCalls(bridge)} // complete: runAgent waited for calls in progress
	res.Stdout, res.StdoutTruncated = stdout.snapshot()
	res.Stderr, res.StderrTruncated = stderr.snapshot()

	if err != nil {
		switch cause := context.Cause(runCtx); {
		case errors.Is(cause, errTimeout):
			res.Status = jobs.StatusTimedOut
			res.Error = &jobs.ErrorInfo{Code: jobs.ErrCodeTimedOut, Message: fmt.Sprintf("the program ran longer than its timeout of %s and was killed", spec.Timeout())}
			return res, nil
		case errors.Is(cause, errCancelled):
			c := cancelledResult(res.Duration)
			c.ToolCalls = res.ToolCalls
			c.Stdout, c.Stderr, c.StdoutTruncated, c.StderrTruncated = res.Stdout, res.Stderr, res.StdoutTruncated, res.StderrTruncated
			return c, nil
		default:
			return jobs.Result{}, err
		}
	}
	res.ExitCode = &code
	res.Status = jobs.StatusSucceeded
	if code != 0 {
		res.Status = jobs.StatusFailed
		if code == 137 && exit.OOMKills > 0 {
			res.Error = &jobs.ErrorInfo{Code: jobs.ErrCodeOOMKilled, Message: fmt.Sprintf("the program ran out of memory (limit %d MB) and was killed", spec.Limits.MemoryMB)}
		}
	}

	// Collecting is bounded in time: what the sandbox sends is untrusted.
	artCtx, cancelArt := context.WithTimeout(ctx, artifactTimeout)
	defer cancelArt()
	arts, err := collectArtifacts(artCtx, agentWorkspace{ctr.agent, listing}, spec.Artifacts, r.cfg.Artifacts, r.blobs, func(p string) string {
		return blob.ArtifactKey(claim.TenantID, ex.jobID, p)
	})
	var limitErr *errArtifactLimit
	switch {
	case errors.As(err, &limitErr):
		res.Status = jobs.StatusFailed
		res.Error = &jobs.ErrorInfo{Code: jobs.ErrCodeOutputLimit, Message: limitErr.Error()}
	case err != nil:
		if errors.Is(context.Cause(ctx), errCancelled) {
			return cancelledResult(res.Duration), nil
		}
		return jobs.Result{}, err
	}
	res.Artifacts = arts
	return res, nil
}

var errTimeout = errors.New("timed out")

// artifactTimeout bounds collecting a job's artifacts.
const artifactTimeout = 5 * time.Minute

func cancelledResult(d time.Duration) jobs.Result {
	return jobs.Result{Status: jobs.StatusCancelled, Duration: d,
		Error: &jobs.ErrorInfo{Code: jobs.ErrCodeCancelled, Message: "cancelled by request; the sandbox was killed"}}
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
