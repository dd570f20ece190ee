package runner

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/gantryhq/gantry/jobs"
)

// TestCellOutputs: a stateful session's cell reports the exception that
// ended it, and with GANTRY_FIGURES=display the figures it showed or left
// open, as a notebook's inline backend shows them, instead of files.
func TestCellOutputs(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker, Postgres, NATS and S3")
	}
	h := newHarness(t, 2)
	sid := h.statefulSession(t)
	display := func(code string) jobs.Request {
		return jobs.Request{Language: "python", Code: code, Env: map[string]string{"GANTRY_FIGURES": "display"}}
	}
	isPNG := func(v jobs.Value) bool {
		b, err := base64.StdEncoding.DecodeString(v.PNG)
		return err == nil && strings.HasPrefix(string(b), "\x89PNG")
	}

	j := h.in(t, sid, display("import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()\nplt.figure()\nplt.bar([1], [3])\n6 * 7"))
	if j.Status != jobs.StatusSucceeded || len(j.Displays) != 2 || j.Value == nil || j.Value.Text != "42" || j.Exception != nil {
		t.Fatalf("shown and open figures: %s displays %d value %+v exception %+v stderr %q", j.Status, len(j.Displays), j.Value, j.Exception, j.Stderr)
	}
	for i, d := range j.Displays {
		if !isPNG(d) || !strings.HasPrefix(d.Text, "<Figure size") {
			t.Errorf("display %d: %q %.20q", i, d.Text, d.PNG)
		}
	}
	// A figure that is the value is shown once, as the value.
	j = h.in(t, sid, display("fig = plt.figure()\nplt.plot([5, 6])\nfig"))
	if len(j.Displays) != 0 || j.Value == nil || !isPNG(*j.Value) {
		t.Errorf("a figure as the value: displays %d value %+v", len(j.Displays), j.Value)
	}
	// (os.listdir, not ls: the ls of Debian 12 cannot stat under gVisor.)
	listOut := py("import os\nsorted(os.listdir('out')) if os.path.isdir('out') else []")
	if j := h.in(t, sid, listOut); j.Value == nil || j.Value.Text != "[]" {
		t.Errorf("display mode wrote files: %+v", j.Value)
	}
	// Otherwise figures are files as in any job (the env a cell sets stays
	// in the interpreter's os.environ: this one sets it back).
	j = h.in(t, sid, jobs.Request{Language: "python", Code: "plt.plot([1]); plt.show()", Env: map[string]string{"GANTRY_FIGURES": "1"}})
	if out := h.in(t, sid, listOut).Value; len(j.Displays) != 0 || out == nil || out.Text != "['figure-1.png']" {
		t.Errorf("files mode: displays %d, out/ %+v", len(j.Displays), out)
	}

	j = h.in(t, sid, py("def f():\n    return 1 / 0\nf()"))
	if j.Status != jobs.StatusFailed || j.Exception == nil || j.Exception.Name != "ZeroDivisionError" || j.Exception.Value != "division by zero" ||
		!strings.Contains(j.Exception.Traceback, "in f") || !strings.Contains(j.Stderr, "ZeroDivisionError") {
		t.Errorf("an exception: %s %+v stderr %q", j.Status, j.Exception, j.Stderr)
	}
	j = h.in(t, sid, py("x = ("))
	if j.Exception == nil || j.Exception.Name != "SyntaxError" || !strings.Contains(j.Exception.Traceback, "SyntaxError") {
		t.Errorf("a syntax error: %+v", j.Exception)
	}
	if j := h.in(t, sid, py("import sys\nsys.exit(3)")); j.Exception != nil || *j.ExitCode != 3 {
		t.Errorf("sys.exit is no exception: %+v", j.Exception)
	}
}
