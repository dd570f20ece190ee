package runner

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gantryhq/gantry/agent/wire"
	"github.com/gantryhq/gantry/jobs"
)

// nodeRun runs a Node (or TypeScript) program in the container's agent with
// the launcher (""): the agent's choice).
func nodeRun(t *testing.T, c *Container, language, code string, args []string, env map[string]string, stdin string, launcher wire.Launcher) (wire.RunResult, string, string) {
	t.Helper()
	lang, _ := jobs.LookupLanguage(language)
	path := wire.ProgramDir + "/" + lang.File
	req := wire.Request{Argv: append(append(append([]string{}, lang.Command...), path), args...), Env: env,
		Files: []wire.File{{Path: path, Data: []byte(code)}}, Fresh: true, Launcher: launcher, TimeoutMS: 20000}
	if stdin != "" {
		req.Stdin = []byte(stdin)
	}
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := c.conn.Run(ctx, req, wire.RunIO{Stdout: &out, Stderr: &errb})
	if err != nil || !res.Exit.Started {
		t.Fatalf("run: %v %+v %q", err, res.Exit, errb.String())
	}
	return res, out.String(), errb.String()
}

// TestNodeSpares: a Node or TypeScript job after another starts in a spare
// whose Node is already running (agent/nodespare.go), and sees exactly
// what a Node started for it sees: its argv, environment, stdin, globals,
// module and exit, its TypeScript transpiled with source maps; nothing of
// one job reaches the next. One that sets what Node reads as it starts
// gets a Node of its own.
func TestNodeSpares(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker")
	}
	c := namespacesContainer(t, "no spares after a job under the container isolation: a container serves one job")
	spare := func(language, code string, args []string, env map[string]string, stdin string) (wire.RunResult, string, string) {
		t.Helper()
		// Node jobs first: the spares follow the kind of the last job, and
		// those made before are taken.
		for range 2 {
			nodeRun(t, c, language, "0", nil, nil, "", "")
		}
		res, out, errs := nodeRun(t, c, language, code, args, env, stdin, wire.LauncherSpare)
		return res, out, errs
	}

	// What a program sees, from a cold Node and from a spare's.
	probe := `const fs = require("fs");
console.log(JSON.stringify({argv: process.argv.slice(1), execArgv: process.execArgv, argv0: process.argv0,
  main: require.main === module, file: __filename, eval: process._eval, paths: require.resolve.paths("x"),
  globals: Object.getOwnPropertyNames(globalThis).sort(), env: process.env, cwd: process.cwd(),
  stdin: fs.readFileSync(0, "utf8"), title: process.title}));
process.exitCode = 3;`
	env := map[string]string{"JOB_VAR": "1", "NODE_PATH": "/tmp/gantry/lib:/workspace/lib", "HOME": "/workspace"}
	cold, coldOut, coldErr := nodeRun(t, c, "node", probe, []string{"a", "b c"}, env, "in\n", wire.LauncherBwrap)
	warm, warmOut, warmErr := spare("node", probe, []string{"a", "b c"}, env, "in\n")
	if warmOut != coldOut || warmErr != coldErr || warm.Exit.Code != 3 || cold.Exit.Code != 3 {
		t.Errorf("a spare's Node differs from a cold one:\ncold %d %s %q\nwarm %d %s %q", cold.Exit.Code, coldOut, coldErr, warm.Exit.Code, warmOut, warmErr)
	}
	if warm.Exit.Launcher != wire.LauncherSpare {
		t.Errorf("launcher %q", warm.Exit.Launcher)
	}

	// Nothing of a job reaches the next.
	if _, out, _ := spare("node", `globalThis.leak = 1; process.env.LEAK = "1"; require("fs").writeFileSync("/tmp/leak", "x");
require("http").leak = 1; console.log(process.pid)`, nil, nil, ""); strings.TrimSpace(out) == "" {
		t.Fatalf("leaking job: %q", out)
	}
	if res, out, errs := spare("node", `console.log(typeof globalThis.leak, process.env.LEAK, require("fs").existsSync("/tmp/leak"), require("http").leak)`, nil, nil, ""); out != "undefined undefined false undefined\n" || res.Exit.Launcher != wire.LauncherSpare {
		t.Errorf("the next job saw: %q %q (%s)", out, errs, res.Exit.Launcher)
	}

	// Random draws are each job's own (a spare starts from the image's
	// snapshot of Node: nothing drawn before it was made is replayed).
	draw := `console.log(Math.random(), require("crypto").randomUUID())`
	_, first, _ := spare("node", draw, nil, nil, "")
	if _, second, _ := spare("node", draw, nil, nil, ""); first == second || strings.Fields(first)[0] == strings.Fields(second)[0] {
		t.Errorf("two jobs drew %q and %q", first, second)
	}

	// An uncaught error: Node's report and exit status.
	if res, _, errs := spare("node", "function boom() { throw new Error('boom') }\nboom()", nil, nil, ""); res.Exit.Code != 1 ||
		!strings.Contains(errs, "Error: boom") || !strings.Contains(errs, "main.js:1") {
		t.Errorf("an uncaught error: %d %q", res.Exit.Code, errs)
	}

	// TypeScript: transpiled, run with source maps, argv as a cold one's.
	ts := "const n: number = 6\nconsole.log(n * 7, process.argv.slice(2).join(','))\nif (process.argv[2] === 'throw') { throw new Error('at line 3') }"
	if res, out, errs := spare("typescript", ts, []string{"x"}, nil, ""); out != "42 x\n" || res.Exit.Code != 0 || res.Exit.Launcher != wire.LauncherSpare {
		t.Errorf("TypeScript: %d %q %q %s", res.Exit.Code, out, errs, res.Exit.Launcher)
	}
	if res, _, errs := spare("typescript", ts, []string{"throw"}, nil, ""); res.Exit.Code != 1 || !strings.Contains(errs, "main.ts:3") {
		t.Errorf("a TypeScript error's trace: %d %q", res.Exit.Code, errs)
	}
	if res, _, errs := spare("typescript", "const = ;", nil, nil, ""); res.Exit.Code == 0 || !strings.Contains(errs, "main.ts") {
		t.Errorf("TypeScript that does not transpile: %d %q", res.Exit.Code, errs)
	}

	// What Node reads as it starts needs a Node of its own.
	for range 2 {
		nodeRun(t, c, "node", "0", nil, nil, "", "")
	}
	if res, out, _ := nodeRun(t, c, "node", "console.log(process.execArgv.length, process.env.NODE_OPTIONS)", nil,
		map[string]string{"NODE_OPTIONS": "--no-warnings"}, "", ""); out != "0 --no-warnings\n" || res.Exit.Launcher == wire.LauncherSpare {
		t.Errorf("NODE_OPTIONS: %q %s", out, res.Exit.Launcher)
	}
}

// TestSparesOfTwoKinds: a container whose jobs go back and forth between
// Python and Node keeps a spare of each (agent/spare.go, topUpSpares), so
// that every job after the first two starts in one, instead of finding the
// other kind's at the head and discarding it.
func TestSparesOfTwoKinds(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker")
	}
	c := namespacesContainer(t, "a container serves one job under the container isolation")
	var missed []string
	for i, kind := range "PNNPPNNPPN" {
		language := "python"
		if kind == 'N' {
			language = "node"
		}
		code := "print(6*7)"
		if language == "node" {
			code = "console.log(6*7)"
		}
		res, out, _ := nodeRun(t, c, language, code, nil, nil, "", "")
		if out != "42\n" {
			t.Fatalf("%s: %q", language, out)
		}
		if i >= 2 && res.Exit.Launcher != wire.LauncherSpare {
			missed = append(missed, fmt.Sprintf("job %d (%s): %s", i, language, res.Exit.Launcher))
		}
	}
	if len(missed) > 0 {
		t.Errorf("jobs that found no spare of their kind: %v", missed)
	}
}
