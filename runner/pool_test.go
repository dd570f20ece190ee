package runner

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gantryhq/gantry/jobs"
)

func (h *harness) poolContainers(t *testing.T) []string {
	t.Helper()
	res, err := h.sb.docker.ContainerList(context.Background(), client.ContainerListOptions{
		Filters: make(client.Filters).Add("label", LabelPool+"=true").Add("label", LabelRunner+"="+h.sb.runnerID).Add("status", "running")})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range res.Items {
		ids = append(ids, c.ID)
	}
	return ids
}

func (h *harness) waitPool(t *testing.T, n int) []string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ids := h.poolContainers(t)
		if len(ids) >= n {
			return ids
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool has %d containers, want %d", len(ids), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestWarmPool(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker, Postgres, NATS and S3")
	}
	policy := jobs.DefaultPolicy()
	h := newHarness(t, 2, withPool(PoolConfig{Min: 2, Max: 4, Limits: policy.DefaultLimits}))
	h.waitPool(t, 2)

	// A pooled container serves one job and is destroyed: nothing passes on.
	j := h.run(t, jobs.Request{Language: "bash", Code: "echo secret > /workspace/left.txt; echo secret > /tmp/left.txt; echo ran"})
	if j.Status != jobs.StatusSucceeded || j.Stdout != "ran\n" {
		t.Fatalf("job: %+v", j)
	}
	j = h.run(t, jobs.Request{Language: "bash", Code: "ls /workspace /tmp; cat /workspace/left.txt /tmp/left.txt 2>&1 || true"})
	if strings.Contains(j.Stdout, "secret") || strings.Contains(j.Stdout, "left.txt\n") {
		t.Fatalf("state passed between jobs: %q", j.Stdout)
	}
	if got := testutil.ToFloat64(h.r.pool.hits); got != 2 {
		t.Errorf("pool hits = %v, want 2", got)
	}

	// Jobs with other limits take the cold path and still work.
	if j := h.run(t, jobs.Request{Language: "bash", Code: "echo cold", Limits: &jobs.Limits{MemoryMB: 256}}); j.Stdout != "cold\n" {
		t.Fatalf("cold path: %+v", j)
	}

	// Pooled containers that die (as in a Docker restart) are replaced, and a
	// job never fails for having drawn one.
	for _, id := range h.waitPool(t, 2) {
		if out, err := exec.Command("docker", "kill", id).CombinedOutput(); err != nil {
			t.Fatalf("docker kill: %v %s", err, out)
		}
	}
	if j := h.run(t, jobs.Request{Language: "bash", Code: "echo after-restart"}); j.Status != jobs.StatusSucceeded || j.Stdout != "after-restart\n" {
		t.Fatalf("job after the pool died: %+v", j)
	}
	h.waitPool(t, 2)
}
