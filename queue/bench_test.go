package queue_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
	"github.com/gantryhq/gantry/queue/queuetest"
)

// BenchmarkQueueR3 measures how many jobs a 3-node JetStream cluster
// passes through gantry's queue per second: the ingress's publish (with
// the job id as message id, waiting for the ack) and a runner's fetch of
// one message and double ack, on an R3 stream. The three nodes run in this
// process, so they share its CPUs: a floor for three separate servers. It
// reports jobs/s.
func BenchmarkQueueR3(b *testing.B) {
	c := queuetest.NewCluster(b, 3)
	c.StartAll()
	ctx := context.Background()
	pub, err := nats.Connect(c.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer pub.Close()
	sub, err := nats.Connect(c.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Close()
	pjs, _ := jetstream.New(pub)
	sjs, _ := jetstream.New(sub)
	cfg := queue.Config{Replicas: 3}
	if err := queue.Ensure(ctx, sjs, cfg); err != nil {
		b.Fatal(err)
	}
	cons, err := queue.EnsureTenant(ctx, sjs, cfg, "ten_bench", -1)
	if err != nil {
		b.Fatal(err)
	}
	var acked atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range 16 { // runners' free slots, each asking for one message
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				msgs, err := cons.Fetch(1, jetstream.FetchMaxWait(time.Second))
				if err != nil {
					continue
				}
				for m := range msgs.Messages() {
					if err := m.DoubleAck(ctx); err == nil {
						acked.Add(1)
					}
				}
			}
		}()
	}
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := jobs.NewID("job")
			data, _ := json.Marshal(queue.RunMessage{JobID: id, TenantID: "ten_bench"})
			if _, err := pjs.Publish(ctx, queue.TenantSubject("ten_bench"), data, jetstream.WithMsgID(id)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	eventually.Within(time.Duration(b.N)*time.Second, func() bool { return acked.Load() >= int64(b.N) })
	b.StopTimer()
	close(done)
	wg.Wait()
	b.ReportMetric(float64(acked.Load())/b.Elapsed().Seconds(), "jobs/s")
}
