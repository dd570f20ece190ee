package runner

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gantryhq/gantry/agent/wire"
	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
)

// warmHarness is a harness whose containers are handed out with their
// warm interpreter loaded (the test is skipped under the container
// isolation, which has none).
func warmHarness(t *testing.T, slots int) *harness {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Docker, Postgres, NATS and S3")
	}
	h := newHarness(t, slots, awaitingWarm)
	if h.sb.Isolation() != wire.Namespaces {
		t.Skip("no warm interpreter under the container isolation")
	}
	return h
}

// TestWarmJobsShareNothing runs jobs one after another in one container,
// forked from one warm interpreter: none may see what another did to its
// copy of the interpreter, or draw the same random values.
func TestWarmJobsShareNothing(t *testing.T) {
	h := warmHarness(t, 1)
	draw := `import random, os, uuid, tempfile, secrets, multiprocessing
import numpy as np
print(random.random(), random.getrandbits(64), np.random.random(), np.random.randint(1 << 62),
      np.random.default_rng().random(), uuid.uuid4(), os.path.basename(tempfile.mktemp()), secrets.token_hex(8),
      multiprocessing.current_process().authkey.hex())`
	seen := map[string]string{}
	var container string
	for i := 0; i < 4; i++ {
		j, c := h.host(t, h.tenant, jobs.Request{Language: "python", Code: draw})
		if j.Status != jobs.StatusSucceeded {
			t.Fatalf("job %d: %s %q", i, j.Status, j.Stderr)
		}
		if container == "" {
			container = c
		} else if c != container {
			t.Fatalf("job %d ran in container %s, not %s", i, c, container)
		}
		for _, v := range strings.Fields(j.Stdout) {
			if prev, ok := seen[v]; ok {
				t.Errorf("job %d drew %s, as %s did", i, v, prev)
			}
			seen[v] = j.ID
		}
	}

	// A job changes its interpreter every way it can; the next one, in
	// the same container, sees none of it.
	if j, c := h.host(t, h.tenant, jobs.Request{Language: "python", Code: `import builtins, json, os, sys, pandas, numpy
builtins.LEAK = 1
json.dumps = lambda *a, **k: "patched"
sys.modules["leaked_module"] = type(sys)("leaked_module")
sys.path.append("/leaked")
pandas.DataFrame.leak = 1
numpy.random.seed(0)
os.environ["LEAK"] = "1"
os.chdir("/tmp")
import warnings; warnings.simplefilter("error")
print("patched")`}); j.Stdout != "patched\n" || c != container {
		t.Fatalf("patching job: %s %q %q in %s", j.Status, j.Stdout, j.Stderr, c)
	}
	j, c := h.host(t, h.tenant, jobs.Request{Language: "python", Code: `import builtins, json, os, sys, pandas, numpy, warnings
numpy.random.seed(0); seeded = numpy.random.random()
numpy.random.seed()
print(hasattr(builtins, "LEAK"), json.dumps(1), "leaked_module" in sys.modules, "/leaked" in sys.path,
      hasattr(pandas.DataFrame, "leak"), os.environ.get("LEAK"), os.getcwd(), warnings.filters[0][0] == "error")`})
	if c != container || j.Stdout != "False 1 False False False None /workspace False\n" {
		t.Errorf("the next job in %s (want %s) saw: %s %q %q", c, container, j.Status, j.Stdout, j.Stderr)
	}
}

// TestWarmInterpreterDeathRetiresTheContainer: a container whose warm
// interpreter died never runs another job; the job that finds it so runs
// elsewhere, once.
func TestWarmInterpreterDeathRetiresTheContainer(t *testing.T) {
	h := warmHarness(t, 1)
	j, c1 := h.host(t, h.tenant, jobs.Request{Language: "python", Code: "print('first')"})
	if j.Stdout != "first\n" {
		t.Fatalf("first job: %s %q %q", j.Status, j.Stdout, j.Stderr)
	}
	// Kill the warm interpreter from outside, as a crash would.
	// The warm interpreter is the agent's child (its sandboxes' processes
	// are its own children and grandchildren).
	out, err := exec.Command("docker", "exec", c1, "ps", "-eo", "pid=,ppid=,comm=,args=").CombinedOutput()
	if err != nil {
		t.Fatalf("docker exec ps: %v %s", err, out)
	}
	agentPid, pid := "", ""
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[1] == "1" && f[2] == "gantry-agent" { // docker-init's child
			agentPid = f[0]
		}
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 5 && f[1] == agentPid && f[3] == "python3" && strings.HasSuffix(f[4], "/warm.py") {
			pid = f[0]
		}
	}
	if pid == "" {
		t.Fatalf("no warm interpreter in %s:\n%s", c1, out)
	}
	if out, err := exec.Command("docker", "exec", c1, "kill", "-9", pid).CombinedOutput(); err != nil {
		t.Fatalf("docker exec kill: %v %s", err, out)
	}
	j, c2 := h.host(t, h.tenant, jobs.Request{Language: "python", Code: "print('second')"})
	if j.Status != jobs.StatusSucceeded || j.Stdout != "second\n" || j.Attempt != 1 {
		t.Fatalf("second job: %s attempt %d %q %q", j.Status, j.Attempt, j.Stdout, j.Stderr)
	}
	if c2 == c1 {
		t.Fatalf("the job ran in %s, whose warm interpreter was dead", c1)
	}
	if !h.gone(t, c1) {
		t.Error("the container whose warm interpreter died was not retired")
	}
}

