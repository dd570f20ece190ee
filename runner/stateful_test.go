package runner

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gantryhq/gantry/agent/wire"
	"github.com/gantryhq/gantry/blob"
	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
	"github.com/gantryhq/gantry/store"
)

func (h *harness) statefulSession(t *testing.T) string {
	t.Helper()
	return h.newStatefulSession(t, false)
}

// durableSession makes a durable stateful session: under gVisor where the
// runner has it.
func (h *harness) durableSession(t *testing.T) string {
	t.Helper()
	return h.newStatefulSession(t, true)
}

func (h *harness) newStatefulSession(t *testing.T, durable bool) string {
	t.Helper()
	req, _ := jobs.SessionRequest{DiskMB: 64, Stateful: true, Durable: &durable}.Normalize()
	sess, err := h.st.CreateSession(context.Background(), h.tenant, req)
	if err != nil {
		t.Fatal(err)
	}
	if !sess.Stateful || sess.Durable != durable {
		t.Fatalf("session stateful %v, durable %v", sess.Stateful, sess.Durable)
	}
	return sess.ID
}

// in runs a job in the session and waits for it.
func (h *harness) in(t *testing.T, sid string, req jobs.Request) jobs.Job {
	t.Helper()
	return h.waitFor(t, h.submitIn(t, sid, req), func(j jobs.Job) bool { return j.Status.Terminal() })
}

