package startstop

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gantryhq/gantry/internal/eventually"
)

func TestLoops(t *testing.T) {
	var l Loops
	if l.Go(func(context.Context) {}) {
		t.Error("Go before Start ran")
	}
	var ended atomic.Int32
	loop := func(ctx context.Context) { <-ctx.Done(); ended.Add(1) }
	if err := l.Start(t.Context(), loop, loop); err != nil {
		t.Fatal(err)
	}
	if !l.Go(loop) {
		t.Fatal("Go after Start ran nothing")
	}
	if err := l.Start(t.Context()); !errors.Is(err, ErrStarted) {
		t.Errorf("second Start: %v, want ErrStarted", err)
	}
	l.Stop()
	if n := ended.Load(); n != 3 {
		t.Errorf("Stop returned with %d of 3 loops ended", n)
	}
	l.Stop() // again: a no-op
	if l.Go(loop) {
		t.Error("Go after Stop ran")
	}
}

func TestStopBeforeStart(t *testing.T) {
	var l Loops
	l.Stop()
	if err := l.Start(t.Context()); !errors.Is(err, ErrStarted) {
		t.Errorf("Start after Stop: %v, want ErrStarted", err)
	}
}

func TestStartKeepsValuesNotEnd(t *testing.T) {
	type key struct{}
	ctx, cancel := context.WithCancel(context.WithValue(t.Context(), key{}, "v"))
	var l Loops
	got := make(chan any, 1)
	if err := l.Start(ctx, func(ctx context.Context) { <-ctx.Done(); got <- ctx.Value(key{}) }); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-got:
		t.Fatal("the loop ended with the start's context")
	default:
	}
	l.Stop()
	if v := <-got; v != "v" {
		t.Errorf("value %v, want the start context's", v)
	}
}

// TestStopOrder: Stop ends the loops first; background work handed off
// during the drain runs until the loops have returned; the clean-ups run
// last, last registered first.
func TestStopOrder(t *testing.T) {
	var l Loops
	if l.Background(func(context.Context) {}) {
		t.Error("Background before Start ran")
	}
	var mu sync.Mutex
	var order []string
	note := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, s)
	}
	handedOff := make(chan bool, 1)
	loop := func(ctx context.Context) {
		<-ctx.Done()
		// Draining: what the loop hands off now still runs.
		handedOff <- l.Background(func(ctx context.Context) {
			<-ctx.Done()
			note("background ended")
		})
		note("loop returned")
	}
	if err := l.Start(t.Context(), loop); err != nil {
		t.Fatal(err)
	}
	l.Cleanup(func() { note("cleanup 1") })
	l.Cleanup(func() { note("cleanup 2") })
	if l.Stopping() {
		t.Error("stopping before Stop")
	}
	l.Stop()
	if !<-handedOff {
		t.Error("background work handed off during the drain did not run")
	}
	want := []string{"loop returned", "background ended", "cleanup 2", "cleanup 1"}
	if strings.Join(order, ", ") != strings.Join(want, ", ") {
		t.Errorf("order %q, want %q", order, want)
	}
	if !l.Stopping() || l.Background(func(context.Context) {}) {
		t.Error("after Stop: not stopping, or background work ran")
	}
	ran := false
	l.Cleanup(func() { ran = true })
	if !ran {
		t.Error("a clean-up registered after Stop did not run at once")
	}
}

// TestConcurrentStops: every Stop returns only once the first is done,
// clean-ups included, and they run once.
func TestConcurrentStops(t *testing.T) {
	var l Loops
	if err := l.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var runs atomic.Int32
	l.Cleanup(func() { <-release; runs.Add(1) })
	done := make(chan struct{}, 2)
	for range 2 {
		go func() { l.Stop(); done <- struct{}{} }()
	}
	eventually.True(t, 10*time.Second, "Stop to begin", l.Stopping)
	select {
	case <-done:
		t.Fatal("a Stop returned before the clean-ups ran")
	default:
	}
	close(release)
	<-done
	<-done
	if n := runs.Load(); n != 1 {
		t.Errorf("the clean-up ran %d times", n)
	}
}

func TestStoppingWithoutStart(t *testing.T) {
	var l Loops
	ran := false
	l.Cleanup(func() { ran = true })
	l.Stop()
	if !l.Stopping() || !ran {
		t.Errorf("Stop without Start: stopping %v, clean-up ran %v", l.Stopping(), ran)
	}
}
