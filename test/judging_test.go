package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store/storetest"
)

// TestVerlOwnTests runs verl's own test of its SandboxFusion client
// (tests/utils/reward_score/reward_score/test_sandbox_fusion_on_cpu.py)
// with verl's client code, both unmodified (test/compatclients/verl, from
// verl's repository at the commit its README names), against a gantry dev
// on its defaults: no slots setting. Its 100 programs that all run past
// their time limit at once must all come back as timeouts, not 504s.
func TestVerlOwnTests(t *testing.T) {
	python := pythonWith(t, "pytest", "requests")
	d := startDev(t, "GANTRY_LANGUAGES=all")
	dir := verlTree(t)
	cmd := exec.Command(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_sandbox_fusion_on_cpu.py")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SANDBOX_FUSION_URL="+d.url+"/compat/key/"+d.key+"/sandboxfusion/run_code", "PYTHONPATH="+dir)
	out, err := cmd.CombinedOutput()
	summary := regexp.MustCompile(`(?m)^.*\d+ (passed|failed).*$`).FindString(string(out))
	t.Logf("verl's tests: %s", summary)
	if err != nil || !regexp.MustCompile(`\b15 passed\b`).MatchString(summary) || strings.Contains(summary, "failed") {
		tail := string(out)
		if len(tail) > 20000 {
			tail = tail[len(tail)-20000:]
		}
		t.Fatalf("verl's tests: %v\n%s", err, tail)
	}
	if m := regexp.MustCompile(`all timeout test \(100 cases\) duration: ([0-9.]+) seconds`).FindStringSubmatch(string(out)); m != nil {
		t.Logf("verl's 100 programs that all time out: the last answer after %s s", m[1])
	}
}

// pythonWith is a python3 that imports every module named (Debian's
// python3-pytest and python3-requests: make compat-deps installs them).
func pythonWith(t *testing.T, modules ...string) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		path, err := exec.LookPath(p)
		if err != nil {
			continue
		}
		if exec.Command(path, "-c", "import "+strings.Join(modules, ", ")).Run() == nil {
			return path
		}
	}
	storetest.Unavailable(t, "no python3 with %s (make compat-deps installs Debian's python3-pytest and python3-requests)", strings.Join(modules, ", "))
	return ""
}

