package runner

import (
	"context"
	"errors"
	"testing"

	"github.com/gantryhq/gantry/agent/wire"
)

// TestRunEnding: a run's ending is decided once, from the agent's report
// when there is one, else from why the run's context ended, else from the
// attempt's context, else from whether the program had started.
func TestRunEnding(t *testing.T) {
	broke := errors.New("stream broke")
	started := wire.Exit{Started: true}
	compiled := &wire.CompileReport{Exit: wire.Exit{Started: true}}
	live, cancelled := context.Background(), func() context.Context {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx
	}()
	for _, c := range []struct {
		name string
		r    programRun
		ctx  context.Context
		want ending
	}{
		{"exit", programRun{report: wire.RunResult{Started: true, Exit: wire.Exit{Started: true, Code: 3}}}, live, endExited},
		{"compiled, then exit", programRun{report: wire.RunResult{Started: true, Compile: compiled, Exit: started}}, live, endExited},
		{"compile sandbox not made", programRun{report: wire.RunResult{Compile: &wire.CompileReport{Exit: wire.Exit{Message: "bwrap"}}}}, live, endCompileNotStarted},
		{"compile error", programRun{report: wire.RunResult{Started: true, Compile: &wire.CompileReport{Exit: wire.Exit{Started: true, Code: 1}}}}, live, endCompileFailed},
		{"compile killed by the agent", programRun{report: wire.RunResult{Started: true, Compile: &wire.CompileReport{Exit: wire.Exit{Started: true, TimedOut: true}}}}, live, endCompileFailed},
		{"sandbox not made", programRun{report: wire.RunResult{Exit: wire.Exit{Message: "bwrap"}}}, live, endNotStarted},
		{"killed by the agent", programRun{report: wire.RunResult{Started: true, Exit: wire.Exit{Started: true, TimedOut: true}}}, live, endTimedOut},
		{"the report wins over a cause", programRun{report: wire.RunResult{Started: true, Exit: started}, cause: errTimeout}, cancelled, endExited},
		{"compile deadline", programRun{err: broke, cause: errCompileTimeout}, live, endCompileDeadline},
		{"deadline", programRun{err: broke, cause: errTimeout, report: wire.RunResult{Started: true}}, live, endDeadline},
		{"cancel", programRun{err: broke, cause: errCancelled, report: wire.RunResult{Started: true}}, cancelled, endCancelled},
		{"shutdown", programRun{err: broke, cause: errShutdown, report: wire.RunResult{Started: true}}, cancelled, endShutdown},
		{"broken before the start", programRun{err: broke}, live, endBroken},
		{"died while running", programRun{err: broke, report: wire.RunResult{Started: true}}, live, endDied},
	} {
		if got := c.r.ending(c.ctx); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}
