package jobs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/jobs/jobstest"
)

// TestEnsureQueueUpgrades: a stream and consumer as older gantry made them
// (one subject, an unfiltered consumer with a delivery limit, discarding
// old messages) are updated in place: waiting messages stay deliverable,
// deliveries become unlimited, the stream bounded, and tenants' queues can
// be added beside the old consumer.
func TestEnsureQueueUpgrades(t *testing.T) {
	nc := jobstest.Connect(t, jobstest.Server(t))
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: jobs.StreamName, Subjects: []string{jobs.SubjectRun},
		Retention: jetstream.WorkQueuePolicy, Discard: jetstream.DiscardOld}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateConsumer(ctx, jobs.StreamName, jetstream.ConsumerConfig{Durable: jobs.ConsumerName,
		AckPolicy: jetstream.AckExplicitPolicy, MaxDeliver: 4, MaxAckPending: -1}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, jobs.SubjectRun, []byte(`{"job_id":"old"}`)); err != nil {
		t.Fatal(err)
	}

	cfg := jobs.QueueConfig{MaxMsgs: 3}
	legacy, err := jobs.EnsureQueue(ctx, js, cfg)
	if err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	if c := legacy.CachedInfo().Config; c.FilterSubject != jobs.SubjectRun || c.MaxDeliver != -1 {
		t.Errorf("old consumer after the upgrade: filter %q, max deliver %d", c.FilterSubject, c.MaxDeliver)
	}
	msgs, err := legacy.Fetch(1, jetstream.FetchMaxWait(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range msgs.Messages() {
		if string(m.Data()) != `{"job_id":"old"}` {
			t.Errorf("old message: %s", m.Data())
		}
		_ = m.Ack()
	}

	pub := jobs.NewPublisher(nc, js, cfg)
	for i, tenant := range []string{"ten_a", "ten_b", "ten_a"} {
		if _, err := pub.Publish(ctx, jobs.RunMessage{JobID: "job_" + tenant, TenantID: tenant}, string(rune('x'+i)), 2); err != nil {
			t.Fatalf("publish for %s: %v", tenant, err)
		}
	}
	cons, err := js.Consumer(ctx, jobs.StreamName, jobs.TenantConsumer("ten_a"))
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := cons.Info(ctx); info.NumPending != 2 || info.Config.MaxAckPending != 2 {
		t.Errorf("tenant a's queue: %d pending, cap %d", info.NumPending, info.Config.MaxAckPending)
	}
	// The stream holds 3 (the old message was acked): one more is refused.
	if _, err := pub.Publish(ctx, jobs.RunMessage{JobID: "job_c", TenantID: "ten_c"}, "c", 2); !errors.Is(err, jobs.ErrQueueFull) {
		t.Errorf("publish to a full stream: %v, want ErrQueueFull", err)
	}
}
