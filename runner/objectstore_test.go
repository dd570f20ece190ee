package runner

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/gantryhq/gantry/blob"
	"github.com/gantryhq/gantry/blob/blobtest"
	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
)

// withS3 has the runner use s3, which the test stops and starts.
func withS3(s3 *blobtest.Restartable) func(*harness, *Config) {
	return func(h *harness, _ *Config) { h.blobs = s3.Store }
}

// TestS3Outage: a job that ran while S3 was down keeps its outcome and
// files until S3 is back, and is recorded once with its artifacts, as a
// result waits out Postgres; a session's workspace is saved and restored
// through an outage without spending the job's attempt; a runner that
// stops while it holds a job for S3 gives it back unspent.
func TestS3Outage(t *testing.T) {
	s3 := blobtest.NewRestartable(t)
	h := newHarness(t, 2, withS3(s3), func(_ *harness, c *Config) { c.DrainTimeout = 2 * time.Second })
	ctx := context.Background()
	running := func(j jobs.Job) bool { return j.Status == jobs.StatusRunning }
	terminal := func(j jobs.Job) bool { return j.Status.Terminal() }
	// held stops S3 and waits until the runner holds a job for it. held
	// and outage take the (sub)test that calls them.
	held := func(t *testing.T) {
		t.Helper()
		holds := h.metric(t, "gantry_runner_s3_holds_total", nil)
		s3.Stop()
		eventually.True(t, time.Minute, "the runner to hold a job for S3", func() bool {
			return h.metric(t, "gantry_runner_s3_holds_total", nil) > holds
		})
	}
	// outage stops S3 once the job runs, until the runner holds the job
	// for it, then starts it again.
	outage := func(t *testing.T, id string) {
		t.Helper()
		h.waitFor(t, id, running)
		held(t)
		if j, _ := h.st.GetJob(ctx, h.tenant, id); j.Status != jobs.StatusRunning {
			t.Errorf("during the outage the job is %s (%v), want it held running", j.Status, j.Error)
		}
		s3.Start()
	}

	t.Run("a plain job's files", func(t *testing.T) {
		id := h.submit(t, jobs.Request{Language: "python", Code: `
import os, time
time.sleep(1)
os.makedirs("out", exist_ok=True)
open("out/result.txt", "w").write("kept through the outage")
print("x" * 100000)  # long output: recorded through S3 too
`})
		outage(t, id)
		j := h.waitFor(t, id, terminal)
		if j.Status != jobs.StatusSucceeded || j.Attempt != 1 || len(j.Artifacts) != 1 {
			t.Fatalf("after the outage: %s attempt %d %+v %v", j.Status, j.Attempt, j.Artifacts, j.Error)
		}
		rc, err := s3.Store.Get(ctx, blob.ArtifactKey(h.tenant, id, "out/result.txt"))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		if string(b) != "kept through the outage" {
			t.Errorf("artifact = %q", b)
		}
	})

	t.Run("a session's workspace, saved and restored", func(t *testing.T) {
		sid := h.session(t)
		id := h.submitIn(t, sid, jobs.Request{Language: "bash", Code: "sleep 1; echo first > kept.txt"})
		outage(t, id)
		if j := h.waitFor(t, id, terminal); j.Status != jobs.StatusSucceeded || j.Attempt != 1 {
			t.Fatalf("first job: %s attempt %d %v", j.Status, j.Attempt, j.Error)
		}
		// The next job needs the workspace from S3: drop the container
		// the runner kept, and stop S3.
		h.r.fleet.dropSession(sid)
		holds := h.metric(t, "gantry_runner_s3_holds_total", nil)
		s3.Stop()
		id = h.submitIn(t, sid, jobs.Request{Language: "bash", Code: "cat kept.txt"})
		h.waitFor(t, id, running)
		eventually.True(t, time.Minute, "the runner to hold the job for its workspace", func() bool {
			return h.metric(t, "gantry_runner_s3_holds_total", nil) > holds
		})
		if j, _ := h.st.GetJob(ctx, h.tenant, id); j.Status != jobs.StatusRunning || j.Attempt != 1 {
			t.Errorf("waiting for its workspace, the job is %s attempt %d (%v)", j.Status, j.Attempt, j.Error)
		}
		s3.Start()
		if j := h.waitFor(t, id, terminal); j.Status != jobs.StatusSucceeded || j.Stdout != "first\n" || j.Attempt != 1 {
			t.Fatalf("after the restore: %s attempt %d %q %v", j.Status, j.Attempt, j.Stdout, j.Error)
		}
	})

	t.Run("a runner that stops gives the job back unspent", func(t *testing.T) {
		id := h.submit(t, jobs.Request{Language: "bash", Code: "sleep 1; mkdir -p out; echo x > out/x.txt"})
		h.waitFor(t, id, running)
		held(t) // the program ended; its files wait
		h.stop()
		j, err := h.st.GetJob(ctx, h.tenant, id)
		if err != nil {
			t.Fatal(err)
		}
		if j.Status != jobs.StatusQueued || j.Attempt != 0 {
			t.Fatalf("given back: %s attempt %d %v", j.Status, j.Attempt, j.Error)
		}
		if n := h.metric(t, "gantry_job_handbacks_total", map[string]string{"cause": "object_store"}); n != 1 {
			t.Errorf("hand-backs for the object store: %v", n)
		}
		s3.Start()
	})
}
