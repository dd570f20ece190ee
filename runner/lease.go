package runner

import (
	"sync/atomic"
	"time"
)

// lease is one owner's hold on a container, from the fleet's acquire,
// createSession or unpark to its one end: release (back to the fleet) or
// park (kept for the session's next job). Ending it again does nothing,
// so an owner may end it on every path without counting: a lease never
// hands back a container a later owner holds. The fleet itself still
// refuses a move its books do not allow (fleet.setLocked panics).
type lease struct {
	*Container
	fleet *fleet
	ended atomic.Bool
}

// lease makes c, which the fleet just moved to busy, the caller's.
func (f *fleet) lease(c *Container) *lease { return &lease{Container: c, fleet: f} }

// release ends the lease, giving the container back to the fleet, which
// reuses it (reusable) or retires it for reason (fleet.release).
// Idempotent: only the lease's first end counts.
func (l *lease) release(reusable bool, reason string) {
	if l.ended.Swap(true) {
		return
	}
	l.fleet.release(l.Container, reusable, reason)
}

// park ends the lease, keeping the container, holding workspace version,
// for the session's next job (fleet.park). Idempotent: only the lease's
// first end counts.
func (l *lease) park(sessionID string, version int64, ttl time.Duration) {
	if l.ended.Swap(true) {
		return
	}
	l.fleet.park(sessionID, l.Container, version, ttl)
}
