// Package clock holds the one wait that ends with its context: retries,
// back-offs and tests' schedules sleep through it.
package clock

import (
	"context"
	"time"
)

// Sleep waits d, or less if ctx ends first, and reports whether d passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
