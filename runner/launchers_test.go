package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gantryhq/gantry/agent/wire"
	"github.com/gantryhq/gantry/jobs"
)

// The launchers' conformance suite. The agent starts a program one of
// several ways (agent/launch.go): a bubblewrap sandbox, a fork of the warm
// interpreter, a spare sandbox made ahead (a Node started in it for a
// Node job), the stateful session's
// live sandbox (its Python interpreter, or one of its JavaScript kernels),
// or (the container isolation, gVisor) the container itself.
// Every one of them passes the same cases here, driving a container's agent
// directly and forcing the launcher (wire.Request.Launcher): the same
// identity and isolation, the same mount table, the same limits, accounting
// and output, and the same clean-up (a session keeps its processes: that is
// what it is for). TestSandboxEscapes and TestWarmSandbox were folded in.

// launcherUnderTest is one launcher in one container, as the suite runs it.
type launcherUnderTest struct {
	name     string
	launcher wire.Launcher
	// stateful runs as a session's job (the session launcher).
	stateful bool
	// warm: the container has a warm interpreter (its spares are its).
	warm bool
	// node runs each case's Python under a Node program (nodeWrapper):
	// a spare's Node, a session's JavaScript kernel.
	node bool
	// primed: the spares made before the suite's first run were taken.
	primed bool
	// spareSession: each case starts a new session whose sandbox the agent
	// made ahead (agent/livespare.go), the container cleaned first as a
	// closed session's is (newSession); the case's later runs go on in it.
	spareSession bool
	ctr          *Container
	// fresh, when set, makes a new container for every run: under the
	// container isolation a container serves one job (the program's
	// leftovers are killed with everything the agent may signal, a spare
	// included).
	fresh func() *Container
	iso   wire.Isolation
	// mu serializes runs: the agent serves one request at a time.
	mu sync.Mutex
}

// conformanceRun is what a run of the suite gave.
type conformanceRun struct {
	res            wire.RunResult
	stdout, stderr string
	err            error
}

// nodeWrapper is a Node program that runs a case's Python as its child,
// with its own streams, and exits as it did (in a block: a kernel's cells
// share their globals).
func nodeWrapper(code string) []byte {
	literal, _ := json.Marshal(code)
	return []byte(`{
  const r = require("child_process").spawnSync("python3", ["-c", ` + string(literal) + `], {stdio: "inherit"});
  process.exitCode = r.status === null ? 128 + require("os").constants.signals[r.signal] : r.status;
}`)
}

// newSession ends a spareSession launcher's session as a closed one's
// container is given back to its tenant (Clean, which makes the next
// session's sandbox ahead), so that its next run starts a new session in
// that spare; a no-op for the other launchers.
func (l *launcherUnderTest) newSession(t *testing.T) {
	t.Helper()
	if !l.spareSession {
		return
	}
	l.run(t, "0", 0, 0) // a session to close: the last case's, or a first one
	l.mu.Lock()
	defer l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := l.ctr.conn.Clean(ctx); err != nil {
		t.Fatal(err)
	}
}

