// Command bench measures a gantry against plain `docker run` on the same
// machine and prints a markdown table (and writes the figures as JSON).
//
//	go run ./bench                 # starts its own `gantry dev` (bin/gantry)
//	go run ./bench -target URL -key KEY
//
// The targets it reports against are in docs/PERFORMANCE.md; it never fails
// because a target was missed.
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gantryhq/gantry/codemode/codemodetest"
)

var (
	target    = flag.String("target", "", "URL of a running gantry (default: start gantry dev)")
	key       = flag.String("key", "", "API key for -target")
	bin       = flag.String("gantry", "bin/gantry", "gantry binary to start")
	dbURL     = flag.String("db", "postgres://gantry:gantry@127.0.0.1:5432/gantry?sslmode=disable", "Postgres to create throwaway databases on")
	image     = flag.String("image", "gantry-sandbox:latest", "sandbox image for gantry and the docker run baseline")
	latencyN  = flag.Int("n", 100, "sequential executions for the latency rows")
	baselineN = flag.Int("baseline-n", 30, "sequential docker runs for the baseline latency row")
	tputJobs  = flag.Int("jobs", 48, "jobs per throughput row")
	programs  = flag.Int("programs", 300, "short test programs (half passing, half failing) for the test-suite row")
	queued    = flag.Int("queued", 10000, "jobs queued (no runner) for the memory row")
	slots     = flag.Int("slots", 8, "runner slots of the started gantry")
	pace      = flag.Duration("pace", 500*time.Millisecond, "pause between the paced latency samples, as an agent thinks between calls")
	runsc     = flag.Bool("runsc", true, "also measure under gVisor when dockerd has the runsc runtime")
	runc      = flag.Bool("runc", true, "measure under Docker's default runtime (-runc=false -queued=0: the gVisor rows alone)")
	jsonOut   = flag.String("json", "bench-results.json", "where to write the figures")
	compiledN = flag.Int("compiled-n", 5, "compile-and-run executions per compiled language, when the image has them")
	burst     = flag.Int("burst", 256, "SandboxFusion /run_code calls sent at once (0: none)")
	problems  = flag.Int("problems", 164, "HumanEval-style problems scored through /run_code and POST /v1/execute")
)

const code = "print(6*7)"

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type row struct {
	Name     string  `json:"name"`
	Gantry   string  `json:"gantry"`
	Baseline string  `json:"baseline,omitempty"`
	Ratio    string  `json:"ratio,omitempty"`
	Target   string  `json:"target,omitempty"`
	Met      *bool   `json:"met,omitempty"`
	Value    float64 `json:"value"`
}

type results struct {
	Machine string `json:"machine"`
	Date    string `json:"date"`
	Rows    []row  `json:"rows"`
}

func run() error {
	res := results{Machine: machine(), Date: time.Now().UTC().Format(time.RFC3339)}
	if *runc || *target != "" {
		rows, err := measure("")
		if err != nil {
			return err
		}
		res.Rows = append(res.Rows, rows...)
	}
	if *target == "" && *runsc && hasRuntime("runsc") {
		rows, err := measure("runsc")
		if err != nil {
			return err
		}
		res.Rows = append(res.Rows, rows...)
	}

	// Memory with a deep queue and no runner.
	if *target == "" && *queued > 0 {
		fmt.Fprintf(os.Stderr, "bench: queueing %d jobs with no runner\n", *queued)
		url, apiKey, pid, stop, err := startDev(map[string]string{"GANTRY_DEV_RUNNER": "false"})
		if err != nil {
			return err
		}
		qc := newClient(url, apiKey)
		if _, err := throughput(16, *queued, qc.submit); err != nil {
			stop()
			return err
		}
		hwm := vmHWM(pid)
		stop()
		res.Rows = append(res.Rows, row{Name: fmt.Sprintf("peak RSS of gantry dev (ingress + embedded NATS) with %d jobs queued", *queued),
			Gantry: fmt.Sprintf("%.0f MB", hwm), Target: "≤ 100 MB", Met: met(hwm <= 100), Value: hwm})
	}

	printTable(res)
	data, _ := json.MarshalIndent(res, "", "  ")
	return os.WriteFile(*jsonOut, data, 0o644)
}

