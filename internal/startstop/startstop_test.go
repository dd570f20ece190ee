package startstop

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
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
