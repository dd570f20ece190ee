package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/gantryhq/gantry/codemode"
	"github.com/gantryhq/gantry/internal/startstop"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
	"github.com/gantryhq/gantry/secret"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/webhook"
)

// MaintenanceConfig is the configuration of the ingress's background work.
type MaintenanceConfig struct {
	// Interval is how often the sweeper runs (GANTRY_SWEEP_INTERVAL).
	Interval time.Duration
	// Queue is the job stream's configuration: its ack wait says when a
	// job or session shows no sign of life, MaxAttempts when a stranded
	// job is given up.
	Queue queue.Config
	// TenantLimits are the quotas of tenants the operator set none for
	// (the running cap of the messages the maintenance publishes).
	TenantLimits jobs.TenantLimits
	// CodeMode has its stale tool lists refreshed (nil: code mode is off).
	CodeMode *codemode.Registry
	// History deletes finished jobs past their retention (nil: history is
	// kept forever).
	History Retention
	// Webhooks delivers job webhooks (nil: off). Server.Webhooks is the
	// ingress's.
	Webhooks *webhook.Dispatcher
	// Box seals the env of jobs stored in the clear before the key was
	// set (nil or disabled: they stay as they are).
	Box *secret.Box
	// Tracer makes the spans of the run messages the reconciler publishes
	// again, in their jobs' traces (nil: none).
	Tracer trace.TracerProvider
}

// WithDefaults fills in zero fields.
func (c MaintenanceConfig) WithDefaults() MaintenanceConfig {
	if c.Interval == 0 {
		c.Interval = 15 * time.Second
	}
	c.Queue = c.Queue.WithDefaults()
	c.TenantLimits = c.TenantLimits.Or(jobs.DefaultTenantLimits())
	return c
}

// MaintenanceStore is what the maintenance needs of the store. Every
// method is safe to call from several ingress replicas at once.
type MaintenanceStore interface {
	Ping(ctx context.Context) error
	// Stateful sessions that pause at their timeout, and checkpoints
	// nothing names any more (livestate.go).
	ExpiredToPause(ctx context.Context, limit int) ([]store.PauseRef, error)
	PauseIdle(ctx context.Context, tenantID, sessionID string) error
	PauseLost(ctx context.Context, sessionID, live, reason string) error
	UnusedCheckpoints(ctx context.Context, age time.Duration, limit int) ([]store.Checkpoint, error)
	DeleteCheckpoint(ctx context.Context, id string) (bool, error)
	// ExpireSessions marks up to limit sessions idle past their TTL as
	// closing and returns them.
	ExpireSessions(ctx context.Context, limit int) ([]store.SessionRef, error)
	// ClosingSessions returns up to limit sessions left closing for
	// longer than age.
	ClosingSessions(ctx context.Context, age time.Duration, limit int) ([]store.SessionRef, error)
	// StalledSessions returns up to limit sessions with queued jobs and no
	// live owner.
	StalledSessions(ctx context.Context, limit int) ([]store.SessionRef, error)
	// FinishClosing deletes a closing session's row once no owner holds
	// it, and reports whether it did.
	FinishClosing(ctx context.Context, id string) (bool, error)
	TenantLimits(ctx context.Context, tenantID string) (jobs.TenantLimits, error)
	ReconcileJobs(ctx context.Context, opt store.ReconcileOptions, repair func(context.Context, store.Unfinished) (store.Repair, error)) (int, error)
	// DeleteExpiredPII deletes up to limit expired privacy tokens.
	DeleteExpiredPII(ctx context.Context, limit int) (int, error)
	// SealPlainEnv seals, with seal, the env of up to limit jobs stored in
	// the clear, and returns how many it sealed.
	SealPlainEnv(ctx context.Context, limit int, seal func(tenantID, jobID string, spec *jobs.Spec) error) (int, error)
	// LiveJobs counts the unfinished jobs and the age of the oldest.
	LiveJobs(ctx context.Context) (store.LiveJobs, error)
}

// SessionObjects deletes what a closed session left in the object store.
type SessionObjects interface {
	// DeletePrefix deletes every object under prefix and returns how many
	// it deleted; nothing to delete is no error.
	DeletePrefix(ctx context.Context, prefix string) (int, error)
	// Delete deletes one object (a checkpoint nothing names); a missing
	// one is no error.
	Delete(ctx context.Context, key string) error
}

// Maintenance is the ingress's background work, apart from serving
// requests: the sweeper (expired and half-closed sessions, stalled
// sessions, stranded jobs, stale code-mode tool lists, expired privacy
// tokens, job history past its retention) and the webhook dispatcher.
// Every ingress replica runs one; their passes share the work through
// Postgres.
type Maintenance struct {
	cfg     MaintenanceConfig
	log     *slog.Logger
	store   MaintenanceStore
	js      jetstream.JetStream
	nc      *nats.Conn
	blobs   SessionObjects
	queue   *publisher
	closer  *closer
	metrics *maintenanceMetrics

	loops startstop.Loops
}

