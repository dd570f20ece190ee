// Package test holds gantry's end-to-end tests: they build the gantry
// binary, start it as a user would (`gantry dev`, `gantry runner`), and talk
// to it only over HTTP, like a client.
package test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store/storetest"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// gantryBin is GANTRY_BIN (set by `make test`) or a fresh build.
func gantryBin(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end")
	}
	buildOnce.Do(func() {
		if binPath = os.Getenv("GANTRY_BIN"); binPath != "" {
			return
		}
		dir, err := os.MkdirTemp("", "gantry-e2e")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "gantry")
		_, file, _, _ := runtime.Caller(0)
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/gantry")
		cmd.Dir = filepath.Join(filepath.Dir(file), "..")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func versityGW(t *testing.T) string {
	if v := os.Getenv("GANTRY_VERSITYGW_BIN"); v != "" {
		return v
	}
	_, file, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(file), "..", "bin", "versitygw")
	if _, err := os.Stat(p); err != nil {
		storetest.Unavailable(t, "versitygw not built (make versitygw)")
	}
	return p
}

// proc is a gantry process started by a test.
type proc struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
}

func (p *proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

func start(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{done: make(chan struct{})}
	p.cmd = exec.Command(gantryBin(t), args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p, p
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	// A runner killed mid-test leaves its containers stopped: remove them
	// once the process is gone (cleanups run last-registered first).
	for _, kv := range env {
		if id, ok := strings.CutPrefix(kv, "GANTRY_RUNNER_ID="); ok {
			t.Cleanup(func() { removeContainers(t, id) })
		}
	}
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("output of gantry %s:\n%s", strings.Join(args, " "), p.output())
		}
	})
	return p
}

// uniqueSuffix is 12 random base32 characters, for runner ids: tests run
// at once share a Docker host, and a runner removes the containers of its
// id (a millisecond timestamp would collide).
func uniqueSuffix() string {
	id := jobs.NewID("r")
	return id[len(id)-12:]
}

// removeContainers removes every container of the runner id.
func removeContainers(t *testing.T, runnerID string) {
	out, err := exec.Command("docker", "ps", "-aq", "--filter", "label=dev.gantry.runner="+runnerID).Output()
	if err != nil {
		t.Logf("list containers of runner %s: %v", runnerID, err)
		return
	}
	if ids := strings.Fields(string(out)); len(ids) > 0 {
		if out, err := exec.Command("docker", append([]string{"rm", "-f"}, ids...)...).CombinedOutput(); err != nil {
			t.Logf("remove containers of runner %s: %v %s", runnerID, err, out)
		}
	}
}

// stop asks the process to shut down and waits for it.
func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// kill kills the process at once, as a crash would.
func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// waitOutput waits until the process printed something matching re.
func (p *proc) waitOutput(t *testing.T, re *regexp.Regexp, within time.Duration) []string {
	t.Helper()
	var m []string
	exited := false
	eventually.Within(within, func() bool {
		if m = re.FindStringSubmatch(p.output()); m != nil {
			return true
		}
		select {
		case <-p.done:
			exited = true
		default:
		}
		return exited
	})
	switch {
	case m != nil:
		return m
	case exited:
		t.Fatalf("gantry exited:\n%s", p.output())
	}
	t.Fatalf("no %q in output within %s:\n%s", re, within, p.output())
	return nil
}

// dev is a running `gantry dev`.
type dev struct {
	*proc
	url, key, natsURL, s3URL string
	natsUserURL              string   // natsURL with dev's NATS user
	runnerID                 string   // the id of the dev process's runner
	env                      []string // what a `gantry runner` needs to join it
}

const devKey = "gk_e2e_test_key_0123456789"

