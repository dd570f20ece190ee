package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"
)

// HumanEval's 164 problems (github.com/openai/human-eval, MIT licence,
// data/HumanEval.jsonl.gz at commit 6d43fb98), as published.
//
//go:embed testdata/HumanEval.jsonl.gz
var humanEvalGz []byte

// humanEvalProblem is one line of HumanEval.jsonl.
type humanEvalProblem struct {
	TaskID            string `json:"task_id"`
	Prompt            string `json:"prompt"`
	CanonicalSolution string `json:"canonical_solution"`
	Test              string `json:"test"`
	EntryPoint        string `json:"entry_point"`
}

func humanEval() ([]humanEvalProblem, error) {
	zr, err := gzip.NewReader(bytes.NewReader(humanEvalGz))
	if err != nil {
		return nil, err
	}
	var out []humanEvalProblem
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var p humanEvalProblem
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, sc.Err()
}

// program is HumanEval's harness around a completion: the prompt, the
// completion, the tests and check(entry point), as human-eval's
// execution.py puts them together.
func (p humanEvalProblem) program(completion string) string {
	return p.Prompt + completion + "\n" + p.Test + "\n" + fmt.Sprintf("check(%s)", p.EntryPoint) + "\n"
}

// judgingRows measure what judges and RL reward pipelines do: HumanEval's
// canonical and broken solutions through SandboxFusion's /run_code, a
// program compiled once across calls, tests in a job, and verl's burst of
// 100 programs that all run past their time limit.
func judgingRows(c *client, runnerID string, devPID int) ([]row, error) {
	var rows []row
	sf := c.url + "/compat/key/" + c.key + "/sandboxfusion/run_code"

	problems, err := humanEval()
	if err != nil {
		return nil, fmt.Errorf("HumanEval: %w", err)
	}
	fmt.Fprintf(os.Stderr, "bench: HumanEval's %d problems, canonical and broken, through /run_code\n", len(problems))
	type sample struct {
		task, program string
		good          bool
	}
	var samples []sample
	for _, p := range problems {
		samples = append(samples, sample{p.TaskID, p.program(p.CanonicalSolution), true})
		// Broken: the body returns nothing (every problem's checks then fail).
		samples = append(samples, sample{p.TaskID, p.program("    return None\n"), false})
	}
	var mu sync.Mutex
	next, passedGood, passedBroken := 0, 0, 0
	var missed []string // canonical solutions that did not pass, and what came back
	start := time.Now()
	_, err = throughput(32, len(samples), func() error {
		mu.Lock()
		s := samples[next]
		next++
		mu.Unlock()
		verdict, _ := runCode(sf, s.program, "", 10)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case verdict == "Success" && s.good:
			passedGood++
		case verdict == "Success":
			passedBroken++
		case s.good:
			missed = append(missed, s.task+": "+verdict)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	took := time.Since(start)
	rows = append(rows, row{Name: fmt.Sprintf("HumanEval through /run_code: %d canonical and %d broken solutions at concurrency 32: jobs/s (canonical passed, broken passed)", len(problems), len(problems)),
		Gantry: fmt.Sprintf("%.1f jobs/s (%d/%d, %d/%d)%s", float64(len(samples))/took.Seconds(), passedGood, len(problems), passedBroken, len(problems), listed(missed)),
		Target: "every canonical passes, no broken one", Met: met(passedGood == len(problems) && passedBroken == 0), Value: float64(len(samples)) / took.Seconds()})

	// Tests in a job: 40 Python tests in one job against 40 jobs back to
	// back, in turn, three rounds (the medians: a shared machine's load
	// moves between phases), with the CPU each phase cost (a profile of
	// where a test's time goes, beside a job's).
	fmt.Fprintln(os.Stderr, "bench: 40 Python tests in one job, and 40 jobs back to back, three rounds")
	tr, err := testsVsJobs(c, runnerID, devPID)
	if err != nil {
		return nil, err
	}
	rows = append(rows, tr...)

	if !c.offers("cpp") {
		fmt.Fprintln(os.Stderr, "bench: the sandbox image runs no C++: no compile rows (SANDBOX=compilers make bench)")
		return rows, nil
	}

	// Compile once: 20 calls of one program against 20 distinct programs
	// of the same size, through /run_code, one after another.
	fmt.Fprintln(os.Stderr, "bench: 20 /run_code calls of one C++ program, and of 20 distinct ones")
	stamp := time.Now().UnixNano()
	cpp := func(tag string) string {
		return "#include <bits/stdc++.h>\nusing namespace std;\nint main() { string s; cin >> s; map<char, int> n; for (char c : s) n[c]++; " +
			"cout << s << \" " + tag + " \" << n.size() << \"\\n\"; }\n"
	}
	same, distinct := cpp(fmt.Sprintf("same%d", stamp)), func(i int) string { return cpp(fmt.Sprintf("d%03d%d", i, stamp)) }
	timeCalls := func(code func(i int) string) (time.Duration, int) {
		ok := 0
		start := time.Now()
		for i := range 20 {
			if v, _ := runCodeLang(sf, code(i), fmt.Sprintf("in%d", i), 60, 10, "cpp"); v == "Success" {
				ok++
			}
		}
		return time.Since(start), ok
	}
	distinctT, okD := timeCalls(distinct)
	sameT, okS := timeCalls(func(int) string { return same })
	rows = append(rows, row{Name: "20 /run_code calls of one C++ program (compiled once) vs 20 distinct programs of its size",
		Gantry: fmt.Sprintf("%s (%d ok)", ms(sameT), okS), Baseline: fmt.Sprintf("%s (%d ok)", ms(distinctT), okD),
		Ratio:  fmt.Sprintf("%.1f× faster", distinctT.Seconds()/sameT.Seconds()),
		Target: "≥ 8× faster", Met: met(okS == 20 && sameT*8 <= distinctT), Value: msf(sameT)})

	// A C++ problem with 50 tests: cold (compiled in the job) and cached.
	fmt.Fprintln(os.Stderr, "bench: a C++ problem with 50 tests, cold and cached")
	var cppTests []map[string]any
	for i := range 50 {
		in := strings.Repeat("ab", i+1)
		cppTests = append(cppTests, map[string]any{"stdin": in, "expected_stdout": fmt.Sprintf("%s t%d 2", in, stamp)})
	}
	cold, okCold, err := timedTests(c, "cpp", cpp(fmt.Sprintf("t%d", stamp)), cppTests)
	if err != nil {
		return nil, err
	}
	warm, okWarm, err := timedTests(c, "cpp", cpp(fmt.Sprintf("t%d", stamp)), cppTests)
	if err != nil {
		return nil, err
	}
	rows = append(rows, row{Name: "a C++ problem with 50 tests in one job: cold (compiled once) / cached build",
		Gantry: fmt.Sprintf("%s (%d passed) / %s (%d passed)", ms(cold), okCold, ms(warm), okWarm), Value: msf(warm)})

	return rows, nil
}

// listed is " (a; b)" of what it is given, or "".
func listed(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return " (" + strings.Join(s, "; ") + ")"
}

// testsVsJobs times 40 Python tests in one job against the same 40 runs
// as jobs back to back, in turn for three rounds, and reports the medians;
// with a runner of the bench's own (runnerID), also the CPU per test and
// per job: in the sandbox containers (the agent, the sandboxes' set-up and
// teardown, the program) and in gantry dev.
func testsVsJobs(c *client, runnerID string, devPID int) ([]row, error) {
	const n, rounds = 40, 3
	py := "import sys\nprint(sum(map(int, sys.stdin.read().split())))\n"
	var tests []map[string]any
	for i := range n {
		tests = append(tests, map[string]any{"stdin": fmt.Sprintf("%d %d", i, i), "expected_stdout": fmt.Sprint(2 * i)})
	}
	var oneJob, backToBack []time.Duration
	var perTest, perJob []cpuTimes
	minPassed := n
	for range rounds {
		meter := startCPU(runnerID, devPID)
		d, passed, err := timedTests(c, "python", py, tests)
		if err != nil {
			return nil, err
		}
		perTest = append(perTest, meter.perJob(n))
		oneJob, minPassed = append(oneJob, d), min(minPassed, passed)

		meter = startCPU(runnerID, devPID)
		start := time.Now()
		for i := range n {
			if _, err := c.executeReq(map[string]any{"language": "python", "code": py, "stdin": fmt.Sprintf("%d %d", i, i)}); err != nil {
				return nil, err
			}
		}
		backToBack = append(backToBack, time.Since(start))
		perJob = append(perJob, meter.perJob(n))
	}
	one, b2b := pct(oneJob, 50), pct(backToBack, 50)
	rows := []row{{Name: fmt.Sprintf("%d Python tests: in one job vs %d jobs back to back (medians of %d rounds in turn)", n, n, rounds),
		Gantry:   fmt.Sprintf("%s (fewest passed: %d)", ms(one), minPassed),
		Baseline: ms(b2b), Ratio: fmt.Sprintf("%.2f of the jobs' time", one.Seconds()/b2b.Seconds()),
		Target: "≤ ½ of the jobs'", Met: met(minPassed == n && one*2 <= b2b), Value: msf(one)}}
	if runnerID == "" {
		return rows, nil
	}
	median := func(cs []cpuTimes, f func(cpuTimes) time.Duration) time.Duration {
		var ds []time.Duration
		for _, c := range cs {
			ds = append(ds, f(c))
		}
		return pct(ds, 50)
	}
	for _, part := range []struct {
		name string
		f    func(cpuTimes) time.Duration
	}{
		{"in the sandbox containers (agent, sandboxes made and ended, program)", func(c cpuTimes) time.Duration { return c.sandbox }},
		{"in gantry dev (ingress, runner, NATS)", func(c cpuTimes) time.Duration { return c.gantry }},
	} {
		t, j := median(perTest, part.f), median(perJob, part.f)
		rows = append(rows, row{Name: "CPU per Python test in one job vs per job back to back: " + part.name,
			Gantry: ms(t), Baseline: ms(j), Ratio: ratio(t, j), Value: msf(t)})
	}
	return rows, nil
}

// verlBurstRow is verl's test of 100 programs that all run past their
// 10 s limit (its test_integration_concurrency_all_timeout), sent as verl's
// check_correctness sends them: through a pool of max(32, 5 × CPUs)
// threads, one call each: the time to the last answer, and how many came
// back as timeouts.
func verlBurstRow(c *client) row {
	fmt.Fprintln(os.Stderr, "bench: verl's 100 programs at once, all past their time limit")
	sf := c.url + "/compat/key/" + c.key + "/sandboxfusion/run_code"
	code := "\ndef knight_moves(X, Y):\n    MOD = 10**9 + 7\n    dp = [[0] * (Y + 1) for _ in range(X + 1)]\n    dp[0][0] = 1\n" +
		"    for i in range(1, X + 1):\n        for j in range(1, Y + 1):\n            dp[i][j] = (dp[i - 1][j] + dp[i][j - 1]) % MOD\n" +
		"    return dp[X][Y]\n\ndef solve():\n    X, Y = map(int, input().split())\n    print(knight_moves(X, Y))\n\nif __name__ == \"__main__\":\n    solve()\n    "
	var mu sync.Mutex
	timeouts, retried := 0, 0
	start := time.Now()
	_, _ = throughput(max(32, 5*runtime.NumCPU()), 100, func() error {
		v, r := runCode(sf, code, "324 384429", 10)
		mu.Lock()
		defer mu.Unlock()
		if v == "TimeLimitExceeded" {
			timeouts++
		}
		if r > 0 {
			retried++
		}
		return nil
	})
	took := time.Since(start)
	return row{Name: "verl's 100 programs, all past their 10 s limit, through verl's pool of 32 calls: time to the last answer (timeouts; calls retried after a 504)",
		Gantry: fmt.Sprintf("%.1f s (%d/100; %d)", took.Seconds(), timeouts, retried), Target: "100/100 timeouts", Met: met(timeouts == 100), Value: took.Seconds()}
}

// timedTests runs one job with tests and waits for it: its wall time from
// submission to the answer, and how many tests passed.
func timedTests(c *client, lang, code string, tests []map[string]any) (time.Duration, int, error) {
	start := time.Now()
	j, err := c.executeReq(map[string]any{"language": lang, "code": code, "tests": tests, "compile_timeout_ms": 120000, "timeout_ms": 20000})
	if err != nil {
		return 0, 0, err
	}
	var out struct {
		TestsPassed *int `json:"tests_passed"`
	}
	_ = json.Unmarshal(j, &out)
	n := 0
	if out.TestsPassed != nil {
		n = *out.TestsPassed
	}
	return time.Since(start), n, nil
}

// executeReq is POST /v1/execute of req: the finished job's body.
func (c *client) executeReq(req map[string]any) ([]byte, error) {
	b, code, err := c.do("POST", "/v1/execute", string(mustJSON(req)))
	if err != nil || code != http.StatusOK {
		return nil, fmt.Errorf("execute answered %d: %v %s", code, err, b)
	}
	return b, nil
}

// offers reports whether the gantry offers the language.
func (c *client) offers(lang string) bool {
	b, code, err := c.do("GET", "/v1/languages", "")
	if err != nil || code != http.StatusOK {
		return false
	}
	var l struct{ Languages []struct{ Name string } }
	_ = json.Unmarshal(b, &l)
	for _, x := range l.Languages {
		if x.Name == lang {
			return true
		}
	}
	return false
}
