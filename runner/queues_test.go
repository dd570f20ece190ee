package runner

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/store/storetest"
)

// TestTenantsTakeTurns: a tenant's job queued behind another tenant's
// backlog starts at the first free slot, not after the backlog; and a
// tenant's cap on running jobs holds across the runner's slots while
// another tenant uses the rest.
func TestTenantsTakeTurns(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker, Postgres, NATS and S3")
	}
	h := newHarness(t, 3)
	other, _ := storetest.Tenant(t, h.st, "other")
	ctx := context.Background()
	one := 1
	if _, err := h.st.SetTenantLimits(ctx, h.tenant, store.LimitsUpdate{MaxRunning: &one}); err != nil {
		t.Fatal(err)
	}
	sleep := jobs.Request{Language: "bash", Code: "sleep 0.4"}
	var backlog []string
	for range 8 {
		backlog = append(backlog, h.submit(t, sleep))
	}
	late := []string{h.submitFor(t, other, sleep), h.submitFor(t, other, sleep)}

	got := map[string]jobs.Job{}
	for _, id := range append(append([]string{}, backlog...), late...) {
		got[id] = h.waitFor(t, id, func(j jobs.Job) bool { return j.Status.Terminal() })
	}
	for id, j := range got {
		if j.Status != jobs.StatusSucceeded || j.StartedAt == nil || j.FinishedAt == nil {
			t.Fatalf("job %s: %+v", id, j)
		}
	}
	// The capped tenant never ran two at once.
	sort.Slice(backlog, func(i, j int) bool { return got[backlog[i]].StartedAt.Before(*got[backlog[j]].StartedAt) })
	for i := 1; i < len(backlog); i++ {
		prev, cur := got[backlog[i-1]], got[backlog[i]]
		if cur.StartedAt.Before(*prev.FinishedAt) {
			t.Errorf("tenant with a cap of 1 ran two jobs at once: %s until %s, %s from %s",
				prev.ID, prev.FinishedAt.Format(time.StampMilli), cur.ID, cur.StartedAt.Format(time.StampMilli))
		}
	}
	// The other tenant's jobs did not wait for the backlog.
	for _, id := range late {
		before := 0
		for _, b := range backlog {
			if got[b].StartedAt.Before(*got[id].StartedAt) {
				before++
			}
		}
		if before > 2 {
			t.Errorf("the other tenant's job %s started after %d of the backlog's 8", id, before)
		}
	}
}