// run runs a Python program with the launcher.
func (l *launcherUnderTest) run(t *testing.T, code string, timeoutMS, outputCap int) conformanceRun {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fresh != nil {
		l.ctr = l.fresh()
	}
	req := wire.Request{Argv: []string{"python3", wire.ProgramDir + "/main.py"},
		Files:    []wire.File{{Path: wire.ProgramDir + "/main.py", Data: []byte(code)}},
		Fresh:    !l.stateful,
		Stateful: l.stateful, Launcher: l.launcher, TimeoutMS: timeoutMS, OutputCap: outputCap}
	if l.node {
		req.Argv = []string{"node", wire.ProgramDir + "/main.js"}
		req.Files = []wire.File{{Path: wire.ProgramDir + "/main.js", Data: nodeWrapper(code)}}
	}
	if l.node && l.launcher == wire.LauncherSpare && !l.primed {
		// The spares made before the first Node job are not Nodes: take
		// them.
		for range 2 {
			_, _ = l.ctr.conn.Run(context.Background(), wire.Request{Argv: req.Argv, Files: []wire.File{{Path: wire.ProgramDir + "/main.js", Data: []byte("0")}},
				Fresh: true}, wire.RunIO{Stdout: io.Discard, Stderr: io.Discard})
		}
		l.primed = true
	}
	for try := 0; ; try++ {
		var out, errb bytes.Buffer
		// Well under the 120 s a background child of a case sleeps: a run
		// held by one fails here.
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		res, err := l.ctr.conn.Run(ctx, req, wire.RunIO{Stdout: &out, Stderr: &errb})
		cancel()
		if l.launcher == wire.LauncherSpare && err == nil && !res.Exit.Started && strings.Contains(res.Exit.Message, "no spare sandbox suits") && try < 8 {
			// The spares come after the jobs that tell their kind: a
			// job of the kind first, then the spare.
			warmUp := l.launcher
			l.launcher = l.spareMaker()
			_, _ = l.ctr.conn.Run(context.Background(), wire.Request{Argv: req.Argv, Files: req.Files, Fresh: true, Launcher: l.launcher}, wire.RunIO{Stdout: &out, Stderr: &errb})
			l.launcher = warmUp
			continue
		}
		return conformanceRun{res: res, stdout: out.String(), stderr: errb.String(), err: err}
	}
}

// namespacesContainer is warmContainer of the test sandbox, the test
// skipped (saying why) where its isolation is not Namespaces.
func namespacesContainer(t *testing.T, why string) *Container {
	t.Helper()
	sb := testSandbox(t)
	if sb.Isolation() != wire.Namespaces {
		t.Skip(why)
	}
	return warmContainer(t, sb)
}