// TestWarmCheck: the runner's readiness check loads the warm interpreter,
// so a module it cannot import is found at start, named.
func TestWarmCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker")
	}
	sb := testSandbox(t)
	if sb.Isolation() != wire.Namespaces {
		t.Skip("no warm interpreter under the container isolation")
	}
	ctx := context.Background()
	if err := sb.Check(ctx); err != nil {
		t.Fatalf("check: %v", err)
	}
	bad := sb.cfg
	bad.Warm = []string{"numpy", "no_such_module"}
	sb.cfg = bad.WithDefaults()
	err := sb.Check(ctx)
	if err == nil || !strings.Contains(err.Error(), "No module named 'no_such_module'") || !strings.Contains(err.Error(), "GANTRY_WARM_PRELOAD") {
		t.Errorf("check with a module that does not exist: %v", err)
	}
}

// TestWarmFailuresAreCounted: a pool container whose warm interpreter
// cannot load is not offered, and counts as retired for it (the zygote's
// health on the dashboard).
func TestWarmFailuresAreCounted(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker, Postgres, NATS and S3")
	}
	if testSandbox(t).Isolation() != wire.Namespaces {
		t.Skip("no warm interpreter under the container isolation")
	}
	badWarm := func(h *harness, _ *Config) {
		cfg := h.sb.cfg
		cfg.Warm = []string{"no_such_module"}
		h.sb.cfg = cfg.WithDefaults()
	}
	h := newHarness(t, 1, badWarm, withFleet(FleetConfig{Min: 1, Max: 1, Limits: jobs.DefaultPolicy().DefaultLimits}))
	eventually.True(t, 2*time.Minute, "a warm failure to be counted", func() bool {
		return testutil.ToFloat64(h.r.fleet.m.retired.WithLabelValues("warm interpreter failed")) >= 1
	})
}

// TestWarmInterpreterHoldsNoJobData: a job's environment (its secrets,
// say) never enters the warm interpreter, nor the spare sandbox forked from
// it for the next job: the host reads their memory after the job, looking
// for the job's secret.
func TestWarmInterpreterHoldsNoJobData(t *testing.T) {
	h := warmHarness(t, 1)
	secret := jobs.NewID("secret")
	j, c := h.host(t, h.tenant, jobs.Request{Language: "python", Env: map[string]string{"API_TOKEN": secret},
		Code: "import os\nprint(len(os.environ['API_TOKEN']))"})
	if j.Status != jobs.StatusSucceeded || j.Stdout != fmt.Sprintf("%d\n", len(secret)) {
		t.Fatalf("job: %s %q %q", j.Status, j.Stdout, j.Stderr)
	}
	out, err := exec.Command("docker", "top", c, "-o", "pid,comm").CombinedOutput()
	if err != nil {
		t.Fatalf("docker top: %v %s", err, out)
	}
	searched := 0
	for _, line := range strings.Split(string(out), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) != 2 || (f[1] != "python3" && f[1] != "sandbox-init") {
			continue
		}
		n, found, err := memoryHolds(f[0], []byte(secret))
		if err != nil {
			t.Skipf("cannot read process memory from here: %v", err)
		}
		if found {
			t.Errorf("process %s (%s) holds the job's secret", f[0], f[1])
		}
		searched += n
	}
	if searched == 0 {
		t.Fatal("no warm interpreter process searched")
	}
}

