package ingress_test

import (
	"strings"
	"testing"
	"time"

	"github.com/gantryhq/gantry/ingress"
	"github.com/gantryhq/gantry/jobs"
)

// TestOfferedLanguages: an ingress offers the languages of its policy (the
// sandbox image's): it lists them with their aliases, takes them by any
// name, records the name, and refuses another known language saying why.
func TestOfferedLanguages(t *testing.T) {
	h := newHarness(t, func(_ *harness, c *ingress.Config) { c.Policy.Languages = jobs.StandardLanguages() })
	var list struct{ Languages []jobs.Language }
	h.do(t, h.keyA, "GET", "/v1/languages", "").json(t, &list)
	var names []string
	for _, l := range list.Languages {
		names = append(names, l.Name)
	}
	if strings.Join(names, ",") != "python,bash,node,typescript" || len(list.Languages[0].Aliases) == 0 {
		t.Errorf("languages: %+v", list.Languages)
	}
	r := h.do(t, h.keyA, "POST", "/v1/jobs", `{"language":"py","code":"print(1)","args":["a"]}`)
	if j := r.job(t); r.status != 202 || j.Language != "python" {
		t.Errorf("by alias: %d %s", r.status, r.body)
	}
	r = h.do(t, h.keyA, "POST", "/v1/jobs", `{"language":"c++","code":"int main(){}"}`)
	if r.status != 400 || !strings.Contains(string(r.body), `"field":"language"`) || !strings.Contains(string(r.body), "cpp is not offered by this gantry") {
		t.Errorf("a language the image lacks: %d %s", r.status, r.body)
	}

	// Everything offered (the compilers image): a compiled job's record.
	h = newHarness(t)
	r = h.do(t, h.keyA, "POST", "/v1/jobs", `{"language":"golang","code":"package main\nfunc main() {}","args":["x"],"compile_timeout_ms":5000}`)
	j := r.job(t)
	if r.status != 202 || j.Language != "go" || j.Compile != nil || j.CPUTimeMS != nil {
		t.Fatalf("go: %d %s", r.status, r.body)
	}
	zero, cpu, peak := 0, int64(3), int64(1800)
	h.finish(t, j.ID, jobs.Result{Status: jobs.StatusSucceeded, ExitCode: &zero, Stdout: []byte("ok\n"), Duration: 4 * time.Millisecond,
		Usage:   &jobs.ProgramUsage{CPUTime: 2500 * time.Microsecond, PeakMemoryKB: &peak},
		Compile: &jobs.Compile{Status: jobs.CompileSucceeded, ExitCode: &zero, DurationMS: 310, CPUTimeMS: &cpu, PeakMemoryKB: &peak},
	})
	// The contract checker (the harness's server) checks the answer
	// against the document, the new fields included.
	got := h.do(t, h.keyA, "GET", "/v1/jobs/"+j.ID+"?wait=8s&include=spec", "").job(t)
	if got.Status != jobs.StatusSucceeded || got.CPUTimeMS == nil || *got.CPUTimeMS != 3 || *got.PeakMemoryKB != 1800 ||
		got.Compile == nil || got.Compile.DurationMS != 310 || got.Spec == nil || got.Spec.CompileTimeoutMS != 5000 || got.Spec.Args[0] != "x" {
		t.Errorf("finished: %+v (spec %+v)", got, got.Spec)
	}
}
