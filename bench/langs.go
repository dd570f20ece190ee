package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// accountingRows report what measuring each job's CPU time and peak
// memory cost: the agent's wait for a sandbox's init after its output
// ended (gantry_sandbox_accounting_seconds, over the runs so far), beside
// a back-to-back job's latency p50.
func accountingRows(c *client, b2bP50 time.Duration) ([]row, error) {
	body, status, err := c.do("GET", "/metrics", "")
	if err != nil || status != 200 {
		return nil, fmt.Errorf("GET /metrics: %d %v", status, err)
	}
	h, err := histogram(body, "gantry_sandbox_accounting_seconds")
	if err != nil {
		return nil, err
	}
	if h.count == 0 {
		return nil, nil // no sandbox reported (under gVisor a job's program is the agent's child)
	}
	mean := time.Duration(h.sum / h.count * 1e9)
	p50 := time.Duration(h.quantile(0.5) * 1e9)
	p99 := time.Duration(h.quantile(0.99) * 1e9)
	share := 100 * float64(p50) / float64(b2bP50)
	return []row{
		{Name: fmt.Sprintf("usage accounting per run (the agent's wait for the sandbox's init after its output ended), p50 of %.0f runs (bucket bound)", h.count),
			Gantry: fmt.Sprintf("≤ %.3f ms", msf(p50)), Value: msf(p50)},
		{Name: "usage accounting per run, p99 (bucket bound); mean", Gantry: fmt.Sprintf("≤ %.3f ms; %.3f ms", msf(p99), msf(mean)), Value: msf(p99)},
		{Name: "usage accounting p50, share of a back-to-back job's p50", Gantry: fmt.Sprintf("≤ %.2f%%", share),
			Target: "≤ 1%", Met: met(share <= 1), Value: share},
	}, nil
}

// promHistogram is a Prometheus histogram as /metrics shows it.
type promHistogram struct {
	sum, count float64
	buckets    [][2]float64 // upper bound, cumulative count
}

// quantile is the upper bound of the bucket holding quantile q.
func (h promHistogram) quantile(q float64) float64 {
	for _, b := range h.buckets {
		if b[1] >= q*h.count {
			return b[0]
		}
	}
	return math.Inf(1)
}

func histogram(metrics []byte, name string) (promHistogram, error) {
	var h promHistogram
	sc := bufio.NewScanner(bytes.NewReader(metrics))
	for sc.Scan() {
		line := sc.Text()
		key, val, ok := strings.Cut(line, " ")
		if !ok || !strings.HasPrefix(key, name) {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			continue
		}
		switch {
		case key == name+"_sum":
			h.sum = v
		case key == name+"_count":
			h.count = v
		case strings.HasPrefix(key, name+`_bucket{le="`):
			le := strings.TrimSuffix(strings.TrimPrefix(key, name+`_bucket{le="`), `"}`)
			bound, err := strconv.ParseFloat(le, 64)
			if le == "+Inf" {
				bound, err = math.Inf(1), nil
			}
			if err == nil {
				h.buckets = append(h.buckets, [2]float64{bound, v})
			}
		}
	}
	return h, sc.Err()
}

// compiledHello is a program per compiled language that reads a line and
// greets it.
var compiledHello = map[string]string{
	"c":    "#include <stdio.h>\nint main(void) { char s[64]; if (scanf(\"%63s\", s) == 1) printf(\"hello %s\\n\", s); }\n",
	"cpp":  "#include <bits/stdc++.h>\nint main() { std::string s; std::cin >> s; std::cout << \"hello \" << s << '\\n'; }\n",
	"go":   "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tvar s string\n\tfmt.Scan(&s)\n\tfmt.Println(\"hello\", s)\n}\n",
	"java": "import java.util.Scanner;\npublic class Main { public static void main(String[] a) { System.out.println(\"hello \" + new Scanner(System.in).next()); } }\n",
	"rust": "fn main() { let mut s = String::new(); std::io::stdin().read_line(&mut s).unwrap(); println!(\"hello {}\", s.trim()); }\n",
}

// compiledRows compile and run a small program in each compiled language
// the gantry offers (the compilers image): the compile step's time and CPU,
// and the whole execute's wall time, p50 of n each.
func compiledRows(c *client, n int) ([]row, error) {
	body, _, err := c.do("GET", "/v1/languages", "")
	if err != nil {
		return nil, err
	}
	var list struct {
		Languages []struct{ Name string } `json:"languages"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, err
	}
	var rows []row
	for _, l := range list.Languages {
		code, ok := compiledHello[l.Name]
		if !ok {
			continue
		}
		fmt.Fprintf(os.Stderr, "bench: %d compile-and-run executions in %s\n", n, l.Name)
		var compile, compileCPU, wall, runCPU []time.Duration
		for i := range n + 1 {
			req := mustJSON(map[string]any{"language": l.Name, "code": code, "stdin": "bench\n", "compile_timeout_ms": 120_000})
			start := time.Now()
			b, status, err := c.do("POST", "/v1/execute", string(req))
			d := time.Since(start)
			if err != nil {
				return nil, err
			}
			var j struct {
				Status  string `json:"status"`
				Stdout  string `json:"stdout"`
				CPU     *int64 `json:"cpu_time_ms"`
				Compile *struct {
					DurationMS int64  `json:"duration_ms"`
					CPUTimeMS  *int64 `json:"cpu_time_ms"`
				} `json:"compile"`
			}
			if err := json.Unmarshal(b, &j); err != nil || status != 200 || j.Status != "succeeded" || j.Stdout != "hello bench\n" || j.Compile == nil {
				return nil, fmt.Errorf("execute in %s answered %d: %s", l.Name, status, b)
			}
			if i == 0 {
				continue // the first reads the compiler from disk
			}
			compile = append(compile, time.Duration(j.Compile.DurationMS)*time.Millisecond)
			compileCPU = append(compileCPU, time.Duration(deref(j.Compile.CPUTimeMS))*time.Millisecond)
			runCPU = append(runCPU, time.Duration(deref(j.CPU))*time.Millisecond)
			wall = append(wall, d)
		}
		rows = append(rows,
			row{Name: fmt.Sprintf("%s: compile step p50 (its CPU time)", l.Name), Gantry: fmt.Sprintf("%s (%s)", ms(pct(compile, 50)), ms(pct(compileCPU, 50))), Value: msf(pct(compile, 50))},
			row{Name: fmt.Sprintf("%s: sync execute of a compiled hello (compile and run) p50 (the program's CPU time)", l.Name),
				Gantry: fmt.Sprintf("%s (%s)", ms(pct(wall, 50)), ms(pct(runCPU, 50))), Value: msf(pct(wall, 50))})
	}
	return rows, nil
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
