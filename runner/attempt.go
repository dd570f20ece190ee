package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/gantryhq/gantry/agent/wire"
	"github.com/gantryhq/gantry/blob"
	"github.com/gantryhq/gantry/codemode"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/tracing"
)

// Causes of an attempt's context ending. The outcome of an attempt is
// decided once, from the cause, in programRun.ending.
var (
	errTimeout        = errors.New("timed out")
	errCompileTimeout = errors.New("the compile timed out")
	errCancelled      = errors.New("cancelled by request")
)

// artifactTimeout bounds collecting a job's artifacts or a session's
// snapshot: what the sandbox sends is untrusted.
const artifactTimeout = 5 * time.Minute

// startTries is how many containers an attempt tries when the program does
// not even start (a container that died while it waited, a Docker hiccup)
// before it gives the job back to the queue.
const startTries = 3

// errNotStarted marks a failure before any of the program ran: the job
// may run elsewhere without repeating anything it did.
var errNotStarted = errors.New("the program did not start")

// attempt is one attempt at running one job. It owns the job's container
// from the moment it obtains one until it hands it on: to the fleet
// (release: reuse or retire) for a job, or to the session for a session's
// job. It decides the outcome once.
type attempt struct {
	r     *Runner
	log   *slog.Logger
	ex    *execution
	claim store.Claim
	// session is set for a session's job: the container holds the
	// session's workspace and goes back to the session protocol.
	session *sessionWork
	// jobCtx ends only when the runner gives up on running jobs
	// (errShutdown); the context run gets also ends on a cancel request.
	jobCtx context.Context
	// testing is set while the job's tests run (tests.go): runIn keeps the
	// container for the next test, collects no artifacts and publishes no
	// live output.
	testing bool
}

// prepared is what a run needs besides the container.
type prepared struct {
	req        wire.Request
	stamp      string      // the tenant's skills stamp
	skillFiles []wire.File // the tenant's skills
	bridge     *codemode.Bridge
	egress     *jobEgress // nil: no network
	// cached is the kept build the program runs from (req.Build), nil
	// when it is compiled; buildKey, when set, is where what its compile
	// step builds is kept (buildcache.go).
	cached   *build
	buildKey string
	// built is what the run's compile step sent back (Compile.SendBuild).
	built []byte
}

// run runs the attempt. The result is final when err is nil (succeeded,
// failed, timed out, cancelled, or error for a failure after the program
// ran that must not repeat it); err means gantry could not run the job and
// nothing of the program ran (or it was lost to a failure outside it):
// the caller gives the job back to the queue.
//
// For a session's job, the container whose workspace the program left
// (the program ended by itself) is returned to the caller, who snapshots
// and parks it; otherwise it is always nil.
func (a *attempt) run(ctx context.Context) (jobs.Result, *lease, error) {
	if errors.Is(context.Cause(ctx), errCancelled) {
		return cancelledResult(0), nil, nil
	}
	claim, err := a.r.withEnv(a.claim, a.ex.jobID)
	if err != nil {
		return jobs.Result{}, nil, err
	}
	claim, err = a.r.withPrivacy(ctx, claim)
	if err != nil {
		return jobs.Result{}, nil, fmt.Errorf("privacy tokens: %w", err)
	}
	if msg := a.r.lacksLanguage(ctx, claim); msg != "" {
		// The ingress took a language the job's image lacks (see
		// GANTRY_LANGUAGES): say so, once.
		return jobs.Result{Status: jobs.StatusError, Error: &jobs.ErrorInfo{Code: jobs.ErrCodeInfrastructure, Message: msg}}, nil, nil
	}
	in, err := a.prepare(ctx, claim)
	if err != nil {
		return jobs.Result{}, nil, err
	}
	done, failed := a.useBuild(ctx, claim, in)
	defer done()
	if failed != nil {
		return *failed, nil, nil
	}
	if len(claim.Spec.Tests) > 0 {
		res, err := a.runTests(ctx, claim, in)
		if err == nil && claim.Private {
			err = a.r.tokenizeResult(ctx, claim.TenantID, &res)
		}
		return res, nil, err
	}
	var lastErr error
	for try := 1; try <= startTries; try++ {
		ctr, err := a.obtain(ctx)
		var refused *RefusedError
		switch {
		case err != nil && errors.Is(context.Cause(ctx), errCancelled):
			return cancelledResult(0), nil, nil
		case errors.As(err, &refused):
			// What the job asks cannot be had here: say so, once.
			return jobs.Result{Status: jobs.StatusError, Error: &jobs.ErrorInfo{Code: jobs.ErrCodeInfrastructure,
				Message: refused.Error() + " (the job's limits cannot be met on this runner's host)"}}, nil, nil
		case isEnv(err) || isTooLarge(err):
			// Its environment, or its memory, cannot be had: say so, once.
			return jobs.Result{Status: jobs.StatusError, Error: &jobs.ErrorInfo{Code: jobs.ErrCodeInfrastructure, Message: err.Error()}}, nil, nil
		case err != nil:
			return jobs.Result{}, nil, err
		}
		res, keep, err := a.runIn(ctx, ctr, in)
		if errors.Is(err, errNotStarted) && ctx.Err() == nil {
			lastErr = err
			a.log.Warn("the program did not start; trying another container", "try", try, "container", shortID(ctr.id), "err", err)
			continue
		}
		if err == nil && claim.Private {
			err = a.r.tokenizeResult(ctx, claim.TenantID, &res)
		}
		return res, keep, err
	}
	return jobs.Result{}, nil, lastErr
}