// warmContainer is a new container of sb, with the default limits, once
// its warm interpreter (if sb has one) is ready; removed when t ends.
func warmContainer(t *testing.T, sb *Sandbox) *Container {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := sb.Create(ctx, ContainerSpec{Limits: jobs.DefaultPolicy().DefaultLimits.Container()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Remove(context.Background()) })
	if err := c.conn.Warm(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// spareMaker is the launcher whose runs make the spares a spare launcher
// under test takes.
func (l *launcherUnderTest) spareMaker() wire.Launcher {
	switch {
	case l.iso == wire.Container:
		return wire.LauncherContainer
	case l.warm:
		return wire.LauncherWarm
	}
	return wire.LauncherBwrap
}

// launchersUnderTest makes a container for each launcher this runtime has.
func launchersUnderTest(t *testing.T) []*launcherUnderTest {
	t.Helper()
	withWarm, noWarm := testSandbox(t), testSandboxWith(t, "")
	cfg := noWarm.cfg
	cfg.Warm = []string{}
	noWarm.cfg = cfg.WithDefaults()
	container := func(sb *Sandbox) *Container { return warmContainer(t, sb) }
	var out []*launcherUnderTest
	if withWarm.Isolation() == wire.Container {
		fresh := func() *Container { return container(noWarm) }
		out = []*launcherUnderTest{
			{name: "container", launcher: wire.LauncherContainer, fresh: fresh},
			// The spare the agent makes at its start, for its one job.
			{name: "spare", launcher: wire.LauncherSpare, fresh: fresh},
			{name: "session", launcher: wire.LauncherSession, stateful: true, ctr: container(noWarm)},
			{name: "session-js", launcher: wire.LauncherSession, stateful: true, node: true, ctr: container(noWarm)},
		}
	} else {
		out = []*launcherUnderTest{
			{name: "bwrap", launcher: wire.LauncherBwrap, ctr: container(noWarm)},
			{name: "warm", launcher: wire.LauncherWarm, warm: true, ctr: container(withWarm)},
			{name: "lean", launcher: wire.LauncherLean, warm: true, ctr: container(withWarm)},
			{name: "spare-warm", launcher: wire.LauncherSpare, warm: true, ctr: container(withWarm)},
			{name: "spare-bwrap", launcher: wire.LauncherSpare, ctr: container(noWarm)},
			{name: "session", launcher: wire.LauncherSession, stateful: true, warm: true, ctr: container(withWarm)},
			{name: "session-spare", launcher: wire.LauncherSession, stateful: true, warm: true, spareSession: true, ctr: container(withWarm)},
			{name: "session-bwrap", launcher: wire.LauncherSession, stateful: true, ctr: container(noWarm)},
			{name: "spare-node", launcher: wire.LauncherSpare, node: true, ctr: container(noWarm)},
			{name: "session-js", launcher: wire.LauncherSession, stateful: true, node: true, warm: true, ctr: container(withWarm)},
		}
	}
	for _, l := range out {
		l.iso = withWarm.Isolation()
	}
	return out
}

// launcherCase is one case: a Python program and the lines it must print
// under every launcher (want), or under the container isolation
// (wantContainer, when it differs), or in a session (wantSession, when it
// differs: a session keeps processes between its jobs).
type launcherCase struct {
	name           string
	code           string
	want           []string
	wantContainer  []string
	wantSession    []string
	namespacesOnly bool
	timeoutMS      int
	outputCap      int
	check          func(t *testing.T, l *launcherUnderTest, r conformanceRun)
	skipIsolation  wire.Isolation
}

var launcherCases = []launcherCase{
	{
		name: "identity: uid 1000, no capabilities, no_new_privs, the job's seccomp filter",
		code: `st = dict(l.rstrip("\n").split(":\t", 1) for l in open("/proc/self/status"))
for k in ("Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp"):
    if k in st:
        print(k, st[k].strip())`,
		want: []string{"Uid 1000\t1000\t1000\t1000", "Gid 1000\t1000\t1000\t1000", "Groups 1000",
			"CapInh 0000000000000000", "CapPrm 0000000000000000", "CapEff 0000000000000000", "CapBnd 0000000000000000", "CapAmb 0000000000000000",
			"NoNewPrivs 1", "Seccomp 2"},
		// gVisor's /proc/self/status has no ambient set or no_new_privs
		// line, and shows no seccomp filter on the program: gVisor's own
		// kernel serves its system calls (the container's no_new_privs and
		// Docker's profile hold on the sandbox's host side).
		wantContainer: []string{"Uid 1000\t1000\t1000\t1000", "Gid 1000\t1000\t1000\t1000", "Groups 1000",
			"CapInh 0000000000000000", "CapPrm 0000000000000000", "CapEff 0000000000000000", "CapBnd 0000000000000000", "Seccomp 0"},
	},
	{
		name:           "no further namespaces, no mounts",
		namespacesOnly: true,
		code: `import ctypes, errno, subprocess
libc = ctypes.CDLL(None, use_errno=True)
def call(f, *a):
    r = f(*a)
    return "ok" if r == 0 else errno.errorcode[ctypes.get_errno()]
for cmd in (["unshare", "-U", "true"], ["unshare", "-Ur", "true"], ["unshare", "-m", "true"], ["unshare", "-pf", "true"], ["unshare", "-n", "true"]):
    print(" ".join(cmd), subprocess.run(cmd, capture_output=True).returncode)
print("unshare(CLONE_NEWUSER)", call(libc.unshare, 0x10000000))
print("mount", call(libc.mount, b"none", b"/tmp", b"tmpfs", 0, None))
print("umount2", call(libc.umount2, b"/tmp", 2))
print("setns", call(libc.setns, 0, 0))`,
		want: []string{"unshare -U true 1", "unshare -Ur true 1", "unshare -m true 1", "unshare -pf true 1", "unshare -n true 1",
			"unshare(CLONE_NEWUSER) EPERM", "mount EPERM", "umount2 EPERM", "setns EPERM"},
	},
	{
		name: "only lo, and lo up",
		code: `import socket
print(socket.if_nameindex())
s = socket.socket(); s.settimeout(3)
try:
    s.connect(("1.1.1.1", 80)); print("connected")
except OSError as e:
    print("blocked")
for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
    srv = socket.create_server((host, 0), family=family)
    c = socket.create_connection(srv.getsockname()[:2], timeout=3)
    c.sendall(b"hi")
    print(host, srv.accept()[0].recv(2).decode())`,
		want:          []string{"[(1, 'lo')]", "blocked", "127.0.0.1 hi", "::1 hi"},
		skipIsolation: wire.Container, // gVisor's network stack, not the host's: tested by the egress tests
	},
	{
		name:           "the files it sees",
		namespacesOnly: true,
		code: `import os
def touch(p):
    try:
        open(p, "w").close(); return "writable"
    except OSError as e:
        return e.strerror
for p in ("/etc/x", "/usr/x", "/sys/fs/cgroup/x", "/skills/x", "/tmp/gantry/x", "/proc/sys/kernel/hostname", "/workspace/x", "/tmp/x", "/dev/shm/x"):
    print(p, touch(p))
print(os.path.exists("/tmp/.gantry-agent"))
print(sorted(os.listdir("/dev")))
for p in ("/proc/keys", "/proc/timer_list", "/proc/kcore", "/proc/sched_debug"):
    try:
        print(p, len(open(p, "rb").read(100)))
    except OSError as e:
        print(p, e.strerror)
print(os.listdir("/sys/firmware"), os.getcwd())`,
		want: []string{"/etc/x Read-only file system", "/usr/x Read-only file system", "/sys/fs/cgroup/x Read-only file system",
			"/skills/x Read-only file system", "/tmp/gantry/x Read-only file system", "/proc/sys/kernel/hostname Permission denied",
			"/workspace/x writable", "/tmp/x writable", "/dev/shm/x writable", "False",
			"['core', 'fd', 'full', 'null', 'ptmx', 'pts', 'random', 'shm', 'stderr', 'stdin', 'stdout', 'tty', 'urandom', 'zero']",
			"/proc/keys Permission denied", "/proc/timer_list Permission denied", "/proc/kcore No such file or directory", "/proc/sched_debug No such file or directory",
			"[] /workspace"},
	},
	{
		name:           "its sandbox's init cannot be stopped, traced, read or written",
		namespacesOnly: true,
		code: `import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
for name, req in (("attach", 16), ("seize", 0x4206)):
    r = libc.ptrace(req, 1, None, None)
    print(name, "ok" if r == 0 else errno.errorcode[ctypes.get_errno()])
    if r == 0 and req == 0x4206:
        libc.ptrace(0x4207, 1, None, None)  # PTRACE_INTERRUPT
try:
    f = open("/proc/1/mem", "r+b")
    print("/proc/1/mem", "opened", f.read(1))
except OSError as e:
    print("/proc/1/mem", errno.errorcode[e.errno])
try:
    # The warm interpreter's sandboxes' init lives in the container's
    # mount namespace: its root is refused (bubblewrap's is the sandbox's).
    leaks = sorted(os.listdir("/proc/1/root")) != sorted(os.listdir("/"))
except OSError:
    leaks = False
print("no other root through the init", not leaks)
import signal, time
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGABRT, signal.SIGKILL):
    os.kill(1, s)
time.sleep(0.1)
print("init alive", os.path.exists("/proc/1/stat"))`,
		want: []string{"attach EPERM", "seize EPERM", "/proc/1/mem EACCES", "no other root through the init True", "init alive True"},
	},
	{
		name:           "nothing but its own processes, and no memory shared",
		namespacesOnly: true,
		code: `import os, subprocess
ps = subprocess.run(["ps", "-e", "-o", "comm="], capture_output=True, text=True).stdout.split()
print("agent visible", any(p in ("gantry-agent", "docker-init", "containerd-shim") for p in ps))
print("shared mappings", [l for l in open("/proc/self/maps") if l.split()[1][1] == "w" and l.split()[1][3] == "s"])`,
		want: []string{"agent visible False", "shared mappings []"},
	},
	{
		name: "only its own descriptors (a session's interpreter also its own socket and pipes)",
		code: `import os
def open_fd(fd):
    try:
        os.fstat(fd); return True
    except OSError:
        return False
print(" ".join(str(fd) for fd in range(1024) if open_fd(fd)))`,
		check: func(t *testing.T, l *launcherUnderTest, r conformanceRun) {
			fds := strings.Fields(r.stdout)
			if len(fds) < 3 || strings.Join(fds[:3], " ") != "0 1 2" || !l.stateful && len(fds) != 3 {
				t.Errorf("open descriptors %q", r.stdout)
			}
		},
	},
	{
		name: "output: stdout and stderr apart, the exit status",
		code: `import sys
print("out"); sys.stdout.flush()
print("err", file=sys.stderr)
sys.exit(3)`,
		check: func(t *testing.T, _ *launcherUnderTest, r conformanceRun) {
			if r.stdout != "out\n" || r.stderr != "err\n" || r.res.Exit.Code != 3 {
				t.Errorf("stdout %q stderr %q code %d", r.stdout, r.stderr, r.res.Exit.Code)
			}
		},
	},
	{
		name:      "limits: output past its cap is cut",
		code:      "import sys\nsys.stdout.write('x' * (300 << 10))",
		outputCap: 100 << 10,
		check: func(t *testing.T, _ *launcherUnderTest, r conformanceRun) {
			// One byte past the cap tells the runner output was cut.
			if len(r.stdout) != 100<<10+1 || r.res.Exit.Code != 0 {
				t.Errorf("%d bytes of output, code %d", len(r.stdout), r.res.Exit.Code)
			}
		},
	},
	{
		name:      "limits: the timeout kills it, and says so",
		code:      "import time\nprint('started', flush=True)\ntime.sleep(60)",
		timeoutMS: 1500,
		check: func(t *testing.T, _ *launcherUnderTest, r conformanceRun) {
			if !r.res.Exit.TimedOut || r.stdout != "started\n" {
				t.Errorf("timed out %v, stdout %q, exit %+v", r.res.Exit.TimedOut, r.stdout, r.res.Exit)
			}
		},
	},
	{
		name: "accounting: what it used",
		code: `import time
b = bytearray(64 << 20)
for i in range(0, len(b), 4096):
    b[i] = 1
t = time.process_time()
while time.process_time() - t < 0.3:
    pass
print("done")`,
		check: func(t *testing.T, l *launcherUnderTest, r conformanceRun) {
			u := r.res.Exit.Usage
			if u == nil || u.CPUTimeUS < 200_000 {
				t.Errorf("usage %+v: want at least 0.2 s of CPU", u)
				return
			}
			// A session's job is measured from outside the sandbox, where
			// a process's peak can be reset (not under gVisor: none is
			// reported there, rather than a false one).
			switch p := u.PeakMemoryKB; {
			case l.stateful && testRuntime() == "runsc":
				if p != nil {
					t.Errorf("peak memory %d KiB under gVisor: want none", *p)
				}
			case p == nil || *p < 60<<10:
				t.Errorf("peak memory %v KiB: want at least 60 MiB", deref(p))
			}
		},
	},
	{
		name: "a background child holding stdout does not hold the run",
		code: `import subprocess, sys
subprocess.Popen(["sleep", "120"])
print("started")`,
		check: func(t *testing.T, _ *launcherUnderTest, r conformanceRun) {
			// The run ends as its main process does, not with the child
			// (which a session keeps, its output dropped).
			if r.stdout != "started\n" || r.res.Exit.Code != 0 {
				t.Errorf("stdout %q code %d", r.stdout, r.res.Exit.Code)
			}
		},
	},
	{
		name: "the usual writable places: /tmp, /var/tmp, /dev/shm, HOME and the cwd, within the disk limit, gone with the sandbox (a session keeps them)",
		code: `import os
for name, d in (("/tmp", "/tmp"), ("/var/tmp", "/var/tmp"), ("/dev/shm", "/dev/shm"), ("HOME", os.environ["HOME"]), ("cwd", os.getcwd())):
    p = os.path.join(d, ".gantry-conformance-" + name.strip("/").replace("/", "-"))
    with open(p, "w") as f:
        f.write("kept")
    st = os.statvfs(d)
    print(name, open(p).read(), st.f_blocks * st.f_frsize >> 20)`,
		check: func(t *testing.T, l *launcherUnderTest, r conformanceRun) {
			// Each is writable and no bigger than the job's disk limit
			// (a tmpfs of disk_mb, or the workspace; under the container
			// isolation /dev/shm is Docker's, of 64 MB).
			disk := jobs.DefaultPolicy().DefaultLimits.DiskMB
			lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
			if len(lines) != 5 || r.res.Exit.Code != 0 {
				t.Fatalf("first run: %q %q %+v", r.stdout, r.stderr, r.res.Exit)
			}
			for i, name := range []string{"/tmp", "/var/tmp", "/dev/shm", "HOME", "cwd"} {
				var got, kept string
				var mb int
				if _, err := fmt.Sscan(lines[i], &got, &kept, &mb); err != nil || got != name || kept != "kept" || mb < 1 || mb > disk {
					t.Errorf("%s: %q, want it written and read back, of 1 to %d MB", name, lines[i], disk)
				}
			}
			next := l.run(t, `import os
print([os.path.exists(os.path.join(d, ".gantry-conformance-" + n)) for n, d in (("tmp", "/tmp"), ("var-tmp", "/var/tmp"), ("dev-shm", "/dev/shm"), ("HOME", os.environ["HOME"]), ("cwd", os.getcwd()))])`, 0, 0)
			want := "[False, False, False, False, False]\n"
			if l.stateful {
				want = "[True, True, True, True, True]\n"
			}
			if next.stdout != want {
				t.Errorf("the next run saw %q, want %q (%q)", next.stdout, want, next.stderr)
			}
		},
	},
	{
		name: "clean-up: what it left running is gone (a session keeps it)",
		code: `import subprocess, os
subprocess.Popen(["sleep", "300"], start_new_session=True)
print("left")`,
		check: func(t *testing.T, l *launcherUnderTest, r conformanceRun) {
			if r.stdout != "left\n" {
				t.Fatalf("first run: %q %q %+v", r.stdout, r.stderr, r.res.Exit)
			}
			next := l.run(t, `import subprocess
print("sleeping", "sleep" in subprocess.run(["ps", "-e", "-o", "comm="], capture_output=True, text=True).stdout.split())`, 0, 0)
			want := "sleeping False\n"
			if l.stateful {
				want = "sleeping True\n"
			}
			if next.stdout != want {
				t.Errorf("the next run saw %q, want %q (%q)", next.stdout, want, next.stderr)
			}
		},
	},
}

// TestLaunchers runs the suite against every launcher of this runtime.
func TestLaunchers(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker")
	}
	for _, l := range launchersUnderTest(t) {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			for _, tc := range launcherCases {
				t.Run(tc.name, func(t *testing.T) {
					iso := l.iso
					if tc.namespacesOnly && iso != wire.Namespaces || tc.skipIsolation == iso {
						t.Skip("not under this isolation")
					}
					l.newSession(t)
					r := l.run(t, tc.code, tc.timeoutMS, tc.outputCap)
					if r.err != nil || !r.res.Exit.Started {
						t.Fatalf("run: %v %+v %q", r.err, r.res.Exit, r.stderr)
					}
					if live := r.res.Exit.Live; l.spareSession && (live == nil || !live.Fresh || !live.Spare) {
						t.Errorf("the case's session was not the spare made ahead: %+v", live)
					}
					if want := expectedLauncher(l); r.res.Exit.Launcher != want {
						t.Errorf("ran with %q, want %q", r.res.Exit.Launcher, want)
					}
					if tc.check != nil {
						tc.check(t, l, r)
						return
					}
					want := tc.want
					if iso == wire.Container && tc.wantContainer != nil {
						want = tc.wantContainer
					}
					if l.stateful && tc.wantSession != nil {
						want = tc.wantSession
					}
					got := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
					if !slices.Equal(got, want) || r.res.Exit.Code != 0 {
						t.Errorf("code %d, stderr %q\n got: %q\nwant: %q", r.res.Exit.Code, r.stderr, got, want)
					}
				})
			}
		})
	}
}