func startDev(t *testing.T, extra ...string) *dev {
	t.Helper()
	var dbURL string
	for _, e := range extra {
		if v, ok := strings.CutPrefix(e, "GANTRY_DATABASE_URL="); ok {
			dbURL = v // the test's own Postgres
		}
	}
	if dbURL == "" {
		dbURL = storetest.DatabaseURL(t)
	}
	s3Key, s3Secret := "e2eaccess", "e2esecret0123456789"
	runnerID := "e2e-" + uniqueSuffix()
	dataDir := t.TempDir()
	env := append([]string{
		"GANTRY_ADDR=127.0.0.1:0",
		"GANTRY_DEV_NATS_ADDR=127.0.0.1:0",
		"GANTRY_DEV_S3_ADDR=127.0.0.1:0",
		"GANTRY_DATA_DIR=" + dataDir,
		"GANTRY_DATABASE_URL=" + dbURL,
		"GANTRY_DEV_API_KEY=" + devKey,
		"GANTRY_S3_ACCESS_KEY=" + s3Key,
		"GANTRY_S3_SECRET_KEY=" + s3Secret,
		"GANTRY_VERSITYGW_BIN=" + versityGW(t),
		"GANTRY_RUNNER_ID=" + runnerID,
		"GANTRY_DRAIN_TIMEOUT=2s",
	}, extra...)
	p := start(t, env, "dev")
	m := p.waitOutput(t, regexp.MustCompile(`API\s+(http://\S+)[\s\S]*NATS\s+(\S+)[^\n]*\n\s+S3\s+(\S+)`), 60*time.Second)
	d := &dev{proc: p, url: m[1], key: devKey, natsURL: m[2], s3URL: m[3], runnerID: runnerID}
	for _, e := range extra {
		if v, ok := strings.CutPrefix(e, "GANTRY_DATA_DIR="); ok {
			dataDir = v // the test's own, which wins over ours
		}
	}
	// NATS admits only dev's user: processes joining it send it in the URL,
	// as an operator would.
	var natsUser struct{ User, Password string }
	if b, err := os.ReadFile(filepath.Join(dataDir, "nats-credentials.json")); err != nil || json.Unmarshal(b, &natsUser) != nil || natsUser.Password == "" {
		t.Fatalf("gantry dev's NATS credentials: %v %s", err, b)
	}
	d.natsUserURL = strings.Replace(d.natsURL, "nats://", "nats://"+natsUser.User+":"+natsUser.Password+"@", 1)
	d.env = []string{
		"GANTRY_DATABASE_URL=" + dbURL, "GANTRY_NATS_URL=" + d.natsUserURL,
		"GANTRY_S3_ENDPOINT=" + d.s3URL, "GANTRY_S3_ACCESS_KEY=" + s3Key, "GANTRY_S3_SECRET_KEY=" + s3Secret,
		"GANTRY_RUNNER_ADDR=127.0.0.1:0", // several runners on one machine
	}
	if !slices.ContainsFunc(extra, func(e string) bool { return strings.HasPrefix(e, "GANTRY_SECRET_KEY=") }) {
		// Runners joining this dev open the env it sealed with the key
		// it made, as an operator would give them.
		key, err := os.ReadFile(filepath.Join(dataDir, "secret-key"))
		if err != nil {
			t.Fatalf("gantry dev's secret key: %v", err)
		}
		d.env = append(d.env, "GANTRY_SECRET_KEY="+strings.TrimSpace(string(key)))
	}
	d.env = append(d.env, extra...)
	return d
}

