package runner

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gantryhq/gantry/agent/wire"
	"github.com/gantryhq/gantry/codemode"
	"github.com/gantryhq/gantry/codemode/codemodetest"
	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/secret"
	"github.com/gantryhq/gantry/store/storetest"
)

// host runs a job that prints its hostname first (the short id of the
// container it ran in) and returns the job and that id.
func (h *harness) host(t *testing.T, tenant string, req jobs.Request) (jobs.Job, string) {
	t.Helper()
	return h.hostOf(t, h.submitHost(t, tenant, req))
}

// submitHost queues a job that prints its container's hostname first.
func (h *harness) submitHost(t *testing.T, tenant string, req jobs.Request) string {
	t.Helper()
	if req.Language == "python" {
		req.Code = "import socket\nprint(socket.gethostname())\n" + req.Code
	} else {
		req.Code = "hostname\n" + req.Code
	}
	return h.submitFor(t, tenant, req)
}

// hostOf waits for a job of submitHost and returns it without its first
// line, and the hostname that line held.
func (h *harness) hostOf(t *testing.T, id string) (jobs.Job, string) {
	t.Helper()
	j := h.waitFor(t, id, func(j jobs.Job) bool { return j.Status.Terminal() })
	first, rest, _ := strings.Cut(j.Stdout, "\n")
	j.Stdout = rest
	return j, first
}

// processes lists the command lines of the processes in the container
// whose id starts with prefix, as the host sees them.
func (h *harness) processes(t *testing.T, prefix string) []string {
	t.Helper()
	out, err := exec.Command("docker", "top", prefix, "-o", "pid,args").CombinedOutput()
	if err != nil {
		t.Fatalf("docker top: %v %s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[1:]
}

func TestReuse(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker, Postgres, NATS and S3")
	}
	if testRuntime() == "runsc" {
		t.Skip("containers serve one job under gVisor")
	}
	// Containers are offered once their warm interpreters have loaded:
	// the sandbox each builds as its start-up probe is gone by then.
	h := newHarness(t, 2, awaitingWarm, withFleet(FleetConfig{Min: 1, Max: 2, Limits: jobs.DefaultPolicy().DefaultLimits}))
	other, _ := storetest.Tenant(t, h.st, "other")

	// The first job leaves everything it can behind: a detached loop,
	// files in /tmp, /dev/shm and /workspace, its environment.
	j1, c1 := h.host(t, h.tenant, jobs.Request{Language: "bash", Env: map[string]string{"LEFT_BEHIND": "env-secret"}, Code: `
setsid nohup sh -c 'while true; do echo tick >> /workspace/loop.txt; sleep 0.05; done' >/dev/null 2>&1 &
echo secret > /tmp/left.txt; echo secret > /dev/shm/left.txt; echo secret > /workspace/left.txt
sleep 0.3; test -s /workspace/loop.txt && echo looping`})
	if j1.Status != jobs.StatusSucceeded || j1.Stdout != "looping\n" {
		t.Fatalf("job 1: %s %q %q", j1.Status, j1.Stdout, j1.Stderr)
	}
	// Its container is the tenant's once it is cleaned, after the job's
	// answer (a job sent before then takes another).
	eventually.True(t, 30*time.Second, "the first job's container idle for its tenant", func() bool {
		return slices.ContainsFunc(h.idleContainers(t), func(id string) bool { return shortID(id) == c1 })
	})
	// (A spare sandbox made for Python has the image's matplotlib config
	// in its /tmp: nothing of the first job's.)
	j2, c2 := h.host(t, h.tenant, jobs.Request{Language: "bash", Code: `
ls -A /tmp /dev/shm /workspace | grep -vx matplotlib; env | grep -c LEFT_BEHIND; ps -e -o comm= > /dev/shm/ps; sort /dev/shm/ps | tr '\n' ' '`})
	if c1 != c2 {
		t.Fatalf("two jobs of one tenant ran in containers %s and %s", c1, c2)
	}
	// The sandbox's pid 1 is bubblewrap's init; the workspace holds the
	// empty out/ every job starts with.
	// (ps writes to a file first: in a pipeline it could see the next
	// command before its exec.)
	want := "/dev/shm:\n\n/tmp:\ngantry\n\n/workspace:\nout\n0\nbash bwrap ps "
	if j2.Stdout != want {
		t.Errorf("the second job saw %q, want %q (stderr %q)", j2.Stdout, want, j2.Stderr)
	}
	// From the host: nothing of the first job is left, only the
	// container's init, the agent and the next job's spare sandbox.
	for _, p := range h.processes(t, c1) {
		if !strings.Contains(p, "docker-init") && !strings.Contains(p, "gantry-agent") && !strings.Contains(p, "python3 -c") {
			t.Errorf("process left in the container: %q", p)
		}
	}

	// Another tenant's jobs never land in the first tenant's containers,
	// with both tenants' jobs queued at once.
	hosts := map[string]map[string]bool{h.tenant: {c1: true}, other: {}}
	type queued struct{ tenant, id string }
	var all []queued
	for i := 0; i < 6; i++ {
		for _, tenant := range []string{h.tenant, other} {
			all = append(all, queued{tenant, h.submitHost(t, tenant, jobs.Request{Language: "bash", Code: "true"})})
		}
	}
	for _, q := range all {
		j, c := h.hostOf(t, q.id)
		if j.Status != jobs.StatusSucceeded {
			t.Errorf("job: %s %q", j.Status, j.Stderr)
		}
		hosts[q.tenant][c] = true
	}
	for c := range hosts[other] {
		if hosts[h.tenant][c] {
			t.Fatalf("container %s served both tenants", c)
		}
	}
	if got := testutil.ToFloat64(h.r.fleet.m.acquired.WithLabelValues("tenant")); got == 0 {
		t.Error("no job reused a container")
	}

	// A revoked key retires the tenant's containers: its next job runs in
	// a new one.
	ctx := context.Background()
	keys, err := h.st.ListAPIKeys(ctx, h.tenant)
	if err != nil || len(keys) == 0 {
		t.Fatalf("keys: %v", err)
	}
	if _, err := h.st.RevokeAPIKey(ctx, keys[0].ID); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, c := h.host(t, h.tenant, jobs.Request{Language: "bash", Code: "true"}); hosts[h.tenant][c] {
			t.Fatalf("container %s served the tenant again after a key revocation", c)
		}
	}
}

