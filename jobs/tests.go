package jobs

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Tests in a job. A job may carry its test cases (Request.Tests): the
// program is built once (a compiled language's compile step), then run
// once per test, each in a fresh sandbox with the test's stdin, the job's
// timeout_ms and limits; its stdout is compared with what the test expects
// and the job reports each test's result (Job.Tests) and how many passed.

// Test is one test case of a job.
type Test struct {
	// Stdin is the program's standard input for this test (text).
	Stdin string `json:"stdin,omitempty"`
	// ExpectedStdout is what the program must print; without it a test
	// passes when the program exits 0.
	ExpectedStdout *string `json:"expected_stdout,omitempty"`
}

// Compare is how a test's stdout is compared with what it expects
// (Request.Compare).
type Compare string

// The comparisons.
const (
	// CompareLines ignores whitespace at the end of each line and empty
	// lines at the end (the default, as judges compare).
	CompareLines Compare = "lines"
	// CompareExact wants the very same bytes.
	CompareExact Compare = "exact"
	// CompareTokens compares the whitespace-separated tokens, numbers
	// within Request.Tolerance of each other.
	CompareTokens Compare = "tokens"
)

// Compares lists the comparisons a request may name.
var Compares = []Compare{CompareLines, CompareExact, CompareTokens}

// The limits of a job's tests.
const (
	// MaxTests bounds the tests of one job.
	MaxTests = 1000
	// MaxTestsBytes bounds their stdin and expected output together.
	MaxTestsBytes = 16 << 20
	// TestOutputCap bounds what is kept of each test's stdout and of its
	// stderr (the comparison reads up to limits.output_bytes).
	TestOutputCap = 16 << 10
)

// TestStatus is how a test went.
type TestStatus string

// The test statuses: the program exited 0 and printed what was expected;
// it exited 0 and printed something else; it exited otherwise (a runtime
// error), or gantry could not run it (Message says why); it ran longer
// than the job's timeout_ms; it ran out of memory.
const (
	TestPassed  TestStatus = "passed"
	TestFailed  TestStatus = "failed"
	TestError   TestStatus = "error"
	TestTimeout TestStatus = "timeout"
	TestMemory  TestStatus = "memory"
)

// TestStatuses lists every TestStatus.
var TestStatuses = []TestStatus{TestPassed, TestFailed, TestError, TestTimeout, TestMemory}

// TestResult is how one test of a job went.
type TestResult struct {
	Status TestStatus `json:"status"`
	// ExitCode is the program's exit status (128+n when signal n killed
	// it); null when it did not end by itself.
	ExitCode *int `json:"exit_code"`
	// Stdout and Stderr are what the program printed, at most
	// TestOutputCap bytes of each.
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	StderrTruncated bool   `json:"stderr_truncated"`
	// DurationMS is the run's wall-clock time; CPUTimeMS and PeakMemoryKB
	// measure it as the job's own fields do (null when not measured).
	DurationMS   int64  `json:"duration_ms"`
	CPUTimeMS    *int64 `json:"cpu_time_ms"`
	PeakMemoryKB *int64 `json:"peak_memory_kb"`
	// Message says why a test is an error gantry caused, or how its
	// output differs.
	Message string `json:"message,omitempty"`
}

// ErrCodeTestsFailed means the job's program ran its tests and not every
// one passed (Job.Tests says which).
const ErrCodeTestsFailed ErrorCode = "tests_failed"

// TestsPassed counts the passed tests of results.
func TestsPassed(results []TestResult) int {
	n := 0
	for _, r := range results {
		if r.Status == TestPassed {
			n++
		}
	}
	return n
}

