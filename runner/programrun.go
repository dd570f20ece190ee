package runner

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gantryhq/gantry/agent/wire"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
)

// programRun is one run of a job's program in a container, as the agent
// reported it: what attempt.runIn decides the outcome from, once the run is
// over (as nomad's docker driver decides a task's exit result only after
// its container's wait returned).
type programRun struct {
	report wire.RunResult
	// err is Run's: the agent's stream broke, or the run's context ended.
	err error
	// cause is why the run's context ended (nil: it did not), read as Run
	// returned: the runner's own deadline (errTimeout, errCompileTimeout),
	// a cancel request (errCancelled) or the runner giving up on its jobs.
	cause error
	// start is when the run began, compiled when its compile step ended
	// (zero without one) and end when Run returned.
	start, compiled, end time.Time
	stdout, stderr       *output
}

// startRun runs req in ctr, streaming the program's output live, under the
// runner's own deadlines (see runDeadline), and returns once the run is
// over. began is when the attempt started on the container, for the run's
// spans.
func (a *attempt) startRun(ctx context.Context, ctr *lease, in *prepared, req wire.Request, began time.Time) programRun {
	r := programRun{}
	r.stdout, r.stderr = a.outputs()
	// A stateful session's egress outlives the run, for its live processes.
	rio := wire.RunIO{Stdout: r.stdout, Stderr: r.stderr, Egress: in.egress.handler(), KeepEgress: in.req.Stateful}
	if in.bridge != nil {
		rio.Bridge = in.bridge
	}
	runCtx, cancelRun := context.WithCancelCause(ctx)
	defer cancelRun(nil)
	deadline := startDeadline(a.claim.Spec, req.Compile != nil, cancelRun)
	defer deadline.stop()
	rio.Compiled = func(wire.CompileReport) { // called by Run, on this goroutine
		r.compiled = time.Now()
		deadline.compiled()
	}
	r.start = time.Now()
	r.report, r.err = ctr.conn.Run(runCtx, req, rio)
	if in.req.Stateful {
		keepLive(ctr.Container, a.claim.TenantID, in.egress)
	}
	r.end = time.Now()
	a.keepBuild(ctx, in, r.report)
	in.built = r.report.Build
	r.cause = context.Cause(runCtx)
	a.traceRun(runCtx, began, r.end, r.report, r.err)
	return r
}

// outputs makes the job's output streams, published live on the job's log
// subject (unless the job is private, or the run is one of its tests), and
// makes them the execution's, for its followers.
func (a *attempt) outputs() (stdout, stderr *output) {
	private := a.claim.Private
	publish := func(stream string, offset int, chunk []byte) {
		if private || a.r.nc == nil || a.testing {
			return
		}
		m := nats.NewMsg(queue.LogSubject(a.ex.jobID))
		m.Header.Set(queue.HeaderStream, stream)
		m.Header.Set(queue.HeaderOffset, strconv.Itoa(offset))
		m.Data = chunk
		_ = a.r.nc.PublishMsg(m)
	}
	limit := a.claim.Spec.Limits.OutputBytes
	stdout, stderr = newOutput("stdout", limit, publish), newOutput("stderr", limit, publish)
	a.r.mu.Lock()
	a.ex.stdout, a.ex.stderr, a.ex.private = stdout, stderr, private
	a.r.mu.Unlock()
	return stdout, stderr
}

// runDeadline is the runner's own timeout of a run: the agent kills the
// program (and the compile step) at its timeout and reports what it used;
// this deadline, agentGrace later, holds if the agent does not. With a
// compile step the compile's deadline runs first, and the program's starts
// when the compile ended; each ends the run's context with its own cause.
type runDeadline struct {
	spec   jobs.Spec
	cancel context.CancelCauseFunc
	timers []*time.Timer
}

func startDeadline(spec jobs.Spec, compiling bool, cancel context.CancelCauseFunc) *runDeadline {
	d := &runDeadline{spec: spec, cancel: cancel}
	first, cause := spec.Timeout(), errTimeout
	if compiling {
		first, cause = spec.CompileTimeout(), errCompileTimeout
	}
	d.timers = []*time.Timer{time.AfterFunc(first+agentGrace, func() { cancel(cause) })}
	return d
}