// memoryHolds searches the readable memory of host process pid for b.
func memoryHolds(pid string, b []byte) (int, bool, error) {
	maps, err := os.ReadFile("/proc/" + pid + "/maps")
	if err != nil {
		return 0, false, err
	}
	mem, err := os.Open("/proc/" + pid + "/mem")
	if err != nil {
		return 0, false, err
	}
	defer mem.Close()
	regions := 0
	for _, line := range strings.Split(string(maps), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[1][0] != 'r' {
			continue
		}
		var lo, hi uint64
		if _, err := fmt.Sscanf(f[0], "%x-%x", &lo, &hi); err != nil || hi-lo > 1<<30 {
			continue
		}
		buf := make([]byte, hi-lo)
		if n, _ := mem.ReadAt(buf, int64(lo)); n > 0 && bytes.Contains(buf[:n], b) {
			return regions, true, nil
		}
		regions++
	}
	return regions, false, nil
}

// TestWarmJobsAreMeasured: a job forked from the warm interpreter reports
// what it used itself (not the interpreter's start or its preloaded
// libraries), and one that runs past its timeout is killed by the agent,
// measured, as any job.
func TestWarmJobsAreMeasured(t *testing.T) {
	h := warmHarness(t, 1)
	// A warm interpreter's heap is frozen for the garbage collector. The
	// lean interpreter runs a program of the standard library; importing
	// pandas (which the full one has loaded) takes the full one, whose
	// ~90 MB must not count as the job's either.
	for _, w := range []struct{ name, forked string }{
		{"lean", "import gc\nif not gc.get_freeze_count(): print('not forked')\n"},
		{"full", "import gc, pandas\nif not gc.get_freeze_count(): print('not forked')\n"},
	} {
		j := h.run(t, jobs.Request{Language: "python", Code: w.forked +
			"import time\nb = bytearray(64 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\n" +
			"while time.process_time() < 0.5: pass\nprint('done')"})
		if j.Status != jobs.StatusSucceeded || j.Stdout != "done\n" {
			t.Fatalf("%s: %s %q %q", w.name, j.Status, j.Stdout, j.Stderr)
		}
		if cpu := deref(j.CPUTimeMS); j.CPUTimeMS == nil || *j.CPUTimeMS < 450 || *j.CPUTimeMS > 1500 {
			t.Errorf("%s: cpu_time_ms %v, want 450 to 1500", w.name, cpu)
		}
		// 64 MiB and a little: the interpreter's own pages are not the job's.
		if j.PeakMemoryKB == nil || *j.PeakMemoryKB < 64<<10-rssSlackKB || *j.PeakMemoryKB > 96<<10 {
			t.Errorf("%s: peak_memory_kb %v, want 64 to 96 MiB", w.name, deref(j.PeakMemoryKB))
		}
		t.Logf("%s: cpu_time_ms %v, peak_memory_kb %v", w.name, deref(j.CPUTimeMS), deref(j.PeakMemoryKB))

		j = h.run(t, jobs.Request{Language: "python", TimeoutMS: 1500, Code: w.forked +
			"b = bytearray(32 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nwhile True: pass"})
		// The agent kills it at 1.5 s; the runner's own deadline is 5 s later.
		if j.Status != jobs.StatusTimedOut || j.CPUTimeMS == nil || *j.CPUTimeMS < 500 ||
			j.PeakMemoryKB == nil || *j.PeakMemoryKB < 32<<10-rssSlackKB || j.DurationMS == nil || *j.DurationMS > 3000 {
			t.Errorf("%s: timed out: %s %q cpu %v peak %v duration %v", w.name, j.Status, j.Stdout, deref(j.CPUTimeMS), deref(j.PeakMemoryKB), deref(j.DurationMS))
		}
	}
}

// TestWarmJobsImportTheirOwnModules: a job that brings a module named as
// one a warm interpreter has loaded (json.py, a package random/) on its
// path imports its own, as `python3 <file>` would, not the interpreter's.
func TestWarmJobsImportTheirOwnModules(t *testing.T) {
	h := warmHarness(t, 1)
	for _, f := range []jobs.File{{Path: "json.py", Content: "WHO = 'mine'\n"}, {Path: "random/__init__.py", Content: "WHO = 'mine'\n"}} {
		mod := strings.TrimSuffix(strings.TrimSuffix(f.Path, "/__init__.py"), ".py")
		j := h.run(t, jobs.Request{Language: "python", Code: "import " + mod + "\nprint(" + mod + ".WHO)",
			Files: []jobs.File{f}, Env: map[string]string{"PYTHONPATH": "/workspace"}})
		if j.Status != jobs.StatusSucceeded || j.Stdout != "mine\n" {
			t.Errorf("%s: %s %q %q", f.Path, j.Status, j.Stdout, j.Stderr)
		}
	}
}