// measure runs the latency, throughput, test-suite, pandas and memory rows
// against a gantry whose sandboxes run under runtime ("" for Docker's
// default), beside `docker run --rm` under the same runtime.
func measure(runtime string) ([]row, error) {
	suffix := ""
	if runtime != "" {
		suffix = " [" + runtime + "]"
	}
	var rows []row
	add := func(r row) { r.Name += suffix; rows = append(rows, r) }
	url, apiKey := *target, *key
	var stop func()
	var runnerID string
	var devPID int
	if url == "" {
		var err error
		env := map[string]string{"GANTRY_RUNNER_SLOTS": strconv.Itoa(*slots), "GANTRY_POOL_MIN": strconv.Itoa(*slots),
			"GANTRY_POOL_MAX": strconv.Itoa(2 * *slots), "GANTRY_IMAGE": *image}
		if runtime != "" {
			env["GANTRY_RUNTIME"] = runtime
		}
		if url, apiKey, runnerID, devPID, stop, err = startDevRunner(env); err != nil {
			return nil, err
		}
		defer stop()
	}
	c := newClient(url, apiKey)
	fmt.Fprintf(os.Stderr, "bench%s: warming up\n", suffix)
	for range 2 * *slots {
		if _, err := c.execute(code); err != nil {
			return nil, err
		}
	}

	// Back to back: each call the moment the last one returned, as an
	// evaluation harness or a busy agent sends them.
	fmt.Fprintf(os.Stderr, "bench%s: %d executions back to back\n", suffix, *latencyN)
	var b2b, queue []time.Duration
	meter := startCPU(runnerID, devPID)
	for range *latencyN {
		j, err := c.execute(code)
		if err != nil {
			return nil, err
		}
		b2b = append(b2b, j.wall)
		queue = append(queue, j.queue)
	}
	cpu := meter.perJob(*latencyN)
	fmt.Fprintf(os.Stderr, "bench%s: %d sequential docker runs\n", suffix, *baselineN)
	var base []time.Duration
	for range *baselineN {
		d, err := dockerRun(runtime, code, "42\n")
		if err != nil {
			return nil, err
		}
		base = append(base, d)
	}
	for _, q := range []float64{50, 99} {
		g, b := pct(b2b, q), pct(base, q)
		r := row{Name: fmt.Sprintf("sync execute `print(6*7)`, back to back, p%.0f", q), Gantry: ms(g), Baseline: ms(b), Ratio: ratio(g, b), Value: msf(g)}
		if q == 50 && runtime == "" {
			r.Target, r.Met = "≤ 0.1× docker run", met(g*10 <= b)
		}
		add(r)
	}
	// What measuring each job's CPU time and memory costs it.
	acc, err := accountingRows(c, pct(b2b, 50))
	if err != nil {
		return nil, err
	}
	for _, r := range acc {
		add(r)
	}
	if *target == "" && runtime == "" { // under gVisor a container lives for one job: too short to sample
		add(row{Name: "CPU per back-to-back job: in the sandbox containers (agent, sandbox, program)", Gantry: ms(cpu.sandbox), Value: msf(cpu.sandbox)})
		add(row{Name: "CPU per back-to-back job: gantry dev (ingress, runner, NATS)", Gantry: ms(cpu.gantry), Value: msf(cpu.gantry)})
		add(row{Name: "CPU per back-to-back job: dockerd, containerd and shims", Gantry: ms(cpu.docker), Value: msf(cpu.docker)})
	}
	if runtime == "" {
		// Paced, as an agent's calls come with thinking in between.
		fmt.Fprintf(os.Stderr, "bench: %d executions, %s apart\n", *latencyN/2, *pace)
		var paced []time.Duration
		for range *latencyN / 2 {
			time.Sleep(*pace)
			j, err := c.execute(code)
			if err != nil {
				return nil, err
			}
			paced = append(paced, j.wall)
		}
		for _, q := range []float64{50, 99} {
			g := pct(paced, q)
			add(row{Name: fmt.Sprintf("sync execute `print(6*7)`, %s apart, p%.0f", *pace, q), Gantry: ms(g), Baseline: ms(pct(base, q)), Ratio: ratio(g, pct(base, q)), Value: msf(g)})
		}
		for _, q := range []float64{50, 99} {
			g := pct(queue, q)
			r := row{Name: fmt.Sprintf("queue latency (accepted → started) p%.0f", q), Gantry: ms(g), Value: msf(g)}
			if q == 50 {
				r.Target, r.Met = "≤ 10 ms", met(g <= 10*time.Millisecond)
			}
			add(r)
		}
	}

	// Throughput.
	concs := []int{1, 4, 8, 16}
	if runtime != "" {
		concs = []int{8}
	}
	for _, conc := range concs {
		fmt.Fprintf(os.Stderr, "bench%s: throughput at concurrency %d\n", suffix, conc)
		g, err := throughput(conc, *tputJobs, func() error { _, err := c.execute(code); return err })
		if err != nil {
			return nil, err
		}
		b, err := throughput(conc, max(*tputJobs/2, conc), func() error { _, err := dockerRun(runtime, code, "42\n"); return err })
		if err != nil {
			return nil, err
		}
		r := row{Name: fmt.Sprintf("throughput at concurrency %d (jobs/s)", conc), Gantry: fmt.Sprintf("%.1f", g),
			Baseline: fmt.Sprintf("%.1f", b), Ratio: fmt.Sprintf("%.2f×", g/b), Value: g}
		if conc == 8 && runtime == "" {
			r.Target, r.Met = "≥ 10× docker run", met(g >= 10*b)
		}
		add(r)
	}

	// A test suite: short programs, half of whose asserts fail.
	fmt.Fprintf(os.Stderr, "bench%s: %d short test programs at concurrency 8\n", suffix, *programs)
	d, err := testSuite(c, *programs)
	if err != nil {
		return nil, err
	}
	r := row{Name: fmt.Sprintf("%d short Python test programs (half failing) at concurrency 8", *programs), Gantry: fmt.Sprintf("%.1f s", d.Seconds()), Value: d.Seconds()}
	if runtime == "" {
		r.Target, r.Met = "≤ 15 s", met(d <= 15*time.Second)
	}
	add(r)

	// The data stack's import cost.
	fmt.Fprintf(os.Stderr, "bench%s: import pandas\n", suffix)
	var pandas, pandasBase []time.Duration
	for range 20 {
		j, err := c.execute("import pandas; print(1)")
		if err != nil {
			return nil, err
		}
		pandas = append(pandas, j.wall)
	}
	for range 5 {
		d, err := dockerRun(runtime, "import pandas; print(1)", "1\n")
		if err != nil {
			return nil, err
		}
		pandasBase = append(pandasBase, d)
	}
	add(row{Name: "sync execute `import pandas; print(1)` p50", Gantry: ms(pct(pandas, 50)), Baseline: ms(pct(pandasBase, 50)),
		Ratio: ratio(pct(pandas, 50), pct(pandasBase, 50)), Value: msf(pct(pandas, 50))})

	// Compiled languages, when the image has them (SANDBOX=compilers).
	if runtime == "" {
		cr, err := compiledRows(c, *compiledN)
		if err != nil {
			return nil, err
		}
		for _, r := range cr {
			add(r)
		}
	}

	if *target == "" {
		mem, shim, n, err := idleMemory(runnerID)
		if err != nil {
			return nil, err
		}
		add(row{Name: fmt.Sprintf("memory per idle warm container (cgroup: agent, spare sandbox, tmpfs; mean of %d)", n), Gantry: fmt.Sprintf("%.1f MB", mem), Value: mem})
		add(row{Name: "RSS of containerd-shim per container (host)", Gantry: fmt.Sprintf("%.1f MB", shim), Value: shim})
	}
	if runtime != "" {
		return rows, nil
	}

	// Code mode: a tool call's round trip from the sandbox through the
	// agent, the runner and an upstream MCP server over HTTP; the context
	// an agent saves.
	if *target == "" {
		fmt.Fprintln(os.Stderr, "bench: code-mode tool calls")
		cm, err := codeModeRows(c)
		if err != nil {
			return nil, err
		}
		rows = append(rows, cm...)
		if cm, err = contextRows(c); err != nil {
			return nil, err
		}
		rows = append(rows, cm...)
	}

	if *burst > 0 {
		cr, err := compatRows(c, *burst, *problems)
		if err != nil {
			return nil, err
		}
		rows = append(rows, cr...)
	}

	// Polling.
	fmt.Fprintln(os.Stderr, "bench: polling with 50 clients")
	j, err := c.execute(code)
	if err != nil {
		return nil, err
	}
	rps, p99, err := poll(c, j.id, 50, 5*time.Second)
	if err != nil {
		return nil, err
	}
	rows = append(rows,
		row{Name: "GET /v1/jobs/{id}, 50 pollers: requests/s", Gantry: fmt.Sprintf("%.0f", rps), Target: "≥ 2,000", Met: met(rps >= 2000), Value: rps},
		row{Name: "GET /v1/jobs/{id}, 50 pollers: p99", Gantry: ms(p99), Target: "≤ 20 ms", Met: met(p99 <= 20*time.Millisecond), Value: msf(p99)})
	return rows, nil
}