// verlTree lays verl's client module out as verl's package tree (its
// package __init__ files import torch and the rest of verl: empty ones
// stand in for them) beside verl's test file.
func verlTree(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	src := filepath.Join(filepath.Dir(file), "compatclients", "verl")
	dir := t.TempDir()
	pkg := filepath.Join(dir, "verl", "utils", "reward_score", "sandbox_fusion")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"verl", "verl/utils", "verl/utils/reward_score", "verl/utils/reward_score/sandbox_fusion"} {
		if err := os.WriteFile(filepath.Join(dir, p, "__init__.py"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for from, to := range map[string]string{"utils.py": filepath.Join(pkg, "utils.py"), "test_sandbox_fusion_on_cpu.py": filepath.Join(dir, "test_sandbox_fusion_on_cpu.py")} {
		b, err := os.ReadFile(filepath.Join(src, from))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestJudging: tests in a job through the native API, and a program
// compiled once across the compatible APIs' calls, with their clients'
// requests unchanged.
func TestJudging(t *testing.T) {
	d := startDev(t, "GANTRY_LANGUAGES=all")
	var langs struct{ Languages []struct{ Name string } }
	if err := json.Unmarshal(d.call(t, "GET", "/v1/languages", "").body, &langs); err != nil {
		t.Fatal(err)
	}
	cpp := false
	for _, l := range langs.Languages {
		cpp = cpp || l.Name == "cpp"
	}

	t.Run("tests in a job", func(t *testing.T) {
		body := `{"language": "python", "code": "import sys\nx = sys.stdin.read().split()\nprint(int(x[0]) + int(x[1]))",
			"tests": [{"stdin": "1 2", "expected_stdout": "3"}, {"stdin": "2 2", "expected_stdout": "5\n"}, {"stdin": "x"}],
			"timeout_ms": 20000}`
		r := d.call(t, "POST", "/v1/execute", body)
		var j jobs.Job
		if err := json.Unmarshal(r.body, &j); err != nil || r.status != 200 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		if j.Status != jobs.StatusFailed || j.Error == nil || j.Error.Code != jobs.ErrCodeTestsFailed || j.TestsPassed == nil || *j.TestsPassed != 1 ||
			len(j.Tests) != 3 || j.Tests[0].Status != jobs.TestPassed || j.Tests[1].Status != jobs.TestFailed || j.Tests[2].Status != jobs.TestError ||
			j.Tests[1].Stdout != "4\n" || !strings.Contains(j.Tests[2].Stderr, "ValueError") {
			t.Errorf("%s", r.body)
		}
		// Refused with the field named.
		r = d.call(t, "POST", "/v1/jobs", `{"language": "python", "code": "x", "tests": [{}], "compare": "fuzzy"}`)
		if r.status != 400 || !strings.Contains(string(r.body), `"field":"compare"`) {
			t.Errorf("bad compare: %d %s", r.status, r.body)
		}
	})
	if !cpp {
		storetest.Unavailable(t, "the sandbox image runs no C++ (make image-compilers)")
	}
	prog := func(tag string) string {
		return "#include <iostream>\nint main() { std::string s; std::cin >> s; std::cout << s << \"" + tag + "\\n\"; }\n"
	}
	jobOf := func(t *testing.T, h http.Header) jobs.Job {
		t.Helper()
		id := h.Get("X-Gantry-Job-Id")
		if id == "" {
			t.Fatal("no X-Gantry-Job-Id")
		}
		return d.job(t, "GET", "/v1/jobs/"+id, "")
	}
	post := func(t *testing.T, url, body string, header ...string) (map[string]any, http.Header) {
		t.Helper()
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(res.Body).Decode(&out); err != nil || res.StatusCode/100 != 2 {
			t.Fatalf("%s: %d %v", url, res.StatusCode, err)
		}
		return out, res.Header
	}

	t.Run("sandboxfusion: verl's calls of one program compile it once", func(t *testing.T) {
		code := prog("sf")
		for i, in := range []string{"a", "b", "c"} {
			body, _ := json.Marshal(map[string]any{"code": code, "language": "cpp", "stdin": in, "compile_timeout": 120, "run_timeout": 10, "memory_limit_MB": 1024})
			out, h := post(t, d.url+"/compat/key/"+d.key+"/sandboxfusion/run_code", string(body))
			run, _ := out["run_result"].(map[string]any)
			comp, _ := out["compile_result"].(map[string]any)
			j := jobOf(t, h)
			if out["status"] != "Success" || run["stdout"] != in+"sf\n" || comp == nil || j.Compile == nil || j.Compile.Cached != (i > 0) {
				t.Errorf("call %d: %v %+v", i, out, j.Compile)
			}
			if i > 0 && comp["execution_time"] != 0.0 {
				t.Errorf("call %d: a cached compile took %v", i, comp["execution_time"])
			}
		}
	})

	t.Run("judge0: submissions of one program compile it once", func(t *testing.T) {
		code := prog("j0")
		for i, in := range []string{"a", "b"} {
			body, _ := json.Marshal(map[string]any{"source_code": code, "language_id": 54, "stdin": in, "expected_output": in + "j0"})
			out, h := post(t, d.url+"/compat/judge0/submissions?wait=true", string(body), "X-Auth-Token", d.key)
			st, _ := out["status"].(map[string]any)
			if j := jobOf(t, h); st["id"] != 3.0 || j.Compile == nil || j.Compile.Cached != (i > 0) {
				t.Errorf("submission %d: %v %+v", i, out, j.Compile)
			}
		}
		// A batch of one program with many inputs: one compile.
		var subs []map[string]any
		for i := range 6 {
			subs = append(subs, map[string]any{"source_code": prog("batch"), "language_id": 54, "stdin": fmt.Sprint(i)})
		}
		body, _ := json.Marshal(map[string]any{"submissions": subs})
		req, _ := http.NewRequest("POST", d.url+"/compat/judge0/submissions/batch", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Auth-Token", d.key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 201 {
			t.Fatalf("batch: %d", res.StatusCode)
		}
		compiled := 0
		var list struct{ Jobs []jobs.Job }
		r := d.call(t, "GET", "/v1/jobs?metadata.compat=judge0&limit=100", "")
		if err := json.Unmarshal(r.body, &list); err != nil {
			t.Fatal(err)
		}
		for _, j := range list.Jobs {
			j = d.await(t, j.ID, 2*time.Minute, func(j jobs.Job) bool { return j.Status.Terminal() })
			if j.Compile != nil && !j.Compile.Cached {
				compiled++
			}
		}
		if compiled != 2 { // the first program, and the batch's
			t.Errorf("judge0: %d compiles for 2 programs", compiled)
		}
	})

	t.Run("piston-client: runs of one program compile it once", func(t *testing.T) {
		node, err := exec.LookPath("node")
		if err != nil {
			storetest.Unavailable(t, "node is not installed")
		}
		_, file, _, _ := runtime.Caller(0)
		dir := filepath.Join(filepath.Dir(file), "compatclients")
		calls := []any{
			[]any{"execute", "c++", prog("p"), map[string]any{"stdin": "a", "runTimeout": 20000, "compileTimeout": 120000}},
			[]any{"execute", "c++", prog("p"), map[string]any{"stdin": "b", "runTimeout": 20000, "compileTimeout": 120000}},
		}
		in, _ := json.Marshal(calls)
		cmd := exec.Command(node, filepath.Join(dir, "piston.mjs"), d.url+"/compat/key/"+d.key+"/piston")
		cmd.Stdin = bytes.NewReader(in)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("piston.mjs: %v %s", err, out)
		}
		var res []map[string]any
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatal(err)
		}
		for i, want := range []string{"ap\n", "bp\n"} {
			run, _ := res[i]["run"].(map[string]any)
			if run["stdout"] != want {
				t.Errorf("run %d: %v", i, res[i])
			}
		}
		var list struct{ Jobs []jobs.Job }
		if err := json.Unmarshal(d.call(t, "GET", "/v1/jobs?metadata.compat=piston&limit=10", "").body, &list); err != nil {
			t.Fatal(err)
		}
		cached := 0
		for _, j := range list.Jobs {
			if j.Compile != nil && j.Compile.Cached {
				cached++
			}
		}
		if len(list.Jobs) != 2 || cached != 1 {
			t.Errorf("piston: %d jobs, %d cached", len(list.Jobs), cached)
		}
	})
}
