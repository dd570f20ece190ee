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
	ps := newParkedSessions(4)
	base := time.Now()
	park := func(sid, tenant string, age time.Duration) {
		ps.m[sid] = &parkedSession{live: true, ctr: &Container{tenant: tenant, live: sid + "/1", lastUsed: base.Add(-age), state: ctrParked}}
	}
	// The small tenant's session waited longest of all.
	park("small", "b", time.Hour)
	for i := range 5 {
		park(fmt.Sprintf("big%d", i), "a", time.Duration(5-i)*time.Minute)
	}
	out := ps.liveOverflow()
	if len(out) != 2 {
		t.Fatalf("evicted %d, want 2 (6 live, LiveMax 4)", len(out))
	}
	for _, sid := range []string{"big0", "big1"} {
		if out[sid] == nil {
			t.Errorf("%s (the big tenant's least recently used) was kept; evicted %v", sid, keys(out))
		}
	}
	if ps.m["small"] == nil {
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

// TestParkedSessionsBook: a session has one parked container; a plain
// session's counts against IdleMax and expires when idle, a stateful
// session's when its session would, and a dead one goes either way.
func TestParkedSessionsBook(t *testing.T) {
	ps := newParkedSessions(4)
	now := time.Now()
	a1, a2 := &Container{id: "a1", lastUsed: now}, &Container{id: "a2", lastUsed: now}
	if old := ps.put("a", &parkedSession{ctr: a1}); old != nil {
		t.Errorf("first park replaced %v", old)
	}
	if old := ps.put("a", &parkedSession{ctr: a2}); old != a1 {
		t.Errorf("second park replaced %v, want a1", old)
	}
	if old := ps.put("a", &parkedSession{ctr: a2}); old != nil {
		t.Errorf("parking the same container again replaced %v", old)
	}
	liveC := &Container{id: "l", live: "l/1", lastUsed: now.Add(-time.Hour)}
	ps.put("live", &parkedSession{ctr: liveC, live: true, until: now.Add(time.Minute)})
	staleC := &Container{id: "s", lastUsed: now.Add(-time.Hour)}
	ps.put("stale", &parkedSession{ctr: staleC})
	if n := ps.idleCount(); n != 2 {
		t.Errorf("idle count %d, want 2 (the live one apart)", n)
	}
	if sid, c := ps.oldestIdle(); sid != "stale" || c != staleC {
		t.Errorf("oldest idle %s, want stale", sid)
	}
	if !ps.holdsLive("live", "l/1") || ps.holdsLive("live", "l/2") || ps.holdsLive("a", "") {
		t.Error("holdsLive")
	}
	ps.touch("live", liveC, 2*time.Minute, true)
	if p := ps.m["live"]; !p.until.After(now.Add(time.Minute)) || !liveC.lastUsed.After(now.Add(-time.Minute)) {
		t.Errorf("touch with keep: until %s, last used %s", p.until, liveC.lastUsed)
	}
	out := ps.expire(now.Add(3*time.Minute), 30*time.Minute, func(c *Container) bool { return c == a2 })
	if len(out.died) != 1 || out.died[0] != a2 || len(out.idle) != 1 || out.idle[0] != staleC || out.expired["live"] == nil || ps.len() != 0 {
		t.Errorf("expire: %+v, %d left", out, ps.len())
	}
}

// TestIdleSetBook: the idle containers of a binding are taken most
// recently used first; overflow and expiry take the least recently used.
func TestIdleSetBook(t *testing.T) {
	s := idleSet{}
	now := time.Now()
	mk := func(id, tenant string, age time.Duration) *Container {
		c := &Container{id: id, tenant: tenant, lastUsed: now.Add(-age)}
		s.push(c)
		return c
	}
	old, recent := mk("old", "t1", time.Hour), mk("recent", "t1", time.Minute)
	other := mk("other", "t2", 10*time.Minute)
	if c, _ := s.oldest(); c != old {
		t.Errorf("oldest %v, want old", c.id)
	}
	if c := s.pop(bindKey{tenant: "t1"}); c != recent {
		t.Errorf("pop %v, want the one used last", c.id)
	}
	died, expired := s.expire(now, 30*time.Minute, func(c *Container) bool { return c == other })
	if len(died) != 1 || died[0] != other || len(expired) != 1 || expired[0] != old || s.count() != 0 || len(s) != 0 {
		t.Errorf("expire: died %v, expired %v, %d left in %d bindings", died, expired, s.count(), len(s))
	}
	mk("x", "t3", 0)
	mk("y", "t3", 0)
	if got := s.takeTenant("t3"); len(got) != 2 || len(s) != 0 {
		t.Errorf("takeTenant: %d, %d bindings left", len(got), len(s))
	}
}