// TestKillAllHurtsOnlyTheJob: a program that kills every process it may
// signal ends only itself: its container serves the tenant's next job
// (its sandbox's pid namespace holds nothing else; under the container
// isolation it may take the agent with it, its own failure). The sandbox's
// other properties, whichever launcher made it, are TestLaunchers'.
func TestKillAllHurtsOnlyTheJob(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker, Postgres, NATS and S3")
	}
	h := newHarness(t, 2)
	namespaces := h.sb.Isolation() == wire.Namespaces
	j, c1 := h.host(t, h.tenant, jobs.Request{Language: "bash", Code: "sleep 30 & kill -9 -1; echo survived"})
	switch {
	case namespaces && (j.Status != jobs.StatusSucceeded || j.Stdout != "survived\n"):
		t.Errorf("kill -9 -1: %s %q %q", j.Status, j.Stdout, j.Stderr)
	case !namespaces && j.Status != jobs.StatusSucceeded && j.Status != jobs.StatusFailed:
		// It may take the agent down with it: then it is its own failure.
		t.Errorf("kill -9 -1: %s %+v", j.Status, j.Error)
	}
	for i := 0; i < 3; i++ {
		j, c := h.host(t, h.tenant, jobs.Request{Language: "python", Code: "print('next')"})
		if j.Status != jobs.StatusSucceeded || j.Stdout != "next\n" {
			t.Fatalf("the job after: %s %q %q", j.Status, j.Stdout, j.Stderr)
		}
		if namespaces && c == c1 {
			return // and it ran in the same container
		}
	}
	if namespaces {
		t.Error("the container was not reused after kill -9 -1")
	}
}

