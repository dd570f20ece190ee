package codemode

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// A read that meets a database outage is tried again until the database
// answers; an error that is not an outage, or the job's end, stops it.
func TestThroughOutage(t *testing.T) {
	t.Parallel()
	down := fmt.Errorf("%w: %w", ErrUnavailable, errors.New("terminating connection due to administrator command"))
	tries := 0
	v, err := throughOutage(t.Context(), func() (int, error) {
		tries++
		if tries < 3 {
			return 0, down
		}
		return 42, nil
	})
	if v != 42 || err != nil || tries != 3 {
		t.Fatalf("got %d, %v after %d tries; want 42 after 3", v, err, tries)
	}

	tries = 0
	other := errors.New("syntax error")
	if _, err := throughOutage(t.Context(), func() (int, error) { tries++; return 0, other }); err != other || tries != 1 {
		t.Fatalf("a query error: got %v after %d tries; want it at once", err, tries)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := throughOutage(ctx, func() (int, error) { return 0, down }); !errors.Is(err, down) {
		t.Fatalf("the job ended during an outage: got %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the job's end took %s to stop the retries", d)
	}
}