// expectedLauncher is what Exit.Launcher says for l's runs.
func expectedLauncher(l *launcherUnderTest) wire.Launcher { return l.launcher }

// TestLayoutMountTable: whichever launcher made it, a sandbox has the same
// mounts, with the same filesystems and flags (the layout is rendered two
// ways, as bubblewrap's arguments and as the warm interpreter's steps:
// this pins the two together).
func TestLayoutMountTable(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker")
	}
	if testSandbox(t).Isolation() != wire.Namespaces {
		t.Skip("the container isolation makes no sandbox of its own")
	}
	// Mount point, filesystem and flags (the per-mount options that say
	// what the program may do: ro/rw, nosuid, nodev, noexec), in order.
	const table = `import re
for line in open("/proc/self/mountinfo"):
    f = line.split()
    sep = f.index("-")
    point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), f[4])
    opts = ",".join(o for o in f[5].split(",") if o in ("ro", "rw", "nosuid", "nodev", "noexec"))
    print(point, f[sep + 1], opts)`
	tables := map[string][]string{}
	for _, l := range launchersUnderTest(t) {
		l.newSession(t)
		r := l.run(t, table, 0, 0)
		if r.err != nil || r.res.Exit.Code != 0 {
			t.Fatalf("%s: %v %+v %q", l.name, r.err, r.res.Exit, r.stderr)
		}
		tables[l.name] = strings.Split(strings.TrimSpace(r.stdout), "\n")
	}
	want := tables["bwrap"]
	if len(want) < 10 {
		t.Fatalf("bubblewrap's sandbox has %d mounts:\n%s", len(want), strings.Join(want, "\n"))
	}
	want = containerOrderFree(want)
	for name, got := range tables {
		if got = containerOrderFree(got); !slices.Equal(got, want) {
			t.Errorf("%s's mount table differs from bubblewrap's:\n%s", name, diffLines(want, got))
		}
	}
}

// containerOrderFree sorts a mount table's first part, the container's
// own mounts seen from the sandbox (read-only, before the sandbox's first
// writable mount): Docker mounts a container's tmpfs mounts in no fixed
// order, so two containers list them differently. The sandbox's own
// mounts, which the layout orders (a later one covers an earlier), keep
// their order.
func containerOrderFree(table []string) []string {
	out := slices.Clone(table)
	i := slices.IndexFunc(out, func(line string) bool {
		f := strings.Fields(line)
		return len(f) == 3 && slices.Contains(strings.Split(f[2], ","), "rw")
	})
	if i < 0 {
		i = len(out)
	}
	slices.Sort(out[:i])
	return out
}

// diffLines shows where two lists of lines differ.
func diffLines(want, got []string) string {
	var b strings.Builder
	for i := 0; i < max(len(want), len(got)); i++ {
		w, g := "", ""
		if i < len(want) {
			w = want[i]
		}
		if i < len(got) {
			g = got[i]
		}
		mark := " "
		if w != g {
			mark = "!"
		}
		fmt.Fprintf(&b, "%s %-50s | %s\n", mark, w, g)
	}
	return b.String()
}