// withEnv returns the claim with its spec's env values opened: the
// ingress sealed them under GANTRY_SECRET_KEY. Only the attempt's own copy
// holds them, for as long as the attempt runs.
func (r *Runner) withEnv(claim store.Claim, jobID string) (store.Claim, error) {
	if claim.Spec.SealedEnv == nil {
		return claim, nil
	}
	var box jobs.Sealer
	if r.cfg.Box.Enabled() {
		box = r.cfg.Box
	}
	if err := claim.Spec.OpenEnv(box, claim.TenantID, jobID); err != nil {
		return claim, fmt.Errorf("%w (every ingress and runner needs the same GANTRY_SECRET_KEY)", err)
	}
	return claim, nil
}

// prepare gathers the run request: files, program, environment, skills
// and the code-mode bridge.
func (a *attempt) prepare(ctx context.Context, claim store.Claim) (*prepared, error) {
	spec := claim.Spec
	in := &prepared{}
	stamp, skillFiles, err := a.r.skills.get(ctx, claim.TenantID)
	if err != nil {
		return nil, fmt.Errorf("load skills: %w", err)
	}
	in.stamp, in.skillFiles = stamp, skillFiles
	files := make([]wire.File, 0, len(spec.Files)+1)
	for _, f := range spec.Files {
		files = append(files, wire.File{Path: jobs.WorkspaceDir + "/" + f.Path, Data: f.Content})
	}
	plan := spec.Plan()
	if spec.Code != "" {
		files = append(files, wire.File{Path: plan.File, Data: []byte(spec.Code)})
	}
	bridge, genFiles, env, err := a.r.codeMode(ctx, claim)
	if err != nil {
		return nil, fmt.Errorf("prepare code mode: %w", err)
	}
	files = append(files, genFiles...)
	if bridge != nil && claim.Private {
		bridge.Detokenize = func(ctx context.Context, s string) (string, error) {
			return a.r.cfg.Privacy.Detokenize(ctx, claim.TenantID, s)
		}
	}
	in.bridge = bridge
	stateful := a.session != nil && a.session.state.Stateful
	sessionID := ""
	if a.session != nil {
		sessionID = a.session.id
	}
	if in.egress, err = a.r.egressFor(ctx, claim, sessionID, stateful); err != nil {
		return nil, fmt.Errorf("the job's egress: %w", err)
	}
	if in.egress != nil {
		env = in.egress.env(env)
	}
	in.req = wire.Request{
		Files: files, Argv: plan.Run, Env: env,
		OutputCap: spec.Limits.OutputBytes,
		Fresh:     a.session == nil,
		Stateful:  a.session != nil && a.session.state.Stateful,
		TimeoutMS: spec.TimeoutMS,
		Kernel:    spec.Kernel,
	}
	if plan.Compile != nil {
		in.req.Compile = &wire.Compile{Argv: plan.Compile, TimeoutMS: int(spec.CompileTimeout().Milliseconds()), OutputCap: jobs.CompileOutputCap}
	}
	if spec.Stdin != "" {
		in.req.Stdin = []byte(spec.Stdin)
	}
	return in, nil
}

