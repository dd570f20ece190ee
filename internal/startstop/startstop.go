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

// Loops runs a part's goroutines from Start to Stop. The zero value is
// ready to use.
type Loops struct {
	mu      sync.Mutex
	started bool
	ctx     context.Context // the goroutines' context; nil before Start
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// Start marks the part started and runs each loop in a goroutine of its
// own, under a context that Stop ends (ctx's values, not its end). It
// fails with ErrStarted when the part was started or stopped before.
func (l *Loops) Start(ctx context.Context, loops ...func(ctx context.Context)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started {
		return ErrStarted
	}
	l.started = true
	l.ctx, l.cancel = context.WithCancel(context.WithoutCancel(ctx))
	for _, loop := range loops {
		l.wg.Go(func() { loop(l.ctx) })
	}
	return nil
}

// Go runs f in a goroutine that Stop waits for, under the loops' context.
// Before Start and after Stop it runs nothing and returns false: the part
// is not running.
func (l *Loops) Go(f func(ctx context.Context)) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx == nil || l.ctx.Err() != nil {
		return false
	}
	l.wg.Go(func() { f(l.ctx) })
	return true
}

// Stop ends the loops' context and returns once every goroutine started by
// Start or Go has returned. It is safe to call more than once, and without
// Start (a later Start then fails).
func (l *Loops) Stop() {
	l.mu.Lock()
	l.started = true
	if l.cancel != nil {
		l.cancel() // under the lock: a Go after it runs nothing
	}
	l.mu.Unlock()
	l.wg.Wait()
}
