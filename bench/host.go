package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gantryhq/gantry/codemode/codemodetest"
)

// What the benchmark reads of the host: its machine, processes' memory
// and CPU from /proc and the containers' cgroups, and the gantry it starts.

func machine() string {
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if m := regexp.MustCompile(`MemTotal:\s+(\d+) kB`).FindSubmatch(b); m != nil {
			kb, _ := strconv.Atoi(string(m[1]))
			mem = fmt.Sprintf(", %.0f GiB", float64(kb)/(1<<20))
		}
	}
	return fmt.Sprintf("%d cores%s, %s", runtime.NumCPU(), mem, runtime.GOOS+"/"+runtime.GOARCH)
}

// vmHWM is the peak resident set of a process, in MB.
func vmHWM(pid int) float64 { return procStatus(pid, "VmHWM") }

// vmRSS is the resident set of a process, in MB.
func vmRSS(pid int) float64 { return procStatus(pid, "VmRSS") }

func procStatus(pid int, field string) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	m := regexp.MustCompile(field + `:\s+(\d+) kB`).FindSubmatch(b)
	if m == nil {
		return -1
	}
	kb, _ := strconv.Atoi(string(m[1]))
	return float64(kb) / 1024
}

// startDevRunner is startDev for the rows that need the runner's id.
func startDevRunner(env map[string]string) (url, apiKey, runnerID string, pid int, stop func(), err error) {
	runnerID = "bench-" + randHex(4)
	env["GANTRY_RUNNER_ID"] = runnerID
	url, apiKey, pid, stop, err = startDev(env)
	return url, apiKey, runnerID, pid, stop, err
}

// cpuTimes is CPU time per job: in the runner's containers (their
// cgroups: agent, sandboxes, programs; under gVisor also its kernel), by
// the gantry process, and by Docker's daemons and shims.
type cpuTimes struct{ sandbox, gantry, docker time.Duration }

// cpuMeter measures CPU time over a phase. Containers and shims come and
// go during it (a container serves a bounded number of jobs; under gVisor
// one), and what a removed one used disappears with its cgroup, so it
// samples every 50 ms and keeps each one's last value: a container's
// last moments (after its last job) can be missed, nothing before them.
type cpuMeter struct {
	runnerID string
	pid      int
	start    cpuSample
	mu       sync.Mutex
	last     cpuSample
	stop     chan struct{}
	done     chan struct{}
}

type cpuSample struct {
	containers map[string]time.Duration
	docker     map[int]time.Duration
	gantry     time.Duration
}

func startCPU(runnerID string, pid int) *cpuMeter {
	m := &cpuMeter{runnerID: runnerID, pid: pid, stop: make(chan struct{}), done: make(chan struct{})}
	m.start = sampleCPU(runnerID, pid)
	m.last = cpuSample{containers: map[string]time.Duration{}, docker: map[int]time.Duration{}}
	m.merge(m.start)
	go func() {
		defer close(m.done)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-t.C:
				m.merge(sampleCPU(runnerID, pid))
			}
		}
	}()
	return m
}

func (m *cpuMeter) merge(s cpuSample) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, v := range s.containers {
		m.last.containers[id] = max(m.last.containers[id], v)
	}
	for pid, v := range s.docker {
		m.last.docker[pid] = max(m.last.docker[pid], v)
	}
	m.last.gantry = max(m.last.gantry, s.gantry)
}

// perJob ends the phase and returns its CPU time divided by its n jobs.
func (m *cpuMeter) perJob(n int) cpuTimes {
	close(m.stop)
	<-m.done
	m.merge(sampleCPU(m.runnerID, m.pid))
	var c cpuTimes
	for id, v := range m.last.containers {
		c.sandbox += v - m.start.containers[id]
	}
	for pid, v := range m.last.docker {
		c.docker += v - m.start.docker[pid]
	}
	c.gantry = m.last.gantry - m.start.gantry
	d := time.Duration(n)
	return cpuTimes{sandbox: c.sandbox / d, gantry: c.gantry / d, docker: c.docker / d}
}

// sampleCPU reads the CPU time of the runner's running containers, of the
// gantry process and of Docker's processes.
func sampleCPU(runnerID string, pid int) cpuSample {
	s := cpuSample{containers: map[string]time.Duration{}, docker: map[int]time.Duration{}}
	if out, err := exec.Command("docker", "ps", "-q", "--no-trunc", "--filter", "label=dev.gantry.runner="+runnerID).Output(); err == nil {
		for _, id := range strings.Fields(string(out)) {
			if v, ok := containerCPU(id); ok {
				s.containers[id] = v
			}
		}
	}
	s.gantry = procCPU(pid)
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", n))
		switch strings.TrimSpace(string(comm)) {
		case "dockerd", "containerd", "containerd-shim", "containerd-shim-runc-v2":
			s.docker[n] = procCPU(n)
		}
	}
	return s
}

// containerCPU reads a container's cgroup CPU time (cgroup v1 or v2).
func containerCPU(id string) (time.Duration, bool) {
	if b, err := os.ReadFile("/sys/fs/cgroup/cpuacct/docker/" + id + "/cpuacct.usage"); err == nil {
		n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return time.Duration(n), true
	}
	b, err := os.ReadFile("/sys/fs/cgroup/system.slice/docker-" + id + ".scope/cpu.stat")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return time.Duration(n) * time.Microsecond, true
		}
	}
	return 0, false
}