// obtain gets the container to run in: the session's, or one bound to the
// job's tenant and limits.
func (a *attempt) obtain(ctx context.Context) (c *lease, err error) {
	if a.session != nil {
		defer a.r.metrics.stage("restore", time.Now())
		ctx, end := a.r.stage(ctx, "job.restore")
		defer func() { end(err) }()
		return a.session.container(ctx, a.claim.Spec)
	}
	defer a.r.metrics.stage("acquire", time.Now())
	ctx, span := a.r.tracer().Start(ctx, "job.acquire")
	defer func() { tracing.End(span, err) }()
	image, err := a.r.envs.image(ctx, a.claim.TenantID, a.claim.Spec.Environment)
	if err != nil {
		return nil, err
	}
	c, source, err := a.r.fleet.acquire(ctx, a.claim.TenantID, a.claim.KeyEpoch, a.claim.Spec.Limits, image)
	if err != nil {
		return nil, err
	}
	span.SetAttributes(tracing.Outcome.String(source))
	a.log.Debug("container", "id", shortID(c.id), "source", source, "jobs", c.jobs)
	return c, nil
}

// handOn gives the container to its next owner: back to the fleet (which
// reuses or retires it) for a job; for a session's job, a container still
// worth keeping is returned for the session to snapshot and park.
func (a *attempt) handOn(c *lease, reusable bool, reason string) *lease {
	if (a.session != nil || a.testing) && reusable {
		return c
	}
	if a.session != nil {
		a.session.retired = reason
		c.release(false, reason)
		return nil
	}
	c.release(reusable, reason)
	return nil
}

// runIn runs the program in ctr and decides the outcome, in named steps,
// as nomad's docker driver's task handle does (run, then wait, inspect and
// one exit result): putSkills, withCA (the run's request, with the egress
// CA the container's image needs), startRun (the run, under the runner's
// own deadlines), measure, then the run's ending, decided once from the
// agent's report and the context's cause (programRun.ending). A program
// that ended by itself has its exit read (exited) and its artifacts
// collected (collect); any other ending is said once (ended, died).
// errNotStarted means the container failed before the program started; the
// container has been retired and another may be tried.
func (a *attempt) runIn(ctx context.Context, ctr *lease, in *prepared) (jobs.Result, *lease, error) {
	began := time.Now() // the sandbox's start, for its span
	if err := a.putSkills(ctx, ctr, in); err != nil {
		a.handOn(ctr, false, "broken")
		if errors.Is(context.Cause(ctx), errCancelled) {
			return cancelledResult(0), nil, nil
		}
		return jobs.Result{}, nil, err
	}
	req, err := a.withCA(ctx, ctr, in)
	if err != nil {
		a.handOn(ctr, false, "broken")
		return jobs.Result{}, nil, err
	}
	r := a.startRun(ctx, ctr, in, req, began)
	res := a.measure(r, in)
	if end := r.ending(ctx); end != endExited {
		return a.ended(ctx, ctr, r, end, res)
	}
	res, reusable := a.exited(ctr, r, res)
	return a.collect(ctr, r, res, reusable)
}

// putSkills gives the container's agent the tenant's skills, unless it
// holds them already. A failure is errNotStarted: nothing of the program
// ran.
func (a *attempt) putSkills(ctx context.Context, ctr *lease, in *prepared) error {
	if ctr.skills == in.stamp {
		return nil
	}
	if err := ctr.conn.Skills(ctx, in.skillFiles); err != nil {
		return fmt.Errorf("%w: put skills in: %v", errNotStarted, err)
	}
	ctr.skills = in.stamp
	return nil
}

// withCA is the run's request with the files of the job's egress CA that
// the container's image needs (none without egress). A failure is
// errNotStarted: nothing of the program ran.
func (a *attempt) withCA(ctx context.Context, ctr *lease, in *prepared) (wire.Request, error) {
	ca, err := a.r.caFile(ctx, in.egress, ctr.Container)
	if err != nil {
		return wire.Request{}, fmt.Errorf("%w: %v", errNotStarted, err)
	}
	req := in.req
	req.Files = append(append([]wire.File(nil), req.Files...), ca...)
	return req, nil
}

