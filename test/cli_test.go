package test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gantryhq/gantry/jobs"
)

// cliResult is what a gantry command printed and how it exited.
type cliResult struct {
	stdout, stderr string
	code           int
}

// gantryCLI runs the people commands against the dev instance, in dir,
// with stdin.
func (d *dev) gantryCLI(t *testing.T, dir, stdin string, env []string, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(gantryBin(t), args...)
	cmd.Dir = dir
	cmd.Env = append(cleanEnv(), "GANTRY_URL="+d.url, "GANTRY_API_KEY="+d.key, "XDG_CONFIG_HOME="+t.TempDir())
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return cliResult{out.String(), errOut.String(), code}
}

// cleanEnv is the test's environment without gantry settings, so that a
// developer's own GANTRY_URL or key cannot leak into a test.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GANTRY_") {
			env = append(env, kv)
		}
	}
	return env
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCLIRun: gantry run sends the program with its files and environment,
// prints its output, downloads what it made and exits with its exit code.
func TestCLIRun(t *testing.T) {
	d := startDev(t, "GANTRY_RUNNER_SLOTS=2")
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "prog.py"), `
import os, sys
os.makedirs("out/sub", exist_ok=True)
open("out/sub/result.txt", "w").write("result " + os.environ["SEED"])
print(open("data.csv").read().strip(), open("inputs/b.bin", "rb").read().hex())
print("oops", file=sys.stderr)
sys.exit(3)
`)
	writeFile(t, filepath.Join(dir, "data.csv"), "a,b\n1,2\n")
	writeFile(t, filepath.Join(dir, "in", "b.bin"), "\x00\xff")

	r := d.gantryCLI(t, dir, "", nil, "run", "prog.py", "-e", "SEED=7", "-f", "data.csv", "-f", "in:inputs", "-o", "got")
	if r.code != 3 || r.stdout != "a,b\n1,2 00ff\n" || !strings.Contains(r.stderr, "oops\n") ||
		!regexp.MustCompile(`job job_\S+ failed with exit code 3`).MatchString(r.stderr) {
		t.Fatalf("run: %+v", r)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "got", "out", "sub", "result.txt")); err != nil || string(b) != "result 7" {
		t.Errorf("downloaded artifact: %q %v", b, err)
	}
	// Piped output carries no spinner or terminal codes.
	if strings.Contains(r.stdout+r.stderr, "\033[") {
		t.Errorf("terminal codes in piped output: %q", r.stderr)
	}

	// From stdin, with the language named.
	if r := d.gantryCLI(t, dir, "echo hi from bash\n", nil, "run", "--lang", "bash", "-"); r.code != 0 || r.stdout != "hi from bash\n" {
		t.Errorf("stdin: %+v", r)
	}
	if r := d.gantryCLI(t, dir, "print(1)", nil, "run", "-"); r.code != 2 || !strings.Contains(r.stderr, "--lang") {
		t.Errorf("stdin without --lang: %+v", r)
	}
	writeFile(t, filepath.Join(dir, "x.rb"), "puts 1")
	if r := d.gantryCLI(t, dir, "", nil, "run", "x.rb"); r.code != 2 || !strings.Contains(r.stderr, "--lang") {
		t.Errorf("unknown extension: %+v", r)
	}
	// A refusal by the server is shown as the server words it.
	if r := d.gantryCLI(t, dir, "", nil, "run", "prog.py", "-e", "1BAD=x"); r.code != 125 || !strings.Contains(r.stderr, "not a valid variable name") {
		t.Errorf("bad env name: %+v", r)
	}

	// --timeout, and the exit code of a timed-out job.
	if r := d.gantryCLI(t, dir, "sleep 30", nil, "run", "--lang", "bash", "--timeout", "1s", "-"); r.code != 124 || !strings.Contains(r.stderr, "timed out") {
		t.Errorf("timeout: %+v", r)
	}

	// --json prints the finished job; --detach its id at once.
	r = d.gantryCLI(t, dir, "print(6*7)", nil, "run", "--lang", "python", "--json", "-")
	var j jobs.Job
	if err := json.Unmarshal([]byte(r.stdout), &j); err != nil || r.code != 0 || j.Status != jobs.StatusSucceeded || j.Stdout != "42\n" {
		t.Errorf("--json: %+v (%v)", r, err)
	}
	r = d.gantryCLI(t, dir, "sleep 1; echo later", nil, "run", "--lang", "bash", "--detach", "-")
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || !jobs.ValidID("job", id) {
		t.Fatalf("--detach: %+v", r)
	}
	if j := d.await(t, id, time.Minute, terminal); j.Stdout != "later\n" {
		t.Errorf("detached job: %+v", j)
	}

	// In a session, files persist from one run to the next.
	sid := strings.TrimSpace(d.gantryCLI(t, dir, "", nil, "sessions", "create", "--lang", "bash").stdout)
	d.gantryCLI(t, dir, "echo kept > note.txt", nil, "run", "--lang", "bash", "--session", sid, "-")
	if r := d.gantryCLI(t, dir, "cat note.txt", nil, "run", "--lang", "bash", "--session", sid, "-"); r.stdout != "kept\n" {
		t.Errorf("session run: %+v", r)
	}
	// In a stateful session, Python's state persists, and run prints the
	// last expression's value.
	sid = strings.TrimSpace(d.gantryCLI(t, dir, "", nil, "sessions", "create", "--stateful").stdout)
	d.gantryCLI(t, dir, "x = 41", nil, "run", "--lang", "python", "--session", sid, "-")
	if r := d.gantryCLI(t, dir, "x + 1", nil, "run", "--lang", "python", "--session", sid, "-"); r.stdout != "42\n" {
		t.Errorf("stateful session run: %+v", r)
	}
}

