package test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store/storetest"
)

// TestCompatibleAPIs drives SandboxFusion's, Judge0's and Piston's APIs of
// a `gantry dev` as their own clients do: verl's SandboxFusion client (its
// requests and verdicts, compat_verl_test.go), Judge0's requests as its
// docs show them, and npm's piston-client, unmodified.
func TestCompatibleAPIs(t *testing.T) {
	// Debug logs every request's path: none may hold a key.
	d := startDev(t, "GANTRY_RUNNER_SLOTS=32", "GANTRY_LOG_LEVEL=debug")
	key := func(tenant string) string {
		d.cli(t, "tenants", "create", tenant)
		k := regexp.MustCompile(`gk_\S+`).FindString(d.cli(t, "keys", "create", tenant, "compat test"))
		if k == "" {
			t.Fatal("no key created")
		}
		return k
	}
	// This tenant's key is sent only in paths: it must reach no log.
	pathKey := key("compat-path")
	other := key("compat-other")
	var langs struct{ Languages []struct{ Name string } }
	if err := json.Unmarshal(d.call(t, "GET", "/v1/languages", "").body, &langs); err != nil {
		t.Fatal(err)
	}
	has := func(names ...string) bool {
		return slices.ContainsFunc(langs.Languages, func(l struct{ Name string }) bool { return slices.Contains(names, l.Name) })
	}
	u, _ := url.Parse(d.url)

	sf := "http://verl:" + pathKey + "@" + u.Host + "/compat/sandboxfusion/run_code" // verl's URL: requests sends Basic
	// The bursts are sized from what this machine answers: verl gives
	// up on a call after three 504s, so a burst larger than the machine
	// can start within verl's window fails for capacity, not for a fault.
	// On a machine that runs trivial calls at 18 a second or more they
	// are verl's own sizes (256 and 100).
	burst, timeouts := verlBurstSizes(t, d.url+"/compat/key/"+pathKey+"/sandboxfusion/run_code")
	// Alone first: a burst on an idle gantry, as an RL step sends it.
	t.Run("sandboxfusion: a burst at once", func(t *testing.T) {
		verlBurst(t, d.url+"/compat/key/"+pathKey+"/sandboxfusion/run_code", burst)
	})
	t.Run("apis", func(t *testing.T) {
		t.Run("sandboxfusion: verl's cases", func(t *testing.T) {
			t.Parallel()
			verlCases(t, sf, has("cpp", "c++"))
		})
		t.Run("judge0", func(t *testing.T) {
			t.Parallel()
			judge0Cases(t, d, d.url+"/compat/judge0", pathKey, other, has("cpp", "c++"))
		})
		t.Run("piston-client", func(t *testing.T) {
			t.Parallel()
			pistonCases(t, d.url+"/compat/key/"+pathKey+"/piston", d.url+"/compat/key/gk_wrong/piston", has("cpp", "c++"))
		})
	})
	t.Run("sandboxfusion: verl's 100 cases at once", func(t *testing.T) { verlLoad(t, sf, timeouts) })

	capKey := key("compat-cap")
	t.Run("beyond capacity each API answers what its clients retry", func(t *testing.T) {
		d.cli(t, "tenants", "set-limits", "compat-cap", "--rps", "2", "--max-queued", "2", "--max-running", "1")
		statuses := func(n int, send func() (int, string)) map[int]int {
			out := map[int]int{}
			var mu sync.Mutex
			var wg sync.WaitGroup
			for range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					code, retry := send()
					mu.Lock()
					defer mu.Unlock()
					out[code]++
					if code == 503 && retry == "" {
						t.Errorf("503 without Retry-After")
					}
				}()
			}
			wg.Wait()
			return out
		}
		post := func(url, body string, header ...string) (int, string) {
			req, _ := http.NewRequest("POST", url, strings.NewReader(body))
			for i := 0; i+1 < len(header); i += 2 {
				req.Header.Set(header[i], header[i+1])
			}
			r, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return 0, ""
			}
			_, _ = io.Copy(io.Discard, r.Body)
			r.Body.Close()
			return r.StatusCode, r.Header.Get("Retry-After")
		}
		// One runs, two wait, the rest are beyond the tenant's queue: verl
		// gets 504, Judge0's clients 503 "queue is full", Piston's 503.
		// A burst past the tenant's request rate (2/s) is admitted, not 429.
		sf := statuses(8, func() (int, string) {
			return post(d.url+"/compat/key/"+capKey+"/sandboxfusion/run_code", `{"code": "import time; time.sleep(2)", "language": "python", "run_timeout": 5}`)
		})
		if sf[504] == 0 || sf[200] == 0 || sf[200]+sf[504] != 8 {
			t.Errorf("sandboxfusion: %v", sf)
		}
		j0 := statuses(6, func() (int, string) {
			return post(d.url+"/compat/judge0/submissions", `{"source_code": "import time; time.sleep(2)", "language_id": 71}`, "X-Auth-Token", capKey)
		})
		if j0[503] == 0 || j0[201] == 0 || j0[201]+j0[503] != 6 {
			t.Errorf("judge0: %v", j0)
		}
		ps := statuses(6, func() (int, string) {
			return post(d.url+"/compat/key/"+capKey+"/piston/api/v2/execute", `{"language": "python", "version": "*", "files": [{"content": "print(1)"}]}`)
		})
		if ps[503] == 0 || ps[200]+ps[503] != 6 {
			t.Errorf("piston: %v", ps)
		}
	})

	t.Run("a submission is a gantry job of the tenant", func(t *testing.T) {
		for _, api := range []string{"sandboxfusion", "judge0", "piston"} {
			req, _ := http.NewRequest("GET", d.url+"/v1/jobs?limit=5&metadata.compat="+api, nil)
			req.Header.Set("Authorization", "Bearer "+pathKey)
			r, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var page struct{ Jobs []jobs.Job }
			_ = json.NewDecoder(r.Body).Decode(&page)
			r.Body.Close()
			if len(page.Jobs) == 0 {
				t.Errorf("no %s jobs in the tenant's history", api)
			}
		}
		// The dev tenant made none.
		if r := d.call(t, "GET", "/v1/jobs?metadata.compat=judge0", ""); strings.Contains(string(r.body), `"compat"`) {
			t.Errorf("another tenant sees the jobs: %s", r.body)
		}
	})

	t.Run("a key in a path reaches no log or metric", func(t *testing.T) {
		metrics := string(get(t, d.url+"/metrics").body)
		if !strings.Contains(metrics, `route="/compat/sandboxfusion"`) || !strings.Contains(metrics, `route="/compat/piston"`) {
			t.Errorf("no compat routes in the metrics")
		}
		if !strings.Contains(d.output(), "path=/compat/sandboxfusion/run_code") {
			t.Errorf("the debug log shows no request paths")
		}
		for name, text := range map[string]string{"the log": d.output(), "/metrics": metrics} {
			for _, k := range []string{pathKey, capKey} {
				if strings.Contains(text, k) || strings.Contains(text, k[3:15]) {
					t.Errorf("%s holds a key", name)
				}
			}
		}
	})
}

