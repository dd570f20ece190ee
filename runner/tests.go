package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store"
)

// runTests runs a job's tests (jobs.Spec.Tests): the program is built once,
// by the first test's run (or not at all, from a kept build), then every
// test runs in a fresh sandbox of the job's container (a run's sandbox is
// always fresh, and its workspace emptied first), with its stdin, the job's
// timeout and limits. A test that times out or runs out of memory retires
// its container, and the next test gets another. The job's result holds
// each test's, and how the compile went; it has no output or artifacts of
// its own. An error is the attempt's (runIn's): the job goes back to the
// queue and its tests run again.
func (a *attempt) runTests(ctx context.Context, claim store.Claim, in *prepared) (jobs.Result, error) {
	spec := claim.Spec
	a.testing = true
	if in.req.Compile != nil {
		in.req.Compile.SendBuild = true // for the tests after the first
	}
	var (
		ctr     *lease
		res     = jobs.Result{Status: jobs.StatusSucceeded, Tests: []jobs.TestResult{}}
		cpu     time.Duration
		peak    int64
		usage   bool
		started = time.Now()
	)
	defer func() {
		if ctr != nil {
			ctr.release(true, "")
		}
	}()
	for i, test := range spec.Tests {
		in.req.Stdin = nil
		if test.Stdin != "" {
			in.req.Stdin = []byte(test.Stdin)
		}
		var run jobs.Result
		var err error
		for try := 1; ; try++ {
			if ctr == nil {
				if ctr, err = a.obtain(ctx); err != nil {
					switch {
					case errors.Is(context.Cause(ctx), errCancelled):
						return cancelledTests(res, started), nil
					case isEnv(err) || isTooLarge(err):
						return jobs.Result{Status: jobs.StatusError, Error: &jobs.ErrorInfo{Code: jobs.ErrCodeInfrastructure, Message: err.Error()}}, nil
					}
					return jobs.Result{}, err
				}
			}
			run, ctr, err = a.runIn(ctx, ctr, in)
			if errors.Is(err, errNotStarted) && ctx.Err() == nil && try < startTries {
				a.log.Warn("a test's program did not start; trying another container", "test", i, "try", try, "err", err)
				continue
			}
			break
		}
		if err != nil {
			return jobs.Result{}, err
		}
		if i == 0 || res.Compile == nil {
			res.Compile, res.CompileOutput = run.Compile, run.CompileOutput
		}
		if in.req.Compile != nil && len(in.built) > 0 {
			// Built: the next tests run what the first one built.
			in.req.Compile, in.req.Build = nil, in.built
		}
		switch {
		case run.Error != nil && run.Error.Code == jobs.ErrCodeCompileError:
			// It did not compile: nothing of it ran, no test has a result.
			res.Status, res.Error, res.Tests = run.Status, run.Error, nil
			res.Duration = time.Since(started)
			return res, nil
		case run.Status == jobs.StatusCancelled:
			return cancelledTests(res, started), nil
		}
		tr := testResult(&spec, test, run)
		if run.Usage != nil {
			usage = true
			cpu += run.Usage.CPUTime
			peak = max(peak, run.Usage.PeakMemoryKB)
		}
		res.Tests = append(res.Tests, tr)
		if tr.Status != jobs.TestPassed && spec.StopOnFailure {
			break
		}
	}
	res.Duration = time.Since(started)
	if usage {
		res.Usage = &jobs.ProgramUsage{CPUTime: cpu, PeakMemoryKB: peak}
	}
	if passed := jobs.TestsPassed(res.Tests); passed < len(spec.Tests) {
		res.Status = jobs.StatusFailed
		res.Error = &jobs.ErrorInfo{Code: jobs.ErrCodeTestsFailed,
			Message: fmt.Sprintf("%d of %d tests passed%s; see tests", passed, len(spec.Tests), stoppedAt(len(res.Tests), len(spec.Tests)))}
	}
	return res, nil
}

func stoppedAt(ran, all int) string {
	if ran < all {
		return fmt.Sprintf(" (stopped at the first that did not pass: %d ran)", ran)
	}
	return ""
}

// cancelledTests is a job cancelled among its tests, with the results of
// those that ran.
func cancelledTests(res jobs.Result, started time.Time) jobs.Result {
	c := cancelledResult(time.Since(started))
	c.Tests, c.Compile, c.CompileOutput = res.Tests, res.Compile, res.CompileOutput
	return c
}

// testResult is one test's result from its run's.
func testResult(spec *jobs.Spec, test jobs.Test, run jobs.Result) jobs.TestResult {
	tr := jobs.TestResult{ExitCode: run.ExitCode, DurationMS: run.Duration.Milliseconds(),
		StdoutTruncated: run.StdoutTruncated, StderrTruncated: run.StderrTruncated}
	tr.Stdout, tr.StdoutTruncated = keptOutput(run.Stdout, tr.StdoutTruncated)
	tr.Stderr, tr.StderrTruncated = keptOutput(run.Stderr, tr.StderrTruncated)
	if u := run.Usage; u != nil {
		tr.CPUTimeMS, tr.PeakMemoryKB = ptr(u.CPUTimeMS()), ptr(u.PeakMemoryKB)
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