// ended is the outcome of a run that did not end by itself (or whose
// program did not start or compile), and it hands the container on: kept
// only after a compile that failed cleanly, or a plain job's program the
// agent killed at its timeout; retired otherwise.
func (a *attempt) ended(ctx context.Context, ctr *lease, r programRun, end ending, res jobs.Result) (jobs.Result, *lease, error) {
	spec := a.claim.Spec
	switch end {
	case endCompileNotStarted:
		a.handOn(ctr, false, "sandbox setup failed")
		return jobs.Result{}, nil, fmt.Errorf("%w: the compile step's sandbox: %s", errNotStarted, r.report.Compile.Exit.Message)
	case endCompileFailed:
		// The compile step's sandbox ended (killed at its timeout, or by
		// itself) and nothing else ran.
		ce := r.report.Compile.Exit
		res.Status, res.Duration = jobs.StatusFailed, 0
		res.Error = compileError(ce, spec)
		reusable := !ce.TimedOut && ce.OOMKills == 0
		return res, a.handOn(ctr, reusable && ctr.conn.Err() == nil, "compile failed"), nil
	case endNotStarted:
		a.handOn(ctr, false, "sandbox setup failed")
		return jobs.Result{}, nil, fmt.Errorf("%w: %s", errNotStarted, r.report.Exit.Message)
	case endTimedOut:
		// Measured, with nothing of it left running (its sandbox's pid
		// namespace died with it). A job's container serves again, as
		// after any run (a burst of programs that all run to their limit
		// would otherwise make a container each); a session's goes, its
		// workspace left as it was before the job.
		ctr = a.handOn(ctr, a.session == nil && ctr.conn.Err() == nil && r.report.Exit.OOMKills == 0, "timed out")
		res.Status, res.Usage = jobs.StatusTimedOut, usage(r.report.Exit.Usage)
		res.Error = timeoutError(spec)
		return res, ctr, nil
	case endCompileDeadline:
		a.handOn(ctr, false, "timed out")
		res.Status = jobs.StatusFailed
		res.Compile = &jobs.Compile{Status: jobs.CompileTimedOut, DurationMS: r.end.Sub(r.start).Milliseconds()}
		res.Error = compileError(wire.Exit{Started: true, TimedOut: true}, spec)
		return res, nil, nil
	case endDeadline:
		a.handOn(ctr, false, "timed out")
		res.Status = jobs.StatusTimedOut
		res.Error = timeoutError(spec)
		return res, nil, nil
	case endCancelled:
		a.handOn(ctr, false, "cancelled")
		res.Status = jobs.StatusCancelled
		res.Error = cancelledResult(0).Error
		return res, nil, nil
	case endShutdown:
		a.handOn(ctr, false, "shutdown")
		return jobs.Result{}, nil, fmt.Errorf("the runner stopped the job: %w", context.Cause(ctx))
	case endBroken:
		a.handOn(ctr, false, "broken")
		return jobs.Result{}, nil, fmt.Errorf("%w: %v", errNotStarted, r.err)
	}
	return a.died(ctx, ctr, r, res)
}

// died is the outcome of a run whose container broke while the program
// ran. Under Namespaces only the program can run it out of memory, and
// anything else happened to it from outside (Docker, an operator): the job
// may run again. Under the Container isolation the program shares the
// container with the agent and may have stopped it itself: a container
// that exited is the program's doing.
func (a *attempt) died(ctx context.Context, ctr *lease, r programRun, res jobs.Result) (jobs.Result, *lease, error) {
	f, derr := ctr.diagnose(context.WithoutCancel(ctx))
	a.log.Warn("the sandbox container stopped while the program ran", "container", shortID(ctr.id),
		"err", r.err, "oom_killed", f.oomKilled, "exit_code", f.exitCode, "running", f.running, "gone", f.gone, "inspect_err", derr, "agent_stderr", ctr.lastWords())
	a.handOn(ctr, false, "died")
	switch {
	case derr != nil || f.gone:
		return jobs.Result{}, nil, fmt.Errorf("the sandbox container went away while the program ran (%v): %w", r.err, errSandboxLost)
	case f.oomKilled:
		res.Status = jobs.StatusFailed
		res.ExitCode = ptr(137)
		res.Error = oomError(a.claim.Spec.Limits)
		return res, nil, nil
	case a.r.sandbox.Isolation() == wire.Container && !f.running:
		res.Status = jobs.StatusFailed
		res.ExitCode = ptr(f.exitCode)
		return res, nil, nil
	}
	return jobs.Result{}, nil, fmt.Errorf("the sandbox container stopped while the program ran (%v): %w", r.err, errSandboxLost)
}