// withMarker registers the Marker fixture for the harness's tenant (code
// mode), so that a program can leave one count per execution outside its
// sandbox.
func withMarker(t *testing.T, marks **codemodetest.Marks) func(*harness, *Config) {
	return func(h *harness, c *Config) {
		box, _ := secret.New(bytes.Repeat([]byte{7}, secret.KeySize))
		log := slog.New(slog.DiscardHandler)
		up := codemode.NewUpstreams(codemode.Config{AllowPrivate: true}, log)
		t.Cleanup(up.Stop)
		reg := codemode.NewRegistry(h.st, box, up, log)
		srv, m := codemodetest.Marker()
		*marks = m
		if _, err := reg.Register(context.Background(), h.tenant, codemode.Registration{Name: "marker", Description: "counts",
			URL: codemodetest.ServeHTTP(t, srv), Headers: map[string]string{"Authorization": "Bearer " + codemodetest.Token}}); err != nil {
			t.Fatal(err)
		}
		c.CodeMode = reg
	}
}

// TestProgramFaultsRunOnce: whatever a program does to its own sandbox
// ends as its own result, once; it is never retried (a retry would repeat
// its side effects, here a tool call).
func TestProgramFaultsRunOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker, Postgres, NATS and S3")
	}
	var marks *codemodetest.Marks
	h := newHarness(t, 2, withMarker(t, &marks))
	for name, tc := range map[string]struct {
		code   string
		limits *jobs.Limits
		check  func(jobs.Job) bool
	}{
		"kills its parent": {
			code: "import os, time\nos.kill(os.getppid(), 9)\ntime.sleep(0.2)\nprint('alive')",
			check: func(j jobs.Job) bool {
				if testRuntime() == "runsc" { // the parent is the agent: the container stops
					return j.Status == jobs.StatusFailed
				}
				return j.Status == jobs.StatusSucceeded && j.Stdout == "alive\n"
			},
		},
		"kills its whole process group": {
			code:  "import os, signal, subprocess\nsubprocess.Popen(['sleep', '30'])\nos.killpg(0, signal.SIGKILL)",
			check: func(j jobs.Job) bool { return j.Status == jobs.StatusFailed && *j.ExitCode == 137 },
		},
		"fills the workspace past its memory": {
			// The workspace's pages count against the container's memory:
			// nearly full, it leaves too little for what the program
			// holds (the warm interpreter's share included).
			code:   "with open('/workspace/fill', 'wb') as f:\n    for _ in range(120):\n        f.write(b'x' * (1 << 20))\nb = []\nwhile True:\n    b.append(bytearray(1 << 20))",
			limits: &jobs.Limits{MemoryMB: 128, DiskMB: 128},
			check: func(j jobs.Job) bool {
				return j.Status == jobs.StatusFailed && j.Error != nil && j.Error.Code == jobs.ErrCodeOOMKilled
			},
		},
		"fills its memory": {
			code:   "b = []\nwhile True:\n    b.append(bytearray(1 << 20))",
			limits: &jobs.Limits{MemoryMB: 128},
			check: func(j jobs.Job) bool {
				if testRuntime() == "runsc" {
					// gVisor (runsc 2024-07) holds its sandbox to the
					// cgroup's limit itself: the program's allocations
					// fail (MemoryError, exit 1) and nothing is
					// OOM-killed, so nothing says memory.
					return j.Status == jobs.StatusFailed && j.ExitCode != nil && *j.ExitCode != 0
				}
				return j.Status == jobs.StatusFailed && j.Error != nil && j.Error.Code == jobs.ErrCodeOOMKilled
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			key := jobs.NewID("mark")
			code := fmt.Sprintf("import gantry\ngantry.call('marker', 'mark', {'key': %q})\n%s", key, tc.code)
			j := h.run(t, jobs.Request{Language: "python", Code: code, Limits: tc.limits})
			if !tc.check(j) {
				t.Errorf("job: %s exit %v %+v\nstdout %q\nstderr %q", j.Status, deref(j.ExitCode), j.Error, j.Stdout, j.Stderr)
			}
			if n := marks.Count(key); n != 1 || j.Attempt != 1 {
				t.Errorf("the program ran %d times (attempt %d)", n, j.Attempt)
			}
		})
	}
}

