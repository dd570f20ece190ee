package agent

import (
	"testing"
	"time"
)

// TestByteRate: past its burst a byteRate lets bytes through at its rate,
// to whoever takes them, and stop ends a wait.
func TestByteRate(t *testing.T) {
	t.Parallel()
	b := newByteRate(1<<20, 64<<10)
	start := time.Now()
	var waited time.Duration
	for range 16 + 1 { // the burst, then 1 MiB at 1 MiB/s
		waited += b.take(64<<10, nil)
	}
	if took := time.Since(start); took < 900*time.Millisecond || took > 3*time.Second || waited < 900*time.Millisecond {
		t.Errorf("1 MiB past the burst took %v (waited %v), want about 1 s", took, waited)
	}
	stop := make(chan struct{})
	close(stop)
	if d := b.take(10<<20, stop); d > 100*time.Millisecond {
		t.Errorf("a stopped wait took %v", d)
	}
}
