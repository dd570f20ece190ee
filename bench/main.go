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
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
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
	warmN     = flag.Int("warm-n", 50, "back-to-back executions per row of the warm interpreter's rows (0: none)")
	nodeN     = flag.Int("node-n", 49, "back-to-back executions counted per row of warm Node's rows (0: none)")
	portN     = flag.Int("port-n", 200, "requests of a sandbox's port through the ingress, and inside the sandbox (0: no port rows)")
	ttiN      = flag.Int("tti-n", 10, "sequential iterations of ComputeSDK's sandbox benchmark through its E2B provider (0: no ComputeSDK rows)")
	ttiBurst  = flag.Int("tti-burst", 100, "iterations of ComputeSDK's benchmark at once, after the sequential ones")
	liveN     = flag.Int("live-n", 5, "samples per row of the live state's rows: pause, resume, snapshot, fork (0: none)")
	compiledN = flag.Int("compiled-n", 5, "compile-and-run executions per compiled language, when the image has them")
	burst     = flag.Int("burst", 256, "SandboxFusion /run_code calls sent at once (0: none)")
	problems  = flag.Int("problems", 164, "HumanEval-style problems scored through /run_code and POST /v1/execute")
	judging   = flag.Bool("judging", true, "HumanEval through /run_code, compiling once, tests in a job and verl's burst of 100")
	only      = flag.String("only", "", "measure only these rows: judging (the judging rows and verl's burst, under Docker's default runtime), live (the live state's rows: pause, resume, snapshot, fork), tti (ComputeSDK's sandbox benchmark, sequential and a burst)")
)

const code = "print(6*7)"

func main() {
	flag.Parse()
	if *only != "" && *only != "judging" && *only != "live" && *only != "tti" {
		fmt.Fprintln(os.Stderr, "bench: -only takes judging, live or tti")
		os.Exit(2)
	}
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
	if *only != "" {
		printTable(res)
		data, _ := json.MarshalIndent(res, "", "  ")
		return os.WriteFile(*jsonOut, data, 0o644)
	}
	if *target == "" && *runsc && hasRuntime("runsc") {
		rows, err := measure("runsc")
		if err != nil {
			return err
		}
		res.Rows = append(res.Rows, rows...)
	}

	if *target == "" && *beforeBin != "" {
		rows, err := compareRows()
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

	if *only == "judging" {
		jr, err := judgingRows(c, runnerID, devPID)
		if err != nil {
			return nil, err
		}
		return append(jr, verlBurstRow(c)), nil
	}
	if *only == "live" {
		return liveStateRows(c, *liveN)
	}
	if *only == "tti" {
		return ttiRows(url, apiKey, max(*ttiN, 1), *ttiBurst)
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
	// The warm interpreter's rows (no warm interpreter under gVisor).
	if *target == "" && runtime == "" && *warmN > 0 {
		wr, err := warmRows(c, runnerID, devPID, *warmN)
		if err != nil {
			return nil, err
		}
		rows = append(rows, wr...)
	}

	// Warm Node: spares whose Node already runs (none under gVisor).
	if *target == "" && runtime == "" && *nodeN > 0 {
		nr, err := nodeRows(c, *nodeN)
		if err != nil {
			return nil, err
		}
		rows = append(rows, nr...)
	}

	// A sandbox port's requests through the ingress.
	if *target == "" && runtime == "" && *portN > 0 {
		pr, err := portRows(c, *portN)
		if err != nil {
			return nil, err
		}
		rows = append(rows, pr...)
	}

	// ComputeSDK's sandbox benchmark: live sandboxes' time to interactive.
	if runtime == "" && *ttiN > 0 {
		tr, err := ttiRows(url, apiKey, *ttiN, *ttiBurst)
		if err != nil {
			return nil, err
		}
		rows = append(rows, tr...)
	}

	// The live state's rows (under gVisor, run by the runner, whatever
	// runtime its other sandboxes use).
	if *target == "" && runtime == "" && *liveN > 0 {
		lr, err := liveStateRows(c, *liveN)
		if err != nil {
			return nil, err
		}
		rows = append(rows, lr...)
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
	if *judging {
		jr, err := judgingRows(c, runnerID, devPID)
		if err != nil {
			return nil, err
		}
		rows = append(append(rows, jr...), verlBurstRow(c))
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