// cli runs a gantry command as the operator would, against this dev's
// engines, and returns its output.
func (d *dev) cli(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(gantryBin(t), args...)
	cmd.Env = append(cmd.Environ(), d.env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("gantry %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// cliErr runs a gantry command and returns its output and stderr together.
func (d *dev) cliErr(args ...string) (string, error) {
	cmd := exec.Command(binPath, args...)
	cmd.Env = append(cmd.Environ(), d.env...)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

var httpClient = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func (d *dev) call(t *testing.T, method, path, body string) resp {
	t.Helper()
	r, err := d.try(method, path, body)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// try is call for goroutines the test does not own: it fails nothing.
func (d *dev) try(method, path, body string) (resp, error) {
	req, err := http.NewRequest(method, d.url+path, strings.NewReader(body))
	if err != nil {
		return resp{}, err
	}
	req.Header.Set("Authorization", "Bearer "+d.key)
	req.Header.Set("Content-Type", "application/json")
	r, err := httpClient.Do(req)
	if err != nil {
		return resp{}, err
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	return resp{r.StatusCode, r.Header, b}, err
}

func (d *dev) job(t *testing.T, method, path, body string) jobs.Job {
	t.Helper()
	r := d.call(t, method, path, body)
	var j jobs.Job
	if err := json.Unmarshal(r.body, &j); err != nil || j.ID == "" {
		t.Fatalf("%s %s: %d %s", method, path, r.status, r.body)
	}
	return j
}

func (d *dev) submit(t *testing.T, req map[string]any) jobs.Job {
	t.Helper()
	b, _ := json.Marshal(req)
	r := d.call(t, "POST", "/v1/jobs", string(b))
	if r.status != 202 {
		t.Fatalf("submit: %d %s", r.status, r.body)
	}
	var j jobs.Job
	_ = json.Unmarshal(r.body, &j)
	return j
}

// await polls the job (with long polls) until cond holds.
func (d *dev) await(t *testing.T, id string, within time.Duration, cond func(jobs.Job) bool) jobs.Job {
	t.Helper()
	var j jobs.Job
	if !eventually.Within(within, func() bool {
		j = d.job(t, "GET", "/v1/jobs/"+id+"?wait=1s", "") // a long poll
		return cond(j)
	}) {
		t.Fatalf("job %s: still %s after %s", id, j.Status, within)
	}
	return j
}

func terminal(j jobs.Job) bool { return j.Status.Terminal() }

// download fetches an artifact through its presigned URL with a plain
// client that has no credentials.
func (d *dev) download(t *testing.T, a jobs.Artifact) []byte {
	t.Helper()
	r := d.call(t, "GET", a.URL, "")
	loc := r.header.Get("Location")
	if r.status != 302 || loc == "" {
		t.Fatalf("artifact %s: %d %s", a.Path, r.status, r.body)
	}
	got, err := http.Get(loc)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Body.Close()
	b, _ := io.ReadAll(got.Body)
	if got.StatusCode != 200 {
		t.Fatalf("presigned GET %s: %d %s", a.Path, got.StatusCode, b)
	}
	sum := sha256.Sum256(b)
	if hex.EncodeToString(sum[:]) != a.SHA256 || int64(len(b)) != a.Size {
		t.Fatalf("artifact %s: %d bytes, sha256 mismatch with the manifest", a.Path, len(b))
	}
	return b
}

// dockerContainers lists the containers carrying all the labels (a
// "status=..." filter is passed as it is).
func dockerContainers(t *testing.T, labels ...string) []string {
	args := []string{"ps", "-aq"}
	for _, l := range labels {
		if !strings.HasPrefix(l, "status=") {
			l = "label=" + l
		}
		args = append(args, "--filter", l)
	}
	out, err := exec.Command("docker", args...).Output()
	if err != nil {
		t.Fatalf("docker ps: %v", err)
	}
	return strings.Fields(string(out))
}

// containersWhere lists the runner's running containers in which argv,
// run with docker exec, exits 0.
func containersWhere(t *testing.T, runnerID string, argv ...string) []string {
	t.Helper()
	var out []string
	for _, id := range dockerContainers(t, "dev.gantry.runner="+runnerID, "status=running") {
		if exec.Command("docker", append([]string{"exec", id}, argv...)...).Run() == nil {
			out = append(out, id)
		}
	}
	return out
}

// containersRunning lists the runner's running containers that run a
// process whose command line holds cmd (docker top: the container's
// processes, its sandboxes' included).
func containersRunning(t *testing.T, runnerID, cmd string) []string {
	t.Helper()
	var out []string
	for _, id := range dockerContainers(t, "dev.gantry.runner="+runnerID, "status=running") {
		// A container removed since the list has no processes.
		if top, err := exec.Command("docker", "top", id).Output(); err == nil && strings.Contains(string(top), cmd) {
			out = append(out, id)
		}
	}
	return out
}

func TestEndToEnd(t *testing.T) {
	d := startDev(t, "GANTRY_RUNNER_SLOTS=2")

	t.Run("python artifacts through presigned URLs, and history", func(t *testing.T) {
		j := d.submit(t, map[string]any{"language": "python", "metadata": map[string]string{"case": "e2e"}, "code": `
import os, csv
import matplotlib.pyplot as plt
os.makedirs("out", exist_ok=True)
with open("out/result.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["x", "square"])
    for x in range(5):
        w.writerow([x, x * x])
plt.plot(range(5), [x * x for x in range(5)])
plt.savefig("out/plot.png")
print("wrote 2 files")
`})
		j = d.await(t, j.ID, 2*time.Minute, terminal)
		if j.Status != jobs.StatusSucceeded || j.Stdout != "wrote 2 files\n" || len(j.Artifacts) != 2 {
			t.Fatalf("job = %+v", j)
		}
		csvBytes := d.download(t, j.Artifacts[1-indexOf(j.Artifacts, "out/plot.png")])
		if string(csvBytes) != "x,square\r\n0,0\r\n1,1\r\n2,4\r\n3,9\r\n4,16\r\n" {
			t.Errorf("result.csv = %q", csvBytes)
		}
		png := d.download(t, j.Artifacts[indexOf(j.Artifacts, "out/plot.png")])
		if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 1000 {
			t.Errorf("plot.png is not a PNG (%d bytes)", len(png))
		}
		var hist struct{ Jobs []jobs.Job }
		if err := json.Unmarshal(d.call(t, "GET", "/v1/jobs?status=succeeded&limit=100", "").body, &hist); err != nil {
			t.Fatal(err)
		}
		if indexOfJob(hist.Jobs, j.ID) < 0 {
			t.Errorf("job %s not in the history", j.ID)
		}
	})

	t.Run("execute is synchronous", func(t *testing.T) {
		j := d.job(t, "POST", "/v1/execute", `{"language":"python","code":"print(6*7)"}`)
		if j.Status != jobs.StatusSucceeded || j.Stdout != "42\n" {
			t.Errorf("execute: %+v", j)
		}
		if j.TraceID != "" {
			t.Errorf("with no collector named, tracing is off, yet the job has trace_id %q", j.TraceID)
		}
	})

	t.Run("live logs over SSE", func(t *testing.T) {
		j := d.submit(t, map[string]any{"language": "bash", "code": "echo first; sleep 1; echo second >&2; sleep 0.5; echo third"})
		req, _ := http.NewRequest("GET", d.url+"/v1/jobs/"+j.ID+"/logs", nil)
		req.Header.Set("Authorization", "Bearer "+d.key)
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		var got []string
		sc := bufio.NewScanner(r.Body)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "event: ") {
				event = line[7:]
			}
			if strings.HasPrefix(line, "data: ") {
				var v map[string]any
				_ = json.Unmarshal([]byte(line[6:]), &v)
				if event == "status" {
					got = append(got, "status:"+fmt.Sprint(v["status"]))
				} else {
					got = append(got, event+":"+fmt.Sprint(v["data"]))
				}
			}
		}
		want := []string{"stdout:first\n", "stderr:second\n", "stdout:third\n", "status:succeeded"}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("events %q, want %q", got, want)
		}
	})

	t.Run("cancel a running and a queued job", func(t *testing.T) {
		// Two sleepers fill both slots; a third waits in the queue.
		a := d.submit(t, map[string]any{"language": "bash", "code": "sleep 121"})
		b := d.submit(t, map[string]any{"language": "bash", "code": "sleep 122"})
		d.await(t, a.ID, time.Minute, func(j jobs.Job) bool { return j.Status == jobs.StatusRunning })
		d.await(t, b.ID, time.Minute, func(j jobs.Job) bool { return j.Status == jobs.StatusRunning })
		ctrs := map[string]string{a.ID: d.containerRunning(t, "sleep 121"), b.ID: d.containerRunning(t, "sleep 122")}
		c := d.submit(t, map[string]any{"language": "bash", "code": "echo never"})
		if got := d.job(t, "POST", "/v1/jobs/"+c.ID+"/cancel", ""); got.Status != jobs.StatusCancelled {
			t.Errorf("queued job after cancel: %s", got.Status)
		}
		for _, id := range []string{a.ID, b.ID} {
			d.call(t, "POST", "/v1/jobs/"+id+"/cancel", "")
			j := d.await(t, id, 30*time.Second, terminal)
			if j.Status != jobs.StatusCancelled || j.Error == nil || j.Error.Code != "cancelled" {
				t.Errorf("running job after cancel: %+v", j)
			}
			waitGone(t, ctrs[id])
		}
		// The cancelled queued job never ran, even once slots freed up: a
		// job of the tenant queued after it has run since.
		later := d.submit(t, map[string]any{"language": "bash", "code": "echo later"})
		d.await(t, later.ID, 30*time.Second, terminal)
		if j := d.job(t, "GET", "/v1/jobs/"+c.ID, ""); j.Status != jobs.StatusCancelled || j.StartedAt != nil {
			t.Errorf("cancelled queued job ran: %+v", j)
		}
	})
}

// containerRunning waits for a container of the dev runner with a process
// whose command line contains pattern, and returns its id.
func (d *dev) containerRunning(t *testing.T, pattern string) string {
	t.Helper()
	var found string
	eventually.True(t, 30*time.Second, "a container running "+strconv.Quote(pattern), func() bool {
		for _, id := range dockerContainers(t, "dev.gantry.runner="+d.runnerID, "status=running") {
			out, _ := exec.Command("docker", "top", id, "-o", "pid,args").Output()
			if strings.Contains(string(out), pattern) {
				found = id
				return true
			}
		}
		return false
	})
	return found
}

// waitGone waits for the container to be removed (a container that saw a
// timeout or cancel is retired).
func waitGone(t *testing.T, id string) {
	t.Helper()
	eventually.True(t, 15*time.Second, "container "+id+" to be removed", func() bool {
		return exec.Command("docker", "inspect", id).Run() != nil
	})
}

// TestRunnerKilledMidJob runs an ingress and separate runner processes, and
// kills runners in the middle of jobs.
func TestRunnerKilledMidJob(t *testing.T) {
	d := startDev(t, "GANTRY_DEV_RUNNER=false", "GANTRY_ACK_WAIT=2s", "GANTRY_MAX_ATTEMPTS=2")
	runner := func(id string) *proc {
		p := start(t, append(d.env, "GANTRY_RUNNER_ID="+id, "GANTRY_RUNNER_SLOTS=1", "GANTRY_DRAIN_TIMEOUT=1s"), "runner")
		p.waitOutput(t, regexp.MustCompile(`runner started`), 30*time.Second)
		return p
	}
	suffix := uniqueSuffix()
	idA, idB, idC := "e2e-a-"+suffix, "e2e-b-"+suffix, "e2e-c-"+suffix

	a := runner(idA)
	j := d.submit(t, map[string]any{"language": "python", "code": `
import os, time
print("working", flush=True)
time.sleep(3)
os.makedirs("out", exist_ok=True)
open("out/done.txt", "w").write("finished")
`})
	d.await(t, j.ID, time.Minute, func(j jobs.Job) bool { return j.Status == jobs.StatusRunning })
	leftovers := dockerContainers(t, "dev.gantry.runner="+idA) // its job's and its warm pool's
	a.kill()
	// Its containers stop at once: their agents see the runner's connection close.
	eventually.True(t, 15*time.Second, "the killed runner's containers to stop", func() bool {
		return len(dockerContainers(t, "dev.gantry.runner="+idA, "status=running")) == 0
	})
	b := runner(idB)
	j = d.await(t, j.ID, 2*time.Minute, terminal)
	if j.Status != jobs.StatusSucceeded || j.Attempt != 2 || len(j.Artifacts) != 1 {
		t.Fatalf("job after its runner was killed: %+v", j)
	}
	if got := d.download(t, j.Artifacts[0]); string(got) != "finished" {
		t.Errorf("artifact = %q", got)
	}
	var hist struct{ Jobs []jobs.Job }
	_ = json.Unmarshal(d.call(t, "GET", "/v1/jobs?limit=100", "").body, &hist)
	if len(hist.Jobs) != 1 || hist.Jobs[0].ID != j.ID {
		t.Errorf("history holds %d jobs, want exactly the one", len(hist.Jobs))
	}
	// The killed runner's containers are removed when it comes back.
	a = runner(idA)
	for _, id := range leftovers {
		waitGone(t, id)
	}

	// A job whose runner dies on every attempt ends as an error saying so.
	live := map[string]*proc{idA: a, idB: b}
	k := d.submit(t, map[string]any{"language": "bash", "code": "sleep 120"})
	for attempt := 1; attempt <= 2; attempt++ {
		d.await(t, k.ID, time.Minute, func(j jobs.Job) bool { return j.Status == jobs.StatusRunning && j.Attempt == attempt })
		killed := ""
		holder := d.runnerOf(t, k.ID)
		if p, ok := live[holder]; ok {
			p.kill()
			killed = holder
		}
		if killed == "" {
			t.Fatalf("attempt %d: no live runner holds the job", attempt)
		}
		delete(live, killed)
		if len(live) == 0 {
			live[idC] = runner(idC)
		}
	}
	k = d.await(t, k.ID, time.Minute, terminal)
	if k.Status != jobs.StatusError || k.Error == nil || !strings.Contains(k.Error.Message, "gave up after 2 attempts") {
		t.Errorf("job after every runner died: %+v", k)
	}
}

func indexOf(arts []jobs.Artifact, path string) int {
	for i, a := range arts {
		if a.Path == path {
			return i
		}
	}
	return -1
}

func indexOfJob(list []jobs.Job, id string) int {
	for i, j := range list {
		if j.ID == id {
			return i
		}
	}
	return -1
}

// runnerOf reads which runner took the job (not part of the API).
func (d *dev) runnerOf(t *testing.T, jobID string) string {
	conn, err := pgx.Connect(context.Background(), d.dbURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var id string
	if err := conn.QueryRow(context.Background(), `SELECT coalesce(runner_id, '') FROM jobs WHERE id = $1`, jobID).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}