// writeWorkspace makes a new version of the session's workspace holding
// files, as the files API does: under the session's lease, between jobs.
func (h *harness) writeWorkspace(t *testing.T, sid string, files map[string]string) {
	t.Helper()
	ctx := context.Background()
	owner := "test-writer"
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, ok, err := h.st.AcquireSession(ctx, sid, owner, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the session's lease was never free")
		}
		time.Sleep(20 * time.Millisecond)
	}
	sess, err := h.st.GetSession(ctx, h.tenant, sid)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, content := range files {
		if err := tw.WriteHeader(&tar.Header{Name: "./" + name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		_, _ = tw.Write([]byte(content))
	}
	_ = tw.Close()
	snap := store.Snapshot{Version: sess.Version + 1, Key: blob.NewSessionKey(h.tenant, sid, sess.Version+1), Bytes: int64(buf.Len())}
	if _, err := h.blobs.PutStream(ctx, snap.Key, &buf, "application/x-tar"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.st.CommitWorkspace(ctx, sid, owner, snap); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.st.ReleaseSession(ctx, sid, owner, false); err != nil {
		t.Fatal(err)
	}
}

func py(code string) jobs.Request   { return jobs.Request{Language: "python", Code: code} }
func bash(code string) jobs.Request { return jobs.Request{Language: "bash", Code: code} }

// TestStatefulSessions: a stateful session's Python jobs run in one
// interpreter, as notebook cells, with /tmp and background processes kept;
// what it loses, and why, its next job says.
func TestStatefulSessions(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker, Postgres, NATS and S3")
	}
	h := newHarness(t, 4)

	t.Run("globals, imports, values and processes persist", func(t *testing.T) {
		t.Parallel()
		sid := h.statefulSession(t)
		want := func(j jobs.Job, state jobs.LiveState, stdout, value string) {
			t.Helper()
			got := ""
			if j.Value != nil {
				got = j.Value.Text
			}
			if j.Status != jobs.StatusSucceeded || j.LiveState != state || j.Stdout != stdout || got != value {
				t.Fatalf("%s %s %q value %q (want %s %q %q) stderr %q %+v", j.Status, j.LiveState, j.Stdout, got, state, stdout, value, j.Stderr, j.Error)
			}
		}
		// The session's interpreter forks from the warm one (its container
		// is handed out once that has loaded): the libraries are there
		// before the first job imports them. Under the container isolation
		// it is a new interpreter.
		preloaded := map[bool]string{true: "True", false: "False"}[h.sb.Isolation() == wire.Namespaces]
		want(h.in(t, sid, py("import sys\nprint('pandas' in sys.modules)\nimport pandas as pd\nx = 41\ndf = pd.DataFrame({'a': [1, 2, 3]})")),
			jobs.LiveNew, preloaded+"\n", "")
		want(h.in(t, sid, py("x + 1")), jobs.LiveKept, "", "42")
		want(h.in(t, sid, py("x += 1\nprint(x)\nx;")), jobs.LiveKept, "42\n", "")
		j := h.in(t, sid, py("df.a.sum()\ndf"))
		want(j, jobs.LiveKept, "", "   a\n0  1\n1  2\n2  3")
		if !strings.Contains(j.Value.HTML, "<table") {
			t.Errorf("a DataFrame's value has no HTML: %+v", j.Value)
		}
		// A figure as the last value comes back drawn.
		j = h.in(t, sid, py("import matplotlib.pyplot as plt\nfig = plt.figure()\nplt.plot([1, 2, 3])\nfig"))
		if png, err := base64.StdEncoding.DecodeString(j.Value.PNG); err != nil || !strings.HasPrefix(string(png), "\x89PNG") {
			t.Errorf("a figure's value: %v %.40q", err, j.Value.PNG)
		}
		// An exception: a traceback of the job's own code, no value; the
		// state stays.
		j = h.in(t, sid, py("def f():\n    return 1 / 0\nf()"))
		if j.Status != jobs.StatusFailed || *j.ExitCode != 1 || j.Value != nil || !strings.Contains(j.Stderr, "ZeroDivisionError") ||
			strings.Contains(j.Stderr, "warm.py") || j.LiveState != jobs.LiveKept {
			t.Errorf("exception: %s %v %q %s", j.Status, j.ExitCode, j.Stderr, j.LiveState)
		}
		if j = h.in(t, sid, py("import sys\nsys.exit(3)")); *j.ExitCode != 3 {
			t.Errorf("sys.exit: %s %v %q", j.Status, j.ExitCode, j.Stderr)
		}
		want(h.in(t, sid, py("x")), jobs.LiveKept, "", "42")
		// Background processes and /tmp persist, across languages.
		want(h.in(t, sid, bash("sleep 300 >/dev/null 2>&1 &\necho $! > /tmp/sleeper; echo started")), jobs.LiveKept, "started\n", "")
		want(h.in(t, sid, py("import os\nos.path.exists('/proc/%s' % open('/tmp/sleeper').read().strip())")), jobs.LiveKept, "", "True")
		want(h.in(t, sid, bash("kill -0 $(cat /tmp/sleeper) && echo alive")), jobs.LiveKept, "alive\n", "")
		// A job's stdin, env and files are its own.
		j = h.in(t, sid, jobs.Request{Language: "python", Code: "import os, sys\nprint(sys.stdin.read(), os.environ['WHO'], open('in.txt').read())",
			Stdin: "in", Env: map[string]string{"WHO": "me"}, Files: []jobs.File{{Path: "in.txt", Content: "file"}}})
		want(j, jobs.LiveKept, "in me file\n", "")
	})

	t.Run("jobs are measured; a compiled program runs in the session", func(t *testing.T) {
		t.Parallel()
		sid := h.statefulSession(t)
		h.in(t, sid, bash("echo from-bash > /tmp/note"))
		j := h.in(t, sid, py("import time\nt0 = time.process_time()\nwhile time.process_time() - t0 < 0.4: pass\nx = 7\nprint(round(t0, 3))"))
		// The session's interpreter had used CPU before the cell (its
		// setup): the cell burns 0.4 s of its own.
		t.Logf("the interpreter had used %s s before the cell; the cell measured %v ms", strings.TrimSpace(j.Stdout), deref(j.CPUTimeMS))
		if j.Status != jobs.StatusSucceeded || j.CPUTimeMS == nil || *j.CPUTimeMS < 350 || *j.CPUTimeMS > 1500 {
			t.Errorf("a cell burning 0.4 s: %s %q cpu %v (the interpreter had used %s s before)", j.Status, j.Stderr, deref(j.CPUTimeMS), j.Stdout)
		}
		if !h.sb.Runs("cpp") {
			return // the image has no compilers
		}
		j = h.in(t, sid, jobs.Request{Language: "cpp", Code: "#include <fstream>\n#include <iostream>\n" +
			"int main() { std::ifstream f(\"/tmp/note\"); std::string s; f >> s; std::cout << s << std::endl; }"})
		if j.Status != jobs.StatusSucceeded || j.Stdout != "from-bash\n" || j.Compile == nil || j.LiveState != jobs.LiveKept {
			t.Errorf("C++ in the session: %s %q %q %+v %s", j.Status, j.Stdout, j.Stderr, j.Compile, j.LiveState)
		}
		if j := h.in(t, sid, py("x")); j.Value == nil || j.Value.Text != "7" {
			t.Errorf("after the C++ job: %+v %q", j.Value, j.Stderr)
		}
		j = h.in(t, sid, jobs.Request{Language: "cpp", Code: "int main() { return nope; }"})
		if j.Status != jobs.StatusFailed || j.Error == nil || j.Error.Code != jobs.ErrCodeCompileError {
			t.Errorf("a compile error in the session: %s %+v %q compile %+v exit %v", j.Status, j.Error, j.Stderr, j.Compile, deref(j.ExitCode))
		}
		if j := h.in(t, sid, py("x")); j.Value == nil || j.Value.Text != "7" || j.LiveState != jobs.LiveKept {
			t.Errorf("after the compile error: %+v %s", j.Value, j.LiveState)
		}
	})

	t.Run("a timeout loses the live state, not the files", func(t *testing.T) {
		t.Parallel()
		sid := h.statefulSession(t)
		if j := h.in(t, sid, py("open('kept.txt', 'w').write('yes')\ny = 1")); j.Status != jobs.StatusSucceeded {
			t.Fatalf("job 1: %s %q", j.Status, j.Stderr)
		}
		to := h.in(t, sid, jobs.Request{Language: "python", Code: "import time\ntime.sleep(60)", TimeoutMS: 1500})
		if to.Status != jobs.StatusTimedOut || to.LiveState != "" {
			t.Fatalf("job 2: %s %s", to.Status, to.LiveState)
		}
		j := h.in(t, sid, py("print(open('kept.txt').read(), 'y' in globals())"))
		if j.Stdout != "yes False\n" || j.LiveState != jobs.LiveLost || !strings.Contains(j.LiveStateReason, to.ID+" timed out") {
			t.Errorf("after the timeout: %q %s %q %q", j.Stdout, j.LiveState, j.LiveStateReason, j.Stderr)
		}
		if j := h.in(t, sid, py("1")); j.LiveState != jobs.LiveKept {
			t.Errorf("the next job: %s", j.LiveState)
		}
	})

	t.Run("an interpreter that exits loses its state; the container stays", func(t *testing.T) {
		t.Parallel()
		sid := h.statefulSession(t)
		if j := h.in(t, sid, py("z = 1\nopen('f', 'w').write('1')")); j.LiveState != jobs.LiveNew {
			t.Fatalf("job 1: %s %q", j.LiveState, j.Stderr)
		}
		j := h.in(t, sid, py("import os\nprint('bye', flush=True)\nos._exit(7)"))
		if j.Status != jobs.StatusFailed || *j.ExitCode != 7 || j.Stdout != "bye\n" {
			t.Fatalf("os._exit: %s %d %q %q", j.Status, *j.ExitCode, j.Stdout, j.Stderr)
		}
		j = h.in(t, sid, py("print('z' in globals(), open('f').read())"))
		if j.Stdout != "False 1\n" || j.LiveState != jobs.LiveLost || !strings.Contains(j.LiveStateReason, "exited with status 7") {
			t.Errorf("after os._exit: %q %s %q", j.Stdout, j.LiveState, j.LiveStateReason)
		}
	})

	t.Run("a container that died loses the live state", func(t *testing.T) {
		t.Parallel()
		sid := h.statefulSession(t)
		j := h.in(t, sid, py("import socket\nw = 1\nopen('f', 'w').write('2')\nsocket.gethostname()"))
		if j.Value == nil {
			t.Fatalf("job 1: %s %q", j.Status, j.Stderr)
		}
		host := strings.Trim(j.Value.Text, "'")
		if out, err := exec.Command("docker", "kill", host).CombinedOutput(); err != nil {
			t.Fatalf("docker kill: %v %s", err, out)
		}
		j = h.in(t, sid, py("print('w' in globals(), open('f').read())"))
		if j.Stdout != "False 2\n" || j.LiveState != jobs.LiveLost || j.LiveStateReason == "" {
			t.Errorf("after the container died: %q %s %q %q", j.Stdout, j.LiveState, j.LiveStateReason, j.Stderr)
		}
	})

	t.Run("files written through the API reach the live sandbox", func(t *testing.T) {
		t.Parallel()
		sid := h.statefulSession(t)
		if j := h.in(t, sid, py("v = 5")); j.LiveState != jobs.LiveNew {
			t.Fatalf("job 1: %s %q", j.LiveState, j.Stderr)
		}
		h.writeWorkspace(t, sid, map[string]string{"api.txt": "from the API"})
		j := h.in(t, sid, py("print(v, open('api.txt').read())"))
		if j.Stdout != "5 from the API\n" || j.LiveState != jobs.LiveKept {
			t.Errorf("after a files API write: %q %s %q", j.Stdout, j.LiveState, j.Stderr)
		}
	})

	t.Run("without the warm interpreter, in bubblewrap's sandbox", func(t *testing.T) {
		t.Parallel()
		if h.sb.Isolation() != wire.Namespaces {
			t.Skip("the container isolation has its own way")
		}
		cold := newHarness(t, 1, withoutWarm)
		req, _ := jobs.SessionRequest{DiskMB: 64, Stateful: true}.Normalize()
		sess, err := cold.st.CreateSession(context.Background(), cold.tenant, req)
		if err != nil {
			t.Fatal(err)
		}
		if j := cold.in(t, sess.ID, py("import sys\nprint('pandas' in sys.modules)\nn = 2")); j.Stdout != "False\n" || j.LiveState != jobs.LiveNew {
			t.Fatalf("job 1: %s %q %s %q", j.Status, j.Stdout, j.LiveState, j.Stderr)
		}
		j := cold.in(t, sess.ID, py("n * 21"))
		if j.Value == nil || j.Value.Text != "42" || j.LiveState != jobs.LiveKept {
			t.Errorf("job 2: %s %+v %s %q", j.Status, j.Value, j.LiveState, j.Stderr)
		}
		if j := cold.in(t, sess.ID, py("import subprocess\nprint(subprocess.run(['grep', 'Seccomp_filters', '/proc/self/status'], capture_output=True, text=True).stdout.split())")); j.Stdout != "['Seccomp_filters:', '2']\n" {
			t.Errorf("job 3: %q %q", j.Stdout, j.Stderr)
		}
	})
}

// TestClosedSessionContainerServesTheTenant: a closed session's container
// goes back to its tenant, whose next session gets it without waiting for
// a container or a warm interpreter, and finds nothing of the last one: not
// its globals, files, /tmp or processes. Another tenant never gets it. A
// durable session's gVisor container is its own (the session's
// interpreter runs directly in it): the next session gets a new one. A
// stateful session that is not durable takes its tenant's container on a
// runner with gVisor too.
func TestClosedSessionContainerServesTheTenant(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker, Postgres, NATS and S3")
	}
	t.Run("docker", func(t *testing.T) { testClosedSessionContainer(t, newHarness(t, 2), false) })
	t.Run("gvisor", func(t *testing.T) {
		h := newHarness(t, 2, withGVisor(t))
		if h.r.gv == nil {
			t.Fatal("the runner did not take gVisor up")
		}
		t.Run("not durable", func(t *testing.T) { testClosedSessionContainer(t, h, false) })
		t.Run("durable", func(t *testing.T) { testClosedSessionContainer(t, h, true) })
	})
}

