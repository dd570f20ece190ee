package runner

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
	"github.com/gantryhq/gantry/secret"
	"github.com/gantryhq/gantry/store"
)

// submitSealed queues a job whose env is sealed under box, as an ingress
// with GANTRY_SECRET_KEY stores it.
func (h *harness) submitSealed(t *testing.T, box *secret.Box, req jobs.Request) string {
	t.Helper()
	spec, err := jobs.DefaultPolicy().Normalize(req)
	if err != nil {
		t.Fatal(err)
	}
	id := jobs.NewID("job")
	if err := spec.SealEnv(box, h.tenant, id); err != nil {
		t.Fatal(err)
	}
	_, _, err = h.st.EnqueueJob(context.Background(), store.NewJob{ID: id, TenantID: h.tenant, Spec: spec},
		func(ctx context.Context, id string) (uint64, error) {
			l, err := h.st.TenantLimits(ctx, h.tenant)
			if err != nil {
				return 0, err
			}
			return h.pub.Publish(ctx, queue.RunMessage{JobID: id, TenantID: h.tenant}, id, l.Or(h.r.cfg.TenantLimits).MaxRunning)
		})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestSealedEnv: the runner opens a job's sealed env for the program, and
// a runner without the key fails the job saying why.
func TestSealedEnv(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker, Postgres, NATS and S3")
	}
	box, err := secret.New(bytes.Repeat([]byte{5}, secret.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	req := jobs.Request{Language: "bash", Code: `printf '%s|%s' "$TOKEN" "$MODE"`, Env: map[string]string{"TOKEN": "tok-runner-1", "MODE": "a b"}}

	h := newHarness(t, 1, func(_ *harness, c *Config) { c.Box = box })
	j := h.waitFor(t, h.submitSealed(t, box, req), func(j jobs.Job) bool { return j.Status.Terminal() })
	if j.Status != jobs.StatusSucceeded || j.Stdout != "tok-runner-1|a b" {
		t.Fatalf("sealed env: %s %q %q", j.Status, j.Stdout, j.Stderr)
	}
	// Env stored in the clear (an older row) still runs.
	if j := h.run(t, req); j.Stdout != "tok-runner-1|a b" {
		t.Errorf("plain env: %s %q", j.Status, j.Stdout)
	}

	keyless := newHarness(t, 1, func(_ *harness, c *Config) { c.Queue.MaxAttempts = 1 })
	j = keyless.waitFor(t, keyless.submitSealed(t, box, req), func(j jobs.Job) bool { return j.Status.Terminal() })
	if j.Status != jobs.StatusError || j.Error == nil || !strings.Contains(j.Error.Message, "GANTRY_SECRET_KEY") || strings.Contains(j.Stdout, "tok-runner-1") {
		t.Errorf("sealed env on a runner without the key: %s %+v", j.Status, j.Error)
	}
}
