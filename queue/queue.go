// Package queue is the job queue: the JetStream stream and each tenant's
// consumer on it, the run messages published there, and the core NATS
// subjects the ingress and the runners speak over (status, output, backlog,
// cancel, ready, key revocations, sessions closed). Both sides use it, and
// neither imports the other.
package queue

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The JetStream names and NATS subjects gantry uses.
const (
	// StreamName is the work-queue stream holding jobs waiting for a runner.
	StreamName = "GANTRY_JOBS"
	// SubjectTenantAll matches the per-tenant subjects run messages are
	// published on (TenantSubject).
	SubjectTenantAll = "gantry.jobs.tenant.*"
	// ReadySubject carries a tenant id each time a run message is
	// published for it (core NATS): idle runners wake at once.
	ReadySubject = "gantry.jobs.ready"

	// HeaderStream names the output stream (stdout or stderr) of a log chunk.
	HeaderStream = "Gantry-Stream"
	// HeaderOffset is the byte offset of a log chunk within its stream.
	HeaderOffset = "Gantry-Offset"
)

// StatusSubject is where a job's status changes are announced (core NATS).
func StatusSubject(jobID string) string { return "gantry.job." + jobID + ".status" }

// StatusSubjectAll matches the status subjects of every job.
const StatusSubjectAll = "gantry.job.*.status"

// LogSubject carries a running job's output chunks (core NATS).
func LogSubject(jobID string) string { return "gantry.job." + jobID + ".log" }

// BacklogSubject answers requests for the output a running job produced so
// far; only the runner running the job replies.
func BacklogSubject(jobID string) string { return "gantry.job." + jobID + ".backlog" }

// BacklogSubjectAll matches the backlog subjects of every job.
const BacklogSubjectAll = "gantry.job.*.backlog"

// CancelSubject asks the runner running a job to kill it.
func CancelSubject(jobID string) string { return "gantry.job." + jobID + ".cancel" }

// CancelSubjectAll matches the cancel subjects of every job.
const CancelSubjectAll = "gantry.job.*.cancel"

// KeyRevokedSubject announces that an API key was revoked (core NATS, a
// KeyRevoked body): every ingress drops the key from its cache at once, and
// runners may retire the tenant's warm containers.
const KeyRevokedSubject = "gantry.keys.revoked"

// KeyRevoked is the body of a KeyRevokedSubject message.
type KeyRevoked struct {
	KeyID    string `json:"key_id"`
	TenantID string `json:"tenant_id"`
	// KeyEpoch is the tenant's count of key revocations, this one included
	// (the value store.Claim carries from then on).
	KeyEpoch int64 `json:"key_epoch"`
}

// JobIDFromSubject returns the job id in a gantry.job.<id>.<kind> subject.
func JobIDFromSubject(subject string) string {
	const prefix = "gantry.job."
	if len(subject) <= len(prefix) {
		return ""
	}
	rest := subject[len(prefix):]
	for i := 0; i < len(rest); i++ {
		if rest[i] == '.' {
			return rest[:i]
		}
	}
	return ""
}

// Config shapes the stream and the tenants' consumers.
type Config struct {
	// Replicas is the stream's replication factor: 1 for a single server,
	// 3 for a NATS cluster.
	Replicas int
	// AckWait is how long a runner may go without acking or sending
	// InProgress before its job is redelivered to another runner.
	AckWait time.Duration
	// MaxAttempts is how many times a job is run before it is given up as
	// lost. Attempts are counted in Postgres by the claims that start a
	// run, not by JetStream's deliveries: a message handed back unrun
	// (Postgres unreachable, the runner stopping) spends no attempt, and
	// the consumer redelivers without limit.
	MaxAttempts int
	// MaxMsgs and MaxBytes bound the stream: beyond them a publish is
	// refused (the API answers 503), never an old message dropped.
	MaxMsgs  int64
	MaxBytes int64
	// Log receives a line while Ensure waits for the JetStream
	// cluster to become able to create the stream (nil: nothing is logged).
	Log *slog.Logger
}