// testSuite runs n short programs (odd ones fail an assert) at concurrency
// 8 and checks each ended as it should.
func testSuite(c *client, n int) (time.Duration, error) {
	var next, bad int64
	var mu sync.Mutex
	start := time.Now()
	_, err := throughput(8, n, func() error {
		mu.Lock()
		i := next
		next++
		mu.Unlock()
		want, status := int64(i*(i+1)/2), "succeeded"
		if i%2 == 1 {
			want, status = want+1, "failed"
		}
		prog := fmt.Sprintf("def total(n):\n    return sum(range(n + 1))\n\ndef test_total():\n    assert total(%d) == %d, 'total is wrong'\n\ntest_total()\nprint('ok')\n", i, want)
		b, code, err := c.do("POST", "/v1/execute", string(mustJSON(map[string]any{"language": "python", "code": prog})))
		if err != nil {
			return err
		}
		var j struct{ Status string }
		if json.Unmarshal(b, &j) != nil || code != 200 || j.Status != status {
			mu.Lock()
			bad++
			mu.Unlock()
			return fmt.Errorf("test program %d: %d %s", i, code, b)
		}
		return nil
	})
	return time.Since(start), err
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// idleMemory waits for the runner's containers to settle, then reports
// the mean memory charged to the cgroup of each idle container (its agent,
// its spare sandbox, its tmpfs) and the mean RSS of their containerd
// shims, in MB.
func idleMemory(runnerID string) (float64, float64, int, error) {
	time.Sleep(3 * time.Second)
	out, err := exec.Command("docker", "ps", "-q", "--no-trunc", "--filter", "label=dev.gantry.runner="+runnerID).Output()
	if err != nil {
		return 0, 0, 0, fmt.Errorf("docker ps: %w", err)
	}
	ids := strings.Fields(string(out))
	if len(ids) == 0 {
		return 0, 0, 0, fmt.Errorf("no containers of runner %s", runnerID)
	}
	var mem, shim float64
	for _, id := range ids {
		mem += cgroupMB(id)
		shim += shimRSS(id)
	}
	return mem / float64(len(ids)), shim / float64(len(ids)), len(ids), nil
}

// cgroupMB is a container's memory usage without the page cache of its
// image's files (which the host shares among containers): rss + shmem
// (tmpfs) from its memory cgroup (v1 or v2), in MB.
func cgroupMB(id string) float64 {
	for _, p := range []string{"/sys/fs/cgroup/memory/docker/" + id + "/memory.stat", "/sys/fs/cgroup/system.slice/docker-" + id + ".scope/memory.stat"} {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var total float64
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) == 2 && (f[0] == "total_rss" || f[0] == "total_shmem" || f[0] == "anon" || f[0] == "shmem") {
				v, _ := strconv.ParseFloat(f[1], 64)
				total += v
			}
		}
		return total / (1 << 20)
	}
	return -1
}

