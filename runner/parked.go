package runner

import "time"

// parkedSessions is the fleet's session containers between two of a
// session's jobs, one per session: the session's next job on this runner
// takes it back (fleet.unpark) instead of restoring the workspace in a new
// container. A plain session's container waits like an idle one (counted
// against IdleMax, retired after Idle unused). A stateful session's holds
// its live sandbox, the session's state: it waits until its session would
// expire, apart from IdleMax, and past LiveMax the least recently used of
// the tenant that holds the most of them goes (liveOverflow). It is one of
// the fleet's books, kept under the fleet's lock; a container joins it and
// leaves it only through the fleet, whose setLocked checks the move.
type parkedSessions struct {
	liveMax int
	m       map[string]*parkedSession
}

// parkedSession is a session's container between two of its jobs, with
// the workspace version it holds. A stateful session's (live set) waits
// until its session expires (until).
type parkedSession struct {
	ctr     *Container
	version int64
	live    bool
	until   time.Time
}

func newParkedSessions(liveMax int) *parkedSessions {
	return &parkedSessions{liveMax: liveMax, m: map[string]*parkedSession{}}
}

// take takes the session's parked container out, or nil.
func (ps *parkedSessions) take(sessionID string) *parkedSession {
	p := ps.m[sessionID]
	delete(ps.m, sessionID)
	return p
}

// put parks p for the session, and returns the container it replaces
// (another container of the session's, parked before), if any.
func (ps *parkedSessions) put(sessionID string, p *parkedSession) *Container {
	var old *Container
	if prev := ps.m[sessionID]; prev != nil && prev.ctr != p.ctr {
		old = prev.ctr
	}
	ps.m[sessionID] = p
	return old
}

// holdsLive reports whether the session's parked container holds its live
// sandbox live.
func (ps *parkedSessions) holdsLive(sessionID, live string) bool {
	p := ps.m[sessionID]
	return p != nil && p.live && p.ctr.live == live
}

// touch marks the session's parked container c as just used (a live
// operation), and with keep holds it at least d from now.
func (ps *parkedSessions) touch(sessionID string, c *Container, d time.Duration, keep bool) {
	p := ps.m[sessionID]
	if p == nil || p.ctr != c {
		return
	}
	now := time.Now()
	c.lastUsed = now
	if until := now.Add(d); keep && until.After(p.until) {
		p.until = until
	}
}

// liveOverflow takes out stateful sessions' containers beyond LiveMax,
// fairly: each time the least recently used of the tenant that holds the
// most of them here (one tenant's new sessions never evict another's live
// state while it holds more than that one).
func (ps *parkedSessions) liveOverflow() map[string]*parkedSession {
	out := map[string]*parkedSession{}
	for {
		n := 0
		held := map[string]int{}      // live containers per tenant
		oldest := map[string]string{} // each tenant's least recently used session
		for sid, p := range ps.m {
			if !p.live {
				continue
			}
			n++
			t := p.ctr.tenant
			held[t]++
			if o, ok := oldest[t]; !ok || p.ctr.lastUsed.Before(ps.m[o].ctr.lastUsed) {
				oldest[t] = sid
			}
		}
		if n <= ps.liveMax {
			return out
		}
		victim := ""
		for t, sid := range oldest {
			if victim == "" {
				victim = sid
				continue
			}
			vt := ps.m[victim].ctr.tenant
			if held[t] > held[vt] || held[t] == held[vt] && ps.m[sid].ctr.lastUsed.Before(ps.m[victim].ctr.lastUsed) {
				victim = sid
			}
		}
		out[victim] = ps.m[victim]
		delete(ps.m, victim)
	}
}

// oldestIdle is the least recently used parked container without a live
// sandbox (nil when there is none), and its session: what IdleMax counts.
func (ps *parkedSessions) oldestIdle() (string, *Container) {
	var sid string
	var oldest *Container
	for id, p := range ps.m {
		if !p.live && (oldest == nil || p.ctr.lastUsed.Before(oldest.lastUsed)) {
			sid, oldest = id, p.ctr
		}
	}
	return sid, oldest
}

// idleCount is how many parked containers hold no live sandbox.
func (ps *parkedSessions) idleCount() int {
	n := 0
	for _, p := range ps.m {
		if !p.live {
			n++
		}
	}
	return n
}

func (ps *parkedSessions) len() int { return len(ps.m) }

// parkedExpiry is what expire took out: containers that died or waited
// too long, and the stateful sessions among them, whose live state is lost.
type parkedExpiry struct {
	died, idle        []*Container
	deadLive, expired map[string]*parkedSession
}

// expire takes out the containers that died, the plain sessions' left
// unused past idle, and the stateful sessions' whose session expired.
func (ps *parkedSessions) expire(now time.Time, idle time.Duration, dead func(*Container) bool) parkedExpiry {
	out := parkedExpiry{deadLive: map[string]*parkedSession{}, expired: map[string]*parkedSession{}}
	for sid, p := range ps.m {
		switch {
		case dead(p.ctr) && p.live:
			out.deadLive[sid] = p
			delete(ps.m, sid)
		case dead(p.ctr):
			out.died = append(out.died, p.ctr)
			delete(ps.m, sid)
		case p.live && now.After(p.until):
			out.expired[sid] = p
			delete(ps.m, sid)
		case !p.live && now.Sub(p.ctr.lastUsed) > idle:
			out.idle = append(out.idle, p.ctr)
			delete(ps.m, sid)
		}
	}
	return out
}

// takeLive takes every stateful session's parked container out.
func (ps *parkedSessions) takeLive() map[string]*parkedSession {
	live := map[string]*parkedSession{}
	for sid, p := range ps.m {
		if p.live {
			live[sid] = p
			delete(ps.m, sid)
		}
	}
	return live
}

// drain takes every parked container out, for retirement: those without a
// live sandbox, and the stateful sessions', whose live state is lost.
func (ps *parkedSessions) drain() ([]*Container, map[string]*parkedSession) {
	var all []*Container
	live := map[string]*parkedSession{}
	for sid, p := range ps.m {
		if p.live {
			live[sid] = p
		} else {
			all = append(all, p.ctr)
		}
	}
	ps.m = map[string]*parkedSession{}
	return all, live
}
