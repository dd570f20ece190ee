package agent

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestPauseLoading: a loading interpreter is stopped while a job runs and
// continued after, for at most loadPauseBudget in all; a loaded one is
// left alone.
func TestPauseLoading(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	// A group of its own, as the agent starts the interpreter: the whole
	// group is stopped (the interpreter runs in a fork of that process).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Skipf("no sleep: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	w := &warm{cmd: cmd, ready: make(chan struct{})}
	// state waits up to a second for the process's state to become want.
	state := func(want byte) bool {
		for deadline := time.Now().Add(time.Second); ; time.Sleep(5 * time.Millisecond) {
			b, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/stat")
			if err != nil {
				t.Fatal(err)
			}
			if i := bytes.LastIndexByte(b, ')'); i > 0 && len(b) > i+2 && b[i+2] == want {
				return true
			}
			if time.Now().After(deadline) {
				return false
			}
		}
	}

	resume := w.pauseLoading()
	if !state('T') {
		t.Fatal("not stopped while the job runs")
	}
	resume()
	if !state('S') {
		t.Fatal("not continued after the job")
	}

	// What is left of the budget ends the pause mid-job.
	w.paused = loadPauseBudget - 100*time.Millisecond
	resume = w.pauseLoading()
	if !state('T') {
		t.Fatal("not stopped with budget left")
	}
	time.Sleep(300 * time.Millisecond)
	if !state('S') {
		t.Fatal("still stopped past the budget")
	}
	resume()
	if w.paused < loadPauseBudget {
		t.Errorf("paused %s in all, want the whole budget spent", w.paused)
	}
	resume = w.pauseLoading()
	if state('T') {
		t.Error("stopped with the budget spent")
	}
	resume()

	// Loaded: never stopped.
	w.paused = 0
	close(w.ready)
	resume = w.pauseLoading()
	if state('T') {
		t.Error("a loaded interpreter was stopped")
	}
	resume()
}