// normalizeTests checks a request's tests and how they are compared.
func (p Policy) normalizeTests(req Request, spec *Spec) error {
	if len(req.Tests) == 0 {
		switch {
		case req.Compare != "":
			return fieldErr("compare", "goes with tests")
		case req.Tolerance != 0:
			return fieldErr("tolerance", "goes with tests")
		case req.StopOnFailure:
			return fieldErr("stop_on_failure", "goes with tests")
		}
		return nil
	}
	switch {
	case len(req.Tests) > MaxTests:
		return fieldErr("tests", "has %d tests; at most %d", len(req.Tests), MaxTests)
	case req.SessionID != nil:
		return fieldErr("tests", "cannot run in a session: each test runs in a fresh sandbox")
	case req.Stdin != "":
		return fieldErr("stdin", "goes in each test with tests")
	}
	n := 0
	for i, t := range req.Tests {
		if strings.ContainsRune(t.Stdin, 0) {
			return fieldErr(fmt.Sprintf("tests[%d].stdin", i), "must not contain NUL bytes")
		}
		n += len(t.Stdin)
		if t.ExpectedStdout != nil {
			if strings.ContainsRune(*t.ExpectedStdout, 0) {
				return fieldErr(fmt.Sprintf("tests[%d].expected_stdout", i), "must not contain NUL bytes")
			}
			n += len(*t.ExpectedStdout)
		}
	}
	if n > MaxTestsBytes {
		return fieldErr("tests", "hold %d bytes of input and expected output; at most %d", n, MaxTestsBytes)
	}
	compare := req.Compare
	switch compare {
	case "":
		compare = CompareLines
	case CompareLines, CompareExact, CompareTokens:
	default:
		return fieldErr("compare", "must be lines, exact or tokens, not %q", req.Compare)
	}
	if req.Tolerance != 0 && compare != CompareTokens {
		return fieldErr("tolerance", "goes with \"compare\": \"tokens\"")
	}
	if req.Tolerance < 0 || req.Tolerance > 1 || math.IsNaN(req.Tolerance) {
		return fieldErr("tolerance", "must be between 0 and 1")
	}
	spec.Tests, spec.Compare, spec.Tolerance, spec.StopOnFailure = req.Tests, compare, req.Tolerance, req.StopOnFailure
	return nil
}

// Matches reports whether got is what a test expects, compared as the
// spec says; when it is not, why says how it differs.
func (s *Spec) Matches(got, want string) (ok bool, why string) {
	switch s.Compare {
	case CompareExact:
		if got == want {
			return true, ""
		}
		return false, firstDifference(got, want)
	case CompareTokens:
		g, w := strings.Fields(got), strings.Fields(want)
		for i := range max(len(g), len(w)) {
			switch {
			case i >= len(g):
				return false, fmt.Sprintf("the output ended after %d tokens; %d expected", len(g), len(w))
			case i >= len(w):
				return false, fmt.Sprintf("the output has %d tokens; %d expected", len(g), len(w))
			case !tokenEqual(g[i], w[i], s.Tolerance):
				return false, fmt.Sprintf("token %d is %q; %q expected", i+1, clip(g[i]), clip(w[i]))
			}
		}
		return true, ""
	}
	g, w := trimLines(got), trimLines(want)
	if g == w {
		return true, ""
	}
	return false, firstDifference(g, w)
}

// tokenEqual compares two tokens: as numbers within tol (absolute, or
// relative to the expected one) when tol is set and both are numbers,
// else as text.
func tokenEqual(got, want string, tol float64) bool {
	if got == want {
		return true
	}
	if tol == 0 {
		return false
	}
	g, err1 := strconv.ParseFloat(got, 64)
	w, err2 := strconv.ParseFloat(want, 64)
	if err1 != nil || err2 != nil || math.IsNaN(g) || math.IsNaN(w) {
		return false
	}
	d := math.Abs(g - w)
	return d <= tol || d <= tol*math.Abs(w)
}

// trimLines drops each line's trailing whitespace and the empty lines at
// the end.
func trimLines(s string) string {
	lines := strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t\r\v\f")
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return strings.Join(lines, "\n")
}

// firstDifference says where two texts first differ, by line.
func firstDifference(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		switch {
		case i >= len(g):
			return fmt.Sprintf("the output ended after line %d; %d lines expected", len(g), len(w))
		case i >= len(w):
			return fmt.Sprintf("the output has %d lines; %d expected", len(g), len(w))
		case g[i] != w[i]:
			return fmt.Sprintf("line %d is %q; %q expected", i+1, clip(g[i]), clip(w[i]))
		}
	}
	return "the output differs from what was expected"
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