// shimRSS is the RSS of the containerd shim that runs the container, in MB.
func shimRSS(id string) float64 {
	out, err := exec.Command("pgrep", "-f", "containerd-shim.*"+id).Output()
	if err != nil {
		return 0
	}
	var total float64
	for _, pid := range strings.Fields(string(out)) {
		n, _ := strconv.Atoi(pid)
		total += vmRSS(n)
	}
	return total
}

func hasRuntime(name string) bool {
	out, err := exec.Command("docker", "info", "--format", "{{json .Runtimes}}").Output()
	return err == nil && strings.Contains(string(out), `"`+name+`"`)
}

func met(b bool) *bool { return &b }

func printTable(res results) {
	fmt.Printf("gantry benchmark, %s, %s\n\n", res.Machine, res.Date)
	fmt.Println("| measure | gantry | docker run baseline | gantry/baseline | target | met |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, r := range res.Rows {
		m := ""
		if r.Met != nil {
			m = map[bool]string{true: "yes", false: "**no**"}[*r.Met]
		}
		fmt.Printf("| %s | %s | %s | %s | %s | %s |\n", r.Name, r.Gantry, dash(r.Baseline), dash(r.Ratio), dash(r.Target), dash(m))
	}
}

func dash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

type client struct {
	url, key string
	http     *http.Client
}

