package runner

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gantryhq/gantry/agent/wire"
	"github.com/gantryhq/gantry/blob"
	"github.com/gantryhq/gantry/blob/blobtest"
	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
	"github.com/gantryhq/gantry/queue/queuetest"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/store/storetest"
)

// harness is a runner wired to real Postgres, NATS, S3 and Docker.
type harness struct {
	st     *store.Store
	nc     *nats.Conn
	js     jetstream.JetStream
	pub    *queue.Publisher
	blobs  *blob.Store
	sb     *Sandbox
	r      *Runner
	tenant string
	owners sync.Map // job id -> tenant, for jobs of other tenants
	// stop stops the runner (draining as it does) and waits; idempotent.
	stop func()
	reg  *prometheus.Registry
}

func testImage() string {
	if v := os.Getenv("GANTRY_IMAGE"); v != "" {
		return v
	}
	return "gantry-sandbox:latest"
}

// testRuntime is the OCI runtime the tests run sandboxes under:
// GANTRY_TEST_RUNTIME=runsc runs them under gVisor.
func testRuntime() string { return os.Getenv("GANTRY_TEST_RUNTIME") }

func testSandbox(t *testing.T) *Sandbox { return testSandboxWith(t, "") }

// testSandboxWith is testSandbox with the given isolation ("": the
// runtime's default).
func testSandboxWith(t *testing.T, iso wire.Isolation) *Sandbox {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	sb, err := NewSandbox("", SandboxConfig{Image: testImage(), RunnerID: "test-" + hex.EncodeToString(b), Runtime: testRuntime(), Isolation: iso})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := sb.CheckImage(ctx); err != nil {
		storetest.Unavailable(t, "%v", err)
	}
	return sb
}

func newHarness(t *testing.T, slots int, opts ...func(*harness, *Config)) *harness {
	t.Helper()
	return newHarnessWith(t, testSandbox(t), slots, opts...)
}