func TestFleetPool(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker, Postgres, NATS and S3")
	}
	policy := jobs.DefaultPolicy()
	h := newHarness(t, 2, withFleet(FleetConfig{Min: 2, Max: 4, Limits: policy.DefaultLimits}))
	h.waitPool(t, 2)

	if j := h.run(t, jobs.Request{Language: "bash", Code: "echo warm"}); j.Stdout != "warm\n" {
		t.Fatalf("job: %+v", j)
	}
	if got := testutil.ToFloat64(h.r.fleet.m.acquired.WithLabelValues("pool")); got != 1 {
		t.Errorf("pool acquisitions = %v, want 1", got)
	}
	// Jobs with other limits take the cold path and still work.
	if j := h.run(t, jobs.Request{Language: "bash", Code: "echo cold", Limits: &jobs.Limits{MemoryMB: 256}}); j.Stdout != "cold\n" {
		t.Fatalf("cold path: %+v", j)
	}

	// Containers that die while they wait (as in a Docker restart) are
	// replaced, and a job never fails for having drawn one.
	for _, id := range append(h.waitPool(t, 2), h.idleContainers(t)...) {
		if out, err := exec.Command("docker", "kill", id).CombinedOutput(); err != nil && !strings.Contains(string(out), "is not running") {
			t.Fatalf("docker kill: %v %s", err, out)
		}
	}
	for i := 0; i < 3; i++ {
		if j := h.run(t, jobs.Request{Language: "bash", Code: "echo after-restart"}); j.Status != jobs.StatusSucceeded || j.Stdout != "after-restart\n" {
			t.Fatalf("job after the containers died: %+v", j)
		}
	}
	h.waitPool(t, 2)
}

func (h *harness) idleContainers(t *testing.T) []string {
	h.r.fleet.mu.Lock()
	defer h.r.fleet.mu.Unlock()
	var ids []string
	for _, list := range h.r.fleet.idle {
		for _, c := range list {
			ids = append(ids, c.id)
		}
	}
	return ids
}

func (h *harness) poolContainers(t *testing.T) []string {
	t.Helper()
	res, err := h.sb.docker.ContainerList(context.Background(), client.ContainerListOptions{
		Filters: make(client.Filters).Add("label", LabelPool+"=true").Add("label", LabelRunner+"="+h.sb.cfg.RunnerID).Add("status", "running")})
	if err != nil {
		t.Fatal(err)
	}
	h.r.fleet.mu.Lock()
	defer h.r.fleet.mu.Unlock()
	var ids []string
	for _, c := range res.Items {
		for _, u := range h.r.fleet.pool.unbound {
			if u.id == c.ID {
				ids = append(ids, c.ID)
			}
		}
	}
	return ids
}

func (h *harness) waitPool(t *testing.T, n int) []string {
	t.Helper()
	var ids []string
	eventually.True(t, time.Minute, fmt.Sprintf("%d pooled containers", n), func() bool {
		ids = h.poolContainers(t)
		return len(ids) >= n
	})
	return ids
}