type timedJob struct {
	id          string
	wall, queue time.Duration
}

func (c *client) do(method, path, body string) ([]byte, int, error) {
	req, _ := http.NewRequest(method, c.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return b, resp.StatusCode, err
}

func newClient(url, key string) *client {
	return &client{url: url, key: key, http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
}

func (c *client) execute(program string) (timedJob, error) {
	start := time.Now()
	b, status, err := c.do("POST", "/v1/execute", string(mustJSON(map[string]any{"language": "python", "code": program})))
	wall := time.Since(start)
	if err != nil {
		return timedJob{}, err
	}
	var j struct {
		ID        string    `json:"id"`
		Status    string    `json:"status"`
		Stdout    string    `json:"stdout"`
		CreatedAt time.Time `json:"created_at"`
		StartedAt time.Time `json:"started_at"`
	}
	if err := json.Unmarshal(b, &j); err != nil || status != 200 || j.Status != "succeeded" {
		return timedJob{}, fmt.Errorf("execute answered %d: %s", status, b)
	}
	return timedJob{id: j.ID, wall: wall, queue: j.StartedAt.Sub(j.CreatedAt)}, nil
}

func (c *client) submit() error {
	b, status, err := c.do("POST", "/v1/jobs", `{"language":"python","code":"`+code+`"}`)
	if err != nil {
		return err
	}
	if status != 202 {
		return fmt.Errorf("submit answered %d: %s", status, b)
	}
	return nil
}

// throughput runs n calls of fn on conc workers and returns calls/s.
func throughput(conc, n int, fn func() error) (float64, error) {
	work := make(chan struct{}, n)
	for range n {
		work <- struct{}{}
	}
	close(work)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				if err := fn(); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return float64(n) / time.Since(start).Seconds(), firstErr
}

func poll(c *client, id string, conc int, d time.Duration) (float64, time.Duration, error) {
	var mu sync.Mutex
	var lats []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	deadline := time.Now().Add(d)
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for time.Now().Before(deadline) {
				start := time.Now()
				_, status, err := c.do("GET", "/v1/jobs/"+id, "")
				if err == nil && status != 200 {
					err = fmt.Errorf("poll answered %d", status)
				}
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
				mine = append(mine, time.Since(start))
			}
			mu.Lock()
			lats = append(lats, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return float64(len(lats)) / d.Seconds(), pct(lats, 99), firstErr
}

// dockerRun is the baseline: one hardened container per job, as the
// sandbox rules ask, with the docker CLI.
func dockerRun(runtime, program, want string) (time.Duration, error) {
	args := []string{"run", "--rm", "--network", "none", "--read-only",
		"--tmpfs", "/workspace:rw,exec,nosuid,nodev,size=512m,uid=1000,gid=1000", "--tmpfs", "/tmp:rw,exec,nosuid,nodev,size=512m",
		"--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--user", "1000:1000",
		"--memory", "512m", "--memory-swap", "512m", "--cpus", "1", "--pids-limit", "128"}
	if runtime != "" {
		args = append(args, "--runtime", runtime)
	}
	args = append(args, "--entrypoint", "python3", *image, "-c", program)
	start := time.Now()
	out, err := exec.Command("docker", args...).CombinedOutput()
	d := time.Since(start)
	if err != nil || string(out) != want {
		return 0, fmt.Errorf("docker run: %v %s", err, out)
	}
	return d, nil
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(float64(len(s)-1) * p / 100)
	return s[i]
}

func ms(d time.Duration) string   { return fmt.Sprintf("%.1f ms", msf(d)) }
func msf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
func ratio(a, b time.Duration) string {
	if b == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f×", float64(a)/float64(b))
}

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
	cmd := exec.Command(*bin, "dev")
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
		return "", "", 0, nil, fmt.Errorf("start %s (run `make build`): %w", *bin, err)
	}
	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
		}
		os.RemoveAll(dir)
		if conn, err := pgx.Connect(context.Background(), *dbURL); err == nil {
			_, _ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)")
			conn.Close(context.Background())
		}
	}
	sc := bufio.NewScanner(stdout)
	re := regexp.MustCompile(`API\s+(http://\S+)`)
	found := make(chan string, 1)
	go func() {
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	select {
	case url = <-found:
		return url, apiKey, cmd.Process.Pid, stop, nil
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