// WithDefaults fills in zero fields.
func (c Config) WithDefaults() Config {
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.AckWait == 0 {
		c.AckWait = 30 * time.Second
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 3
	}
	if c.MaxMsgs == 0 {
		c.MaxMsgs = 100_000
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = 256 << 20
	}
	if c.Log == nil {
		c.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c
}

// How Ensure waits for a cluster: each attempt may take
// queueAttemptTimeout (the JetStream API default; a request sent before the
// cluster had a leader gets no answer at all, so this is also how soon a
// retry follows), and failed attempts are spaced from queueRetryMin
// doubling up to queueRetryMax.
var (
	queueAttemptTimeout = 5 * time.Second
	queueRetryMin       = 250 * time.Millisecond
	queueRetryMax       = 5 * time.Second
)

// Ensure creates or updates the jobs stream (each tenant's consumer is
// made by EnsureTenant). It is idempotent and safe to call from every
// ingress and runner at start.
//
// A JetStream cluster that has just started cannot create a replicated
// stream until it has elected a leader (and enough peers have joined).
// Ensure therefore retries what a forming or recovering cluster answers
// (timeouts, no responders, "temporarily unavailable", "no suitable peers",
// "insufficient resources") until it succeeds or ctx ends, logging to
// cfg.Log while it waits. Other errors, such as R3 on a server without
// clustering, are returned at once.
func Ensure(ctx context.Context, js jetstream.JetStream, cfg Config) error {
	cfg = cfg.WithDefaults()
	start := time.Now()
	waited := false
	err := retryTemporary(ctx, cfg, func(ctx context.Context) error {
		err := ensureStream(ctx, js, cfg)
		if err != nil {
			waited = true
		}
		return err
	})
	if err != nil {
		return err
	}
	if waited {
		cfg.Log.Info("JetStream stream ready", "stream", StreamName, "replicas", cfg.Replicas, "waited", time.Since(start).Round(time.Millisecond).String())
	}
	return nil
}

func ensureStream(ctx context.Context, js jetstream.JetStream, cfg Config) error {
	_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        StreamName,
		Description: "gantry jobs waiting for a runner",
		Subjects:    []string{SubjectTenantAll},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
		Duplicates:  2 * time.Minute,
		MaxMsgs:     cfg.MaxMsgs,
		MaxBytes:    cfg.MaxBytes,
		Discard:     jetstream.DiscardNew,
	})
	if err != nil {
		return fmt.Errorf("create stream %s (replicas %d): %w", StreamName, cfg.Replicas, err)
	}
	return nil
}

// retryTemporary runs fn, each attempt under its own timeout, until it
// succeeds, fails with an error that waiting cannot fix, or ctx ends.
func retryTemporary(ctx context.Context, cfg Config, fn func(context.Context) error) error {
	delay := queueRetryMin
	var lastLog time.Time
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, queueAttemptTimeout)
		err := fn(actx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w (gave up waiting for JetStream: %w)", err, context.Cause(ctx))
		}
		if !temporary(err) {
			return err
		}
		// The first failure and then one line every 10 s: enough to see
		// what it waits for without flooding the log.
		if attempt == 1 || time.Since(lastLog) >= 10*time.Second {
			cfg.Log.Warn("waiting for the JetStream cluster (it needs a leader and enough peers for the replicas); retrying",
				"stream", StreamName, "replicas", cfg.Replicas, "attempt", attempt, "err", err)
			lastLog = time.Now()
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return fmt.Errorf("%w (gave up waiting for JetStream: %w)", err, context.Cause(ctx))
		}
		delay = min(2*delay, queueRetryMax)
	}
}

// JetStream API error codes a forming or recovering cluster answers with
// (besides HTTP-like code 503): the request reached a server that cannot
// place or lead the stream yet.
const (
	errCodeClusterNoPeers    jetstream.ErrorCode = 10005
	errCodeClusterNotLeader  jetstream.ErrorCode = 10009
	errCodeClusterIncomplete jetstream.ErrorCode = 10004
)

// temporary reports whether err may go away by waiting: anything that is
// not a JetStream API error (a timeout, no responders, a connection being
// re-established), or an API error saying the cluster is not ready.
func temporary(err error) bool {
	var jsErr jetstream.JetStreamError
	if !errors.As(err, &jsErr) || jsErr.APIError() == nil {
		return true
	}
	api := jsErr.APIError()
	switch {
	case api.Code == 503:
		return true
	case api.ErrorCode == errCodeClusterNoPeers, api.ErrorCode == errCodeClusterNotLeader, api.ErrorCode == errCodeClusterIncomplete:
		return true
	case api.ErrorCode == jetstream.JSErrCodeStreamNameInUse:
		// Two processes created the stream at once; the next attempt
		// finds it and updates it.
		return true
	}
	return false
}

// Healthy checks that the connection is up and the job stream answers
// (Ready): what every process that submits or runs jobs needs of NATS.
func Healthy(ctx context.Context, nc *nats.Conn, js jetstream.JetStream) error {
	if !nc.IsConnected() {
		return ErrDisconnected
	}
	return Ready(ctx, js)
}

// ErrDisconnected is Healthy's answer while the connection is down (it
// reconnects by itself).
var ErrDisconnected = errors.New("not connected (reconnecting)")

// Pending counts the messages no runner has taken yet, over every tenant's
// queue.
func Pending(ctx context.Context, js jetstream.JetStream) (uint64, error) {
	stream, err := js.Stream(ctx, StreamName)
	if err != nil {
		return 0, err
	}
	list := stream.ListConsumers(ctx)
	var n uint64
	for info := range list.Info() {
		n += info.NumPending
	}
	return n, list.Err()
}

// Ready checks that the job stream can take a publish and deliver: it
// answers its info request, with a leader when it is replicated. During a
// leader election, or with the stream gone, every submission and fetch
// fails.
func Ready(ctx context.Context, js jetstream.JetStream) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	stream, err := js.Stream(ctx, StreamName)
	if err != nil {
		return fmt.Errorf("job stream %s: %w", StreamName, err)
	}
	if c := stream.CachedInfo().Cluster; c != nil && c.Leader == "" {
		return fmt.Errorf("job stream %s has no leader", StreamName)
	}
	return nil
}
