package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store"
)

// runTests runs a job's tests (jobs.Spec.Tests): the program is built once,
// by the first test's run (or not at all: an interpreted program, or a
// kept build), then every test runs in a fresh sandbox (a run's sandbox is
// always fresh, and its workspace emptied first), with its stdin, the
// job's timeout and limits. Tests run on up to testWorkers containers at
// once (each a sandbox of the job's limits, admitted against the host's
// memory as any) — after the first when it builds the program — and one at
// a time with stop_on_failure or egress (whose record is the attempt's). A
// test that times out keeps its container as any job does; one that runs
// out of memory retires it and the next test gets another. The job's
// result holds each test's, in order, and how the compile went; it has no
// output or artifacts of its own. An error is the attempt's (runIn's): the
// job goes back to the queue and its tests run again.
func (a *attempt) runTests(ctx context.Context, claim store.Claim, in *prepared) (jobs.Result, error) {
	spec := claim.Spec
	a.testing = true
	started := time.Now()
	res := jobs.Result{Status: jobs.StatusSucceeded}
	results := make([]*jobs.TestResult, len(spec.Tests))
	runs := make([]jobs.Result, len(spec.Tests))

	w := &testWorker{a: a, in: *in}
	defer w.done()
	next := 0 // the next test to run
	if in.req.Compile != nil {
		// The first test alone: it builds the program, which the others
		// then run (sent back for them).
		w.in.req.Compile.SendBuild = true
		run, err := w.run(ctx, 0, spec.Tests[0])
		if err != nil {
			return jobs.Result{}, err
		}
		switch {
		case run.Error != nil && run.Error.Code == jobs.ErrCodeCompileError:
			// It did not compile: nothing of it ran, no test has a result.
			res.Status, res.Error = run.Status, run.Error
			res.Compile, res.CompileOutput = run.Compile, run.CompileOutput
			res.Duration = time.Since(started)
			return res, nil
		case run.Status == jobs.StatusCancelled:
			res.Compile, res.CompileOutput = run.Compile, run.CompileOutput
			return cancelledTests(res, nil, started), nil
		case run.Error != nil && run.Error.Code == jobs.ErrCodeInfrastructure && !run.ran:
			return run.Result, nil // its environment or memory cannot be had
		}
		if len(w.in.built) > 0 {
			// Built: the other tests run what the first one built.
			w.in.req.Compile, w.in.req.Build = nil, w.in.built
		}
		res.Compile, res.CompileOutput = run.Compile, run.CompileOutput
		runs[0] = run.Result
		tr := testResult(&spec, spec.Tests[0], run.Result)
		results[0], next = &tr, 1
		if tr.Status != jobs.TestPassed && spec.StopOnFailure {
			next = len(spec.Tests)
		}
	}

	if next < len(spec.Tests) {
		workers := 1
		if !spec.StopOnFailure && in.egress == nil {
			workers = min(testWorkers, 2*a.r.cfg.Slots, len(spec.Tests)-next)
		}
		var (
			mu        sync.Mutex
			stop      bool
			firstErr  error
			unrun     *jobs.Result // a test's run that could not be had: the job's result
			cancelled bool
			wg        sync.WaitGroup
		)
		take := func() (int, bool) {
			mu.Lock()
			defer mu.Unlock()
			if stop || next >= len(spec.Tests) {
				return 0, false
			}
			next++
			return next - 1, true
		}
		pool := []*testWorker{w}
		for range workers - 1 {
			tw := &testWorker{a: a, in: w.in}
			defer tw.done()
			pool = append(pool, tw)
		}
		for _, tw := range pool {
			wg.Go(func() {
				// Out of tests, the worker's container goes back at once:
				// another worker may be waiting for its memory.
				defer tw.done()
				for {
					i, ok := take()
					if !ok {
						return
					}
					run, err := tw.run(ctx, i, spec.Tests[i])
					mu.Lock()
					switch {
					case err != nil:
						stop = true
						if firstErr == nil {
							firstErr = err
						}
					case run.Status == jobs.StatusCancelled:
						stop, cancelled = true, true
					case run.Error != nil && run.Error.Code == jobs.ErrCodeInfrastructure && !run.ran:
						// Its environment or memory cannot be had: no
						// test's can.
						stop = true
						if unrun == nil {
							unrun = &run.Result
						}
					default:
						tr := testResult(&spec, spec.Tests[i], run.Result)
						results[i], runs[i] = &tr, run.Result
						if tr.Status != jobs.TestPassed && spec.StopOnFailure {
							stop = true
						}
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if in.req.Compile == nil {
			// A kept build's report (every run has it), or none.
			for i, r := range results {
				if r != nil {
					res.Compile, res.CompileOutput = runs[i].Compile, runs[i].CompileOutput
					break
				}
			}
		}
		switch {
		case firstErr != nil:
			return jobs.Result{}, firstErr
		case cancelled:
			return cancelledTests(res, results, started), nil
		case unrun != nil:
			return *unrun, nil
		}
	}
	res.Tests = collected(results)
	res.Duration = time.Since(started)
	var cpu time.Duration
	var peak int64
	usage, peakKnown := false, true // the largest of the runs, if each one's is known
	for _, r := range runs {
		if r.Usage != nil {
			usage = true
			cpu += r.Usage.CPUTime
			if r.Usage.PeakMemoryKB == nil {
				peakKnown = false
			} else {
				peak = max(peak, *r.Usage.PeakMemoryKB)
			}
		}
	}
	if usage {
		res.Usage = &jobs.ProgramUsage{CPUTime: cpu}
		if peakKnown {
			res.Usage.PeakMemoryKB = &peak
		}
	}
	if passed := jobs.TestsPassed(res.Tests); passed < len(spec.Tests) {
		res.Status = jobs.StatusFailed
		res.Error = &jobs.ErrorInfo{Code: jobs.ErrCodeTestsFailed,
			Message: fmt.Sprintf("%d of %d tests passed%s; see tests", passed, len(spec.Tests), stoppedAt(len(res.Tests), len(spec.Tests)))}
	}
	return res, nil
}

// testWorkers is how many containers a job's tests run on at once, at
// most (and never more than twice the runner's slots: a run waits on its
// sandbox's set-up and the agent as much as on the CPUs).
const testWorkers = 4

// collected are the results of the tests that ran, in order, up to the
// first that did not run.
func collected(results []*jobs.TestResult) []jobs.TestResult {
	out := []jobs.TestResult{}
	for _, r := range results {
		if r == nil {
			break
		}
		out = append(out, *r)
	}
	return out
}

// testWorker runs tests one after another in a container of its own
// (leased for its next test), with its own copy of the run request.
type testWorker struct {
	a   *attempt
	in  prepared
	ctr *lease
}

// testRun is a test's run, and whether its program ran at all.
type testRun struct {
	jobs.Result
	ran bool
}

// run runs test i in the worker's container (obtaining one when it has
// none), trying another container when the program did not start.
func (w *testWorker) run(ctx context.Context, i int, test jobs.Test) (testRun, error) {
	w.in.req.Stdin = nil
	if test.Stdin != "" {
		w.in.req.Stdin = []byte(test.Stdin)
	}
	for try := 1; ; try++ {
		if w.ctr == nil {
			var err error
			if w.ctr, err = w.a.obtain(ctx); err != nil {
				switch {
				case errors.Is(context.Cause(ctx), errCancelled):
					return testRun{Result: cancelledResult(0)}, nil
				case isEnv(err) || isTooLarge(err):
					return testRun{Result: jobs.Result{Status: jobs.StatusError, Error: &jobs.ErrorInfo{Code: jobs.ErrCodeInfrastructure, Message: err.Error()}}}, nil
				}
				return testRun{}, err
			}
		}
		run, ctr, err := w.a.runIn(ctx, w.ctr, &w.in)
		w.ctr = ctr
		if errors.Is(err, errNotStarted) && ctx.Err() == nil && try < startTries {
			w.a.log.Warn("a test's program did not start; trying another container", "test", i, "try", try, "err", err)
			continue
		}
		return testRun{Result: run, ran: true}, err
	}
}

// done hands the worker's container back to the fleet.
func (w *testWorker) done() {
	if w.ctr != nil {
		w.ctr.release(true, "")
		w.ctr = nil
	}
}

func stoppedAt(ran, all int) string {
	if ran < all {
		return fmt.Sprintf(" (stopped at the first that did not pass: %d ran)", ran)
	}
	return ""
}

// cancelledTests is a job cancelled among its tests, with the results of
// those that ran.
func cancelledTests(res jobs.Result, results []*jobs.TestResult, started time.Time) jobs.Result {
	c := cancelledResult(time.Since(started))
	c.Tests, c.Compile, c.CompileOutput = collected(results), res.Compile, res.CompileOutput
	return c
}

// testResult is one test's result from its run's.
func testResult(spec *jobs.Spec, test jobs.Test, run jobs.Result) jobs.TestResult {
	tr := jobs.TestResult{ExitCode: run.ExitCode, DurationMS: run.Duration.Milliseconds(),
		StdoutTruncated: run.StdoutTruncated, StderrTruncated: run.StderrTruncated}
	tr.Stdout, tr.StdoutTruncated = keptOutput(run.Stdout, tr.StdoutTruncated)
	tr.Stderr, tr.StderrTruncated = keptOutput(run.Stderr, tr.StderrTruncated)
	if u := run.Usage; u != nil {
		tr.CPUTimeMS, tr.PeakMemoryKB = ptr(u.CPUTimeMS()), u.PeakMemoryKB
	}
	switch {
	case run.Status == jobs.StatusTimedOut:
		tr.Status, tr.Message = jobs.TestTimeout, run.Error.Message
	case run.Error != nil && run.Error.Code == jobs.ErrCodeOOMKilled:
		tr.Status, tr.Message = jobs.TestMemory, run.Error.Message
	case run.Status == jobs.StatusError:
		tr.Status, tr.Message = jobs.TestError, run.Error.Message
	case run.Status != jobs.StatusSucceeded:
		tr.Status = jobs.TestError
		if run.Error != nil {
			tr.Message = run.Error.Message
		} else if run.ExitCode != nil {
			tr.Message = fmt.Sprintf("the program exited with code %d", *run.ExitCode)
		}
	case test.ExpectedStdout == nil:
		tr.Status = jobs.TestPassed
	default:
		if ok, why := spec.Matches(string(run.Stdout), *test.ExpectedStdout); ok {
			tr.Status = jobs.TestPassed
		} else {
			tr.Status, tr.Message = jobs.TestFailed, why
			if run.StdoutTruncated {
				tr.Message += " (the output was cut at limits.output_bytes)"
			}
		}
	}
	return tr
}

// keptOutput is what a test's result keeps of a stream: at most
// TestOutputCap bytes, as text a JSON column holds (no NUL, valid UTF-8).
func keptOutput(b []byte, truncated bool) (string, bool) {
	if len(b) > jobs.TestOutputCap {
		b, truncated = b[:jobs.TestOutputCap], true
	}
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "\uFFFD"), truncated
}