// TestCLIStreamsLive: output reaches the terminal while the job runs, not
// when it ends; Ctrl-C cancels the job.
func TestCLIStreamsLive(t *testing.T) {
	d := startDev(t, "GANTRY_RUNNER_SLOTS=2")
	cmd := exec.Command(gantryBin(t), "run", "--lang", "python", "-")
	cmd.Env = append(cleanEnv(), "GANTRY_URL="+d.url, "GANTRY_API_KEY="+d.key)
	cmd.Stdin = strings.NewReader("import time\nprint('first', flush=True)\ntime.sleep(120)\nprint('never')\n")
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "first\n" {
		t.Fatalf("first line %q, %v (stderr %s)", line, err, stderr.String())
	}
	var list struct{ Jobs []jobs.Job }
	_ = json.Unmarshal(d.call(t, "GET", "/v1/jobs?limit=1", "").body, &list)
	if len(list.Jobs) != 1 || list.Jobs[0].Status != jobs.StatusRunning {
		t.Fatalf("the first line arrived, but the job is not running: %+v", list.Jobs)
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	_, _ = io.Copy(io.Discard, stdout)
	err = cmd.Wait()
	ee, _ := err.(*exec.ExitError)
	if ee == nil || ee.ExitCode() != 130 || !strings.Contains(stderr.String(), "cancelled job "+list.Jobs[0].ID) {
		t.Errorf("after Ctrl-C: %v, stderr %q", err, stderr.String())
	}
	if j := d.await(t, list.Jobs[0].ID, 30*time.Second, terminal); j.Status != jobs.StatusCancelled {
		t.Errorf("job after Ctrl-C: %s", j.Status)
	}
}

// TestCLISpinner: on a terminal, a queued job shows a spinner until its
// output starts (run under script(1), which gives the command a pty).
func TestCLISpinner(t *testing.T) {
	script, err := exec.LookPath("script")
	if err != nil {
		t.Skip("script(1) is not installed")
	}
	d := startDev(t, "GANTRY_RUNNER_SLOTS=1")
	// The only slot is busy: the next job waits in the queue.
	busy := d.submit(t, map[string]any{"language": "bash", "code": "sleep 3"})
	d.await(t, busy.ID, time.Minute, func(j jobs.Job) bool { return j.Status == jobs.StatusRunning })
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "p.py"), "print('done')\n")
	cmd := exec.Command(script, "-qec", gantryBin(t)+" run p.py", "/dev/null")
	cmd.Dir = dir
	cmd.Env = append(cleanEnv(), "GANTRY_URL="+d.url, "GANTRY_API_KEY="+d.key)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %q", err, out)
	}
	s := string(out)
	if !regexp.MustCompile(`\r\033\[K. job_\S+ queued \d+s`).MatchString(s) || !strings.HasSuffix(strings.TrimRight(s, "\r\n"), "done") ||
		!strings.Contains(s, "\r\033[Kdone") {
		t.Errorf("terminal output %q: want a spinner while queued, cleared before the output", s)
	}
}