// TestZygoteIsFaithful runs programs three ways: forked from the warm
// interpreter (the fast path), in the interpreter of a spare sandbox (the
// path when the warm interpreter is off) and through a plain `python3
// main.py` (PYTHONHASHSEED, which both leave to a real interpreter). What
// the program sees and shows must be the same.
func TestZygoteIsFaithful(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker, Postgres, NATS and S3")
	}
	h := newHarness(t, 2, awaitingWarm)
	cold := newHarness(t, 2, withoutWarm)
	for name, tc := range map[string]struct {
		code, stdin string
	}{
		"names": {code: `import os, sys
print(__name__, sys.argv, sys.path[0], __file__, type(__builtins__).__name__, os.getpid() > 1)
print(os.environ.get("GREETING"), sys.stdin.read())`, stdin: "from stdin"},
		"traceback": {code: `def f():
    return 1 / 0
f()`},
		"exception in exec'd code": {code: `exec(compile("raise KeyError('k')", "<string>", "exec"))`},
		"exit code":                {code: "import sys\nprint('out')\nsys.exit(3)"},
		"exit code over 255":       {code: "import sys\nsys.exit(258)"},
		"syntax error":             {code: "print('never')\nx = (1,\n"},
		"encoding declaration":     {code: "# -*- coding: latin-1 -*-\nprint(len('\xe9'))"},
		"exit message":             {code: "import sys\nsys.exit('bye')"},
		"atexit and threads": {code: `import atexit, threading, time
atexit.register(lambda: print("at exit"))
threading.Thread(target=lambda: (time.sleep(0.2), print("thread"))).start()
print("main")`},
		"a file left open is written": {code: `import os
os.makedirs("out", exist_ok=True)
f = open("out/left-open.txt", "w")
f.write("kept")
class D:
    def __del__(self):
        print("finalized")
d = D()`},
		"environment of children": {code: `import subprocess
print(subprocess.run(["sh", "-c", "echo $GREETING"], capture_output=True, text=True).stdout, end="")`},
		"pickle and fork": {code: `import pickle
from multiprocessing import Pool
class A: pass
print(type(pickle.loads(pickle.dumps(A()))).__name__)
def sq(x): return x * x
if __name__ == "__main__":
    with Pool(2) as p: print(p.map(sq, [1, 2, 3]))`},
		"warnings": {code: "import warnings\nwarnings.warn('careful')"},
		"a figure left open": {code: `import matplotlib.pyplot as plt, os
plt.plot([1, 2, 3])
print(plt.get_backend())`},
		"os._exit":           {code: "import os\nprint('x', flush=True)\nos._exit(4)"},
		"killed by a signal": {code: "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			req := jobs.Request{Language: "python", Code: tc.code, Stdin: tc.stdin, Env: map[string]string{"GREETING": "hej"}}
			warm := h.run(t, req)
			spare := cold.run(t, req)
			req.Env = map[string]string{"GREETING": "hej", "PYTHONHASHSEED": "random"}
			plain := h.run(t, req)
			files := func(j jobs.Job) string {
				var b strings.Builder
				for _, a := range j.Artifacts {
					fmt.Fprintf(&b, "%s:%d ", a.Path, a.Size)
				}
				return b.String()
			}
			for _, j := range []jobs.Job{warm, spare} {
				if j.Status != plain.Status || *j.ExitCode != *plain.ExitCode || j.Stdout != plain.Stdout || j.Stderr != plain.Stderr ||
					files(j) != files(plain) {
					t.Errorf("fast path: %s %d %q %q %s\nplain:     %s %d %q %q %s", j.Status, *j.ExitCode, j.Stdout, j.Stderr, files(j),
						plain.Status, *plain.ExitCode, plain.Stdout, plain.Stderr, files(plain))
				}
			}
		})
	}
}