// newHarnessWith is newHarness on the given sandbox.
func newHarnessWith(t *testing.T, sb *Sandbox, slots int, opts ...func(*harness, *Config)) *harness {
	t.Helper()
	h := &harness{st: storetest.New(t), blobs: blobtest.New(t), sb: sb}
	h.nc = queuetest.Connect(t, queuetest.Server(t))
	h.js, _ = jetstream.New(h.nc)
	h.tenant, _ = storetest.Tenant(t, h.st, "t1")
	cfg := Config{ID: sb.cfg.RunnerID, Slots: slots, Queue: queue.Config{AckWait: 5 * time.Second},
		Artifacts: ArtifactLimits{MaxFiles: 5, MaxFileBytes: 1 << 20, MaxTotal: 2 << 20}, DrainTimeout: time.Second}
	for _, o := range opts {
		o(h, &cfg)
	}
	logTo := io.Discard
	if os.Getenv("GANTRY_TEST_LOG") != "" {
		logTo = os.Stderr
	}
	h.reg = prometheus.NewRegistry()
	r, err := New(cfg, slog.New(slog.NewTextHandler(logTo, nil)), h.nc, h.st, h.blobs, sb, h.reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := queue.Ensure(context.Background(), h.js, cfg.Queue); err != nil {
		t.Fatal(err)
	}
	h.pub = queue.NewPublisher(h.nc, h.js, cfg.Queue)
	h.r = r
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.stop = r.Stop
	t.Cleanup(h.stop)
	return h
}

func (h *harness) submit(t *testing.T, req jobs.Request) string {
	t.Helper()
	return h.submitFor(t, h.tenant, req)
}

// submitFor queues a job for tenant.
func (h *harness) submitFor(t *testing.T, tenant string, req jobs.Request) string {
	t.Helper()
	spec, err := jobs.DefaultPolicy().Normalize(req)
	if err != nil {
		t.Fatal(err)
	}
	sid := ""
	if req.SessionID != nil {
		sid = *req.SessionID
	}
	j, _, err := h.st.EnqueueJob(context.Background(), store.NewJob{TenantID: tenant, Spec: spec, SessionID: req.SessionID, RequestHash: jobs.RequestHash(req)},
		func(ctx context.Context, id string) (uint64, error) {
			// As the ingress does: the tenant's cap on running jobs goes
			// to its queue.
			l, err := h.st.TenantLimits(ctx, tenant)
			if err != nil {
				return 0, err
			}
			return h.pub.Publish(ctx, queue.RunMessage{JobID: id, TenantID: tenant, SessionID: sid, MemoryMB: spec.Limits.MemoryMB}, id, l.Or(h.r.cfg.TenantLimits).MaxRunning)
		})
	if err != nil {
		t.Fatal(err)
	}
	h.owners.Store(j.ID, tenant)
	return j.ID
}

// waitFor polls the job until cond holds or a minute passes.
func (h *harness) waitFor(t *testing.T, id string, cond func(jobs.Job) bool) jobs.Job {
	t.Helper()
	tenant := h.tenant
	if v, ok := h.owners.Load(id); ok {
		tenant = v.(string)
	}
	var j jobs.Job
	eventually.NoError(t, time.Minute, "job "+id, func() error {
		var err error
		if j, err = h.st.GetJob(context.Background(), tenant, id); err != nil {
			return err
		}
		if !cond(j) {
			return fmt.Errorf("stuck in %s", j.Status)
		}
		return nil
	})
	return j
}

func (h *harness) run(t *testing.T, req jobs.Request) jobs.Job {
	t.Helper()
	return h.waitFor(t, h.submit(t, req), func(j jobs.Job) bool { return j.Status.Terminal() })
}

// gone waits up to 10s for the container whose id starts with prefix (as
// a job sees it in its hostname) to be removed, and reports whether it was.
func (h *harness) gone(t *testing.T, prefix string) bool {
	t.Helper()
	if prefix == "" {
		t.Fatal("no container id")
	}
	return eventually.Within(10*time.Second, func() bool {
		res, err := h.sb.docker.ContainerList(context.Background(), client.ContainerListOptions{All: true,
			Filters: make(client.Filters).Add("label", LabelRunner+"="+h.sb.cfg.RunnerID)})
		if err != nil {
			return false
		}
		for _, c := range res.Items {
			if strings.HasPrefix(c.ID, prefix) {
				return false
			}
		}
		return true
	})
}

func TestRunner(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker, Postgres, NATS and S3")
	}
	h := newHarness(t, 4)

	t.Run("python with files, stdin, env and artifacts", func(t *testing.T) {
		t.Parallel()
		j := h.run(t, jobs.Request{Language: "python", Stdin: "from stdin", Env: map[string]string{"GREETING": "hej"},
			Files: []jobs.File{{Path: "data/in.csv", Content: "a,b\n1,2\n"}},
			Code: `import os, sys
print(os.environ["GREETING"], sys.stdin.read())
os.makedirs("out/sub", exist_ok=True)
open("out/result.csv", "w").write(open("data/in.csv").read().upper())
open("out/sub/bin.dat", "wb").write(bytes(range(256)))
open("not-collected.txt", "w").write("x")
print("to stderr", file=sys.stderr)`})
		if j.Status != jobs.StatusSucceeded || *j.ExitCode != 0 {
			t.Fatalf("job = %+v", j)
		}
		if j.Stdout != "hej from stdin\n" || j.Stderr != "to stderr\n" {
			t.Errorf("stdout %q stderr %q", j.Stdout, j.Stderr)
		}
		if len(j.Artifacts) != 2 || j.Artifacts[0].Path != "out/result.csv" || j.Artifacts[1].Path != "out/sub/bin.dat" {
			t.Fatalf("artifacts = %+v", j.Artifacts)
		}
		want := map[string]string{"out/result.csv": "A,B\n1,2\n", "out/sub/bin.dat": string(func() []byte {
			b := make([]byte, 256)
			for i := range b {
				b[i] = byte(i)
			}
			return b
		}())}
		for _, a := range j.Artifacts {
			rc, err := h.blobs.Get(context.Background(), blob.ArtifactKey(h.tenant, j.ID, a.Path))
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(got)
			if string(got) != want[a.Path] || a.SHA256 != hex.EncodeToString(sum[:]) || a.Size != int64(len(got)) {
				t.Errorf("artifact %s: got %d bytes, manifest %+v", a.Path, len(got), a)
			}
		}
		if j.Artifacts[0].ContentType != "text/csv; charset=utf-8" {
			t.Errorf("content type %q", j.Artifacts[0].ContentType)
		}
	})

	t.Run("bash and node", func(t *testing.T) {
		t.Parallel()
		if j := h.run(t, jobs.Request{Language: "bash", Code: "echo $((6*7))"}); j.Stdout != "42\n" {
			t.Errorf("bash: %+v", j)
		}
		if j := h.run(t, jobs.Request{Language: "node", Code: "console.log(6*7)"}); j.Stdout != "42\n" {
			t.Errorf("node: %+v", j)
		}
		if j := h.run(t, jobs.Request{Language: "bash", Command: []string{"sh", "-c", "echo cmd"}}); j.Stdout != "cmd\n" {
			t.Errorf("command: %+v", j)
		}
	})

	t.Run("non-zero exit", func(t *testing.T) {
		t.Parallel()
		j := h.run(t, jobs.Request{Language: "python", Code: "import sys; sys.exit(3)"})
		if j.Status != jobs.StatusFailed || j.ExitCode == nil || *j.ExitCode != 3 || j.Error != nil {
			t.Errorf("job = %+v", j)
		}
	})

	t.Run("timeout kills the program, and its container serves again", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		j := h.run(t, jobs.Request{Language: "python", Code: "import socket, subprocess, time\nsubprocess.Popen(['sleep', '600'])\n" +
			"open('left', 'w').write('x')\nprint(socket.gethostname(), flush=True)\ntime.sleep(60)", TimeoutMS: 4000, Limits: &jobs.Limits{MemoryMB: 200}})
		if j.Status != jobs.StatusTimedOut || j.Error == nil || j.Error.Code != jobs.ErrCodeTimedOut || j.Stdout == "" {
			t.Fatalf("job = %+v", j)
		}
		if time.Since(start) > 20*time.Second {
			t.Errorf("timeout took %s", time.Since(start))
		}
		if !h.r.fleet.reusable() {
			return // a container serves one job (gVisor): it is retired
		}
		// The agent killed the sandbox (its pid namespace, the child it
		// started with it): the container is the tenant's next one,
		// with nothing of the job left in it.
		host := strings.TrimSpace(j.Stdout)
		eventually.True(t, time.Minute, "the container idle for its tenant", func() bool {
			return slices.ContainsFunc(h.idleContainers(t), func(id string) bool { return strings.HasPrefix(id, host) })
		})
		for _, p := range h.processes(t, host) {
			if strings.Contains(p, "sleep 600") {
				t.Errorf("left running in the container: %s", p)
			}
		}
		next := h.run(t, jobs.Request{Language: "bash", Code: "hostname; ls /workspace", Limits: &jobs.Limits{MemoryMB: 200}})
		lines := strings.Fields(next.Stdout)
		if next.Status != jobs.StatusSucceeded || len(lines) < 1 || lines[0] != host || slices.Contains(lines, "left") {
			t.Errorf("the next job: %s %q", next.Status, next.Stdout)
		}
	})

	t.Run("out of memory", func(t *testing.T) {
		t.Parallel()
		j := h.run(t, jobs.Request{Language: "python", Code: "b = bytearray(400 << 20)", Limits: &jobs.Limits{MemoryMB: 128}})
		if j.Status != jobs.StatusFailed || j.Error == nil || j.Error.Code != jobs.ErrCodeOOMKilled {
			t.Errorf("job = %+v", j)
		}
	})

	t.Run("no network", func(t *testing.T) {
		t.Parallel()
		j := h.run(t, jobs.Request{Language: "python", Code: `import socket
s = socket.socket(); s.settimeout(3)
try:
    s.connect(("1.1.1.1", 80)); print("connected")
except OSError as e:
    print("blocked", e.errno)
print(sorted(n for _, n in socket.if_nameindex()))`})
		if !strings.HasPrefix(j.Stdout, "blocked") || !strings.Contains(j.Stdout, "['lo']") {
			t.Errorf("network reachable from the sandbox: %q %q", j.Stdout, j.Stderr)
		}
	})

	t.Run("read-only root, unprivileged user, no capabilities", func(t *testing.T) {
		t.Parallel()
		j := h.run(t, jobs.Request{Language: "bash", Code: `touch /etc/x 2>/dev/null && echo root-writable
touch /usr/x 2>/dev/null && echo usr-writable
touch /workspace/x /tmp/x && echo scratch-ok
id -u
grep -E '^CapEff' /proc/self/status | tr -s '\t' ' '
python3 -c 'import ctypes; print("NoNewPrivs:", ctypes.CDLL(None).prctl(39, 0, 0, 0, 0))'
test -S /var/run/docker.sock && echo docker-socket`})
		want := "scratch-ok\n1000\nCapEff: 0000000000000000\nNoNewPrivs: 1\n"
		if j.Stdout != want {
			t.Errorf("stdout = %q, want %q (stderr %q)", j.Stdout, want, j.Stderr)
		}
	})

	t.Run("output is capped", func(t *testing.T) {
		t.Parallel()
		j := h.run(t, jobs.Request{Language: "python", Code: "print('x' * 100000)", Limits: &jobs.Limits{OutputBytes: 1024}})
		if j.Status != jobs.StatusSucceeded || len(j.Stdout) != 1024 || !j.StdoutTruncated || j.StderrTruncated {
			t.Errorf("len(stdout) = %d truncated = %v", len(j.Stdout), j.StdoutTruncated)
		}
	})

	t.Run("an artifact over the cap is omitted, the rest kept", func(t *testing.T) {
		t.Parallel()
		j := h.run(t, jobs.Request{Language: "bash", Code: "head -c 2000000 /dev/zero > out/big.bin; echo ok > out/small.txt"})
		if j.Status != jobs.StatusSucceeded || j.Error != nil || len(j.Artifacts) != 1 || j.Artifacts[0].Path != "out/small.txt" ||
			len(j.ArtifactsOmitted) != 1 || j.ArtifactsOmitted[0].Path != "out/big.bin" || j.ArtifactsOmitted[0].Size != 2000000 ||
			!strings.Contains(j.ArtifactsOmitted[0].Reason, "per file") {
			t.Errorf("job = %+v", j)
		}
	})

	t.Run("limits Docker refuses end the job once", func(t *testing.T) {
		t.Parallel()
		if runtime.NumCPU() >= 8 {
			t.Skip("the host has the 8 CPUs the policy allows")
		}
		j := h.run(t, jobs.Request{Language: "bash", Code: "echo never", Limits: &jobs.Limits{CPUs: 8}})
		if j.Status != jobs.StatusError || j.Attempt != 1 || j.Error == nil || !strings.Contains(j.Error.Message, "CPU") {
			t.Errorf("job = %s attempt %d %+v", j.Status, j.Attempt, j.Error)
		}
	})

	t.Run("symlinks out of the workspace are not collected", func(t *testing.T) {
		t.Parallel()
		// ... and every entry under out/ is accounted for: collected, or
		// omitted with why (a symlink, a fifo, a name not in UTF-8).
		j := h.run(t, jobs.Request{Language: "bash", Code: "ln -s /etc/passwd out/passwd; echo ok > out/real.txt; mkfifo out/pipe; echo x > $'out/caf\\xe9.txt'"})
		if j.Status != jobs.StatusSucceeded || len(j.Artifacts) != 1 || j.Artifacts[0].Path != "out/real.txt" {
			t.Errorf("artifacts = %+v (%s)", j.Artifacts, j.Stderr)
		}
		reasons := map[string]string{}
		for _, o := range j.ArtifactsOmitted {
			reasons[o.Path] = o.Reason
		}
		if !strings.Contains(reasons["out/passwd"], "symbolic link") || !strings.Contains(reasons["out/pipe"], "not a regular file") ||
			!strings.Contains(reasons["out/caf\uFFFD.txt"], "not valid UTF-8") || len(reasons) != 3 {
			t.Errorf("omitted = %+v", j.ArtifactsOmitted)
		}
	})

	t.Run("cancel a running job", func(t *testing.T) {
		t.Parallel()
		id := h.submit(t, jobs.Request{Language: "python", Code: "import socket, time\nprint(socket.gethostname(), flush=True)\ntime.sleep(60)"})
		h.waitFor(t, id, func(j jobs.Job) bool { return j.Status == jobs.StatusRunning })
		host := h.liveOutput(t, id)
		if out, err := h.st.CancelJob(context.Background(), h.tenant, id, time.Minute); err != nil || out != store.CancelRequested {
			t.Fatalf("cancel: %v %v", out, err)
		}
		start := time.Now()
		if err := h.nc.Publish(queue.CancelSubject(id), nil); err != nil {
			t.Fatal(err)
		}
		j := h.waitFor(t, id, func(j jobs.Job) bool { return j.Status.Terminal() })
		if j.Status != jobs.StatusCancelled || j.Error == nil || j.Error.Code != jobs.ErrCodeCancelled {
			t.Errorf("job = %+v", j)
		}
		if time.Since(start) > 10*time.Second {
			t.Errorf("cancel took %s", time.Since(start))
		}
		if !h.gone(t, host) {
			t.Error("the container of a cancelled job was not retired")
		}
	})
}

