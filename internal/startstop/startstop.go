// Package startstop is the one lifecycle of gantry's long-lived parts (the
// runner, its fleet, the maintenance loops, the webhook dispatcher, the
// code-mode connections): Start(ctx) error starts the part's background
// work and returns once it is ready, and Stop() ends that work and returns
// once every goroutine it started has returned. ctx bounds only the start
// (its values are kept); the work runs until Stop.
//
// Loops is what such a type embeds to keep those promises, as river's
// startstop does for its services.
package startstop

import (
	"context"
	"errors"
	"sync"
)

// ErrStarted is returned by a second Start, and by a Start after Stop:
// a part starts at most once, and nothing would stop a late start.
var ErrStarted = errors.New("already started (or stopped)")

// Loops runs a part's goroutines from Start to Stop, and ends the part in
// one order. The zero value is ready to use.
//
// A part's goroutines are of two kinds:
//
//   - its loops (Start's and Go's), whose context ends when Stop is
//     called: they stop taking work, and return once what they run has
//     drained;
//   - its background work (Background's), what its loops and handlers hand
//     off beside them (an announcement, a clean-up, work taken over), whose
//     context ends only once the loops have returned: it runs through the
//     drain.
//
// Stop ends the loops' context (Stopping reports it from then on), waits
// for the loops, ends the background's context, waits for the background
// work, and then runs the part's clean-ups (Cleanup), last registered
// first.
type Loops struct {
	mu       sync.Mutex
	started  bool
	stopping bool
	ctx      context.Context // the loops' context; nil before Start
	cancel   context.CancelFunc
	bgCtx    context.Context // the background's; ends after the loops
	bgCancel context.CancelFunc
	loops    sync.WaitGroup
	bg       sync.WaitGroup
	cleanups []func()
	cleaned  bool // Stop ran the clean-ups
	stopOnce sync.Once
}

// Start marks the part started and runs each loop in a goroutine of its
// own, under a context that Stop ends (ctx's values, not its end). It
// fails with ErrStarted when the part was started or stopped before. A
// part whose start has more to do (checks, subscriptions) may call Start
// first, to be marked started, and Go its loops once it is ready.
func (l *Loops) Start(ctx context.Context, loops ...func(ctx context.Context)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started {
		return ErrStarted
	}
	l.started = true
	base := context.WithoutCancel(ctx)
	l.ctx, l.cancel = context.WithCancel(base)
	l.bgCtx, l.bgCancel = context.WithCancel(base)
	for _, loop := range loops {
		l.loops.Go(func() { loop(l.ctx) })
	}
	return nil
}

// Go runs f as one of the loops: in a goroutine that Stop waits for, under
// the loops' context. Before Start and once Stop was called it runs
// nothing and returns false: the part is not running.
func (l *Loops) Go(f func(ctx context.Context)) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx == nil || l.ctx.Err() != nil {
		return false
	}
	l.loops.Go(func() { f(l.ctx) })
	return true
}

// Background runs f as background work: in a goroutine that Stop waits
// for, under a context that ends once the loops have returned (after the
// drain). Before Start and once that context ended it runs nothing and
// returns false.
func (l *Loops) Background(f func(ctx context.Context)) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.bgCtx == nil || l.bgCtx.Err() != nil {
		return false
	}
	l.bg.Go(func() { f(l.bgCtx) })
	return true
}

// Stopping reports whether Stop was called: the part takes no new work.
func (l *Loops) Stopping() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stopping
}

// Cleanup registers f to be run by Stop once every goroutine has returned,
// after the clean-ups registered after it: what Start set up is undone in
// the reverse order. Registered once Stop ran its clean-ups, f runs at
// once.
func (l *Loops) Cleanup(f func()) {
	l.mu.Lock()
	if !l.cleaned {
		l.cleanups = append(l.cleanups, f)
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	f()
}

// Stop ends the loops' context, waits for the loops, ends the
// background's context, waits for the background work and runs the
// clean-ups. It is safe to call more than once, at once (every call
// returns once the first is done), and without Start (a later Start then
// fails).
func (l *Loops) Stop() {
	l.mu.Lock()
	l.started, l.stopping = true, true
	if l.cancel != nil {
		l.cancel() // under the lock: a Go after it runs nothing
	}
	l.mu.Unlock()
	l.stopOnce.Do(func() {
		l.loops.Wait()
		l.mu.Lock()
		if l.bgCancel != nil {
			l.bgCancel() // under the lock: a Background after it runs nothing
		}
		l.mu.Unlock()
		l.bg.Wait()
		for {
			l.mu.Lock()
			n := len(l.cleanups)
			if n == 0 {
				l.cleaned = true
				l.mu.Unlock()
				return
			}
			f := l.cleanups[n-1]
			l.cleanups = l.cleanups[:n-1]
			l.mu.Unlock()
			f()
		}
	})
}
