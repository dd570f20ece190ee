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
	image     = flag.String("image", "gantry-sandbox:latest", "sandbox image for the docker run baseline")
	latencyN  = flag.Int("n", 200, "sequential executions for the latency rows")
	baselineN = flag.Int("baseline-n", 50, "sequential docker runs for the baseline latency row")
	tputJobs  = flag.Int("jobs", 48, "jobs per throughput row")
	queued    = flag.Int("queued", 10000, "jobs queued (no runner) for the memory row")
	slots     = flag.Int("slots", 8, "runner slots of the started gantry")
	pace      = flag.Duration("pace", 500*time.Millisecond, "pause between the latency samples, as an agent thinks between calls (0: back to back)")
	jsonOut   = flag.String("json", "bench-results.json", "where to write the figures")
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
	url, apiKey := *target, *key
	var stop func()
	if url == "" {
		var err error
		if url, apiKey, _, stop, err = startDev(map[string]string{
			"GANTRY_RUNNER_SLOTS": strconv.Itoa(*slots), "GANTRY_POOL_MIN": strconv.Itoa(*slots), "GANTRY_POOL_MAX": strconv.Itoa(2 * *slots),
		}); err != nil {
			return err
		}
	}
	c := &client{url: url, key: apiKey, http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	fmt.Fprintln(os.Stderr, "bench: warming up")
	for range 10 {
		if _, err := c.execute(); err != nil {
			return err
		}
	}

	// Sync latency and queue latency. Samples are paced so that each finds
	// the warm pool refilled, as calls from an agent would; the back-to-back
	// row shows what happens when one client outruns the pool.
	fmt.Fprintf(os.Stderr, "bench: %d sequential executions, %s apart\n", *latencyN, *pace)
	var lat, queue, b2b []time.Duration
	for range *latencyN {
		time.Sleep(*pace)
		j, err := c.execute()
		if err != nil {
			return err
		}
		lat = append(lat, j.wall)
		queue = append(queue, j.queue)
	}
	fmt.Fprintln(os.Stderr, "bench: 50 executions back to back")
	for range 50 {
		j, err := c.execute()
		if err != nil {
			return err
		}
		b2b = append(b2b, j.wall)
	}
	fmt.Fprintf(os.Stderr, "bench: %d sequential docker runs\n", *baselineN)
	var base []time.Duration
	for range *baselineN {
		d, err := dockerRun()
		if err != nil {
			return err
		}
		base = append(base, d)
	}
	for _, q := range []float64{50, 95, 99} {
		g, b := pct(lat, q), pct(base, q)
		r := row{Name: fmt.Sprintf("sync execute `print(6*7)` p%.0f (warm pool)", q), Gantry: ms(g), Baseline: ms(b), Ratio: ratio(g, b), Value: msf(g)}
		switch q {
		case 50:
			r.Target, r.Met = "≤ 100 ms", met(g <= 100*time.Millisecond)
		case 99:
			r.Target, r.Met = "≤ 300 ms", met(g <= 300*time.Millisecond)
		}
		res.Rows = append(res.Rows, r)
	}
	res.Rows = append(res.Rows, row{Name: "sync execute p50, 50 back to back (pool outrun)", Gantry: ms(pct(b2b, 50)),
		Baseline: ms(pct(base, 50)), Ratio: ratio(pct(b2b, 50), pct(base, 50)), Value: msf(pct(b2b, 50))})
	for _, q := range []float64{50, 99} {
		g := pct(queue, q)
		r := row{Name: fmt.Sprintf("queue latency (accepted → started) p%.0f", q), Gantry: ms(g), Value: msf(g)}
		if q == 50 {
			r.Target, r.Met = "≤ 10 ms", met(g <= 10*time.Millisecond)
		}
		res.Rows = append(res.Rows, r)
	}

	// Code mode: a tool call's round trip from the sandbox through the
	// agent, the runner and an upstream MCP server over HTTP.
	if *target == "" {
		fmt.Fprintln(os.Stderr, "bench: code-mode tool calls")
		rows, err := codeModeRows(c)
		if err != nil {
			return err
		}
		res.Rows = append(res.Rows, rows...)
	}

	// Throughput.
	for _, conc := range []int{1, 4, 8, 16} {
		fmt.Fprintf(os.Stderr, "bench: throughput at concurrency %d\n", conc)
		g, err := throughput(conc, *tputJobs, func() error { _, err := c.execute(); return err })
		if err != nil {
			return err
		}
		b, err := throughput(conc, max(*tputJobs/2, conc), func() error { _, err := dockerRun(); return err })
		if err != nil {
			return err
		}
		r := row{Name: fmt.Sprintf("throughput at concurrency %d (jobs/s)", conc), Gantry: fmt.Sprintf("%.1f", g),
			Baseline: fmt.Sprintf("%.1f", b), Ratio: fmt.Sprintf("%.2f×", g/b), Value: g}
		if conc == 8 {
			r.Target, r.Met = "≥ 3× baseline", met(g >= 3*b)
		}
		res.Rows = append(res.Rows, r)
	}

	// Polling.
	fmt.Fprintln(os.Stderr, "bench: polling with 50 clients")
	j, err := c.execute()
	if err != nil {
		return err
	}
	rps, p99, err := poll(c, j.id, 50, 5*time.Second)
	if err != nil {
		return err
	}
	res.Rows = append(res.Rows,
		row{Name: "GET /v1/jobs/{id}, 50 pollers: requests/s", Gantry: fmt.Sprintf("%.0f", rps), Target: "≥ 2,000", Met: met(rps >= 2000), Value: rps},
		row{Name: "GET /v1/jobs/{id}, 50 pollers: p99", Gantry: ms(p99), Target: "≤ 20 ms", Met: met(p99 <= 20*time.Millisecond), Value: msf(p99)})
	if stop != nil {
		stop()
	}

	// Memory with a deep queue and no runner.
	if *target == "" && *queued > 0 {
		fmt.Fprintf(os.Stderr, "bench: queueing %d jobs with no runner\n", *queued)
		url, apiKey, pid, stop, err := startDev(map[string]string{"GANTRY_DEV_RUNNER": "false"})
		if err != nil {
			return err
		}
		qc := &client{url: url, key: apiKey, http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
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

func (c *client) execute() (timedJob, error) {
	start := time.Now()
	b, status, err := c.do("POST", "/v1/execute", `{"language":"python","code":"`+code+`"}`)
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
	if err := json.Unmarshal(b, &j); err != nil || status != 200 || j.Stdout != "42\n" {
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
func dockerRun() (time.Duration, error) {
	start := time.Now()
	out, err := exec.Command("docker", "run", "--rm", "--network", "none", "--read-only",
		"--tmpfs", "/workspace:rw,exec,nosuid,nodev,size=512m,uid=1000,gid=1000", "--tmpfs", "/tmp:rw,exec,nosuid,nodev,size=512m",
		"--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--user", "1000:1000",
		"--memory", "512m", "--memory-swap", "512m", "--cpus", "1", "--pids-limit", "128",
		*image, "python3", "-c", code).CombinedOutput()
	d := time.Since(start)
	if err != nil || string(out) != "42\n" {
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
func vmHWM(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	m := regexp.MustCompile(`VmHWM:\s+(\d+) kB`).FindSubmatch(b)
	if m == nil {
		return -1
	}
	kb, _ := strconv.Atoi(string(m[1]))
	return float64(kb) / 1024
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
		"GANTRY_LOG_LEVEL=warn", "GANTRY_RUNNER_ID=bench-"+hex.EncodeToString(b[:3]))
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
	c.do("DELETE", "/v1/mcp-servers/benchcrm", "")
	if body, status, err := c.do("POST", "/v1/mcp-servers", string(reg)); err != nil || status != http.StatusCreated {
		return nil, fmt.Errorf("register the fixture MCP server: %d %s %v", status, body, err)
	}
	defer c.do("DELETE", "/v1/mcp-servers/benchcrm", "")
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