func TestRemoveLeftovers(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker")
	}
	sb := testSandbox(t)
	ctx := context.Background()
	c, err := sb.Create(ctx, ContainerSpec{Limits: jobs.DefaultPolicy().DefaultLimits})
	if err != nil {
		t.Fatal(err)
	}
	other := testSandbox(t) // another runner's container must survive
	c2, err := other.Create(ctx, ContainerSpec{Limits: jobs.DefaultPolicy().DefaultLimits})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c2.Remove(ctx) }()
	n, err := sb.RemoveLeftovers(ctx)
	if err != nil || n != 1 {
		t.Fatalf("removed %d, %v", n, err)
	}
	if _, err := sb.docker.ContainerInspect(ctx, c.ID(), client.ContainerInspectOptions{}); err == nil {
		t.Error("leftover container still exists")
	}
	if _, err := other.docker.ContainerInspect(ctx, c2.ID(), client.ContainerInspectOptions{}); err != nil {
		t.Errorf("another runner's container was removed: %v", err)
	}
}

func TestMissingImageRefusesToStart(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker")
	}
	testSandbox(t) // skips without Docker
	sb, err := NewSandbox("", SandboxConfig{Image: "gantry-sandbox:does-not-exist", RunnerID: "test-missing"})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	err = sb.CheckImage(context.Background())
	if err == nil || !strings.Contains(err.Error(), "make image") {
		t.Errorf("err = %v, want instructions to build the image", err)
	}
}

