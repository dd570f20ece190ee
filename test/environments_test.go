package test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
)

// TestEnvironmentsEndToEnd: the operator builds an environment offline (a
// Dockerfile FROM the sandbox image) and registers it with `gantry
// environments add`, which checks the image's agent; a tenant lists it,
// and a job (HTTP or the CLI's --env) in it sees the image's files while a
// job without sees the default; an unknown name is a 400; removing it
// refuses it again; an image that is not gantry's is refused at
// registration.
func TestEnvironmentsEndToEnd(t *testing.T) {
	image := os.Getenv("GANTRY_IMAGE")
	if image == "" {
		t.Skip("GANTRY_IMAGE is not set (make test sets it)")
	}
	tag := "gantry-e2e-env:" + strings.ToLower(jobs.NewID("t")[2:14])
	build := exec.Command("docker", "build", "-q", "-t", tag, "-")
	build.Stdin = strings.NewReader("FROM " + image + "\nUSER root\nRUN echo from-the-environment > /etc/gantry-env-marker\nUSER 1000\n")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", tag).Run() })

	d := startDev(t)
	if out, err := d.cliErr("environments", "add", "plain-debian", "debian:bookworm-slim-not-here"); err == nil || !strings.Contains(out, "could not be pulled") {
		t.Errorf("an image nobody has: %v %s", err, out)
	}
	out := d.cli(t, "environments", "add", "marked", tag, "--description", "the test's environment")
	if !strings.Contains(out, `"environment": "marked"`) {
		t.Errorf("add: %s", out)
	}
	if out := d.cli(t, "environments", "list"); !strings.Contains(out, "marked") || !strings.Contains(out, tag) {
		t.Errorf("list: %s", out)
	}
	if r := d.call(t, "GET", "/v1/environments", ""); r.status != 200 || !strings.Contains(string(r.body), `"name":"marked","description":"the test's environment"`) {
		t.Fatalf("GET /v1/environments: %d %s", r.status, r.body)
	}
	run := func(env string) jobs.Job {
		body := `{"language":"bash","code":"cat /etc/gantry-env-marker 2>/dev/null || echo none"` + env + `}`
		return d.job(t, "POST", "/v1/execute", body)
	}
	if j := run(`,"environment":"marked"`); j.Status != jobs.StatusSucceeded || j.Stdout != "from-the-environment\n" {
		t.Fatalf("a job in the environment: %s %q %q", j.Status, j.Stdout, j.Stderr)
	}
	if j := run(""); j.Stdout != "none\n" {
		t.Fatalf("a job without: %s %q", j.Status, j.Stdout)
	}
	if r := d.call(t, "POST", "/v1/jobs", `{"language":"bash","code":"x","environment":"nope"}`); r.status != 400 || !strings.Contains(string(r.body), `"field":"environment"`) {
		t.Errorf("an unknown environment: %d %s", r.status, r.body)
	}
	// The CLI.
	dir := t.TempDir()
	writeFile(t, dir+"/probe.sh", "cat /etc/gantry-env-marker\n")
	if r := d.gantryCLI(t, dir, "", nil, "run", "--env", "marked", "probe.sh"); r.code != 0 || r.stdout != "from-the-environment\n" {
		t.Errorf("gantry run --env: %d %q %q", r.code, r.stdout, r.stderr)
	}

	d.cli(t, "environments", "remove", "marked")
	// The ingress's copy of the list is at most 10 s old; an unknown name
	// is looked up again at once, a removed one when the copy ages.
	var r resp
	if !eventually.Within(15*time.Second, func() bool {
		r = d.call(t, "POST", "/v1/jobs", `{"language":"bash","code":"x","environment":"marked"}`)
		return r.status == 400 && strings.Contains(string(r.body), `"field":"environment"`)
	}) {
		t.Fatalf("a removed environment is still accepted: %d %s", r.status, r.body)
	}
}