// checkVerdicts compares verl's verdicts on a run of cases.
func checkVerdicts(t *testing.T, got []verlOutcome, want ...int) {
	t.Helper()
	for i, o := range got {
		if o.Result != want[i] {
			t.Errorf("case %d: %d (%s %s), want %d", i, o.Result, o.Status, o.APIError, want[i])
		}
	}
}

// verlCases are verl's tests/utils/reward_score/reward_score/
// test_sandbox_fusion_on_cpu.py's integration cases, with programs of the
// same kinds, through verl's client.
func verlCases(t *testing.T, sf string, cpp bool) {
	echo := "import sys\ndata = sys.stdin.read()\nprint({'in1': 'out1', 'in2': 'out2'}.get(data, 'unexpected'))\n"
	t.Run("right answers", func(t *testing.T) {
		t.Parallel()
		got := verlCheck(sf, echo, strs("in1", "in2"), strs("out1\n", "out2\n"), 10, "python", 32)
		checkVerdicts(t, got, 1, 1)
		if got[0].Status != "success" || *got[0].Stdout != "out1\n" {
			t.Errorf("%+v", got[0])
		}
	})
	t.Run("wrong answers", func(t *testing.T) {
		t.Parallel()
		got := verlCheck(sf, "print('nope')", strs("in1", "in2"), strs("out1\n", "out2\n"), 10, "python", 32)
		checkVerdicts(t, got, 0, 0)
		if got[0].Status != "wrong_answer" || *got[0].Stdout != "nope\n" {
			t.Errorf("%+v", got[0])
		}
	})
	t.Run("a compile error", func(t *testing.T) {
		t.Parallel()
		got := verlCheck(sf, "\nint main() { return undeclared; }\n", strs("in1", "in2"), strs("out1\n", "out2\n"), 10, "cpp", 32)
		if !cpp {
			// Until gantry runs C++, SandboxFusion's answer for a language
			// its sandbox lacks: a SandboxError.
			checkVerdicts(t, got, -1, -1)
			if got[0].Status != "sandbox_error" {
				t.Errorf("%+v", got[0])
			}
			return
		}
		checkVerdicts(t, got, -4, -4)
		if got[0].Status != "compile_error" {
			t.Errorf("%+v", got[0])
		}
	})
	t.Run("a runtime error", func(t *testing.T) {
		t.Parallel()
		got := verlCheck(sf, "import sys\nprint('about to fail', file=sys.stderr)\nraise ValueError('no')\n", strs("in1"), strs("out1\n"), 10, "python", 32)
		checkVerdicts(t, got, -2)
	})
	t.Run("a timeout", func(t *testing.T) {
		t.Parallel()
		got := verlCheck(sf, "import time\ntime.sleep(10)\n", strs("in1"), strs("out1\n"), 5, "python", 32)
		checkVerdicts(t, got, -3)
		if got[0].Status != "timeout" {
			t.Errorf("%+v", got[0])
		}
	})
	t.Run("no stdin and an empty one", func(t *testing.T) {
		t.Parallel()
		got := verlCheck(sf, "import sys\nprint(repr(sys.stdin.readline().strip()))\n",
			[]*string{nil, strp(""), strp("hello")}, strs("''", "''", "'hello'"), 5, "python", 32)
		checkVerdicts(t, got, 1, 1, 1)
	})
	t.Run("assert cases appended to the program", func(t *testing.T) {
		t.Parallel()
		gen := "def merge(xs):\n    return sorted(set(xs))\n"
		asserts := []string{"assert merge([2, 1, 2]) == [1, 2]", "assert merge([]) == []", "assert merge([3]) == [4]"}
		var got []verlOutcome
		for _, a := range asserts {
			got = append(got, verlCase(sf, gen+"\n\n"+a, strp(""), nil, 5, 1024, "python"))
		}
		checkVerdicts(t, got, 1, 1, -2)
	})
	t.Run("a function called with JSON arguments", func(t *testing.T) {
		t.Parallel()
		// The shape of verl's fn_name cases: the solution, and a harness
		// that reads one JSON argument per line and prints the result.
		code := "from typing import List\nclass Solution:\n    def positions(self, nums: List[int], x: int) -> List[int]:\n" +
			"        return [i for i, n in enumerate(nums) if n == x]\n\n" +
			"import sys, json\nargs = [json.loads(l) for l in sys.stdin.read().split('\\n') if l.strip()]\n" +
			"print(json.dumps(Solution().positions(*args)))\n"
		got := verlCheck(sf, code, strs("[1, 3, 1, 7]\n1", "[1, 2]\n5"), strs("[0, 2]", "[]"), 5, "python", 32)
		checkVerdicts(t, got, 1, 1)
	})
}