// withFleet sizes the harness's runner's containers.
func withFleet(f FleetConfig) func(*harness, *Config) {
	return func(_ *harness, c *Config) { c.Fleet = f }
}

// awaitingWarm has every container handed out only once its warm
// interpreter has loaded (not only the pool's), so that each Python job
// forks from it.
func awaitingWarm(h *harness, _ *Config) { h.sb.awaitWarm = true }

// withoutWarm turns the containers' warm interpreter off: Python jobs run
// in spare sandboxes' own interpreters.
func withoutWarm(h *harness, _ *Config) {
	cfg := h.sb.cfg
	cfg.Warm, cfg.WarmMB = []string{}, 0
	h.sb.cfg = cfg.WithDefaults()
}

// liveOutput waits for the running job's first line of output (asked of
// the runner, as the ingress's log stream does) and returns it.
func (h *harness) liveOutput(t *testing.T, jobID string) string {
	t.Helper()
	var line string
	eventually.True(t, 30*time.Second, "job "+jobID+" to print a line", func() bool {
		ex := h.r.lookup(jobID)
		if ex == nil {
			return false
		}
		h.r.mu.Lock()
		out := ex.stdout
		h.r.mu.Unlock()
		if out == nil {
			return false
		}
		b, _ := out.snapshot()
		line, _, _ = strings.Cut(string(b), "\n")
		return strings.Contains(string(b), "\n")
	})
	return line
}

