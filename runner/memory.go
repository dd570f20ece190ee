package runner

import (
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
// enough memory is free the job waits (taking a container of its tenant's
// that goes idle meanwhile, if one does), and the
// queue loop takes no job: a job whose sandbox does not fit stays queued,
// its message held unclaimed, until it fits. A job that could never fit
// ends as an error.

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

// memBudget is the runner's memory for sandboxes, in MB, reserved and
// released by the fleet.
type memBudget struct {
	mu    sync.Mutex
	total int64
	used  int64
	// freed is closed and replaced when memory is released.
	freed chan struct{}
}

func newMemBudget(totalMB int64) *memBudget {
	return &memBudget{total: totalMB, freed: make(chan struct{})}
}

// tryReserve reserves mb if it is free.
func (m *memBudget) tryReserve(mb int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.used+mb > m.total {
		return false
	}
	m.used += mb
	return true
}

// release gives back mb.
func (m *memBudget) release(mb int64) {
	if mb == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.used -= mb
	close(m.freed)
	m.freed = make(chan struct{})
}

// state is the memory free now, with a channel that closes when memory is
// next released.
func (m *memBudget) state() (free int64, freed <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.total - m.used, m.freed
}

// promise is memory the queue loop counted on for a job it took, until
// the job has its container (the fleet settles it in acquire) or ends:
// without it the loop would take a job for every idle container it saw
// before the first of them was claimed.
type promise struct {
	f    *fleet
	mb   int64
	once sync.Once
}

type promiseKey struct{}

// promise counts mb as taken until the promise is settled.
func (f *fleet) promise(mb int64) *promise {
	f.mu.Lock()
	f.promised += mb
	f.mu.Unlock()
	return &promise{f: f, mb: mb}
}

// settle gives the promised memory back to the count; it is idempotent.
func (p *promise) settle() {
	if p == nil {
		return
	}
	p.once.Do(func() {
		p.f.mu.Lock()
		p.f.promised -= p.mb
		p.f.mu.Unlock()
	})
}

func withPromise(ctx context.Context, p *promise) context.Context {
	return context.WithValue(ctx, promiseKey{}, p)
}

func promiseFrom(ctx context.Context) *promise {
	p, _ := ctx.Value(promiseKey{}).(*promise)
	return p
}