// verlBurstSizes measures how many trivial calls a second this machine
// answers through the adapter (64 at once, 32 slots, once its containers
// have started) and sizes the two
// load cases from it: the burst of 256 and the 100 programs that time out,
// scaled down (to 32 at least) on a machine slower than 18 calls a second.
func verlBurstSizes(t *testing.T, sf string) (burst, timeouts int) {
	const n = 64
	wave := func(n int) time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				verlCase(sf, "print(1)", strp(""), strp("1"), 10, 1024, "python")
			}()
		}
		wg.Wait()
		return time.Since(start)
	}
	cold := wave(32) // the slots' containers start
	rate := n / wave(n).Seconds()
	t.Logf("32 calls on an idle gantry took %s", cold.Round(time.Millisecond))
	scale := min(1, rate/18)
	burst, timeouts = max(32, int(256*scale)), max(32, int(100*scale))
	t.Logf("this machine answered %.1f calls a second: bursts of %d and %d", rate, burst, timeouts)
	return burst, timeouts
}

// verlLoad are verl's two cases of 100 calls, one after the other: its
// check_correctness's thread pool (32 calls in flight), mixed verdicts,
// then programs that all run past their time limit on the CPU.
func verlLoad(t *testing.T, sf string, timeouts int) {
	t.Run("100 cases: right, wrong and timeouts", func(t *testing.T) {
		code := "import sys, time\ndata = sys.stdin.read()\nif data.startswith('slow_'):\n    time.sleep(20)\nprint('out_' + data.split('_')[-1])\n"
		var in, out []string
		want := make([]int, 100)
		for i := range 100 {
			switch {
			case i%25 == 5:
				in, out, want[i] = append(in, fmt.Sprintf("slow_%d", i)), append(out, fmt.Sprintf("out_%d\n", i)), -3
			case i%33 == 10:
				in, out, want[i] = append(in, fmt.Sprintf("in_%d", i)), append(out, fmt.Sprintf("other_%d\n", i)), 0
			default:
				in, out, want[i] = append(in, fmt.Sprintf("in_%d", i)), append(out, fmt.Sprintf("out_%d\n", i)), 1
			}
		}
		checkVerdicts(t, verlCheck(sf, code, strs(in...), strs(out...), 15, "python", 32), want...)
	})
	t.Run("cases that all time out", func(t *testing.T) {
		// A program busy on the CPU, as verl's is, with verl's timeout:
		// verl's input (324 384429) takes 7-12 s of CPU here, so the last
		// calls, alone on the CPUs, may finish; ten times it never does.
		code := "x, y = map(int, input().split())\nn = 0\nfor i in range(x * y):\n    n = (n + i) % 1000000007\nprint(n)\n"
		in := make([]string, timeouts)
		for i := range in {
			in[i] = "3240 384429"
		}
		got := verlCheck(sf, code, strs(in...), make([]*string, timeouts), 10, "python", 32)
		want := make([]int, timeouts)
		for i := range want {
			want[i] = -3
		}
		checkVerdicts(t, got, want...)
	})
}