func TestTypeScript(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker, Postgres, NATS and S3")
	}
	h := newHarness(t, 1)
	j := h.run(t, jobs.Request{Language: "typescript", Stdin: "typed", Code: `
import * as fs from "fs";
interface Point { x: number; y: number }
const norm = (p: Point): number => Math.hypot(p.x, p.y);
const input: string = fs.readFileSync(0, "utf8");
console.log(norm({ x: 3, y: 4 }), input);
function fail(): never { throw new Error("from line 7"); }
if (process.env.FAIL) fail();
`})
	if j.Status != jobs.StatusSucceeded || j.Stdout != "5 typed\n" {
		t.Fatalf("typescript: %s %q %q", j.Status, j.Stdout, j.Stderr)
	}
	// A stack trace names the TypeScript source's lines.
	j = h.run(t, jobs.Request{Language: "typescript", Env: map[string]string{"FAIL": "1"}, Code: "const a: number = 1;\nfunction fail(): never { throw new Error('boom'); }\nfail();\n"})
	if j.Status != jobs.StatusFailed || !strings.Contains(j.Stderr, "main.ts:2") {
		t.Errorf("failing typescript: %s %q", j.Status, j.Stderr)
	}
	// A syntax error is the program's, reported by esbuild.
	j = h.run(t, jobs.Request{Language: "typescript", Code: "const x: = 1;"})
	if j.Status != jobs.StatusFailed || !strings.Contains(j.Stderr, "main.ts") {
		t.Errorf("syntax error: %s %q", j.Status, j.Stderr)
	}
}

