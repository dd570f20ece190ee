package runner

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
)

// Memory admission. A runner gives its sandboxes at most a budget of the
// host's memory (GANTRY_RUNNER_MEMORY_MB): every container it holds counts
// its memory limit against it, from before it is made until it is removed,
// whatever it is doing (running a job, idle, in the pool, parked with a
// session's workspace or live state). A container's limit is all it can
// ever use (memory equals memory+swap: no swap; a job's tmpfs counts in
// it), so the sandboxes together can never take more than the budget, and
// the host's OOM killer never has to choose among them or gantry. A
// container that does not fit is made only once others are removed: idle
// and pooled containers, and parked sessions' that hold only a workspace
// (snapshotted), are retired for it, least recently used first; until
// enough memory is free the job waits, first come first served, and the
// queue loop takes no job beyond its base slots. A job that could never
// fit ends as an error.

// errTooLarge is a job whose container needs more memory than the
// runner's whole budget.
type errTooLarge struct{ need, budget int64 }

func (e *errTooLarge) Error() string {
	return fmt.Sprintf("the job's sandbox needs %d MB (limits.memory_mb and the sandbox's own share), more than the %d MB this runner gives all its sandboxes (GANTRY_RUNNER_MEMORY_MB)", e.need, e.budget)
}

func isTooLarge(err error) bool {
	var e *errTooLarge
	return errors.As(err, &e)
}

// memBudget is the runner's memory for sandboxes, in MB: reserved and
// released by the fleet, granted in the order asked.
type memBudget struct {
	mu      sync.Mutex
	total   int64
	used    int64
	waiters *list.List // of *memWaiter, oldest first
	// freed is closed and replaced when memory is released.
	freed chan struct{}
}

type memWaiter struct {
	mb    int64
	ready chan struct{}
}

func newMemBudget(totalMB int64) *memBudget {
	return &memBudget{total: totalMB, waiters: list.New(), freed: make(chan struct{})}
}

// tryReserve reserves mb if it is free now and nobody waits before it.
func (m *memBudget) tryReserve(mb int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.waiters.Len() > 0 || m.used+mb > m.total {
		return false
	}
	m.used += mb
	return true
}

// reserve reserves mb, waiting behind earlier waiters until it is free or
// ctx ends. More than the whole budget is refused (errTooLarge).
func (m *memBudget) reserve(ctx context.Context, mb int64) error {
	m.mu.Lock()
	if mb > m.total {
		m.mu.Unlock()
		return &errTooLarge{need: mb, budget: m.total}
	}
	if m.waiters.Len() == 0 && m.used+mb <= m.total {
		m.used += mb
		m.mu.Unlock()
		return nil
	}
	w := &memWaiter{mb: mb, ready: make(chan struct{})}
	e := m.waiters.PushBack(w)
	m.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		m.mu.Lock()
		defer m.mu.Unlock()
		select {
		case <-w.ready: // granted meanwhile: give it back
			m.used -= mb
			m.grantLocked()
		default:
			m.waiters.Remove(e)
			m.grantLocked() // who waited behind it may fit
		}
		return context.Cause(ctx)
	}
}

// release gives back mb.
func (m *memBudget) release(mb int64) {
	if mb == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.used -= mb
	m.grantLocked()
	close(m.freed)
	m.freed = make(chan struct{})
}

// grantLocked admits the waiters at the head that fit, in order.
func (m *memBudget) grantLocked() {
	for e := m.waiters.Front(); e != nil; e = m.waiters.Front() {
		w := e.Value.(*memWaiter)
		if m.used+w.mb > m.total {
			return
		}
		m.used += w.mb
		m.waiters.Remove(e)
		close(w.ready)
	}
}

// state is the memory free now and whether anyone waits, with a channel
// that closes when memory is next released.
func (m *memBudget) state() (free int64, waiting bool, freed <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.total - m.used, m.waiters.Len() > 0, m.freed
}