// verlBurst sends n /run_code calls at once through verl's client (no
// thread pool between them), mixing right answers, wrong answers and
// timeouts: every one must come back, with its right verdict, and none
// refused (-1).
func verlBurst(t *testing.T, sf string, n int) {
	code := "import sys, time\nd = sys.stdin.read()\nif d.startswith('slow'):\n    time.sleep(12)\nprint(d.upper())\n"
	want := make([]int, n)
	in, out := make([]*string, n), make([]*string, n)
	for i := range n {
		switch {
		case i%16 == 3: // sleeps past its limit
			in[i], out[i], want[i] = strp(fmt.Sprintf("slow%d", i)), strp(""), -3
		case i%8 == 5:
			in[i], out[i], want[i] = strp(fmt.Sprintf("x%d", i)), strp("wrong"), 0
		default:
			in[i], out[i], want[i] = strp(fmt.Sprintf("x%d", i)), strp(fmt.Sprintf("X%d", i)), 1
		}
	}
	start := time.Now()
	got := make([]verlOutcome, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = verlCase(sf, code, in[i], out[i], 10, 1024, "python") // verl's default timeout
		}()
	}
	wg.Wait()
	retried := 0
	for i, o := range got {
		if o.Result != want[i] {
			t.Errorf("call %d: %d (%s %s), want %d", i, o.Result, o.Status, o.APIError, want[i])
		}
		if o.Attempts > 1 {
			retried++
		}
	}
	t.Logf("%d calls at once: all answered in %s (%d retried after a 504)", n, time.Since(start).Round(time.Millisecond), retried)
}

