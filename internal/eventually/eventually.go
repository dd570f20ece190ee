// Package eventually waits in tests for a condition to hold, instead of
// sleeping for a time that is too long on a fast machine and too short on a
// loaded one: it checks the condition often at first and less often as the
// wait goes on, and fails the test, saying what it waited for, when the
// condition does not hold in time.
package eventually

import (
	"context"
	"testing"
	"time"

	"github.com/gantryhq/gantry/internal/clock"
)

// True waits up to within for cond to return true, and fails the test
// (t.Fatalf: call it from the test's goroutine) with what when it does not.
func True(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Within(within, cond) {
		t.Fatalf("waited %s for %s", within, what)
	}
}

// NoError waits up to within for cond to return nil, and fails the test
// with the last error when it does not.
func NoError(t testing.TB, within time.Duration, what string, cond func() error) {
	t.Helper()
	var last error
	if !Within(within, func() bool { last = cond(); return last == nil }) {
		t.Fatalf("waited %s for %s: %v", within, what, last)
	}
}

// Within waits up to within for cond to return true, and reports whether
// it did. cond is called at once, then after 5 ms, doubling up to 250 ms.
func Within(within time.Duration, cond func() bool) bool {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	return Until(ctx, cond)
}

// Until waits until cond returns true or ctx ends, and reports whether
// cond held. A cond that is true when ctx has just ended still counts.
func Until(ctx context.Context, cond func() bool) bool {
	pause := 5 * time.Millisecond
	for {
		if cond() {
			return true
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return cond()
		case <-t.C:
		}
		pause = min(2*pause, 250*time.Millisecond)
	}
}

// Pause waits d, or less if ctx ends first, and reports whether d passed:
// a test's schedule (a fault held for a while) that ends with the test.
func Pause(ctx context.Context, d time.Duration) bool {
	return clock.Sleep(ctx, d)
}
