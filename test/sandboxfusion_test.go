package test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store/storetest"
)

// sfCall is one /run_code call as verl makes it: a POST of the JSON, read
// whole, given up after compile_timeout + run_timeout + 10 s.
type sfCall struct {
	status int
	jobID  string
	body   []byte
	err    error
}

func runCodeCall(url string, req map[string]any, timeout time.Duration) sfCall {
	b, _ := json.Marshal(req)
	c := &http.Client{Timeout: timeout}
	r, err := c.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		return sfCall{err: err}
	}
	defer r.Body.Close()
	body, err := io.ReadAll(r.Body)
	return sfCall{status: r.StatusCode, jobID: r.Header.Get("X-Gantry-Job-Id"), body: body, err: err}
}

// TestSandboxFusionNoRetryForAJobThatRuns: verl retries a /run_code call
// that answered 504 — so a job answered 504 must never run, or the code
// runs twice. Postgres stops while a call waits for its queued job (the
// only runner slot is taken), and comes back before the client gives up:
// the answer is held through the outage, the job is withdrawn once it can
// be, and then the call is answered 504; the job never runs, though the
// runner is free again and runs the jobs queued after it.
func TestSandboxFusionNoRetryForAJobThatRuns(t *testing.T) {
	pg := storetest.NewCluster(t)
	d := startDev(t, "GANTRY_DATABASE_URL="+pg.URL, "GANTRY_RUNNER_SLOTS=1")
	blocker := d.submit(t, map[string]any{"language": "python", "code": "import time; time.sleep(120)", "timeout_ms": 300000})
	d.await(t, blocker.ID, 2*time.Minute, func(j jobs.Job) bool { return j.Status == jobs.StatusRunning })

	// The job must start within 7 s (10 s of verl's slack, less 3 s of
	// margin) for its answer to come within the client's 20 s.
	answer := make(chan sfCall, 1)
	go func() {
		answer <- runCodeCall(d.url+"/compat/key/"+d.key+"/sandboxfusion/run_code",
			map[string]any{"code": "print('ran')", "language": "python", "compile_timeout": 0, "run_timeout": 10}, 20*time.Second)
	}()
	var queued jobs.Job
	if !eventually.Within(20*time.Second, func() bool {
		var page struct{ Jobs []jobs.Job }
		_ = json.Unmarshal(d.call(t, "GET", "/v1/jobs?metadata.compat=sandboxfusion", "").body, &page)
		if len(page.Jobs) == 1 {
			queued = page.Jobs[0]
		}
		return queued.Status == jobs.StatusQueued
	}) {
		t.Fatalf("the call's job is not queued: %+v", queued)
	}
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	// The outage: past the moment the job had to start by, and shorter
	// than the client waits.
	time.Sleep(10 * time.Second)
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Postgres was down %s", time.Since(stopped).Round(100*time.Millisecond))
	got := <-answer
	if got.err != nil {
		t.Fatalf("the call: %v", got.err)
	}
	t.Logf("answered %d %s", got.status, got.body)

	// The runner is freed, and runs what was queued after the call's job.
	d.call(t, "POST", "/v1/jobs/"+blocker.ID+"/cancel", "")
	probe := d.submit(t, map[string]any{"language": "python", "code": "print('probe')"})
	if p := d.await(t, probe.ID, 2*time.Minute, terminal); p.Status != jobs.StatusSucceeded {
		t.Fatalf("the probe: %s %+v", p.Status, p.Error)
	}
	j := d.job(t, "GET", "/v1/jobs/"+queued.ID, "")
	switch {
	case got.status == http.StatusGatewayTimeout && (j.Status != jobs.StatusCancelled || j.StartedAt != nil):
		t.Errorf("answered 504 (verl retries it) for job %s, which then ran: %s, started %v, stdout %q", j.ID, j.Status, j.StartedAt, j.Stdout)
	case got.status != http.StatusGatewayTimeout:
		// Held past the client's patience: anything but retry.
		if got.status == http.StatusOK && !strings.Contains(string(got.body), "SandboxError") {
			t.Errorf("answered %d %s: the job neither finished nor was withdrawn", got.status, got.body)
		}
		t.Logf("not withdrawn in time (a slow machine); the job is %s", j.Status)
	}
}

// TestSandboxFusionFetchFilesCapped is the red team's call, smaller: a
// program writes a 4 MiB file and the call fetches it by 8 names (big.bin,
// ./big.bin, .//big.bin, ...). The answer would hold 32 MiB of files, past
// the 16 MiB a call may fetch: 413, in FastAPI's {"detail": ...}, naming
// the job, which ran. Fetched by three names, a small file comes back once
// per name.
func TestSandboxFusionFetchFilesCapped(t *testing.T) {
	d := startDev(t, "GANTRY_RUNNER_SLOTS=2")
	url := d.url + "/compat/key/" + d.key + "/sandboxfusion/run_code"
	var names []string
	for i := range 8 {
		names = append(names, strings.Repeat("./", i)+"big.bin")
	}
	got := runCodeCall(url, map[string]any{"language": "python", "run_timeout": 30,
		"code": "open('big.bin', 'wb').write(b'x' * (4 << 20)); open('small.txt', 'w').write('hi')", "fetch_files": names}, time.Minute)
	var refusal struct{ Detail string }
	if err := json.Unmarshal(got.body, &refusal); got.err != nil || got.status != 413 || err != nil ||
		!strings.Contains(refusal.Detail, "fetch_files") || got.jobID == "" || !strings.Contains(refusal.Detail, got.jobID) {
		t.Errorf("8 names of a 4 MiB file: %d %v %.300s", got.status, got.err, got.body)
	}
	got = runCodeCall(url, map[string]any{"language": "python", "run_timeout": 30,
		"code": "open('small.txt', 'w').write('hi')", "fetch_files": []string{"small.txt", "./small.txt", "x/../small.txt", "nope.txt"}}, time.Minute)
	var out struct {
		Status string
		Files  map[string]string
	}
	want := base64.StdEncoding.EncodeToString([]byte("hi"))
	if err := json.Unmarshal(got.body, &out); got.status != 200 || err != nil || out.Status != "Success" || len(out.Files) != 3 ||
		out.Files["small.txt"] != want || out.Files["./small.txt"] != want || out.Files["x/../small.txt"] != want {
		t.Errorf("3 names of a small file: %d %.300s", got.status, got.body)
	}
}
