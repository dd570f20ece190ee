package runner

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/gantryhq/gantry/agent/wire"
)

// sessionRun runs a Python program as a stateful session's job in the
// container's agent.
func sessionRun(t *testing.T, c *Container, code string, env map[string]string) (wire.RunResult, string) {
	t.Helper()
	path := wire.ProgramDir + "/main.py"
	req := wire.Request{Argv: []string{"python3", path}, Env: env, Files: []wire.File{{Path: path, Data: []byte(code)}},
		Stateful: true, TimeoutMS: 20000}
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := c.conn.Run(ctx, req, wire.RunIO{Stdout: &out, Stderr: &errb})
	if err != nil || !res.Exit.Started || res.Exit.Code != 0 {
		t.Fatalf("run: %v %+v %q", err, res.Exit, errb.String())
	}
	return res, out.String()
}

// closeSession gives the container back as a closed session's is.
func closeSession(t *testing.T, c *Container) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.conn.Clean(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestSessionSpares: once a session's container is given back to its
// tenant, the agent makes the next session's sandbox ahead
// (agent/livespare.go), and a session that starts in it sees exactly what
// a session whose sandbox was made for it sees: the same identity, limits,
// mounts, sizes, environment (the session's own variables applied alike)
// and interpreter; nothing of the session before it. A container that
// runs a plain job after a session drops its spare.
func TestSessionSpares(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker")
	}
	c := namespacesContainer(t, "a session spare is made from the warm interpreter, under Namespaces")

	// What a session sees: what differs from one sandbox to the next by
	// nature (pids, namespaces' inode numbers, times) is left out.
	const probe = `import os, sys, resource
st = dict(l.rstrip("\n").split(":\t", 1) for l in open("/proc/self/status"))
print({k: st[k] for k in ("Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp")})
print(sorted(os.environ.items()))
print(os.getcwd(), sys.argv, sys.path, sorted(k for k in globals() if not k.startswith("__")))
print([(r, resource.getrlimit(getattr(resource, r))) for r in ("RLIMIT_NOFILE", "RLIMIT_NPROC", "RLIMIT_AS", "RLIMIT_FSIZE")])
for d in ("/tmp", "/var/tmp", "/dev/shm", "/workspace"):
    v = os.statvfs(d)
    print(d, v.f_blocks * v.f_frsize, sorted(os.listdir(d)))
for line in open("/proc/self/mountinfo"):
    f = line.split()
    print(f[4], f[5], f[f.index("-") + 1])
print(open("/proc/sys/kernel/hostname").read().strip(), sorted(os.listdir("/proc/1/fd")) if os.access("/proc/1/fd", os.R_OK) else "no fd")
print(sorted(p for p in os.listdir("/proc") if p.isdigit()).__len__())`
	env := map[string]string{"SESSION_VAR": "v", "PYTHONPATH": "/workspace/lib"}

	cold, coldOut := sessionRun(t, c, probe, env)
	if l := cold.Exit.Live; l == nil || !l.Fresh || l.Spare {
		t.Fatalf("the container's first session: %+v, want a fresh sandbox made for it", l)
	}
	// The session leaves what it can: globals, a variable, files, a process.
	sessionRun(t, c, `import os, subprocess
secret = "first"
os.environ["LEFT"] = "1"
for p in ("/tmp/left", "/var/tmp/left", "/dev/shm/left", "/workspace/left"):
    open(p, "w").write("x")
subprocess.Popen(["sleep", "300"], start_new_session=True)`, env)
	closeSession(t, c)

	spare, spareOut := sessionRun(t, c, probe, env)
	if l := spare.Exit.Live; l == nil || !l.Fresh || !l.Spare || l.ID == cold.Exit.Live.ID {
		t.Fatalf("the next session: %+v, want a fresh sandbox made ahead", l)
	}
	// Down to the number of its processes (its init, its interpreter, its
	// process service, its relay).
	if coldOut != spareOut {
		t.Errorf("a session started in a spare differs from one made for it:\ncold:\n%s\nspare:\n%s", coldOut, spareOut)
	}
	_, left := sessionRun(t, c, `import os, subprocess
print([p for p in ("/tmp/left", "/var/tmp/left", "/dev/shm/left", "/workspace/left") if os.path.exists(p)],
      "secret" in globals(), os.environ.get("LEFT"),
      "sleep" in subprocess.run(["ps", "-e", "-o", "comm="], capture_output=True, text=True).stdout.split())`, env)
	if left != "[] False None False\n" {
		t.Errorf("the next session saw the last one's: %q", left)
	}

	// A plain job after a session: the container serves jobs now, and its
	// spare is dropped; a later session's sandbox is made for it.
	closeSession(t, c)
	nodeRun(t, c, "python", "print(1)", nil, nil, "", "")
	if res, _ := sessionRun(t, c, "0", nil); res.Exit.Live == nil || res.Exit.Live.Spare {
		t.Errorf("a session after a plain job: %+v, want a sandbox made for it", res.Exit.Live)
	}
}