// TestLibraries imports what a data agent reaches for first: each comes
// from a Debian package in the image.
func TestLibraries(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker, Postgres, NATS and S3")
	}
	h := newHarness(t, 1)
	j := h.run(t, jobs.Request{Language: "python", TimeoutMS: 120_000, Code: `
import numpy, pandas, scipy, matplotlib, sympy, seaborn, plotly, sklearn, statsmodels, openpyxl, xlrd, networkx, bs4, lxml, tabulate
from sklearn.linear_model import LinearRegression
import statsmodels.api as sm, plotly.express as px
print(round(LinearRegression().fit([[0], [1], [2]], [1, 3, 5]).coef_[0], 6), networkx.shortest_path_length(networkx.path_graph(4), 0, 3))
`})
	if j.Status != jobs.StatusSucceeded || j.Stdout != "2.0 3\n" {
		t.Fatalf("libraries: %s %q %q", j.Status, j.Stdout, j.Stderr)
	}
}

// metric is the value of a counter, or the count of a histogram, with the
// labels given (every label of the series must match), summed.
func (h *harness) metric(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	return metricIn(t, h.reg, name, labels)
}

// metricIn sums the series of name in reg that have labels.
func metricIn(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue series
				}
			}
			switch {
			case m.Counter != nil:
				sum += m.GetCounter().GetValue()
			case m.Histogram != nil:
				sum += float64(m.GetHistogram().GetSampleCount())
			case m.Gauge != nil:
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum
}