// NewMaintenance makes the maintenance; Start starts it.
func NewMaintenance(cfg MaintenanceConfig, log *slog.Logger, st MaintenanceStore, blobs SessionObjects, nc *nats.Conn, reg prometheus.Registerer) (*Maintenance, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	return &Maintenance{
		cfg: cfg, log: log, store: st, js: js, nc: nc, blobs: blobs,
		queue:   newPublisher(nc, js, cfg.Queue, st, cfg.TenantLimits, log, cfg.Tracer),
		closer:  &closer{log: log, nc: nc, blobs: blobs, store: st},
		metrics: newMaintenanceMetrics(reg),
	}, nil
}

// Start starts the sweeper and the webhook dispatcher, which run until
// Stop (see startstop).
func (m *Maintenance) Start(ctx context.Context) error {
	if err := m.loops.Start(ctx, m.runSweeper); err != nil {
		return fmt.Errorf("maintenance: %w", err)
	}
	if m.cfg.Webhooks != nil {
		if err := m.cfg.Webhooks.Start(ctx); err != nil {
			m.loops.Stop()
			return err
		}
	}
	return nil
}

// Stop ends the loops and returns once every one has exited: a pass in
// progress is cancelled, not waited out. It is safe to call more than
// once, and without Start.
func (m *Maintenance) Stop() {
	if m.cfg.Webhooks != nil {
		m.cfg.Webhooks.Stop()
	}
	m.loops.Stop()
}

// runSweeper runs the maintenance passes every interval until ctx ends.
// After Postgres was unreachable, the passes that act on missing signs of
// life (re-announcing stalled sessions, reconciling jobs) wait one ack
// wait: every lease and heartbeat lapsed during the outage, and live
// runners need a moment to renew theirs.
func (m *Maintenance) runSweeper(ctx context.Context) {
	t := time.NewTicker(m.cfg.Interval)
	defer t.Stop()
	var down bool
	var back time.Time // when Postgres answered again after an outage
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := m.store.Ping(pctx)
		cancel()
		if err != nil {
			down = true
			continue
		}
		if down {
			down, back = false, time.Now()
			m.log.Info("database back; maintenance resumes", "settling", m.cfg.Queue.AckWait)
		}
		m.pass(ctx, back.IsZero() || time.Since(back) >= m.cfg.Queue.AckWait)
	}
}

// pass runs each maintenance pass once, stopping early when ctx ends.
func (m *Maintenance) pass(ctx context.Context, settled bool) {
	m.sweepSessions(ctx, settled)
	if settled && ctx.Err() == nil {
		m.reconcile(ctx)
	}
	if ctx.Err() == nil {
		m.sweepCodeMode(ctx)
	}
	if ctx.Err() == nil {
		m.sweepHistory(ctx)
	}
	if ctx.Err() == nil {
		m.sealPlainEnv(ctx)
	}
	if ctx.Err() == nil {
		m.measureLiveJobs(ctx)
	}
}

// measureLiveJobs sets the gauges of unfinished jobs, which the alerts
// on stuck jobs and a growing queue read.
func (m *Maintenance) measureLiveJobs(ctx context.Context) {
	l, err := m.store.LiveJobs(ctx)
	if err != nil {
		return
	}
	m.metrics.live.WithLabelValues("queued").Set(float64(l.Queued))
	m.metrics.live.WithLabelValues("running").Set(float64(l.Running))
	m.metrics.oldest.WithLabelValues("queued").Set(l.OldestQueued)
	m.metrics.oldest.WithLabelValues("running").Set(l.OldestRunning)
}

// sealPlainEnv seals the env of jobs stored before GANTRY_SECRET_KEY was
// set (or before env was sealed at all), a batch per pass.
func (m *Maintenance) sealPlainEnv(ctx context.Context) {
	if !m.cfg.Box.Enabled() {
		return
	}
	n, err := m.store.SealPlainEnv(ctx, 200, func(tenantID, jobID string, spec *jobs.Spec) error {
		return spec.SealEnv(m.cfg.Box, tenantID, jobID)
	})
	if n > 0 {
		m.log.Info("sealed the env of jobs stored in the clear", "jobs", n)
	}
	if err != nil && ctx.Err() == nil {
		m.log.Warn("seal env of older jobs; the next sweep retries", "err", err)
	}
}

// sweepSessions closes expired sessions, finishes closings that were
// interrupted, and, when settled, re-announces sessions whose jobs nobody
// is running.
func (m *Maintenance) sweepSessions(ctx context.Context, settled bool) {
	m.pauseExpired(ctx)
	m.deleteUnusedCheckpoints(ctx)
	expired, err := m.store.ExpireSessions(ctx, 100)
	if err != nil && ctx.Err() == nil {
		m.log.Warn("expire sessions", "err", err)
	}
	for _, ref := range expired {
		m.log.Info("session expired", "session_id", ref.ID)
		m.closer.reclaim(ctx, ref)
	}
	if stuck, err := m.store.ClosingSessions(ctx, 10*time.Second, 100); err == nil {
		for _, ref := range stuck {
			m.closer.reclaim(ctx, ref)
		}
	}
	if !settled {
		return
	}
	if stalled, err := m.store.StalledSessions(ctx, 100); err == nil {
		for _, ref := range stalled {
			m.queue.kickSession(ctx, ref.ID, ref.TenantID)
		}
	}
}

