package runner

import (
	"sort"
	"strings"
	"testing"

	"github.com/gantryhq/gantry/jobs"
)

func TestMemBudget(t *testing.T) {
	m := newMemBudget(1000)
	if !m.tryReserve(600) || m.tryReserve(600) || !m.tryReserve(400) {
		t.Fatal("reserve")
	}
	_, freed := m.state()
	m.release(600)
	select {
	case <-freed:
	default:
		t.Error("release did not say so")
	}
	if free, _ := m.state(); free != 600 || !m.tryReserve(600) {
		t.Errorf("free %d", free)
	}
}

// TestMemoryAdmission: the runner's sandboxes never hold more memory, by
// their limits, than its budget: jobs beyond it wait queued (unclaimed)
// and then run in the containers that fit; a job that can never fit ends
// as an error saying so.
func TestMemoryAdmission(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker, Postgres, NATS and S3")
	}
	var warm int64
	h := newHarness(t, 4, func(h *harness, c *Config) {
		warm = int64(h.sb.cfg.WarmMB)
		c.Fleet.MemoryMB = 2 * (256 + warm) // two sandboxes of 256 MB
	})
	var ids []string
	for range 4 {
		ids = append(ids, h.submit(t, jobs.Request{Language: "python", Code: "import socket, time\nprint(socket.gethostname())\ntime.sleep(1.5)",
			Limits: &jobs.Limits{MemoryMB: 256}}))
	}
	var done []jobs.Job
	hosts := map[string]bool{}
	for _, id := range ids {
		j := h.waitFor(t, id, func(j jobs.Job) bool { return j.Status.Terminal() })
		if j.Status != jobs.StatusSucceeded {
			t.Fatalf("%s: %s %+v %q", id, j.Status, j.Error, j.Stderr)
		}
		hosts[strings.TrimSpace(j.Stdout)] = true
		done = append(done, j)
	}
	if len(hosts) > 2 {
		t.Errorf("%d containers for a budget of two", len(hosts))
	}
	// The later two were claimed only once one of the first two ended.
	sort.Slice(done, func(a, b int) bool { return done[a].StartedAt.Before(*done[b].StartedAt) })
	first := done[0].FinishedAt
	if done[1].FinishedAt.Before(*first) {
		first = done[1].FinishedAt
	}
	for _, j := range done[2:] {
		if j.StartedAt.Before(*first) {
			t.Errorf("job %s claimed at %s, before memory was freed at %s", j.ID, j.StartedAt, first)
		}
	}

	j := h.run(t, jobs.Request{Language: "python", Code: "print(1)", Limits: &jobs.Limits{MemoryMB: 1024}})
	if j.Status != jobs.StatusError || j.Error == nil || !strings.Contains(j.Error.Message, "GANTRY_RUNNER_MEMORY_MB") {
		t.Errorf("too large: %s %+v", j.Status, j.Error)
	}
}
