package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"
)

// compatRows measure SandboxFusion's /run_code as RL harnesses call it: a
// burst of calls at once (verl sends an RL step's test cases together),
// and HumanEval-style scoring — one program per problem, its solution and
// its asserts — through /run_code beside the native POST /v1/execute.
func compatRows(c *client, burst, problems int) ([]row, error) {
	sf := c.url + "/compat/key/" + c.key + "/sandboxfusion/run_code"
	fmt.Fprintf(os.Stderr, "bench: %d /run_code calls at once\n", burst)
	code := "import sys, time\nd = sys.stdin.read()\nif d.startswith('slow'):\n    time.sleep(8)\nprint(d.upper())\n"
	type call struct {
		wall    time.Duration
		verdict string
		retries int
	}
	calls := make([]call, burst)
	wrong := 0
	var mu sync.Mutex
	start := time.Now()
	var wg sync.WaitGroup
	for i := range burst {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stdin, want := fmt.Sprintf("x%d", i), "Success"
			switch {
			case i%32 == 7:
				stdin, want = "slow", "TimeLimitExceeded"
			case i%8 == 3:
				want = "wrong" // the harness compares the output; gantry runs it as any
			}
			t0 := time.Now()
			verdict, retries := runCode(sf, code, stdin, 5)
			calls[i] = call{wall: time.Since(t0), verdict: verdict, retries: retries}
			ok := verdict == want || (want == "wrong" && verdict == "Success")
			if !ok {
				mu.Lock()
				wrong++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	total := time.Since(start)
	var walls []time.Duration
	retried := 0
	for _, c := range calls {
		walls = append(walls, c.wall)
		if c.retries > 0 {
			retried++
		}
	}
	rows := []row{
		{Name: fmt.Sprintf("/run_code: %d calls at once (1 in 32 past its 5 s limit): calls/s", burst),
			Gantry: fmt.Sprintf("%.1f", float64(burst)/total.Seconds()), Value: float64(burst) / total.Seconds()},
		{Name: fmt.Sprintf("/run_code: %d calls at once: p50 / p99 per call", burst),
			Gantry: ms(pct(walls, 50)) + " / " + ms(pct(walls, 99)), Value: msf(pct(walls, 99))},
		{Name: fmt.Sprintf("/run_code: %d calls at once: wrong verdicts or lost calls; calls retried after a 504", burst),
			Gantry: fmt.Sprintf("%d; %d", wrong, retried), Target: "0 wrong", Met: met(wrong == 0), Value: float64(wrong)},
	}

	fmt.Fprintf(os.Stderr, "bench: HumanEval-style scoring of %d problems, through /run_code and POST /v1/execute\n", problems)
	programs := make([]string, problems)
	for i := range programs {
		op := "+"
		if i%2 == 1 {
			op = "-" // half the candidates are wrong
		}
		programs[i] = fmt.Sprintf("def add_%d(x: int) -> int:\n    \"\"\"Add %d to x.\"\"\"\n    return x %s %d\n\n\n"+
			"def check(candidate):\n    assert candidate(0) == %d\n    assert candidate(5) == %d\n\n\ncheck(add_%d)\n", i, i, op, i, i, 5+i, i)
	}
	score := func(pass func(program string) (bool, error)) (float64, time.Duration, error) {
		var passed int
		var mu sync.Mutex
		var next int
		start := time.Now()
		_, err := throughput(32, problems, func() error {
			mu.Lock()
			p := programs[next]
			next++
			mu.Unlock()
			ok, err := pass(p)
			if ok {
				mu.Lock()
				passed++
				mu.Unlock()
			}
			return err
		})
		return float64(passed) / float64(problems), time.Since(start), err
	}
	sfScore, sfTime, err := score(func(p string) (bool, error) {
		v, _ := runCode(sf, p, "", 10)
		return v == "Success", nil
	})
	if err != nil {
		return nil, err
	}
	nativeScore, nativeTime, err := score(func(p string) (bool, error) {
		b, code, err := c.do("POST", "/v1/execute", string(mustJSON(map[string]any{"language": "python", "code": p})))
		if err != nil || code != 200 {
			return false, fmt.Errorf("execute answered %d: %v %s", code, err, b)
		}
		var j struct{ Status string }
		_ = json.Unmarshal(b, &j)
		return j.Status == "succeeded", nil
	})
	if err != nil {
		return nil, err
	}
	rows = append(rows,
		row{Name: fmt.Sprintf("HumanEval-style scoring, %d problems at concurrency 32: /run_code (pass@1) vs POST /v1/execute", problems),
			Gantry: fmt.Sprintf("%.1f s (%.0f%%)", sfTime.Seconds(), 100*sfScore), Baseline: fmt.Sprintf("%.1f s (%.0f%%)", nativeTime.Seconds(), 100*nativeScore),
			Ratio: ratio(sfTime, nativeTime), Target: "same scores", Met: met(sfScore == nativeScore && sfScore == 0.5), Value: sfTime.Seconds()})
	return rows, nil
}

// runCode is one /run_code call as verl makes it (its body, its timeout of
// compile + run + 10 s, up to 3 attempts retrying only 504): the run's
// status (Success, TimeLimitExceeded, Failed, SandboxError, or the HTTP
// error), and how many retries it took.
func runCode(url, code, stdin string, timeout int) (string, int) {
	return runCodeLang(url, code, stdin, timeout, timeout, "python")
}

// runCodeLang is runCode with a language and its two timeouts.
func runCodeLang(url, code, stdin string, compileTimeout, runTimeout int, language string) (string, int) {
	body, _ := json.Marshal(map[string]any{"compile_timeout": compileTimeout, "run_timeout": runTimeout, "code": code, "stdin": stdin,
		"memory_limit_MB": 1024, "language": language, "files": map[string]string{}, "fetch_files": []string{}})
	client := &http.Client{Timeout: time.Duration(compileTimeout+runTimeout+10) * time.Second}
	for attempt := range 3 {
		resp, err := client.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			return "error: " + err.Error(), attempt
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusGatewayTimeout {
			time.Sleep(time.Duration(attempt+1) * time.Second)
			continue
		}
		var out struct {
			Status    string `json:"status"`
			RunResult *struct {
				Status string `json:"status"`
			} `json:"run_result"`
		}
		if resp.StatusCode != 200 || json.Unmarshal(data, &out) != nil {
			return fmt.Sprintf("HTTP %d", resp.StatusCode), attempt
		}
		if out.RunResult != nil && out.RunResult.Status == "TimeLimitExceeded" {
			return out.RunResult.Status, attempt
		}
		return out.Status, attempt
	}
	return "HTTP 504", 3
}
