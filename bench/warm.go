package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// The warm interpreter's rows (issue 21): the data stack's jobs back to
// back, each beside `print(6*7)` in the same run, with their CPU; a
// stateful session's call beside a plain job's; the warm interpreter's
// memory in each container.

// warmLoad is a Python job measured back to back.
type warmLoad struct {
	name, code string
	// over is how much more than `print(6*7)` it may cost (0: no target).
	over time.Duration
}

var warmLoads = []warmLoad{
	{name: "`print(6*7)`", code: code},
	{name: "`import pandas` and a DataFrame's sum", code: "import pandas as pd\nprint(pd.DataFrame({'a': [1, 2, 3]}).a.sum())", over: 30 * time.Millisecond},
	{name: "a pandas + matplotlib plot saved as a PNG artifact", code: `import os
import pandas as pd
import matplotlib.pyplot as plt
df = pd.DataFrame({"x": range(100), "y": [i * i for i in range(100)]})
ax = df.plot(x="x", y="y", title="squares")
os.makedirs("out", exist_ok=True)
plt.savefig("out/plot.png")
print(len(df))`, over: 250 * time.Millisecond},
	{name: "a scikit-learn fit (LinearRegression)", code: `import numpy as np
from sklearn.linear_model import LinearRegression
x = np.arange(100).reshape(-1, 1)
print(round(LinearRegression().fit(x, 2 * x.ravel() + 1).coef_[0], 3))`},
}

// warmRows measures the rows above on a gantry started by the bench. The
// jobs' wall times come from rounds of one job of each kind, so that what
// else the machine does weighs on all of them alike; their CPU from a
// phase of each kind alone (the containers' CPU cannot be told apart
// otherwise).
func warmRows(c *client, runnerID string, devPID int, n int) ([]row, error) {
	for _, w := range warmLoads {
		for range 3 { // the containers' first jobs of this kind
			if _, err := c.execute(w.code); err != nil {
				return nil, err
			}
		}
	}
	fmt.Fprintf(os.Stderr, "bench: %d rounds of the warm interpreter's %d jobs, back to back\n", n, len(warmLoads))
	walls := make([][]time.Duration, len(warmLoads))
	for range n {
		for i, w := range warmLoads {
			j, err := c.execute(w.code)
			if err != nil {
				return nil, err
			}
			walls[i] = append(walls[i], j.wall)
		}
	}
	var rows []row
	base := pct(walls[0], 50)
	for i, w := range warmLoads {
		k := max(n/2, 10)
		fmt.Fprintf(os.Stderr, "bench: CPU of %d × %s\n", k, w.name)
		meter := startCPU(runnerID, devPID)
		for range k {
			if _, err := c.execute(w.code); err != nil {
				return nil, err
			}
		}
		cpu := meter.perJob(k)
		p50 := pct(walls[i], 50)
		r := row{Name: fmt.Sprintf("warm interpreter: %s, back to back, p50", w.name), Gantry: ms(p50), Value: msf(p50)}
		if i > 0 {
			r.Baseline, r.Ratio = ms(base)+" (print)", fmt.Sprintf("%+.1f ms", msf(p50-base))
		}
		if w.over > 0 {
			r.Target, r.Met = fmt.Sprintf("≤ print + %d ms", w.over.Milliseconds()), met(p50-base <= w.over)
		}
		rows = append(rows, r,
			row{Name: fmt.Sprintf("warm interpreter: %s, CPU per job in the sandbox containers (gantry dev: %.1f ms, Docker: %.1f ms)", w.name, msf(cpu.gantry), msf(cpu.docker)),
				Gantry: ms(cpu.sandbox), Value: msf(cpu.sandbox)})
	}

	// A stateful session's call against a plain job, both `print(6*7)`,
	// and a plain (files-only) session's call for the session protocol's
	// own share.
	plainSession, err := c.session(false)
	if err != nil {
		return nil, err
	}
	stateful, err := c.session(true)
	if err != nil {
		return nil, err
	}
	samples := map[string][]time.Duration{}
	for range 3 {
		for _, sid := range []string{plainSession, stateful} {
			if _, err := c.executeIn(sid, code); err != nil {
				return nil, err
			}
		}
	}
	fmt.Fprintf(os.Stderr, "bench: %d × `print(6*7)` as a plain job, in a session, in a stateful session (interleaved)\n", n)
	for range n {
		for _, k := range []string{"", plainSession, stateful} {
			var j timedJob
			var err error
			if k == "" {
				j, err = c.execute(code)
			} else {
				j, err = c.executeIn(k, code)
			}
			if err != nil {
				return nil, err
			}
			samples[k] = append(samples[k], j.wall)
		}
	}
	plain, sess, live := pct(samples[""], 50), pct(samples[plainSession], 50), pct(samples[stateful], 50)
	rows = append(rows,
		row{Name: "`print(6*7)` as a plain job, interleaved with the two rows below, p50", Gantry: ms(plain), Value: msf(plain)},
		row{Name: "`print(6*7)` in a session (files kept, snapshot after each job), p50", Gantry: ms(sess), Baseline: ms(plain) + " (plain)",
			Ratio: fmt.Sprintf("%+.1f ms", msf(sess-plain)), Value: msf(sess)},
		row{Name: "`print(6*7)` in a stateful session (a cell of its interpreter), p50", Gantry: ms(live), Baseline: ms(plain) + " (plain)",
			Ratio: fmt.Sprintf("%+.1f ms", msf(live-plain)), Target: "≤ plain + 10 ms", Met: met(live-plain <= 10*time.Millisecond), Value: msf(live)})
	for _, sid := range []string{plainSession, stateful} {
		_, _, _ = c.do("DELETE", "/v1/sessions/"+sid, "")
	}

	rss, anon, count := warmMemory(runnerID)
	if count > 0 {
		rows = append(rows,
			row{Name: fmt.Sprintf("warm interpreter per container: resident memory (mean of %d)", count), Gantry: fmt.Sprintf("%.1f MB", rss), Value: rss},
			row{Name: "warm interpreter per container: its anonymous memory (its heap: what the libraries' import made, shared with its forks; not the files' pages)", Gantry: fmt.Sprintf("%.1f MB", anon), Value: anon})
	}
	return rows, nil
}

