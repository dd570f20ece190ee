package main

import (
	"fmt"
	"os"
	"time"
)

// Warm Node's rows (issue 35): `console.log(6*7)` and its TypeScript
// twin, back to back and paced, beside `print(6*7)` in the same run, and
// a cell of a stateful session's JavaScript kernel beside a Python cell. A Node or
// TypeScript job after another starts in a spare whose Node already runs
// (agent/nodespare.go); the spares follow the last job's kind, so the
// languages run in blocks (alternating, so that what else the machine
// does weighs on each alike), and each block's first jobs, which take the
// other kind's spares, are not counted.

// nodeLoads are the jobs of the rows, Python's first (the baseline); the
// last sets NODE_OPTIONS, which a Node started ahead could not apply: it
// gets a Node started for it, as every Node job did before the spares.
var nodeLoads = []struct {
	name, language, code string
	env                  map[string]string
}{
	{"`print(6*7)`", "python", code, nil},
	{"`console.log(6*7)` (Node)", "javascript", "console.log(6*7)", nil},
	{"`console.log(6*7)` (TypeScript)", "typescript", "const n: number = 6 * 7\nconsole.log(n)", nil},
	{"`console.log(6*7)` (Node) with NODE_OPTIONS set: a Node started for the job", "javascript", "console.log(6*7)", map[string]string{"NODE_OPTIONS": "--no-warnings"}},
}

// runLoad runs one job of load i.
func runLoad(c *client, i int) (timedJob, error) {
	l := nodeLoads[i]
	req := map[string]any{"language": l.language, "code": l.code}
	if l.env != nil {
		req["env"] = l.env
	}
	return c.executeTimed(req)
}

// nodeBlock is how many jobs of a language run in a row; nodeSkip of
// them are not counted.
const (
	nodeBlock = 10
	nodeSkip  = 3
)

// nodeOver is how much more than `print(6*7)` Node's job may take.
const nodeOver = 15 * time.Millisecond

// nodeBlocks runs the loads in blocks of size jobs, pause before each,
// until each has n counted; it returns their wall times, by load.
func nodeBlocks(c *client, n, size int, pause time.Duration) ([][]time.Duration, error) {
	walls := make([][]time.Duration, len(nodeLoads))
	for len(walls[0]) < n {
		for i := range nodeLoads {
			for k := range size {
				time.Sleep(pause)
				j, err := runLoad(c, i)
				if err != nil {
					return nil, err
				}
				if k >= nodeSkip {
					walls[i] = append(walls[i], j.wall)
				}
			}
		}
	}
	return walls, nil
}

// nodeTable is the rows of the loads' wall times, how being how they ran.
func nodeTable(walls [][]time.Duration, how string) []row {
	base := pct(walls[0], 50)
	rows := []row{{Name: fmt.Sprintf("sync execute `print(6*7)`, %s in blocks beside the Node rows below, p50", how), Gantry: ms(base), Value: msf(base)}}
	for i, l := range nodeLoads[1:] {
		p50 := pct(walls[i+1], 50)
		r := row{Name: fmt.Sprintf("sync execute %s, %s, p50", l.name, how), Gantry: ms(p50),
			Baseline: ms(base) + " (print)", Ratio: fmt.Sprintf("%+.1f ms", msf(p50-base)), Value: msf(p50)}
		if l.language == "javascript" && l.env == nil {
			r.Target, r.Met = fmt.Sprintf("≤ print + %d ms", nodeOver.Milliseconds()), met(p50-base <= nodeOver)
		}
		rows = append(rows, r)
	}
	return rows
}

// nodeRows measures the rows above, n counted jobs per language.
func nodeRows(c *client, n int) ([]row, error) {
	fmt.Fprintf(os.Stderr, "bench: %d × `print(6*7)`, `console.log(6*7)` in Node and in TypeScript, back to back in blocks of %d\n", n, nodeBlock)
	walls, err := nodeBlocks(c, n, nodeBlock, 0)
	if err != nil {
		return nil, err
	}
	rows := nodeTable(walls, "back to back")

	// Paced as an agent thinks between calls: each job finds its spare
	// ready (back to back, a Node's start-up, about 100 ms of CPU with
	// the distribution's Node, which has no startup snapshot, can fall
	// behind).
	fmt.Fprintf(os.Stderr, "bench: %d × the same, %s apart\n", n/2, *pace)
	paced, err := nodeBlocks(c, n/2, nodeSkip+3, *pace)
	if err != nil {
		return nil, err
	}
	rows = append(rows, nodeTable(paced, pace.String()+" apart")...)

	// A stateful session's cells: Python's interpreter, JavaScript's kernel.
	sid, err := c.session(true)
	if err != nil {
		return nil, err
	}
	defer func() { _, _, _ = c.do("DELETE", "/v1/sessions/"+sid, "") }()
	cells := map[string][]time.Duration{}
	for k := range n + 3 {
		for _, l := range nodeLoads[:2] {
			j, err := c.executeLang(l.language, sid, l.code)
			if err != nil {
				return nil, err
			}
			if k >= 3 { // the interpreter's and the kernel's start
				cells[l.language] = append(cells[l.language], j.wall)
			}
		}
	}
	py, js := pct(cells["python"], 50), pct(cells["javascript"], 50)
	rows = append(rows, row{Name: "`console.log(6*7)` in a stateful session (a cell of its JavaScript kernel), interleaved with Python's cells, p50",
		Gantry: ms(js), Baseline: ms(py) + " (a Python cell)", Ratio: fmt.Sprintf("%+.1f ms", msf(js-py)), Value: msf(js)})
	return rows, nil
}
