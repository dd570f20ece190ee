package test

import (
	"context"
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/secret"
)

// TestEnvSealedEndToEnd: a job's env values reach the program, through a
// runner killed mid-job and another that takes the job over, and through
// a session, yet they are not in the database row, in any API answer or
// in the processes' logs.
func TestEnvSealedEndToEnd(t *testing.T) {
	key := secret.NewKey()
	d := startDev(t, "GANTRY_DEV_RUNNER=false", "GANTRY_ACK_WAIT=2s", "GANTRY_SECRET_KEY="+key)
	runner := func(id string) *proc {
		p := start(t, append(d.env, "GANTRY_RUNNER_ID="+id, "GANTRY_RUNNER_SLOTS=1", "GANTRY_DRAIN_TIMEOUT=1s"), "runner")
		p.waitOutput(t, regexp.MustCompile(`runner started`), 30*time.Second)
		return p
	}
	suffix := uniqueSuffix()
	a := runner("e2e-env-a-" + suffix)

	const value = "tok-e2e-Sealed-9f3c"
	j := d.submit(t, map[string]any{"language": "python", "env": map[string]string{"TOKEN": value, "MODE": "fast"},
		"metadata": map[string]string{"suite": "env-" + suffix},
		"code": `
import os, time
print("started", flush=True)
time.sleep(3)
print(os.environ["TOKEN"][::-1], os.environ["MODE"], len(os.environ["TOKEN"]))
`})
	d.await(t, j.ID, time.Minute, func(j jobs.Job) bool { return j.Status == jobs.StatusRunning })
	a.kill()
	b := runner("e2e-env-b-" + suffix)
	j = d.await(t, j.ID, 2*time.Minute, terminal)
	reversed := func(s string) string {
		r := []rune(s)
		for i, k := 0, len(r)-1; i < k; i, k = i+1, k-1 {
			r[i], r[k] = r[k], r[i]
		}
		return string(r)
	}
	if want := "started\n" + reversed(value) + " fast 19\n"; j.Status != jobs.StatusSucceeded || j.Attempt != 2 || j.Stdout != want {
		t.Fatalf("job with env after its runner was killed: %s attempt %d, stdout %q, want %q", j.Status, j.Attempt, j.Stdout, want)
	}

	// In a session too.
	var sess jobs.Session
	if err := json.Unmarshal(d.call(t, "POST", "/v1/sessions", `{"language":"bash"}`).body, &sess); err != nil || sess.ID == "" {
		t.Fatalf("create session: %v", err)
	}
	sj := d.job(t, "POST", "/v1/execute", `{"language":"bash","session_id":"`+sess.ID+`","code":"echo ${#TOKEN} > n; cat n","env":{"TOKEN":"`+value+`"}}`)
	if sj.Status != jobs.StatusSucceeded || sj.Stdout != "19\n" {
		t.Errorf("session job with env: %s %q", sj.Status, sj.Stdout)
	}

	conn, err := pgx.Connect(context.Background(), d.dbURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, id := range []string{j.ID, sj.ID} {
		var spec string
		var hash []byte
		if err := conn.QueryRow(context.Background(), `SELECT spec::text, request_hash FROM jobs WHERE id = $1`, id).Scan(&spec, &hash); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(spec, value) || !strings.Contains(spec, `"sealed_env"`) {
			t.Errorf("job %s: the row's spec holds the env value, or no sealed env: %s", id, spec)
		}
	}
	for _, path := range []string{"/v1/jobs/" + j.ID, "/v1/jobs/" + j.ID + "?include=spec", "/v1/jobs?include=spec&limit=100", "/v1/jobs/" + sj.ID + "?include=spec"} {
		if body := string(d.call(t, "GET", path, "").body); strings.Contains(body, value) {
			t.Errorf("GET %s shows the env value", path)
		}
	}
	var withSpec jobs.Job
	_ = json.Unmarshal(d.call(t, "GET", "/v1/jobs/"+j.ID+"?include=spec", "").body, &withSpec)
	if withSpec.Spec == nil || !reflect.DeepEqual(withSpec.Spec.EnvNames, []string{"MODE", "TOKEN"}) || !strings.Contains(withSpec.Spec.Code, "time.sleep(3)") {
		t.Errorf("include=spec: %+v", withSpec.Spec)
	}
	for name, p := range map[string]*proc{"dev": d.proc, "runner a": a, "runner b": b} {
		if strings.Contains(p.output(), value) {
			t.Errorf("the log of %s holds the env value", name)
		}
	}
}

// TestHistorySearchEndToEnd: the history's filters over HTTP and with
// gantry jobs ls, against gantry dev.
func TestHistorySearchEndToEnd(t *testing.T) {
	d := startDev(t, "GANTRY_RUNNER_SLOTS=2")
	run := "run-" + uniqueSuffix()
	py := d.job(t, "POST", "/v1/execute", `{"language":"python","code":"print(1)","metadata":{"run":"`+run+`","agent":"eval"},"env":{"K":"v"}}`)
	sh := d.job(t, "POST", "/v1/execute", `{"language":"bash","code":"exit 3","metadata":{"run":"`+run+`"}}`)
	node := d.job(t, "POST", "/v1/execute", `{"language":"node","code":"console.log(2)","metadata":{"run":"`+run+`","agent":"eval"}}`)
	if py.Status != jobs.StatusSucceeded || sh.Status != jobs.StatusFailed || node.Status != jobs.StatusSucceeded {
		t.Fatalf("jobs: %s %s %s", py.Status, sh.Status, node.Status)
	}
	list := func(query string) []string {
		t.Helper()
		r := d.call(t, "GET", "/v1/jobs?"+query, "")
		var page struct{ Jobs []jobs.Job }
		if err := json.Unmarshal(r.body, &page); err != nil || r.status != 200 {
			t.Fatalf("GET /v1/jobs?%s: %d %s", query, r.status, r.body)
		}
		out := []string{}
		for _, j := range page.Jobs {
			out = append(out, j.ID)
		}
		return out
	}
	since := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"metadata.run=" + run, []string{node.ID, sh.ID, py.ID}},
		{"metadata.run=" + run + "&metadata.agent=eval", []string{node.ID, py.ID}},
		{"metadata.run=" + run + "&status=failed,error", []string{sh.ID}},
		{"metadata.run=" + run + "&language=python&language=node&status=succeeded&created_after=" + since, []string{node.ID, py.ID}},
		{"metadata.run=" + run + "&created_before=" + since, []string{}},
	} {
		if got := list(c.query); !reflect.DeepEqual(got, c.want) {
			t.Errorf("?%s: %v, want %v", c.query, got, c.want)
		}
	}
	if r := d.call(t, "GET", "/v1/jobs?state=failed", ""); r.status != 400 || !strings.Contains(string(r.body), `"field":"state"`) {
		t.Errorf("unknown parameter: %d %s", r.status, r.body)
	}

	dir := t.TempDir()
	ls := d.gantryCLI(t, dir, "", nil, "jobs", "ls", "--status", "succeeded", "--lang", "python,node", "--since", "1h", "--meta", "run="+run, "--meta", "agent=eval", "--json")
	var page struct{ Jobs []jobs.Job }
	if err := json.Unmarshal([]byte(ls.stdout), &page); err != nil || ls.code != 0 || len(page.Jobs) != 2 || page.Jobs[0].ID != node.ID || page.Jobs[1].ID != py.ID {
		t.Errorf("gantry jobs ls with filters: %+v", ls)
	}
	ls = d.gantryCLI(t, dir, "", nil, "jobs", "ls", "--lang", "python", "--meta", "run="+run, "--spec")
	if ls.code != 0 || !strings.Contains(ls.stdout, py.ID) || !strings.Contains(ls.stdout, "print(1)") || strings.Contains(ls.stdout, sh.ID) {
		t.Errorf("gantry jobs ls --spec:\n%s%s", ls.stdout, ls.stderr)
	}
	if r := d.gantryCLI(t, dir, "", nil, "jobs", "ls", "--until", "2026-01-02T15:04:05Z", "--meta", "run="+run); r.code != 0 || strings.Contains(r.stdout, py.ID) {
		t.Errorf("gantry jobs ls --until: %+v", r)
	}
	if r := d.gantryCLI(t, dir, "", nil, "jobs", "ls", "--status", "done"); r.code == 0 || !strings.Contains(r.stderr, "status") {
		t.Errorf("gantry jobs ls --status done: %+v", r)
	}
	if r := d.gantryCLI(t, dir, "", nil, "jobs", "ls", "--since", "last week"); r.code == 0 || !strings.Contains(r.stderr, "--since") {
		t.Errorf("gantry jobs ls --since 'last week': %+v", r)
	}
	get := d.gantryCLI(t, dir, "", nil, "jobs", "get", py.ID)
	for _, want := range []string{"print(1)", "env", "K (values are never shown)"} {
		if !strings.Contains(get.stdout, want) {
			t.Errorf("gantry jobs get lacks %q:\n%s", want, get.stdout)
		}
	}
}
