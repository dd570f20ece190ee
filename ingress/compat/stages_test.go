package compat

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/gantryhq/gantry/jobs"
)

func TestStages(t *testing.T) {
	one, code139 := 1, 139
	d := int64(1500)
	// An interpreted language: the run alone.
	st := StagesOf(jobs.Job{Status: jobs.StatusFailed, ExitCode: &code139, DurationMS: &d, Stdout: "o", Stderr: "e"})
	if st.Compile != nil || st.Run.Outcome != Exited || st.Run.Signal != 11 || st.Run.Wall != 1500*time.Millisecond || st.Run.Stdout != "o" {
		t.Errorf("%+v", st.Run)
	}
	if st := StagesOf(jobs.Job{Status: jobs.StatusTimedOut}); st.Run.Outcome != TimedOut || st.Run.ExitCode != nil {
		t.Errorf("timed out: %+v", st.Run)
	}
	if st := StagesOf(jobs.Job{Status: jobs.StatusError, Error: &jobs.ErrorInfo{Message: "no runner"}}); st.Run.Outcome != Failed || st.Run.Message != "no runner" {
		t.Errorf("error: %+v", st.Run)
	}
	// A compiled language, as a job reports its compile step.
	var m measured
	_ = json.Unmarshal([]byte(`{"cpu_time_ms": 12, "peak_memory_kb": 2048, "compile_output": "main.cpp:1: error",
		"compile": {"status": "failed", "exit_code": 1, "duration_ms": 300}}`), &m)
	st = stagesOf(jobs.Job{Status: jobs.StatusFailed, ExitCode: &one}, m)
	if st.Run != nil || st.Compile == nil || *st.Compile.ExitCode != 1 || st.Compile.Stderr != "main.cpp:1: error" {
		t.Errorf("a failed compile: %+v %+v", st.Compile, st.Run)
	}
	_ = json.Unmarshal([]byte(`{"compile": {"status": "succeeded", "exit_code": 0, "duration_ms": 300}}`), &m)
	zero := 0
	st = stagesOf(jobs.Job{Status: jobs.StatusSucceeded, ExitCode: &zero}, m)
	if st.Run == nil || st.Compile == nil || *st.Run.CPU != 12*time.Millisecond || *st.Run.MemoryKB != 2048 {
		t.Errorf("a compiled run: %+v %+v", st.Compile, st.Run)
	}
	_ = json.Unmarshal([]byte(`{"compile": {"status": "timed_out", "exit_code": null, "duration_ms": 10000}}`), &m)
	if st := stagesOf(jobs.Job{Status: jobs.StatusFailed}, m); st.Run != nil || st.Compile.Outcome != TimedOut {
		t.Errorf("a compile past its time: %+v", st.Compile)
	}
}

func TestLanguagesOfThisGantry(t *testing.T) {
	p := jobs.DefaultPolicy()
	if l, ok := Language(p, "nope", "python"); !ok || l != "python" {
		t.Errorf("Language = %q %v", l, ok)
	}
	if _, ok := Language(p, "cobol"); ok {
		t.Error("cobol found")
	}
	if Compiled("python") || Version("python") != "3.11.2" || Version("nope") != "0.0.0" {
		t.Error("python")
	}
	req := WithCompileTimeout(jobs.Request{Language: "python", Code: "x", Compat: []byte(`{}`)}, 5)
	if req.Code != "x" || string(req.Compat) != "{}" {
		t.Errorf("%+v", req)
	}
}