// exited is the result of a program that ended by itself: its exit code and
// what it used, and a stateful session's cell (cell). reusable says whether
// the container may serve again: not after an out-of-memory kill, which may
// have left it half broken.
func (a *attempt) exited(ctr *lease, r programRun, res jobs.Result) (jobs.Result, bool) {
	exit := r.report.Exit
	res.ExitCode = ptr(exit.Code)
	res.Usage = usage(exit.Usage)
	res.Status = jobs.StatusSucceeded
	if a.session != nil && a.session.state.Stateful {
		a.cell(ctr, exit, &res)
	}
	if exit.Code != 0 {
		res.Status = jobs.StatusFailed
		if exit.Code == 137 && exit.OOMKills > 0 {
			res.Error = oomError(a.claim.Spec.Limits)
		}
	}
	return res, exit.OOMKills == 0
}

// cell reads what a stateful session's cell left: the live state, and its
// value, exception and displays (the sandbox's word: what is not one is
// dropped).
func (a *attempt) cell(ctr *lease, exit wire.Exit, res *jobs.Result) {
	res.LiveState, res.LiveStateReason = a.session.liveState(ctr.Container, exit.Live)
	if len(exit.Value) > 0 {
		v, err := jobs.ParseValue(exit.Value)
		if err != nil {
			a.log.Warn("the sandbox reported a value that is not one; dropped", "err", err)
		}
		res.Value = v
	}
	if len(exit.Exception) > 0 {
		e, err := jobs.ParseException(exit.Exception)
		if err != nil {
			a.log.Warn("the sandbox reported an exception that is not one; dropped", "err", err)
		}
		res.Exception = e
	}
	if len(exit.Displays) > 0 {
		d, err := jobs.ParseDisplays(exit.Displays)
		if err != nil {
			a.log.Warn("the sandbox reported displays that are not; dropped", "err", err)
		}
		res.Displays = d
	}
}

// collect collects the artifacts of a program that ended by itself and
// hands its container on. Collecting is bounded in time and ignores cancel
// requests: the program is done, its result stands. While S3 is
// unavailable the container and the outcome are held and collecting tried
// again.
func (a *attempt) collect(ctr *lease, r programRun, res jobs.Result, reusable bool) (jobs.Result, *lease, error) {
	spec := a.claim.Spec
	var arts []jobs.Artifact
	var omitted []jobs.OmittedArtifact
	defer a.r.metrics.stage("collect", time.Now())
	collectCtx, endCollect := a.r.stage(a.jobCtx, "job.collect")
	err := a.r.throughS3Outage(collectCtx, a.log, "the job's files and result", func() error {
		artCtx, cancelArt := context.WithTimeout(collectCtx, artifactTimeout)
		defer cancelArt()
		globs := spec.Artifacts
		if a.testing {
			globs = nil // a test's workspace is not the job's
		}
		var err error
		arts, omitted, err = collectArtifacts(artCtx, agentWorkspace{ctr.conn, r.report.Listing}, globs, a.r.cfg.Artifacts, a.r.blobs, func(p string) string {
			return blob.ArtifactKey(a.claim.TenantID, a.ex.jobID, p)
		})
		if err != nil && ctr.conn.Err() != nil {
			// The container broke: no second try can read it.
			return fmt.Errorf("%v (and the sandbox's connection broke: %v)", err, ctr.conn.Err())
		}
		return err
	})
	trace.SpanFromContext(collectCtx).SetAttributes(attribute.Int("gantry.artifacts", len(arts)), attribute.Int("gantry.artifacts_omitted", len(omitted)))
	endCollect(err)
	switch {
	case err != nil && a.jobCtx.Err() != nil:
		a.handOn(ctr, false, "shutdown")
		return jobs.Result{}, nil, fmt.Errorf("the runner stopped collecting artifacts: %w", err)
	case err != nil:
		// The program ran; running it again could repeat what it did.
		a.handOn(ctr, false, "artifacts failed")
		res.Status = jobs.StatusError
		res.Error = &jobs.ErrorInfo{Code: jobs.ErrCodeInfrastructure,
			Message: fmt.Sprintf("the program ran (exit code %d), but gantry could not collect its artifacts: %v", r.report.Exit.Code, err)}
		return res, nil, nil
	}
	res.ArtifactsOmitted = omitted
	reason := ""
	switch {
	case ctr.conn.Err() != nil:
		reusable, reason = false, "broken"
	case !reusable:
		reason = "out of memory"
	}
	res.Artifacts = arts
	return res, a.handOn(ctr, reusable, reason), nil
}

