package runner

import (
	"strings"
	"testing"

	"github.com/gantryhq/gantry/jobs"
)

// TestTestsInAJob: a job's tests run one by one, each in a fresh sandbox,
// its program compiled once; each gets a result and a status of its own.
func TestTestsInAJob(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker, Postgres, NATS and S3")
	}
	h := newHarness(t, 2)
	s := func(v string) *string { return &v }

	// Python: each test's sandbox is fresh (a file left by one is not seen
	// by the next), and every status.
	code := `import os, sys, time
seen = os.path.exists("left")
open("left", "w").write("x")
line = sys.stdin.read().strip()
if line == "crash": raise SystemExit(3)
if line == "sleep": time.sleep(30)
if line == "alloc": b = bytearray(400 << 20); print(len(b))
print(line.upper(), "seen" if seen else "")
`
	j := h.run(t, jobs.Request{Language: "python", Code: code, TimeoutMS: 10_000, Limits: &jobs.Limits{MemoryMB: 128},
		Tests: []jobs.Test{
			{Stdin: "a", ExpectedStdout: s("A")},
			{Stdin: "b", ExpectedStdout: s("B  \n\n")},
			{Stdin: "c", ExpectedStdout: s("x")},
			{Stdin: "crash"},
			{Stdin: "sleep"},
			{Stdin: "alloc"},
			{Stdin: "d"},
		}})
	want := []jobs.TestStatus{jobs.TestPassed, jobs.TestPassed, jobs.TestFailed, jobs.TestError, jobs.TestTimeout, jobs.TestMemory, jobs.TestPassed}
	if j.Status != jobs.StatusFailed || j.Error == nil || j.Error.Code != jobs.ErrCodeTestsFailed || len(j.Tests) != len(want) ||
		j.TestsPassed == nil || *j.TestsPassed != 3 || j.ExitCode != nil || len(j.Artifacts) != 0 {
		t.Fatalf("job: %s %+v %d tests, passed %v", j.Status, j.Error, len(j.Tests), j.TestsPassed)
	}
	for i, tr := range j.Tests {
		if tr.Status != want[i] {
			t.Errorf("test %d: %s, want %s (%+v)", i, tr.Status, want[i], tr)
		}
	}
	if tr := j.Tests[2]; tr.Stdout != "C \n" || !strings.Contains(tr.Message, `"C"`) || tr.ExitCode == nil || *tr.ExitCode != 0 || tr.CPUTimeMS == nil {
		t.Errorf("failed test: %+v", tr)
	}
	if tr := j.Tests[3]; tr.ExitCode == nil || *tr.ExitCode != 3 {
		t.Errorf("crash: %+v", tr)
	}

	// stop_on_failure ends at the first that did not pass.
	j = h.run(t, jobs.Request{Language: "python", Code: "print(input())", StopOnFailure: true,
		Tests: []jobs.Test{{Stdin: "1", ExpectedStdout: s("1")}, {Stdin: "2", ExpectedStdout: s("3")}, {Stdin: "4", ExpectedStdout: s("4")}}})
	if j.Status != jobs.StatusFailed || len(j.Tests) != 2 || *j.TestsPassed != 1 || j.Tests[1].Status != jobs.TestFailed {
		t.Errorf("stop on failure: %s %+v", j.Status, j.Tests)
	}

	// Tokens with a tolerance; all passed is a success.
	j = h.run(t, jobs.Request{Language: "python", Code: "print(1/3, 2)", Compare: jobs.CompareTokens, Tolerance: 1e-6,
		Tests: []jobs.Test{{ExpectedStdout: s("0.333333 2\n")}}})
	if j.Status != jobs.StatusSucceeded || j.Error != nil || *j.TestsPassed != 1 {
		t.Errorf("tokens: %s %+v %+v", j.Status, j.Error, j.Tests)
	}

	needCompilers(t, h)
	// C++: 30 tests, one compile.
	var tests []jobs.Test
	for i := range 30 {
		in := strings.Repeat("x", i)
		tests = append(tests, jobs.Test{Stdin: in + "\n", ExpectedStdout: s("hello " + in + "\n")})
	}
	echo := "#include <cstdio>\n#include <cstring>\nint main() { char s[256] = \"\"; if (!fgets(s, sizeof s, stdin)) s[0] = 0;\n" +
		"s[strcspn(s, \"\\n\")] = 0; printf(\"hello %s\\n\", s); }\n"
	j = h.run(t, jobs.Request{Language: "cpp", Code: echo, CompileTimeoutMS: 60_000, Tests: tests})
	if j.Status != jobs.StatusSucceeded || *j.TestsPassed != 30 || j.Compile == nil || j.Compile.Status != jobs.CompileSucceeded || j.Compile.Cached {
		t.Fatalf("cpp: %s %+v %+v passed %v", j.Status, j.Error, j.Compile, j.TestsPassed)
	}
	if got := h.metric(t, "gantry_build_cache_lookups_total", map[string]string{"found": "miss"}); got != 1 {
		t.Errorf("compiles: %v", got)
	}
	// Again: every test runs the kept build (all at once, none building
	// it), and the job says it was kept.
	j = h.run(t, jobs.Request{Language: "cpp", Code: echo, CompileTimeoutMS: 60_000, Tests: tests})
	if j.Status != jobs.StatusSucceeded || *j.TestsPassed != 30 || j.Compile == nil || !j.Compile.Cached || j.Compile.DurationMS != 0 {
		t.Fatalf("cpp, kept: %s %+v %+v passed %v", j.Status, j.Error, j.Compile, j.TestsPassed)
	}
	if got := h.metric(t, "gantry_build_cache_lookups_total", map[string]string{"found": "miss"}); got != 1 {
		t.Errorf("compiles after the kept build's run: %v", got)
	}
	// A compile error: no test ran.
	j = h.run(t, jobs.Request{Language: "cpp", Code: brokenPrograms["cpp"][0], CompileTimeoutMS: 60_000, Tests: tests[:3]})
	if j.Status != jobs.StatusFailed || j.Error == nil || j.Error.Code != jobs.ErrCodeCompileError || len(j.Tests) != 0 {
		t.Errorf("compile error: %s %+v %d tests", j.Status, j.Error, len(j.Tests))
	}
}
