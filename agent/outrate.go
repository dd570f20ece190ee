package agent

import (
	"sync"
	"time"
)

// A stateful session's live processes (E2B's commands, background
// processes started beside its jobs) send their output to the runner as
// it comes, and the runner publishes each chunk on NATS. A process that
// writes as fast as it can (`yes`) would otherwise flood the runner's
// stream, NATS and every ingress that follows the session. So the output
// is rate-limited here, at its source, per process and per sandbox. Past
// the rate the pump stops reading the process's pipe until it may send
// again: the pipe fills and the process blocks in write(2), as under a
// slow terminal. Nothing is dropped; the process's end reports how long
// its output was held back (wire.ProcessExit.ThrottledMS).
const (
	// ProcessOutputRate is the bytes per second one live process's
	// output (stdout and stderr together) may send: `cat` of a 50 MB
	// file takes 6 s, `yes` sends 8 MB a second through NATS.
	ProcessOutputRate = 8 << 20
	// SandboxOutputRate is the bytes per second all the live processes of
	// one sandbox may send together.
	SandboxOutputRate = 16 << 20
	// OutputBurst is how much either may send at once after a quiet
	// spell.
	OutputBurst = 4 << 20
)

// byteRate is a token bucket of bytes. Takers may run it into debt: each
// then waits its turn, in the order it took.
type byteRate struct {
	rate, burst float64

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

func newByteRate(perSecond, burst int) *byteRate {
	return &byteRate{rate: float64(perSecond), burst: float64(burst), tokens: float64(burst), last: time.Now()}
}

// take waits until n bytes may pass, or stop closes, and returns how long
// it waited.
func (b *byteRate) take(n int, stop <-chan struct{}) time.Duration {
	b.mu.Lock()
	now := time.Now()
	b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
	b.tokens -= float64(n)
	wait := time.Duration(0)
	if b.tokens < 0 {
		wait = time.Duration(-b.tokens / b.rate * float64(time.Second))
	}
	b.mu.Unlock()
	if wait <= 0 {
		return 0
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-stop:
	}
	return time.Since(now)
}