func testClosedSessionContainer(t *testing.T, h *harness, durable bool) {
	reuse := !durable
	if !h.r.fleet.reusable() {
		t.Skip("the container isolation serves one session per container")
	}
	ctx := context.Background()
	container := func(sid string) string {
		t.Helper()
		sess, err := h.st.GetSession(ctx, h.tenant, sid)
		if err != nil || sess.Live == "" {
			t.Fatalf("session %s: %v, live %q", sid, err, sess.Live)
		}
		return strings.Split(sess.Live, "/")[0]
	}
	closeSession := func(sid string) {
		t.Helper()
		if _, err := h.st.CloseSession(ctx, h.tenant, sid); err != nil {
			t.Fatal(err)
		}
		if err := h.nc.Publish(queue.SessionClosedSubject(sid), nil); err != nil {
			t.Fatal(err)
		}
	}

	first := h.newStatefulSession(t, durable)
	j := h.in(t, first, bash("echo kept > /workspace/f; echo kept > /tmp/t; echo kept > $HOME/h 2>/dev/null; "+
		"python3 -c 'x = 1'; (sleep 600 &) ; echo started"))
	if j.Status != jobs.StatusSucceeded {
		t.Fatalf("first session's job: %+v", j)
	}
	if j := h.in(t, first, py("secret = 'first'\nsecret")); j.Value == nil || j.Value.Text != "'first'" {
		t.Fatalf("first session's cell: %+v %q", j.Value, j.Stderr)
	}
	ctr := container(first)
	idle := func() error {
		if slices.ContainsFunc(h.idleContainers(t), func(id string) bool { return shortID(id) == ctr }) {
			return nil
		}
		return fmt.Errorf("idle: %v", h.idleContainers(t))
	}
	firstSess, err := h.st.GetSession(ctx, h.tenant, first)
	if err != nil {
		t.Fatal(err)
	}
	closeSession(first)
	if reuse {
		eventually.NoError(t, 30*time.Second, "the closed session's container idle for its tenant", idle)
		// Nothing answers the closed session's live operations any more:
		// its container may serve the tenant's next session.
		if _, err := h.nc.Request(queue.LiveSubject(first, firstSess.Live), []byte(`{"op":"list"}`), 5*time.Second); !errors.Is(err, nats.ErrNoResponders) {
			t.Errorf("a live operation of the closed session: %v, want no responders", err)
		}
	}

	second := h.newStatefulSession(t, durable)
	j = h.in(t, second, py(`import os, subprocess
left = [p for p in ("/workspace/f", "/tmp/t") if os.path.exists(p)]
procs = subprocess.run(["ps", "-eo", "args="], capture_output=True, text=True).stdout
print(left, "sleep 600" in procs, "secret" in globals())`))
	if j.Status != jobs.StatusSucceeded || j.LiveState != jobs.LiveNew || j.Stdout != "[] False False\n" {
		t.Fatalf("second session saw the first's: %s %s %q %q", j.Status, j.LiveState, j.Stdout, j.Stderr)
	}
	if got := container(second); reuse && got != ctr || !reuse && got == ctr {
		t.Errorf("the second session got container %s; the first's was %s", got, ctr)
	}
	if !reuse {
		return
	}

	// Another tenant's session never gets it.
	closeSession(second)
	eventually.NoError(t, 30*time.Second, "idle again", idle)
	other, err := h.st.EnsureTenant(ctx, "other-"+jobs.NewID("t"))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := jobs.SessionRequest{DiskMB: 64, Stateful: true}.Normalize()
	theirs, err := h.st.CreateSession(ctx, other.ID, req)
	if err != nil {
		t.Fatal(err)
	}
	sid := theirs.ID
	id := h.submitFor(t, other.ID, jobs.Request{Language: "python", Code: "1", SessionID: &sid})
	if j := h.waitFor(t, id, func(j jobs.Job) bool { return j.Status.Terminal() }); j.Status != jobs.StatusSucceeded {
		t.Fatalf("other tenant's session: %+v", j)
	}
	sess, err := h.st.GetSession(ctx, other.ID, sid)
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(sess.Live, ctr+"/") {
		t.Errorf("another tenant's session got the tenant's container %s", ctr)
	}
}

