package runner

import (
	"strings"
	"testing"

	"github.com/gantryhq/gantry/jobs"
)

func js(code string) jobs.Request { return jobs.Request{Language: "javascript", Code: code} }

// TestJavaScriptKernels: a stateful session's JavaScript and TypeScript
// jobs are cells of its kernels (agent/jskernel.go): globals persist from
// cell to cell, each kernel has its own, and a cell is a job like any,
// with its output, value, error, exit code, CPU time and timeout.
func TestJavaScriptKernels(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker, Postgres, NATS and S3")
	}
	h := newHarness(t, 2)
	sid := h.statefulSession(t)
	value := func(j jobs.Job) string {
		if j.Value == nil {
			return ""
		}
		return j.Value.Text
	}
	want := func(j jobs.Job, status jobs.Status, stdout, val string) {
		t.Helper()
		if j.Status != status || j.Stdout != stdout || value(j) != val {
			t.Fatalf("%s %q value %q (want %s %q %q) stderr %q %+v", j.Status, j.Stdout, value(j), status, stdout, val, j.Stderr, j.Error)
		}
	}
	want(h.in(t, sid, py("x = 1")), jobs.StatusSucceeded, "", "")
	j := h.in(t, sid, js("const n = 20; console.log('from js'); console.error('to stderr'); n + 1"))
	want(j, jobs.StatusSucceeded, "from js\n", "21")
	if j.Stderr != "to stderr\n" || j.LiveState != jobs.LiveKept {
		t.Errorf("stderr %q, live %s", j.Stderr, j.LiveState)
	}
	want(h.in(t, sid, js("globalThis.obj = {a: [1, 2]}; n * 2")), jobs.StatusSucceeded, "", "40")
	if j := h.in(t, sid, js("obj")); j.Value == nil || strings.ReplaceAll(string(j.Value.JSON), " ", "") != `{"a":[1,2]}` {
		t.Errorf("an object's value: %+v", j.Value)
	}
	// An error: its name and message as the exception, told on stderr; the
	// kernel and its globals stay.
	j = h.in(t, sid, js("function f() { return null.x }\nf()"))
	if j.Status != jobs.StatusFailed || j.ExitCode == nil || *j.ExitCode != 1 || j.Exception == nil || j.Exception.Name != "TypeError" ||
		!strings.Contains(j.Stderr, "Cannot read properties of null") || !strings.Contains(j.Exception.Traceback, "at f") {
		t.Errorf("an error: %s %v %+v %q", j.Status, j.ExitCode, j.Exception, j.Stderr)
	}
	if j := h.in(t, sid, js("process.exitCode = 3; 'set'")); j.Status != jobs.StatusFailed || *j.ExitCode != 3 {
		t.Errorf("process.exitCode: %s %v", j.Status, j.ExitCode)
	}
	want(h.in(t, sid, js("n")), jobs.StatusSucceeded, "", "20")
	// A cell's NODE_PATH counts for its requires (code mode's wrappers).
	lib := js("require('mymod').answer")
	lib.Env = map[string]string{"NODE_PATH": "/workspace/lib"}
	lib.Files = []jobs.File{{Path: "lib/mymod.js", Content: "exports.answer = 42"}}
	want(h.in(t, sid, lib), jobs.StatusSucceeded, "", "42")
	// TypeScript has a kernel of its own, as has a kernel named.
	want(h.in(t, sid, jobs.Request{Language: "typescript", Code: "let t: number = 5; t * 3"}), jobs.StatusSucceeded, "", "15")
	want(h.in(t, sid, jobs.Request{Language: "typescript", Code: "typeof n"}), jobs.StatusSucceeded, "", `"undefined"`)
	other := js("var own = 'mine'; typeof n")
	other.Kernel = "other"
	want(h.in(t, sid, other), jobs.StatusSucceeded, "", `"undefined"`)
	other.Code = "own"
	want(h.in(t, sid, other), jobs.StatusSucceeded, "", `"mine"`)
	wrong := jobs.Request{Language: "typescript", Code: "1", Kernel: "other"}
	if j := h.in(t, sid, wrong); j.Status != jobs.StatusFailed || !strings.Contains(j.Stderr, "runs javascript") {
		t.Errorf("a TypeScript cell in a JavaScript kernel: %s %q", j.Status, j.Stderr)
	}
	// What a cell used is its own.
	if j := h.in(t, sid, js("const t0 = process.cpuUsage(); while (process.cpuUsage(t0).user < 300000) {}")); j.CPUTimeMS == nil || *j.CPUTimeMS < 200 {
		t.Errorf("CPU time: %v", j.CPUTimeMS)
	}
	// A timer a cell left writes as a later cell runs (that cell's
	// output), or between cells (nobody's).
	want(h.in(t, sid, js("setTimeout(() => console.log('late'), 300); 'soon'")), jobs.StatusSucceeded, "", `"soon"`)
	want(h.in(t, sid, js("new Promise((r) => setTimeout(() => r('waited'), 600))")), jobs.StatusSucceeded, "late\n", `"waited"`)
	want(h.in(t, sid, js("setTimeout(() => console.log('between'), 300); const t1 = Date.now(); while (Date.now() - t1 < 600) {}")),
		jobs.StatusSucceeded, "", "")
	want(h.in(t, sid, js("'next'")), jobs.StatusSucceeded, "", `"next"`)
	// Past its timeout: the kernel ends, and with it (as after a Python
	// cell's timeout) the session's live state.
	busy := js("console.log('started'); while (true) {}")
	busy.TimeoutMS = 1500
	j = h.in(t, sid, busy)
	if j.Status != jobs.StatusTimedOut || j.Stdout != "started\n" {
		t.Errorf("timed out: %s %q %q", j.Status, j.Stdout, j.Stderr)
	}
	want(h.in(t, sid, js("typeof n")), jobs.StatusSucceeded, "", `"undefined"`)
	// A cell that ends its kernel reports its exit; the next starts anew.
	if j := h.in(t, sid, js("globalThis.gone = 1; process.exit(4)")); j.Status != jobs.StatusFailed || *j.ExitCode != 4 {
		t.Errorf("process.exit: %s %v", j.Status, j.ExitCode)
	}
	want(h.in(t, sid, js("typeof gone")), jobs.StatusSucceeded, "", `"undefined"`)
}