// session creates a session and returns its id.
func (c *client) session(stateful bool) (string, error) {
	b, status, err := c.do("POST", "/v1/sessions", string(mustJSON(map[string]any{"language": "python", "stateful": stateful})))
	if err != nil {
		return "", err
	}
	var s struct{ ID string }
	if json.Unmarshal(b, &s) != nil || status != 201 {
		return "", fmt.Errorf("create session answered %d: %s", status, b)
	}
	return s.ID, nil
}

// warmMemory finds each running container's warm interpreter (as the host
// sees it: the agent's child running warm.py; its sandboxes' processes
// share its command line) and returns the mean of its resident memory and
// of its anonymous memory (RssAnon: the heap its imports made, which its
// forks share until they write; its pages are shared with the spare
// sandbox forked from it, so "private" would not count them), in MB, and
// how many it measured.
func warmMemory(runnerID string) (rss, anon float64, n int) {
	out, err := exec.Command("docker", "ps", "-q", "--no-trunc", "--filter", "label=dev.gantry.runner="+runnerID).Output()
	if err != nil {
		return 0, 0, 0
	}
	for _, id := range strings.Fields(string(out)) {
		top, err := exec.Command("docker", "top", id, "-o", "pid,ppid,comm,args").Output()
		if err != nil {
			continue
		}
		var procs [][]string
		agent := ""
		for _, line := range strings.Split(string(top), "\n") {
			f := strings.Fields(line)
			if len(f) >= 4 {
				procs = append(procs, f)
				if f[2] == "gantry-agent" && f[len(f)-1] != "wait" && strings.Contains(line, "-isolation") {
					agent = f[0]
				}
			}
		}
		for _, f := range procs {
			if f[1] != agent || f[2] != "python3" || !strings.HasSuffix(f[len(f)-1], "/warm.py") {
				continue
			}
			pid, _ := strconv.Atoi(f[0])
			a := procStatus(pid, "RssAnon")
			if a < 0 {
				continue
			}
			rss += vmRSS(pid)
			anon += a
			n++
		}
	}
	if n == 0 {
		return 0, 0, 0
	}
	return rss / float64(n), anon / float64(n), n
}
