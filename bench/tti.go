package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ComputeSDK's sandbox benchmark (github.com/computesdk/benchmarks) against
// gantry, through its own E2B provider (npm @computesdk/e2b, unmodified,
// installed by make compat-deps): each iteration creates a sandbox, runs
// its identity probe and node -v, and destroys it; the time to interactive
// is from create to node -v's answer. Sequential iterations, then a burst
// at once, beside plain docker run --rm IMAGE node -v in the same run.

// computeSDKResult is what test/compatclients/e2b.mjs computesdkBench prints.
type computeSDKResult struct {
	Sequential  []float64 `json:"sequential"`
	Burst       []float64 `json:"burst"`
	BurstWallMS float64   `json:"burstWallMs"`
	Errors      []string  `json:"errors"`
}

// computeSDK runs ComputeSDK's iterations against the gantry at url:
// sequential one after another, then burst at once; nil (and no error)
// when node or the provider is not installed.
func computeSDK(url, apiKey string, sequential, burst int) (*computeSDKResult, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: no node: no ComputeSDK rows")
		return nil, nil
	}
	dir := filepath.Join("test", "compatclients")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@computesdk", "e2b")); err != nil {
		fmt.Fprintln(os.Stderr, "bench: @computesdk/e2b is not installed (make compat-deps): no ComputeSDK rows")
		return nil, nil
	}
	cmd := exec.Command(node, filepath.Join(dir, "e2b.mjs"), "computesdkBench")
	cmd.Env = append(os.Environ(), "E2B_API_URL="+url+"/compat/e2b", "E2B_SANDBOX_URL="+url+"/compat/e2b/sandbox",
		"E2B_API_KEY=e2b_"+apiKey, "BENCH_SEQUENTIAL="+strconv.Itoa(sequential), "BENCH_BURST="+strconv.Itoa(burst))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("e2b.mjs computesdkBench: %v: %s%s", err, raw, stderr.String())
	}
	var res computeSDKResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("e2b.mjs computesdkBench: %v: %s", err, raw)
	}
	for i, e := range res.Errors {
		if i == 5 {
			break
		}
		fmt.Fprintln(os.Stderr, "bench: a ComputeSDK iteration failed:", e)
	}
	return &res, nil
}

// durations turns a list of milliseconds into durations.
func durations(msList []float64) []time.Duration {
	var ds []time.Duration
	for _, m := range msList {
		ds = append(ds, time.Duration(m*float64(time.Millisecond)))
	}
	return ds
}

func ttiRows(url, apiKey string, sequential, burst int) ([]row, error) {
	fmt.Fprintf(os.Stderr, "bench: ComputeSDK's iteration through @computesdk/e2b: %d one after another, then %d at once\n", sequential, burst)
	res, err := computeSDK(url, apiKey, sequential, burst)
	if res == nil || err != nil {
		return nil, err
	}

	// The baseline: a container made, node -v run in it, and removed.
	var base []time.Duration
	for range max(sequential, 5) {
		start := time.Now()
		out, err := exec.Command("docker", "run", "--rm", "--network", "none", "--entrypoint", "node", *image, "-v").CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("docker run node -v: %v %s", err, out)
		}
		base = append(base, time.Since(start))
	}
	seq, bst := durations(res.Sequential), durations(res.Burst)
	seqMed, baseMed := pct(seq, 50), pct(base, 50)
	failedSeq := sequential - len(seq)
	rows := []row{{
		Name:   fmt.Sprintf("ComputeSDK's iteration through @computesdk/e2b (create, identity probe, node -v), %d one after another: median time to interactive (failed) vs docker run --rm IMAGE node -v", sequential),
		Gantry: fmt.Sprintf("%s (%d failed)", ms(seqMed), failedSeq), Baseline: ms(baseMed), Ratio: ratio(seqMed, baseMed),
		Target: "≤ 0.4× docker run", Met: met(failedSeq == 0 && seqMed > 0 && float64(seqMed) <= 0.4*float64(baseMed)), Value: msf(seqMed),
	}}
	wall := time.Duration(res.BurstWallMS * float64(time.Millisecond))
	rows = append(rows, row{
		Name:   fmt.Sprintf("ComputeSDK's burst: %d iterations at once: interactive of %d, median, last", burst, burst),
		Gantry: fmt.Sprintf("%d/%d, %s, %s", len(bst), burst, ms(pct(bst, 50)), ms(pct(bst, 100))),
		Target: fmt.Sprintf("%d/%d, last ≤ 5 s", burst, burst), Met: met(len(bst) == burst && pct(bst, 100) <= 5*time.Second),
		Value: msf(pct(bst, 100)),
	}, row{Name: "ComputeSDK's burst: wall time of the whole burst", Gantry: ms(wall), Value: msf(wall)})
	return rows, nil
}