// sweepCodeMode refreshes stale tool lists and deletes expired privacy
// tokens.
func (m *Maintenance) sweepCodeMode(ctx context.Context) {
	if m.cfg.CodeMode != nil {
		m.cfg.CodeMode.RefreshStale(ctx)
	}
	if _, err := m.store.DeleteExpiredPII(ctx, 10000); err != nil && ctx.Err() == nil {
		m.log.Warn("delete expired privacy tokens", "err", err)
	}
}

// sweepHistory deletes finished jobs past the history's TTL, in batches,
// with their objects.
func (m *Maintenance) sweepHistory(ctx context.Context) {
	if m.cfg.History == nil {
		return
	}
	n, err := m.cfg.History.Sweep(ctx)
	if n > 0 {
		m.metrics.historyDeleted.Add(float64(n))
		m.log.Info("deleted expired job history", "jobs", n, "ttl", m.cfg.History.TTL())
	}
	if err != nil && ctx.Err() == nil {
		m.log.Warn("sweep job history; the next sweep retries", "err", err)
	}
}

type maintenanceMetrics struct {
	reconciled     *prometheus.CounterVec
	historyDeleted prometheus.Counter
	live, oldest   *prometheus.GaugeVec
}

func newMaintenanceMetrics(reg prometheus.Registerer) *maintenanceMetrics {
	m := &maintenanceMetrics{
		reconciled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gantry_jobs_reconciled_total", Help: "Stranded jobs the reconciler repaired, by action (republished, failed).",
		}, []string{"action"}),
		historyDeleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gantry_history_deleted_total", Help: "Finished jobs deleted by the retention sweep (GANTRY_HISTORY_TTL).",
		}),
		live: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gantry_jobs_unfinished", Help: "Jobs queued or running now, across tenants (read every sweep by each ingress).",
		}, []string{"status"}),
		oldest: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gantry_jobs_oldest_seconds", Help: "How long the oldest queued job has waited since it was submitted, and the oldest running job has run since its attempt started (read every sweep).",
		}, []string{"status"}),
	}
	reg.MustRegister(m.reconciled, m.historyDeleted, m.live, m.oldest)
	return m
}

// pauseExpired pauses the stateful sessions past their timeout that pause
// then (on_timeout pause): the runner holding each one's live sandbox
// checkpoints it; one that holds none is only marked paused. One whose job
// is running is paused by a later pass.
func (m *Maintenance) pauseExpired(ctx context.Context) {
	refs, err := m.store.ExpiredToPause(ctx, 20)
	if err != nil {
		if ctx.Err() == nil {
			m.log.Warn("list sessions to pause", "err", err)
		}
		return
	}
	for _, ref := range refs {
		log := m.log.With("session_id", ref.ID)
		if ref.Live == "" {
			if err := m.store.PauseIdle(ctx, ref.TenantID, ref.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
				log.Warn("pause a session at its timeout", "err", err)
			}
			continue
		}
		_, err := control(ctx, m.nc, ref.ID, ref.Live, queue.ControlRequest{Op: queue.ControlPause, TenantID: ref.TenantID})
		switch {
		case errors.Is(err, errHolderGone):
			err = m.store.PauseLost(ctx, ref.ID, ref.Live, "its runner was lost before its timeout paused it")
		case err != nil:
			var e *Error
			if errors.As(err, &e) && e.Status == http.StatusNotImplemented {
				// Its runner cannot checkpoint: what it holds is lost.
				err = m.store.PauseLost(ctx, ref.ID, ref.Live, "its timeout paused it on a runner that keeps live state in memory only")
			}
		}
		if err != nil {
			log.Info("pause a session at its timeout; the next pass tries again", "err", err)
		} else {
			log.Info("session paused at its timeout")
		}
	}
}

// unusedCheckpointAge is how long a checkpoint nothing names is kept (a
// fork or snapshot being recorded names it within seconds).
const unusedCheckpointAge = 10 * time.Minute

// deleteUnusedCheckpoints deletes checkpoints no session or snapshot names
// any more (superseded, their session closed, their snapshot deleted).
func (m *Maintenance) deleteUnusedCheckpoints(ctx context.Context) {
	cps, err := m.store.UnusedCheckpoints(ctx, unusedCheckpointAge, 100)
	if err != nil {
		return
	}
	for _, cp := range cps {
		if err := m.blobs.Delete(ctx, cp.Key); err != nil {
			m.log.Warn("delete an unused checkpoint", "checkpoint", cp.ID, "err", err)
			continue
		}
		if _, err := m.store.DeleteCheckpoint(ctx, cp.ID); err != nil {
			m.log.Warn("delete an unused checkpoint's row", "checkpoint", cp.ID, "err", err)
		}
	}
}