// TestCLICommands: jobs, sessions and skills, and the failures a person
// meets: no server, a bad key, no key, a bad config file.
func TestCLICommands(t *testing.T) {
	d := startDev(t, "GANTRY_RUNNER_SLOTS=2")
	dir := t.TempDir()
	ok := func(r cliResult) cliResult {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("exit %d: %s%s", r.code, r.stdout, r.stderr)
		}
		return r
	}
	done := d.job(t, "POST", "/v1/execute", `{"language":"bash","code":"echo out; echo err >&2; echo x > out/f.txt","metadata":{"who":"cli"}}`)
	ls := ok(d.gantryCLI(t, dir, "", nil, "jobs", "ls", "--status", "succeeded"))
	if !strings.Contains(ls.stdout, done.ID) || !strings.HasPrefix(ls.stdout, "ID ") {
		t.Errorf("jobs ls:\n%s", ls.stdout)
	}
	get := ok(d.gantryCLI(t, dir, "", nil, "jobs", "get", done.ID))
	for _, want := range []string{"succeeded (exit code 0)", "out/f.txt", "metadata.who", "cli"} {
		if !strings.Contains(get.stdout, want) {
			t.Errorf("jobs get lacks %q:\n%s", want, get.stdout)
		}
	}
	var j jobs.Job
	if err := json.Unmarshal([]byte(ok(d.gantryCLI(t, dir, "", nil, "jobs", "get", "--json", done.ID)).stdout), &j); err != nil || j.ID != done.ID {
		t.Errorf("jobs get --json: %v", err)
	}
	if r := ok(d.gantryCLI(t, dir, "", nil, "jobs", "logs", done.ID)); r.stdout != "out\n" || r.stderr != "err\n" {
		t.Errorf("jobs logs: %+v", r)
	}
	running := d.submit(t, map[string]any{"language": "bash", "code": "echo one; sleep 1; echo two"})
	if r := ok(d.gantryCLI(t, dir, "", nil, "jobs", "logs", "-f", running.ID)); r.stdout != "one\ntwo\n" {
		t.Errorf("jobs logs -f: %+v", r)
	}
	sleeper := d.submit(t, map[string]any{"language": "bash", "code": "sleep 100"})
	if r := ok(d.gantryCLI(t, dir, "", nil, "jobs", "cancel", sleeper.ID)); !strings.Contains(r.stdout, sleeper.ID) {
		t.Errorf("jobs cancel: %+v", r)
	}
	if j := d.await(t, sleeper.ID, 30*time.Second, terminal); j.Status != jobs.StatusCancelled {
		t.Errorf("cancelled job: %s", j.Status)
	}
	if r := d.gantryCLI(t, dir, "", nil, "jobs", "get", jobs.NewID("job")); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("unknown job: %+v", r)
	}

	sid := strings.TrimSpace(ok(d.gantryCLI(t, dir, "", nil, "sessions", "create")).stdout)
	if r := ok(d.gantryCLI(t, dir, "", nil, "sessions", "ls")); !strings.Contains(r.stdout, sid) {
		t.Errorf("sessions ls:\n%s", r.stdout)
	}
	ok(d.gantryCLI(t, dir, "", nil, "sessions", "rm", sid))
	if r := d.call(t, "GET", "/v1/sessions/"+sid, ""); r.status != 404 {
		t.Errorf("session after rm: %d", r.status)
	}

	// Skills: push a folder, find it, read it, pull it back.
	writeFile(t, filepath.Join(dir, "tidy-logs", "SKILL.md"), "---\nname: tidy-logs\ndescription: Summarise nginx access logs by status.\n---\n# Tidy logs\nRun scripts/tidy.py.\n")
	writeFile(t, filepath.Join(dir, "tidy-logs", "scripts", "tidy.py"), "print('tidy')\n")
	writeFile(t, filepath.Join(dir, "tidy-logs", "assets", "b.bin"), "\x00\x01\xff")
	if r := ok(d.gantryCLI(t, dir, "", nil, "skills", "push", "tidy-logs")); r.stdout != "saved tidy-logs version 1\n" {
		t.Errorf("skills push: %+v", r)
	}
	if r := ok(d.gantryCLI(t, dir, "", nil, "skills", "ls", "-q", "nginx")); !strings.Contains(r.stdout, "tidy-logs") {
		t.Errorf("skills ls -q:\n%s", r.stdout)
	}
	if r := ok(d.gantryCLI(t, dir, "", nil, "skills", "get", "tidy-logs")); !strings.Contains(r.stdout, "Run scripts/tidy.py.") || !strings.Contains(r.stderr, "scripts/tidy.py") {
		t.Errorf("skills get: %+v", r)
	}
	ok(d.gantryCLI(t, dir, "", nil, "skills", "pull", "tidy-logs", "-o", "pulled"))
	for p, want := range map[string]string{"scripts/tidy.py": "print('tidy')\n", "assets/b.bin": "\x00\x01\xff"} {
		if b, err := os.ReadFile(filepath.Join(dir, "pulled", "tidy-logs", p)); err != nil || string(b) != want {
			t.Errorf("pulled %s: %q %v", p, b, err)
		}
	}
	if r := d.gantryCLI(t, dir, "", nil, "skills", "pull", "tidy-logs", "-o", "pulled"); r.code == 0 || !strings.Contains(r.stderr, "--force") {
		t.Errorf("pull over a folder: %+v", r)
	}
	writeFile(t, filepath.Join(dir, "bad", "SKILL.md"), "---\nname: Bad_Name\ndescription: x\n---\n")
	if r := d.gantryCLI(t, dir, "", nil, "skills", "push", "bad"); r.code == 0 || !strings.Contains(r.stderr, "name") {
		t.Errorf("push of a bad skill: %+v", r)
	}

	// Failures, each in plain words.
	for name, c := range map[string]struct {
		env  []string
		want string
	}{
		"no server": {[]string{"GANTRY_URL=http://127.0.0.1:1"}, "cannot reach gantry at http://127.0.0.1:1"},
		"bad key":   {[]string{"GANTRY_API_KEY=gk_not_a_real_key_000000"}, "API key was refused"},
		"no key":    {[]string{"GANTRY_API_KEY="}, "no API key"},
		"bad url":   {[]string{"GANTRY_URL=localhost:8080"}, "GANTRY_URL"},
	} {
		if r := d.gantryCLI(t, dir, "", c.env, "jobs", "ls"); r.code != 1 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: %+v, want %q", name, r, c.want)
		}
		if r := d.gantryCLI(t, dir, "print(1)", c.env, "run", "--lang", "python", "-"); r.code != 125 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("run, %s: %+v", name, r)
		}
	}
	if r := d.gantryCLI(t, dir, "", nil, "jobs", "frobnicate"); r.code != 2 || !strings.Contains(r.stderr, "Usage:") {
		t.Errorf("unknown subcommand: %+v", r)
	}

	// The config file, when the environment does not say.
	cfg := filepath.Join(dir, "config.json")
	writeFile(t, cfg, `{"url": "`+d.url+`", "api_key": "`+d.key+`"}`)
	if err := os.Chmod(cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := d.gantryCLI(t, dir, "", []string{"GANTRY_URL=", "GANTRY_API_KEY=", "GANTRY_CONFIG=" + cfg}, "jobs", "ls"); r.code != 0 || !strings.Contains(r.stdout, done.ID) || r.stderr != "" {
		t.Errorf("with the config file: %+v", r)
	}
	writeFile(t, cfg, `{"url": "`+d.url+`", "key": "x"}`)
	if r := d.gantryCLI(t, dir, "", []string{"GANTRY_URL=", "GANTRY_API_KEY=", "GANTRY_CONFIG=" + cfg}, "jobs", "ls"); r.code != 1 || !strings.Contains(r.stderr, cfg) {
		t.Errorf("bad config file: %+v", r)
	}
}