// errSandboxLost marks a container lost while a program ran, to something
// outside the program: the job may run again.
var errSandboxLost = errors.New("sandbox lost")

// agentGrace is how much later than the agent the runner enforces a
// timeout itself: the agent kills the program at its timeout and reports
// it, measured, well within it.
const agentGrace = 5 * time.Second

// usage is what the agent measured of a sandbox, nil when it could not.
// It is the agent's word (a program under the Container isolation shares
// its container), so only what cannot be true is refused.
func usage(u *wire.Usage) *jobs.ProgramUsage {
	if u == nil || u.CPUTimeUS < 0 {
		return nil
	}
	if u.PeakMemoryKB != nil && *u.PeakMemoryKB < 0 {
		return &jobs.ProgramUsage{CPUTime: time.Duration(u.CPUTimeUS) * time.Microsecond}
	}
	return &jobs.ProgramUsage{CPUTime: time.Duration(u.CPUTimeUS) * time.Microsecond, PeakMemoryKB: u.PeakMemoryKB}
}

// compileResult is the job's record of its compile step, which took d.
func compileResult(rep wire.CompileReport, d time.Duration) *jobs.Compile {
	c := &jobs.Compile{Status: jobs.CompileSucceeded, DurationMS: d.Milliseconds(), OutputTruncated: rep.Truncated}
	switch e := rep.Exit; {
	case e.TimedOut:
		c.Status = jobs.CompileTimedOut
	case e.Code != 0:
		c.Status = jobs.CompileFailed
		c.ExitCode = ptr(e.Code)
	default:
		c.ExitCode = ptr(0)
	}
	if u := usage(rep.Exit.Usage); u != nil {
		c.CPUTimeMS, c.PeakMemoryKB = ptr(u.CPUTimeMS()), u.PeakMemoryKB
	}
	return c
}

// compileError says why a job's program did not compile.
func compileError(e wire.Exit, spec jobs.Spec) *jobs.ErrorInfo {
	msg := fmt.Sprintf("the program did not compile (the compiler exited with code %d); see compile_output", e.Code)
	switch {
	case e.TimedOut:
		msg = fmt.Sprintf("the compile ran longer than its timeout of %s and was killed (compile_timeout_ms)", spec.CompileTimeout())
	case e.Code == 137 && e.OOMKills > 0:
		msg = fmt.Sprintf("the compiler ran out of memory (limit %d MB) and was killed: the compile runs within the job's limits.memory_mb", spec.Limits.MemoryMB)
	case e.Signal != 0:
		msg = fmt.Sprintf("the compiler was killed by signal %d; see compile_output", e.Signal)
	}
	return &jobs.ErrorInfo{Code: jobs.ErrCodeCompileError, Message: msg}
}

func timeoutError(spec jobs.Spec) *jobs.ErrorInfo {
	return &jobs.ErrorInfo{Code: jobs.ErrCodeTimedOut, Message: fmt.Sprintf("the program ran longer than its timeout of %s and was killed", spec.Timeout())}
}

func oomError(lim jobs.Limits) *jobs.ErrorInfo {
	return &jobs.ErrorInfo{Code: jobs.ErrCodeOOMKilled, Message: fmt.Sprintf("the program ran out of memory (limit %d MB) and was killed", lim.MemoryMB)}
}

func cancelledResult(d time.Duration) jobs.Result {
	return jobs.Result{Status: jobs.StatusCancelled, Duration: d,
		Error: &jobs.ErrorInfo{Code: jobs.ErrCodeCancelled, Message: "cancelled by request; the sandbox was killed"}}
}

func ptr[T any](v T) *T { return &v }
