package queue_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/queue"
	"github.com/gantryhq/gantry/queue/queuetest"
)

// TestTenantQueues: each tenant's jobs go to a queue of its own, capped at
// its running jobs, and a stream at its bound refuses a publish instead of
// dropping an old message.
func TestTenantQueues(t *testing.T) {
	t.Parallel()
	nc := queuetest.Connect(t, queuetest.Server(t))
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	cfg := queue.Config{MaxMsgs: 3}
	if err := queue.Ensure(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	pub := queue.NewPublisher(nc, js, cfg)
	for i, tenant := range []string{"ten_a", "ten_b", "ten_a"} {
		if _, err := pub.Publish(ctx, queue.RunMessage{JobID: "job_" + tenant, TenantID: tenant}, string(rune('x'+i)), 2); err != nil {
			t.Fatalf("publish for %s: %v", tenant, err)
		}
	}
	cons, err := js.Consumer(ctx, queue.StreamName, queue.TenantConsumer("ten_a"))
	if err != nil {
		t.Fatal(err)
	}
	// A consumer counts what it has pending a moment after the stream
	// stored it.
	eventually.NoError(t, 10*time.Second, "tenant a's queue to hold its 2 messages", func() error {
		info, err := cons.Info(ctx)
		if err == nil && (info.NumPending != 2 || info.Config.MaxAckPending != 2) {
			err = fmt.Errorf("%d pending, cap %d", info.NumPending, info.Config.MaxAckPending)
		}
		return err
	})
	// The stream holds 3: one more is refused.
	if _, err := pub.Publish(ctx, queue.RunMessage{JobID: "job_c", TenantID: "ten_c"}, "c", 2); !errors.Is(err, queue.ErrFull) {
		t.Errorf("publish to a full stream: %v, want ErrQueueFull", err)
	}
}
