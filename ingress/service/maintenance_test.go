package service

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue/queuetest"
	"github.com/gantryhq/gantry/secret"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/webhook"
)

// gate holds a loop inside a store call: entered closes when the loop is
// in it; the call returns only after its context ended and release closed.
type gate struct {
	entered, release chan struct{}
	once             sync.Once
	exited           atomic.Bool
}

func newGate() *gate { return &gate{entered: make(chan struct{}), release: make(chan struct{})} }

func (g *gate) hold(ctx context.Context) error {
	g.once.Do(func() { close(g.entered) })
	<-ctx.Done()
	<-g.release
	g.exited.Store(true)
	return ctx.Err()
}

// heldStore is a MaintenanceStore whose sweep is held in ExpireSessions.
type heldStore struct{ g *gate }

func (s heldStore) Ping(context.Context) error                     { return nil }
func (heldStore) LiveJobs(context.Context) (store.LiveJobs, error) { return store.LiveJobs{}, nil }
func (s heldStore) SealPlainEnv(context.Context, int, func(string, string, *jobs.Spec) error) (int, error) {
	return 0, nil
}
func (s heldStore) ExpireSessions(ctx context.Context, _ int) ([]store.SessionRef, error) {
	return nil, s.g.hold(ctx)
}
func (heldStore) ClosingSessions(context.Context, time.Duration, int) ([]store.SessionRef, error) {
	return nil, nil
}
func (heldStore) StalledSessions(context.Context, int) ([]store.SessionRef, error) { return nil, nil }
func (heldStore) FinishClosing(context.Context, string) (bool, error)              { return true, nil }
func (heldStore) TenantLimits(context.Context, string) (jobs.TenantLimits, error) {
	return jobs.TenantLimits{}, nil
}
func (heldStore) ReconcileJobs(context.Context, store.ReconcileOptions, func(context.Context, store.Unfinished) (store.Repair, error)) (int, error) {
	return 0, nil
}
func (heldStore) DeleteExpiredPII(context.Context, int) (int, error)            { return 0, nil }
func (heldStore) ExpiredToPause(context.Context, int) ([]store.PauseRef, error) { return nil, nil }
func (heldStore) PauseIdle(context.Context, string, string) error               { return nil }
func (heldStore) PauseLost(context.Context, string, string, string) error       { return nil }
func (heldStore) UnusedCheckpoints(context.Context, time.Duration, int) ([]store.Checkpoint, error) {
	return nil, nil
}
func (heldStore) DeleteCheckpoint(context.Context, string) (bool, error) { return false, nil }

// heldWebhooks is a webhook.Store whose dispatcher is held in
// ClaimWebhooks.
type heldWebhooks struct{ g *gate }

func (s heldWebhooks) ClaimWebhooks(ctx context.Context, _ int, _ time.Duration) ([]webhook.DueDelivery, error) {
	return nil, s.g.hold(ctx)
}
func (heldWebhooks) GetJob(context.Context, string, string) (jobs.Job, error) {
	return jobs.Job{}, store.ErrNotFound
}
func (heldWebhooks) RecordWebhookAttempt(context.Context, string, jobs.WebhookAttempt, string, time.Time) error {
	return nil
}
func (heldWebhooks) WebhookSecrets(context.Context, string) (webhook.SealedSecrets, error) {
	return webhook.SealedSecrets{}, nil
}
func (heldWebhooks) InitWebhookSecret(context.Context, string, []byte) (webhook.SealedSecrets, error) {
	return webhook.SealedSecrets{}, nil
}
func (heldWebhooks) RotateWebhookSecret(context.Context, string, []byte, time.Duration) (webhook.SealedSecrets, error) {
	return webhook.SealedSecrets{}, nil
}

type nowhere struct{}

func (nowhere) DeletePrefix(context.Context, string) (int, error) { return 0, nil }
func (nowhere) Delete(context.Context, string) error              { return nil }

// TestMaintenanceStopWaitsForLoops: Stop cancels what the loops are doing
// and returns only once the sweeper and the webhook dispatcher have both
// exited — not while either is still inside a call.
func TestMaintenanceStopWaitsForLoops(t *testing.T) {
	if testing.Short() {
		t.Skip("needs NATS")
	}
	nc := queuetest.Connect(t, queuetest.Server(t))
	log := slog.New(slog.DiscardHandler)
	sweep, deliver := newGate(), newGate()
	box, err := secret.New(make([]byte, secret.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	d, err := webhook.New(webhook.Config{Poll: 10 * time.Millisecond}, heldWebhooks{deliver}, box, log)
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMaintenance(MaintenanceConfig{Interval: 10 * time.Millisecond, Webhooks: d},
		log, heldStore{sweep}, nowhere{}, nc, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(t.Context()); err == nil {
		t.Error("a second Start was accepted")
	}
	for name, g := range map[string]*gate{"sweeper": sweep, "webhook dispatcher": deliver} {
		select {
		case <-g.entered:
		case <-time.After(10 * time.Second):
			t.Fatalf("the %s never ran", name)
		}
	}

	stopped := make(chan struct{})
	go func() { m.Stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("Stop returned while the loops were still inside their calls")
	case <-time.After(100 * time.Millisecond):
	}
	close(sweep.release)
	select {
	case <-stopped:
		t.Fatal("Stop returned while the webhook dispatcher was still inside its call")
	case <-time.After(100 * time.Millisecond):
	}
	close(deliver.release)
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop did not return after the loops could exit (were their contexts cancelled?)")
	}
	if !sweep.exited.Load() || !deliver.exited.Load() {
		t.Fatalf("Stop returned before the loops exited: sweeper %v, dispatcher %v", sweep.exited.Load(), deliver.exited.Load())
	}
	m.Stop() // again: a no-op
}

// TestMaintenanceStopWithoutStart: a Maintenance that never started stops
// at once, and does not start after that.
func TestMaintenanceStopWithoutStart(t *testing.T) {
	if testing.Short() {
		t.Skip("needs NATS")
	}
	nc := queuetest.Connect(t, queuetest.Server(t))
	m, err := NewMaintenance(MaintenanceConfig{}, slog.New(slog.DiscardHandler), heldStore{newGate()}, nowhere{}, nc, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { m.Stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop without Start hangs")
	}
	if err := m.Start(t.Context()); err == nil {
		m.Stop()
		t.Error("Start after Stop was accepted: nothing would stop its loops")
	}
}