// judge0Cases are Judge0's documented requests (docs/api/submissions)
// and the cases of a judge: stdin, arguments, runtime errors, time limits,
// compile errors, base64, batches, tokens, wait, fields and callbacks.
func judge0Cases(t *testing.T, d *dev, base, key, otherKey string, cpp bool) {
	type answer struct {
		status int
		body   []byte
		json   map[string]any
	}
	call := func(t *testing.T, method, path, body string, header ...string) answer {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if len(header) == 0 {
			header = []string{"X-Auth-Token", key}
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		a := answer{status: r.StatusCode}
		a.body, _ = io.ReadAll(r.Body)
		_ = json.Unmarshal(a.body, &a.json)
		return a
	}
	statusID := func(a answer) int {
		st, _ := a.json["status"].(map[string]any)
		id, _ := st["id"].(float64)
		return int(id)
	}
	// poll gets a submission until it has left the queue and processing.
	poll := func(t *testing.T, token, query string) answer {
		t.Helper()
		var a answer
		eventually.Within(2*time.Minute, func() bool {
			a = call(t, "GET", "/submissions/"+token+query, "")
			if a.status != 200 {
				t.Fatalf("GET %s: %d %s", token, a.status, a.body)
			}
			return statusID(a) > 2
		})
		return a
	}
	submit := func(t *testing.T, query, body string) string {
		t.Helper()
		a := call(t, "POST", "/submissions"+query, body)
		tok, _ := a.json["token"].(string)
		if a.status != 201 || tok == "" {
			t.Fatalf("POST /submissions%s: %d %s", query, a.status, a.body)
		}
		return tok
	}
	run := func(t *testing.T, body string) answer {
		t.Helper()
		a := call(t, "POST", "/submissions?wait=true&fields=*", body)
		if a.status != 201 {
			t.Fatalf("wait=true: %d %s", a.status, a.body)
		}
		return a
	}

	t.Run("languages and statuses", func(t *testing.T) {
		a := call(t, "GET", "/languages", "")
		for _, want := range []string{`{"id":71,"name":"Python (3.11.2)"}`, `"id":63`, `"id":46`, `"id":74`} {
			if !strings.Contains(string(a.body), want) {
				t.Errorf("languages: no %s in %s", want, a.body)
			}
		}
		a = call(t, "GET", "/statuses", "")
		var st []map[string]any
		_ = json.Unmarshal(a.body, &st)
		if len(st) != 14 || st[12]["description"] != "Internal Error" {
			t.Errorf("statuses: %s", a.body)
		}
	})
	t.Run("a token, then the result with the default fields", func(t *testing.T) {
		tok := submit(t, "", `{"source_code": "name = input()\nprint(f'hello, {name}')", "language_id": 71, "stdin": "Judge0", "expected_output": "hello, Judge0"}`)
		a := poll(t, tok, "")
		keys := make([]string, 0, len(a.json))
		for k := range a.json {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if statusID(a) != 3 || a.json["stdout"] != "hello, Judge0\n" || a.json["token"] != tok || a.json["stderr"] != nil ||
			strings.Join(keys, ",") != "compile_output,memory,message,status,stderr,stdout,time,token" {
			t.Errorf("%s", a.body)
		}
		if tm, _ := a.json["time"].(string); !regexp.MustCompile(`^\d+\.\d+$`).MatchString(tm) {
			t.Errorf("time %v is not a decimal string", a.json["time"])
		}
		a = call(t, "GET", "/submissions/"+tok+"?fields=stdout,stderr,status_id,language_id", "")
		if len(a.json) != 4 || a.json["status_id"] != 3.0 || a.json["language_id"] != 71.0 {
			t.Errorf("fields: %s", a.body)
		}
		a = call(t, "GET", "/submissions/"+tok+"?fields=*", "")
		if a.json["memory_limit"] != 128000.0 || a.json["cpu_time_limit"] != "5.0" || a.json["source_code"] == nil || a.json["expected_output"] != "hello, Judge0" {
			t.Errorf("fields=*: %s", a.body)
		}
		if a := call(t, "GET", "/submissions/"+tok+"?fields=stdout,nope", ""); a.status != 400 || a.json["error"] != "invalid fields: [nope]" {
			t.Errorf("bad fields: %d %s", a.status, a.body)
		}
		// Another tenant's token is not found; no key is 401.
		if a := call(t, "GET", "/submissions/"+tok, "", "X-Auth-Token", otherKey); a.status != 404 {
			t.Errorf("another tenant's token: %d %s", a.status, a.body)
		}
		if a := call(t, "GET", "/submissions/"+tok, "", "X-Other", "x"); a.status != 401 || len(a.body) != 0 {
			t.Errorf("no key: %d %s", a.status, a.body)
		}
		if a := call(t, "GET", "/submissions/"+tok, "", "Authorization", "Bearer "+key); a.status != 200 {
			t.Errorf("a bearer key: %d", a.status)
		}
	})
	t.Run("wrong answers, runtime errors, signals and time limits", func(t *testing.T) {
		for _, c := range []struct {
			body      string
			status    int
			exit, sig any
			message   string
			stdout    any
		}{
			{`{"source_code": "print('a  ')\nprint()", "language_id": 71, "expected_output": "a\n\n\n"}`, 3, 0.0, nil, "", "a  \n\n"},
			{`{"source_code": "print(2)", "language_id": 92, "expected_output": "1"}`, 4, 0.0, nil, "", "2\n"},
			{`{"source_code": "import sys; sys.exit(3)", "language_id": 71}`, 11, 3.0, nil, "Exited with error status 3", nil},
			{`{"source_code": "kill -SEGV $$", "language_id": 46}`, 7, 0.0, 11.0, "Caught fatal signal 11", nil},
			{`{"source_code": "while True: pass", "language_id": 71, "cpu_time_limit": 1, "cpu_extra_time": 0.5}`, 5, 0.0, nil, "Time limit exceeded", nil},
			{`{"source_code": "console.log(process.argv.slice(2).join('|'))", "language_id": 63, "command_line_arguments": "a 'b c' \"d\""}`, 3, 0.0, nil, "", "a|b c|d\n"},
			{`{"source_code": "const x: number = 6 * 7; console.log(x)", "language_id": 74, "stdin": ""}`, 3, 0.0, nil, "", "42\n"},
			{`{"source_code": "import sys; print('err', file=sys.stderr)", "language_id": 71, "redirect_stderr_to_stdout": true}`, 3, 0.0, nil, "", "err\n"},
		} {
			a := run(t, c.body)
			msg, _ := a.json["message"].(string)
			if statusID(a) != c.status || a.json["exit_code"] != c.exit || a.json["exit_signal"] != c.sig || msg != c.message || a.json["stdout"] != c.stdout {
				t.Errorf("%s:\n%s", c.body, a.body)
			}
		}
	})
	t.Run("compile errors", func(t *testing.T) {
		a := call(t, "POST", "/submissions?wait=true", `{"source_code": "int main() { return x; }", "language_id": 54}`)
		if !cpp {
			if a.status != 422 || !strings.Contains(string(a.body), "language with id 54 doesn't exist") {
				t.Errorf("C++ before gantry runs it: %d %s", a.status, a.body)
			}
			return
		}
		if statusID(a) != 6 || a.json["compile_output"] == nil {
			t.Errorf("%s", a.body)
		}
		// With Judge0's default limits (memory_limit 128000 KB), what
		// competitive programmers write compiles (g++ needs about 210 MB
		// for <bits/stdc++.h>, as Judge0 compiles within its largest
		// limits) and runs; a program past its own limit is killed, as the
		// kernel kills it under Judge0.
		a = run(t, `{"source_code": "#include <bits/stdc++.h>\nusing namespace std;\nint main() { string s; cin >> s; cout << \"hello \" << s << endl; }", "language_id": 54, "stdin": "judge"}`)
		if statusID(a) != 3 || a.json["stdout"] != "hello judge\n" {
			t.Errorf("bits/stdc++.h with the default limits: %s", a.body)
		}
		a = run(t, `{"source_code": "#include <cstdio>\n#include <cstdlib>\n#include <cstring>\nint main() { size_t mb; if (scanf(\"%zu\", &mb) != 1) return 2; char *p = (char *)malloc(mb << 20); memset(p, (int)mb, mb << 20); long s = 0; for (size_t i = 0; i < mb << 20; i += 4096) s += p[i]; printf(\"%ld\\n\", s); }", "language_id": 54, "stdin": "200", "cpu_time_limit": 15, "wall_time_limit": 20}`)
		if statusID(a) != 12 || a.json["exit_signal"] != 9.0 {
			t.Errorf("200 MB under a 128000 KB limit: %s", a.body)
		}
	})
	t.Run("base64", func(t *testing.T) {
		src := base64.StdEncoding.EncodeToString([]byte("import sys\nsys.stdout.buffer.write(bytes([0, 255]) + sys.stdin.buffer.read())"))
		tok := submit(t, "?base64_encoded=true", `{"source_code": "`+src+`", "language_id": 71, "stdin": "SnVkZ2Uw"}`)
		a := poll(t, tok, "?base64_encoded=true&fields=stdout,stdin,status")
		out, _ := a.json["stdout"].(string)
		b, err := base64.StdEncoding.DecodeString(strings.ReplaceAll(out, "\n", ""))
		if statusID(a) != 3 || err != nil || a.json["stdin"] != "SnVkZ2Uw\n" || !bytes.HasSuffix(b, []byte("Judge0")) {
			t.Errorf("%s (stdout %q)", a.body, b)
		}
	})
	t.Run("batches", func(t *testing.T) {
		a := call(t, "POST", "/submissions/batch", `{"submissions": [{"language_id": 46, "source_code": "echo hello from Bash"},
			{"language_id": 123456789, "source_code": "print(1)"}, {"language_id": 71, "source_code": ""},
			{"language_id": 71, "source_code": "print(\"hello from Python\")"}]}`)
		var items []map[string]any
		_ = json.Unmarshal(a.body, &items)
		if a.status != 201 || len(items) != 4 || items[0]["token"] == nil || items[3]["token"] == nil ||
			!strings.Contains(fmt.Sprint(items[1]["language_id"]), "doesn't exist") || !strings.Contains(fmt.Sprint(items[2]["source_code"]), "can't be blank") {
			t.Fatalf("%d %s", a.status, a.body)
		}
		tokens := items[0]["token"].(string) + "," + items[3]["token"].(string) + ",d85cd024-1548-4165-96c7-7bc88673f194"
		var got struct{ Submissions []map[string]any }
		if !eventually.Within(time.Minute, func() bool {
			a = call(t, "GET", "/submissions/batch?tokens="+tokens+"&fields=token,stdout,status_id,language_id", "")
			got.Submissions = nil
			_ = json.Unmarshal(a.body, &got)
			if len(got.Submissions) != 3 {
				t.Fatalf("%d %s", a.status, a.body)
			}
			return got.Submissions[0]["status_id"] == 3.0 && got.Submissions[1]["status_id"] == 3.0
		}) {
			t.Fatalf("batch not done: %s", a.body)
		}
		if got.Submissions[0]["stdout"] != "hello from Bash\n" || got.Submissions[1]["stdout"] != "hello from Python\n" || got.Submissions[2] != nil {
			t.Errorf("%s", a.body)
		}
		if a := call(t, "POST", "/submissions/batch", `{"submissions": []}`); a.status != 400 {
			t.Errorf("empty batch: %d %s", a.status, a.body)
		}
	})
	t.Run("errors per attribute", func(t *testing.T) {
		a := call(t, "POST", "/submissions", `{"source_code": "x"}`)
		if a.status != 422 || !strings.Contains(string(a.body), `"language_id":["can't be blank"]`) {
			t.Errorf("%d %s", a.status, a.body)
		}
		a = call(t, "POST", "/submissions", `{"source_code": "x", "language_id": 71, "wall_time_limit": 100000}`)
		if a.status != 422 || !strings.Contains(string(a.body), `"wall_time_limit":["must be less than or equal to 20"]`) {
			t.Errorf("%d %s", a.status, a.body)
		}
	})
	t.Run("callbacks", func(t *testing.T) {
		got := make(chan map[string]any, 1)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var body map[string]any
			_ = json.NewDecoder(r.Body).Decode(&body)
			if r.Method == "PUT" {
				got <- body
			}
		}))
		defer srv.Close()
		tok := submit(t, "", `{"source_code": "print('called back')", "language_id": 71, "callback_url": "`+srv.URL+`/judge0"}`)
		select {
		case body := <-got:
			out, _ := body["stdout"].(string)
			b, _ := base64.StdEncoding.DecodeString(strings.ReplaceAll(out, "\n", ""))
			if body["token"] != tok || string(b) != "called back\n" {
				t.Errorf("callback: %v", body)
			}
		case <-time.After(time.Minute):
			t.Fatal("no callback")
		}
	})
}