// serving is the process of the gantry started as pid that serves: as
// root with gVisor it runs again in a mount namespace of its own
// (cmd/gantry/mountns.go), as pid's child.
func serving(pid int) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", n))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) && strings.Contains(string(b), "(gantry)") {
			return n
		}
	}
	return pid
}

// procCPU is a process's user and system time (clock ticks of 10 ms).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// startDev starts `gantry dev` on free ports with a throwaway database.
func startDev(env map[string]string) (url, apiKey string, pid int, stop func(), err error) {
	return startDevOf(*bin, env)
}

// startDevOf is startDev of the gantry binary gantryBin.
func startDevOf(gantryBin string, env map[string]string) (url, apiKey string, pid int, stop func(), err error) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, *dbURL)
	if err != nil {
		return "", "", 0, nil, fmt.Errorf("postgres (run `make postgres`): %w", err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	db := "gantry_bench_" + hex.EncodeToString(b)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		conn.Close(ctx)
		return "", "", 0, nil, err
	}
	conn.Close(ctx)
	dir, _ := os.MkdirTemp("", "gantry-bench")
	apiKey = "gk_bench_" + hex.EncodeToString(b) + "_key"
	dbu := strings.Replace(*dbURL, "/gantry?", "/"+db+"?", 1)
	cmd := exec.Command(gantryBin, "dev")
	cmd.Env = append(os.Environ(), "GANTRY_ADDR=127.0.0.1:0", "GANTRY_DEV_NATS_ADDR=127.0.0.1:0", "GANTRY_DEV_S3_ADDR=127.0.0.1:0",
		"GANTRY_DATA_DIR="+filepath.Join(dir, "data"), "GANTRY_DATABASE_URL="+dbu, "GANTRY_DEV_API_KEY="+apiKey,
		"GANTRY_LOG_LEVEL=warn", "GANTRY_RUNNER_ID=bench-"+hex.EncodeToString(b[:3]), "GANTRY_RUNNER_ADDR=",
		// The load is the point here, not the tenant quotas.
		"GANTRY_TENANT_RPS=1000000", "GANTRY_TENANT_MAX_QUEUED=1000000")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stderr = os.Stderr
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		return "", "", 0, nil, fmt.Errorf("start %s (run `make build`): %w", gantryBin, err)
	}
	// exited closes when dev's process ends (err then says how).
	exited := make(chan struct{})
	var waitErr error
	sc := bufio.NewScanner(stdout)
	re := regexp.MustCompile(`API\s+(http://\S+)`)
	found := make(chan string, 1)
	go func() {
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default: // only the first counts
				}
			}
		}
		waitErr = cmd.Wait() // after its output is read, as Wait wants
		close(exited)
	}()
	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
		}
		os.RemoveAll(dir)
		if conn, err := pgx.Connect(context.Background(), *dbURL); err == nil {
			_, _ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)")
			conn.Close(context.Background())
		}
	}
	select {
	case url = <-found:
		return url, apiKey, serving(cmd.Process.Pid), stop, nil
	case <-exited:
		stop()
		return "", "", 0, nil, fmt.Errorf("gantry dev exited before it was ready (%v): its output is above", waitErr)
	case <-time.After(60 * time.Second):
		stop()
		return "", "", 0, nil, fmt.Errorf("gantry dev did not start within 60s")
	}
}

// codeModeRows registers a fixture MCP server and times 200 tool calls made
// from Python in one job, as the program sees them.
func codeModeRows(c *client) ([]row, error) {
	up := httptest.NewServer(codemodetest.Handler(codemodetest.CRM(codemodetest.CredentialOK)))
	defer up.Close()
	reg, _ := json.Marshal(map[string]any{"name": "benchcrm", "url": up.URL + "/mcp",
		"headers": map[string]string{"Authorization": "Bearer " + codemodetest.Token}})
	_, _, _ = c.do("DELETE", "/v1/mcp-servers/benchcrm", "") // left by an earlier run, or not there
	if body, status, err := c.do("POST", "/v1/mcp-servers", string(reg)); err != nil || status != http.StatusCreated {
		return nil, fmt.Errorf("register the fixture MCP server: %d %s %v", status, body, err)
	}
	defer func() { _, _, _ = c.do("DELETE", "/v1/mcp-servers/benchcrm", "") }()
	code := `import gantry, json, time
ts = []
for _ in range(200):
    t = time.perf_counter()
    gantry.call("benchcrm", "whoami")
    ts.append(time.perf_counter() - t)
ts.sort()
print(json.dumps([ts[100] * 1000, ts[198] * 1000]))`
	req, _ := json.Marshal(map[string]any{"language": "python", "code": code, "limits": map[string]any{"tool_calls": 1000}})
	body, status, err := c.do("POST", "/v1/execute", string(req))
	if err != nil || status != http.StatusOK {
		return nil, fmt.Errorf("code-mode job: %d %s %v", status, body, err)
	}
	var j struct {
		Status, Stdout, Stderr string
	}
	var p []float64
	if err := json.Unmarshal(body, &j); err != nil || json.Unmarshal([]byte(j.Stdout), &p) != nil || len(p) != 2 {
		return nil, fmt.Errorf("code-mode job: %s %q %q", j.Status, j.Stdout, j.Stderr)
	}
	return []row{
		{Name: "code mode: tool call from the sandbox (HTTP upstream) p50", Gantry: fmt.Sprintf("%.1f ms", p[0]), Value: p[0]},
		{Name: "code mode: tool call from the sandbox (HTTP upstream) p99", Gantry: fmt.Sprintf("%.1f ms", p[1]), Value: p[1]},
	}, nil
}
