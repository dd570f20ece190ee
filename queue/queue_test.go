package queue_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/queue"
	"github.com/gantryhq/gantry/queue/queuetest"
)

// logBuffer collects log lines written from several goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestEnsureQueueWaitsForClusterLeader starts gantry's queue on a 3-node
// cluster of which one node is up: an R3 stream cannot be created before
// the cluster has a leader and three peers. EnsureQueue waits, saying so,
// and succeeds once the other nodes join.
func TestEnsureQueueWaitsForClusterLeader(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a NATS cluster")
	}
	c := queuetest.NewCluster(t, 3)
	c.Start(0)
	nc, err := nats.Connect(c.URL(), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	cfg := queue.Config{Replicas: 3, AckWait: 5 * time.Second, Log: slog.New(slog.NewTextHandler(&logs, nil))}

	// A caller that stops waiting gets an error saying what it waited for.
	short, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	err = queue.Ensure(short, js, cfg)
	cancel()
	if err == nil || !strings.Contains(err.Error(), "gave up waiting for JetStream") {
		t.Fatalf("EnsureQueue on a cluster without quorum, with a 1.5s deadline: %v", err)
	}

	done := make(chan error, 1)
	go func() {
		done <- queue.Ensure(context.Background(), js, cfg)
	}()
	if !eventually.Within(30*time.Second, func() bool { return strings.Contains(logs.String(), "waiting for the JetStream cluster") }) {
		t.Fatalf("no waiting line in the log:\n%s", logs.String())
	}
	select {
	case err := <-done:
		t.Fatalf("EnsureQueue returned before the cluster had a quorum: %v", err)
	default:
	}

	c.StartAll()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("EnsureQueue after the cluster formed: %v\n%s", err, logs.String())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("EnsureQueue still waiting 2 minutes after the cluster formed:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "JetStream stream ready") {
		t.Errorf("no ready line in the log:\n%s", logs.String())
	}

	ctx := context.Background()
	stream, err := js.Stream(ctx, queue.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.Replicas != 3 || info.Cluster == nil || info.Cluster.Leader == "" || len(info.Cluster.Replicas) != 2 {
		t.Fatalf("stream: replicas %d, cluster %+v", info.Config.Replicas, info.Cluster)
	}
	// The queue works: a job published is the one a runner fetches.
	if err := queue.Ensure(ctx, js, cfg); err != nil { // again, as every replica does
		t.Fatal(err)
	}
	if _, err := queue.NewPublisher(nc, js, cfg).Publish(ctx, queue.RunMessage{JobID: "job_x", TenantID: "ten_x"}, "job_x", 1); err != nil {
		t.Fatal(err)
	}
	cons, err := js.Consumer(ctx, queue.StreamName, queue.TenantConsumer("ten_x"))
	if err != nil {
		t.Fatal(err)
	}
	msg, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
	if err != nil || !strings.Contains(string(msg.Data()), `"job_id":"job_x"`) {
		t.Fatalf("fetch: %v", err)
	}
	_ = msg.DoubleAck(ctx)
}

// TestEnsureQueueRefusesAtOnce: a mistake that waiting cannot fix (three
// replicas on a server without clustering) is reported at once.
func TestEnsureQueueRefusesAtOnce(t *testing.T) {
	t.Parallel()
	js, err := jetstream.New(queuetest.Connect(t, queuetest.Server(t)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	err = queue.Ensure(ctx, js, queue.Config{Replicas: 3})
	if err == nil || !strings.Contains(err.Error(), "replicas") || time.Since(start) > 5*time.Second {
		t.Fatalf("R3 on a single server: %v after %s", err, time.Since(start))
	}
}