// TestWarmIsUsed checks which path Python jobs take: forked from a warm
// interpreter (whose heap is frozen for the garbage collector: a fresh
// interpreter's is not), the lean one for a program that imports only the
// standard library's modules it has loaded, the full one, its libraries
// already imported, for anything else; unless their environment sets what
// those libraries read when imported, or the interpreter is still loading
// (then a fresh interpreter in a spare sandbox); with the warm
// interpreter off, the spare sandbox's own interpreter (started with -c).
func TestWarmIsUsed(t *testing.T) {
	h := warmHarness(t, 1)
	const (
		lean    = "import sys, gc\nprint(gc.get_freeze_count() > 0, 'pandas' in sys.modules, sys.orig_argv[:2])"
		full    = "import sys, gc, pandas\nprint(gc.get_freeze_count() > 0, 'matplotlib' in sys.modules, sys.orig_argv[:2])"
		forked  = "True False ['python3', '/tmp/gantry/main.py']\n"
		preload = "True True ['python3', '/tmp/gantry/main.py']\n"
		fresh   = "False False ['python3', '/tmp/gantry/main.py']\n"
	)
	for i := 0; i < 3; i++ {
		if j := h.run(t, jobs.Request{Language: "python", Code: lean}); j.Stdout != forked {
			t.Errorf("job %d ran in %q (stderr %q), want the lean interpreter's fork", i, j.Stdout, j.Stderr)
		}
		if j := h.run(t, jobs.Request{Language: "python", Code: full}); j.Stdout != preload {
			t.Errorf("job %d importing pandas ran in %q (stderr %q), want the full interpreter's fork", i, j.Stdout, j.Stderr)
		}
	}
	j := h.run(t, jobs.Request{Language: "python", Code: lean, Env: map[string]string{"OPENBLAS_NUM_THREADS": "2"}})
	if j.Stdout != fresh {
		t.Errorf("a job that sets OPENBLAS_NUM_THREADS ran in %q (stderr %q)", j.Stdout, j.Stderr)
	}
	// A container made on demand runs its first job at once (in the lean
	// interpreter if it has loaded, else as without a warm interpreter),
	// while the full one, still loading, is stopped; once it has loaded,
	// the jobs that need it fork from it.
	made := newHarness(t, 1)
	id := made.submit(t, jobs.Request{Language: "python", Code: lean + "\nimport time\ntime.sleep(3)"})
	stopped := false
	for deadline := time.Now().Add(10 * time.Second); !stopped && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if j, _ := made.st.GetJob(context.Background(), made.tenant, id); j.Status.Terminal() {
			break
		}
		out, _ := exec.Command("sh", "-c", "for c in $(docker ps -q --filter label="+LabelRunner+"="+made.sb.cfg.RunnerID+
			"); do docker top $c -o pid,stat,args; done").CombinedOutput()
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) == 4 && f[2] == "python3" && strings.HasSuffix(f[3], "/warm.py") && strings.HasPrefix(f[1], "T") {
				stopped = true
			}
		}
	}
	if !stopped {
		t.Error("the warm interpreter was not seen stopped beside the first job of its container")
	}
	if j := made.waitFor(t, id, func(j jobs.Job) bool { return j.Status.Terminal() }); j.Stdout != fresh && j.Stdout != forked {
		t.Errorf("the first job of a container made for it ran in %q (stderr %q)", j.Stdout, j.Stderr)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		j := made.run(t, jobs.Request{Language: "python", Code: full})
		if j.Stdout == preload {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a minute on, jobs still run in %q (stderr %q)", j.Stdout, j.Stderr)
		}
	}
	cold := newHarness(t, 1, withoutWarm)
	for i := 0; i < 3; i++ {
		j := cold.run(t, jobs.Request{Language: "python", Code: lean})
		if j.Stdout != "False False ['python3', '-c']\n" && i > 0 { // the first may find the spare still starting
			t.Errorf("job %d without the warm interpreter ran in %q (stderr %q)", i, j.Stdout, j.Stderr)
		}
	}
}

// TestSessionsWaitForWarming: a stateful session makes a new container
// only with one of the fleet's Warming tokens (each held until that
// container's warm interpreter has loaded); without one it waits, and
// takes the container its tenant gives back meanwhile instead of making
// another, or makes one once a token is given back.
func TestSessionsWaitForWarming(t *testing.T) {
	ctx := context.Background()
	d := &fakeDocker{runs: []script{exits(0, "")}}
	f := fakeRunner(t, d).fleet
	lim := jobs.DefaultPolicy().DefaultLimits
	made := func() int { d.mu.Lock(); defer d.mu.Unlock(); return d.next }
	session := func(id string) <-chan *lease {
		got := make(chan *lease, 1)
		go func() {
			l, err := f.createSession(ctx, id, "t1", lim, "", false, true)
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		return got
	}
	first := <-session("ses_1")
	if first == nil || made() != 1 || len(f.warming) != 0 {
		t.Fatalf("the first session: %v, %d made, %d tokens held", first, made(), len(f.warming))
	}

	// Every token held, as if that many containers were loading.
	for range cap(f.warming) {
		f.warming <- struct{}{}
	}
	second := session("ses_2")
	select {
	case l := <-second:
		t.Fatalf("a session made a container past the bound: %v", l)
	case <-time.After(200 * time.Millisecond):
	}
	first.release(true, "") // the first session closed: its container goes idle
	if l := <-second; l == nil || l.Container != first.Container || made() != 1 {
		t.Fatalf("the waiting session got %v (%d made), want the container its tenant gave back", l, made())
	}

	third := session("ses_3")
	f.unwarm() // a container loaded: its token comes back
	if l := <-third; l == nil || made() != 2 {
		t.Fatalf("with a token back, the session got %v (%d made), want a new container", l, made())
	}
}
