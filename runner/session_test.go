package runner

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gantryhq/gantry/blob"
	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
)

func (h *harness) session(t *testing.T) string {
	t.Helper()
	req, _ := jobs.SessionRequest{DiskMB: 64}.Normalize()
	sess, err := h.st.CreateSession(context.Background(), h.tenant, req)
	if err != nil {
		t.Fatal(err)
	}
	return sess.ID
}

func (h *harness) submitIn(t *testing.T, sessionID string, req jobs.Request) string {
	t.Helper()
	req.SessionID = &sessionID
	return h.submit(t, req)
}

func TestSessions(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker, Postgres, NATS and S3")
	}
	h := newHarness(t, 4)

	t.Run("state persists across jobs", func(t *testing.T) {
		t.Parallel()
		sid := h.session(t)
		run := func(code string) jobs.Job {
			return h.waitFor(t, h.submitIn(t, sid, jobs.Request{Language: "bash", Code: code}), func(j jobs.Job) bool { return j.Status.Terminal() })
		}
		if j := run("mkdir -p src && echo 'print(40 + 2)' > src/main.py && echo written"); j.Stdout != "written\n" {
			t.Fatalf("job 1: %+v", j)
		}
		if j := run("python3 src/main.py > result.txt && cat result.txt"); j.Stdout != "42\n" {
			t.Fatalf("job 2: %+v", j)
		}
		// A job that times out leaves the workspace as it was before it.
		if j := h.waitFor(t, h.submitIn(t, sid, jobs.Request{Language: "bash", Code: "echo junk > junk.txt; rm result.txt; sleep 30", TimeoutMS: 1000}),
			func(j jobs.Job) bool { return j.Status.Terminal() }); j.Status != jobs.StatusTimedOut {
			t.Fatalf("job 3: %+v", j)
		}
		if j := run("ls; cat result.txt"); j.Stdout != "out\nresult.txt\nsrc\n42\n" {
			t.Fatalf("workspace after a timed-out job: %q", j.Stdout)
		}
		// The replaced snapshot is deleted just after the result is
		// recorded: wait for it.
		sess, _ := h.st.GetSession(context.Background(), h.tenant, sid)
		eventually.NoError(t, 10*time.Second, "only the current snapshot kept", func() error {
			n, err := h.blobs.Count(context.Background(), blob.SessionPrefix(h.tenant, sid))
			if err == nil && (n != 1 || sess.Version != 3) {
				err = fmt.Errorf("%d snapshot objects (want only the current one), version %d", n, sess.Version)
			}
			return err
		})
	})

	t.Run("20 jobs submitted at once run in order", func(t *testing.T) {
		t.Parallel()
		sid := h.session(t)
		ids := make([]string, 20)
		for i := range ids {
			ids[i] = h.submitIn(t, sid, jobs.Request{Language: "bash", Code: fmt.Sprintf("echo %d >> order.txt; tr '\\n' ' ' < order.txt", i)})
		}
		var want strings.Builder
		for i, id := range ids {
			fmt.Fprintf(&want, "%d ", i)
			j := h.waitFor(t, id, func(j jobs.Job) bool { return j.Status.Terminal() })
			if j.Status != jobs.StatusSucceeded || j.Stdout != want.String() {
				t.Fatalf("job %d saw %q, want %q (%s, %+v, %q)", i, j.Stdout, want.String(), j.Status, j.Error, j.Stderr)
			}
		}
	})

	t.Run("sessions do not share a workspace", func(t *testing.T) {
		t.Parallel()
		a, b := h.session(t), h.session(t)
		// Both queued at once, so that they run side by side.
		ids := []string{
			h.submitIn(t, a, jobs.Request{Language: "bash", Code: "echo " + a + " > who.txt"}),
			h.submitIn(t, b, jobs.Request{Language: "bash", Code: "echo " + b + " > who.txt"}),
		}
		for _, id := range ids {
			h.waitFor(t, id, func(j jobs.Job) bool { return j.Status.Terminal() })
		}
		for _, sid := range []string{a, b} {
			j := h.waitFor(t, h.submitIn(t, sid, jobs.Request{Language: "bash", Code: "cat who.txt"}), func(j jobs.Job) bool { return j.Status.Terminal() })
			if j.Stdout != sid+"\n" {
				t.Errorf("session %s sees %q", sid, j.Stdout)
			}
		}
	})

	t.Run("artifacts of a session job", func(t *testing.T) {
		t.Parallel()
		sid := h.session(t)
		j := h.waitFor(t, h.submitIn(t, sid, jobs.Request{Language: "bash", Code: "mkdir -p out; echo hi > out/a.txt"}), func(j jobs.Job) bool { return j.Status.Terminal() })
		if len(j.Artifacts) != 1 {
			t.Fatalf("artifacts %+v", j.Artifacts)
		}
		rc, err := h.blobs.Get(context.Background(), blob.ArtifactKey(h.tenant, j.ID, "out/a.txt"))
		if err != nil {
			t.Fatal(err)
		}
		rc.Close()
	})
}

// TestOutExists: out/, where artifacts are collected from by default, is
// there (empty) when every job starts, in sessions too, so that
// plt.savefig("out/plot.png") works as the README shows it.
func TestOutExists(t *testing.T) {
	h := newHarness(t, 1)
	j := h.run(t, jobs.Request{Language: "python", Code: `
import os
print(sorted(os.listdir(".")), sorted(os.listdir("out")))
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
plt.plot([1, 2, 3])
plt.savefig("out/plot.png")
`})
	if j.Status != jobs.StatusSucceeded || j.Stdout != "['out'] []\n" || len(j.Artifacts) != 1 || j.Artifacts[0].Path != "out/plot.png" {
		t.Fatalf("a plain job: %s %q %q %+v", j.Status, j.Stdout, j.Stderr, j.Artifacts)
	}
	// The runner's stages and the tenant's count went to its metrics.
	for _, stage := range []string{"acquire", "collect", "record"} {
		if n := h.metric(t, "gantry_job_stage_seconds", map[string]string{"stage": stage}); n != 1 {
			t.Errorf("gantry_job_stage_seconds{stage=%q}: %v observations", stage, n)
		}
	}
	if n := h.metric(t, "gantry_tenant_jobs_total", map[string]string{"tenant": h.tenant, "status": "succeeded"}); n != 1 {
		t.Errorf("gantry_tenant_jobs_total: %v", n)
	}
	if n := h.metric(t, "gantry_tenant_cpu_seconds_total", map[string]string{"tenant": h.tenant}); n <= 0 {
		t.Errorf("gantry_tenant_cpu_seconds_total: %v", n)
	}
	sid := h.session(t)
	for i, code := range []string{"rm -r out && echo gone", "ls -d out && echo x > out/a.txt", "rm -r out; echo file > out", "cat out"} {
		j := h.waitFor(t, h.submitIn(t, sid, jobs.Request{Language: "bash", Code: code}), func(j jobs.Job) bool { return j.Status.Terminal() })
		if j.Status != jobs.StatusSucceeded {
			t.Fatalf("session job %d (%s): %s %q %q", i+1, code, j.Status, j.Stdout, j.Stderr)
		}
		// A session's own file named out stays as it is.
		if i == 3 && j.Stdout != "file\n" {
			t.Errorf("the session's file named out: %q", j.Stdout)
		}
	}
}