// TestStatefulSessionPeakMemory: a stateful session's job records the peak
// memory its sandbox's processes reached while it ran, measured from
// outside, job by job (not the session's whole life), whether a cell
// holds it or a program the job runs; under gVisor, which cannot reset a
// process's peak, none (null), never a false 0.
func TestStatefulSessionPeakMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker, Postgres, NATS and S3")
	}
	h := newHarness(t, 1)
	sid := h.statefulSession(t)
	peak := func(req jobs.Request) *int64 {
		t.Helper()
		j := h.in(t, sid, req)
		if j.Status != jobs.StatusSucceeded || j.Stdout != "done\n" {
			t.Fatalf("%s %q %q", j.Status, j.Stdout, j.Stderr)
		}
		t.Logf("%q: peak_memory_kb %v", req.Code, deref(j.PeakMemoryKB))
		return j.PeakMemoryKB
	}
	held := peak(py("b = bytearray(150 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nprint('done')"))
	freed := peak(py("del b\nimport gc; gc.collect()\nprint('done')"))
	small := peak(py("x = 1\nprint('done')"))
	child := peak(bash("python3 -c 'b = bytearray(120 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nimport time; time.sleep(0.5)'\necho done"))
	if testRuntime() == "runsc" {
		for _, p := range []*int64{held, freed, small, child} {
			if p != nil {
				t.Errorf("peak %d KiB under gVisor: want none", *p)
			}
		}
		return
	}
	switch {
	case held == nil || *held < 150<<10:
		t.Errorf("a cell holding 150 MiB: peak %v KiB", deref(held))
	case freed == nil || *freed < 150<<10:
		t.Errorf("the cell that freed it (it held it as it began): peak %v KiB", deref(freed))
	case small == nil || *small <= 0 || *small >= 150<<10:
		t.Errorf("a cell after it: peak %v KiB, want the interpreter's own, below 150 MiB", deref(small))
	case child == nil || *child < 120<<10:
		t.Errorf("a program of 120 MiB the job ran: peak %v KiB", deref(child))
	}
}