// compiled starts the program's deadline, once the compile step ended in
// time. It is called on the run's goroutine.
func (d *runDeadline) compiled() {
	if d.timers[0].Stop() {
		d.timers = append(d.timers, time.AfterFunc(d.spec.Timeout()+agentGrace, func() { d.cancel(errTimeout) }))
	}
}

func (d *runDeadline) stop() {
	for _, t := range d.timers {
		t.Stop()
	}
}

// ending is how a run ended.
type ending int

const (
	// endExited: the program ended by itself; its exit says how.
	endExited ending = iota
	// endCompileNotStarted: the compile step's sandbox was not made.
	endCompileNotStarted
	// endCompileFailed: the program did not compile (the compiler exited,
	// or the agent killed it at its timeout); nothing else ran.
	endCompileFailed
	// endNotStarted: the program's sandbox was not made.
	endNotStarted
	// endTimedOut: the agent killed the program at its timeout, measured.
	endTimedOut
	// endCompileDeadline, endDeadline: the runner's own deadline ended the
	// compile step, or the program (the agent did not).
	endCompileDeadline
	endDeadline
	// endCancelled: a cancel request ended the run.
	endCancelled
	// endShutdown: the runner gave up on its jobs (its drain ran out).
	endShutdown
	// endBroken: the agent's stream broke before the program started.
	endBroken
	// endDied: the agent's stream broke while the program ran: the
	// container stopped (attempt.died asks Docker why).
	endDied
)

var endings = [...]string{"exited", "compile not started", "compile failed", "not started", "timed out",
	"compile deadline", "deadline", "cancelled", "shutdown", "broken", "died"}

func (e ending) String() string { return endings[e] }

// ending decides, once, how the run ended: from the agent's report when Run
// returned one, else from why the run's context ended, else from ctx (the
// attempt's) having ended, else from whether the program had started.
func (r programRun) ending(ctx context.Context) ending {
	rr := r.report
	switch {
	case r.err == nil && rr.Compile != nil && !rr.Compile.Exit.Started:
		return endCompileNotStarted
	case r.err == nil && rr.Compile != nil && !rr.Compile.Exit.Succeeded():
		return endCompileFailed
	case r.err == nil && !rr.Exit.Started:
		return endNotStarted
	case r.err == nil && rr.Exit.TimedOut:
		return endTimedOut
	case r.err == nil:
		return endExited
	case errors.Is(r.cause, errCompileTimeout):
		return endCompileDeadline
	case errors.Is(r.cause, errTimeout):
		return endDeadline
	case errors.Is(r.cause, errCancelled):
		return endCancelled
	case ctx.Err() != nil:
		return endShutdown
	case !rr.Started:
		return endBroken
	default:
		return endDied
	}
}

// measure is the result as far as the run itself tells, whatever its
// ending: how long it took, its compile step, its output, its tool calls
// and its egress connections.
func (a *attempt) measure(r programRun, in *prepared) jobs.Result {
	if r.report.Compile != nil {
		a.r.metrics.accounted(r.report.Compile.Exit.Usage)
	}
	a.r.metrics.accounted(r.report.Exit.Usage)
	res := jobs.Result{Duration: r.end.Sub(r.start), ToolCalls: toolCalls(in.bridge)} // complete: Run waited for calls in progress
	in.egress.record(&res)                                                            // and for the proxy's connections
	if c := r.report.Compile; c != nil {
		res.Duration = r.end.Sub(r.compiled)
		res.Compile, res.CompileOutput = compileResult(*c, r.compiled.Sub(r.start)), c.Output
	}
	if in.cached != nil {
		res.Compile, res.CompileOutput = in.cached.report(), in.cached.Output
	}
	res.Stdout, res.StdoutTruncated = r.stdout.snapshot()
	res.Stderr, res.StderrTruncated = r.stderr.snapshot()
	return res
}