// pistonCases drive npm's piston-client, unmodified (installed by make
// compat-deps), with a Node script.
func pistonCases(t *testing.T, server, badServer string, cpp bool) {
	node, err := exec.LookPath("node")
	if err != nil {
		storetest.Unavailable(t, "node is not installed")
	}
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "compatclients")
	if _, err := exec.Command(node, "-e", "require.resolve('piston-client/package.json', {paths: [process.argv[1]]})", dir).CombinedOutput(); err != nil {
		storetest.Unavailable(t, "piston-client is not installed (make compat-deps)")
	}
	drive := func(t *testing.T, server string, calls ...[]any) []map[string]any {
		t.Helper()
		in, _ := json.Marshal(calls)
		cmd := exec.Command(node, filepath.Join(dir, "piston.mjs"), server)
		cmd.Stdin = bytes.NewReader(in)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("piston.mjs: %v %s", err, out)
		}
		var res []map[string]any
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		return res
	}
	res := drive(t, server,
		[]any{"execute", "python", "import sys\nprint(sys.argv[1:], repr(sys.stdin.read()))", map[string]any{"stdin": "in", "runTimeout": 20000}},
		// Node starts slowly on a loaded machine: these calls are about
		// their output, so they get a run timeout a slow machine meets.
		[]any{"execute", "javascript", "console.log(process.argv.slice(2))", map[string]any{"args": []string{"x", "y z"}, "runTimeout": 20000}},
		[]any{"execute", "typescript", "const n: number = 6 * 7;\nconsole.log(n)", map[string]any{"runTimeout": 20000}},
		[]any{"execute", "bash", "sleep 5", map[string]any{"runTimeout": 1000}},
		[]any{"execute", "python", "raise SystemExit(3)"},
		[]any{"execute", "bash", "kill -SEGV $$"},
		[]any{"execute", map[string]any{"language": "python", "version": "3.x", "files": []any{
			map[string]any{"name": "main.py", "content": "print(open('data.txt').read())"},
			map[string]any{"name": "data.txt", "content": "ZnJvbSBhIGZpbGU=", "encoding": "base64"}}}},
		[]any{"execute", "cobol", "x"},
	)
	run := func(i int) map[string]any { r, _ := res[i]["run"].(map[string]any); return r }
	for i, c := range []struct {
		stdout string
		code   any
		signal any
		status any
	}{
		{"['1', '2', '3'] 'in\\n'\n", 0.0, nil, nil}, // piston-client's default args, Piston's newline
		{"[ 'x', 'y z' ]\n", 0.0, nil, nil},
		{"42\n", 0.0, nil, nil},
		{"", nil, "SIGKILL", "TO"},
		{"", 3.0, nil, "RE"},
		{"", nil, "SIGSEGV", "SG"},
		{"from a file\n", 0.0, nil, nil},
	} {
		r := run(i)
		if r == nil || r["stdout"] != c.stdout || r["output"] != r["stdout"].(string)+r["stderr"].(string) ||
			r["code"] != c.code || r["signal"] != c.signal || r["status"] != c.status {
			t.Errorf("call %d: %v", i, res[i])
		}
	}
	// piston-client finds no version of a language it was not offered, and
	// sends none.
	if res[7]["message"] != "version is required as a string" {
		t.Errorf("an unknown language: %v", res[7])
	}
	if cpp {
		// A run_memory_limit below what g++ needs: the compile has its own
		// (none here), and the program is held to the run's.
		const alloc = "#include <bits/stdc++.h>\nint main() { size_t mb; std::cin >> mb; std::vector<char> v(mb << 20, 1); long s = 0; for (size_t i = 0; i < v.size(); i += 4096) s += v[i]; std::cout << s << std::endl; }"
		res = drive(t, server,
			[]any{"execute", "c++", alloc, map[string]any{"stdin": "1", "runMemoryLimit": 128 << 20, "compileTimeout": 60000, "runTimeout": 20000}},
			[]any{"execute", "c++", alloc, map[string]any{"stdin": "200", "runMemoryLimit": 128 << 20, "compileTimeout": 60000, "runTimeout": 20000}},
		)
		if r := run(0); r == nil || r["stdout"] != "256\n" || r["code"] != 0.0 {
			t.Errorf("C++ within its run_memory_limit: %v", res[0])
		}
		if r := run(1); r == nil || r["signal"] != "SIGKILL" || r["status"] != "SG" {
			t.Errorf("C++ past its run_memory_limit: %v", res[1])
		}
	}
	res = drive(t, badServer, []any{"runtimes"})
	if !strings.Contains(fmt.Sprint(res[0]), "invalid or revoked API key") {
		t.Errorf("a bad key: %v", res)
	}
}
