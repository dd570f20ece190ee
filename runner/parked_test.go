package runner

import (
	"fmt"
	"testing"
	"time"
)

// TestLiveOverflowIsFair: past LiveMax, the live sessions evicted are the
// least recently used of the tenant holding the most of them, never a
// smaller tenant's, however long it waited.
func TestLiveOverflowIsFair(t *testing.T) {
	f := &fleet{cfg: FleetConfig{LiveMax: 4}, parked: map[string]*parkedSession{}}
	base := time.Now()
	park := func(sid, tenant string, age time.Duration) {
		f.parked[sid] = &parkedSession{live: true, ctr: &Container{tenant: tenant, live: sid + "/1", lastUsed: base.Add(-age), state: ctrParked}}
	}
	// The small tenant's session waited longest of all.
	park("small", "b", time.Hour)
	for i := range 5 {
		park(fmt.Sprintf("big%d", i), "a", time.Duration(5-i)*time.Minute)
	}
	out := f.liveOverflowLocked()
	if len(out) != 2 {
		t.Fatalf("evicted %d, want 2 (6 live, LiveMax 4)", len(out))
	}
	for _, sid := range []string{"big0", "big1"} {
		if out[sid] == nil {
			t.Errorf("%s (the big tenant's least recently used) was kept; evicted %v", sid, keys(out))
		}
	}
	if f.parked["small"] == nil {
		t.Error("the small tenant's only live session was evicted for the big tenant's")
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
