package service

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/gantryhq/gantry/blob"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
	"github.com/gantryhq/gantry/secret"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/tracing"
)

// SubmitJob validates a request, records the job and queues it. It is the
// one path by which jobs enter gantry, from every adapter alike. created
// is false when the request's idempotency key named an existing job, which
// is returned instead.
func (s *Service) SubmitJob(ctx context.Context, p Principal, req jobs.Request) (job jobs.Job, created bool, err error) {
	return s.submitJob(ctx, p, req, "")
}

// submitJob is SubmitJob for a job of a batch ("" for none). Its span,
// job.submit, is where the job's trace begins on the ingress (under the
// request's); job.enqueue, under it, is the span the job's row and run
// message name as their runners' parent.
func (s *Service) submitJob(ctx context.Context, p Principal, req jobs.Request, batchID string) (job jobs.Job, created bool, err error) {
	ctx, span := s.tracer.Start(ctx, "job.submit", trace.WithAttributes(tracing.TenantID.String(p.TenantID)))
	defer func() {
		if job.ID != "" {
			span.SetAttributes(tracing.JobID.String(job.ID))
			if !created {
				span.SetAttributes(tracing.Outcome.String("existing"))
			}
		}
		endSpan(span, err)
	}()
	spec, err := s.cfg.Policy.Normalize(req)
	if err != nil {
		return jobs.Job{}, false, err
	}
	span.SetAttributes(tracing.Language.String(spec.Language))
	if err := s.checkWebhookURL("webhook_url", req.WebhookURL); err != nil {
		return jobs.Job{}, false, err
	}
	if req.SessionID == nil {
		if err := s.checkEnvironment(ctx, p, spec.Environment); err != nil {
			return jobs.Job{}, false, err
		}
	}
	sessionID := ""
	if req.SessionID != nil {
		sessionID = *req.SessionID
		if !jobs.ValidID("ses", sessionID) {
			return jobs.Job{}, false, sessionNotFound(sessionID)
		}
		if err := s.fitSession(ctx, p, req, &spec); err != nil {
			return jobs.Job{}, false, err
		}
	}
	if err := s.checkNetwork(ctx, p, "network", spec.Network, sessionID, nil); err != nil {
		return jobs.Job{}, false, err
	}
	hash, err := requestHash(s.cfg.Box, p.TenantID, req)
	if err != nil {
		return jobs.Job{}, false, err
	}
	// The id is chosen here: the sealed env is bound to it.
	id := jobs.NewID("job")
	if err := sealEnv(s.cfg.Box, &spec, p.TenantID, id); err != nil {
		return jobs.Job{}, false, err
	}
	limits := s.Limits(p)
	attrs := []attribute.KeyValue{tracing.JobID.String(id), tracing.TenantID.String(p.TenantID)}
	if sessionID != "" {
		attrs = append(attrs, tracing.SessionID.String(sessionID))
	}
	published := "" // the job whose run message is on the queue
	ctx, enqueue := s.tracer.Start(ctx, "job.enqueue", trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(append(attrs, tracing.Publish(queue.TenantSubject(p.TenantID))...)...))
	job, created, err = s.store.EnqueueJob(ctx, store.NewJob{
		ID:             id,
		TenantID:       p.TenantID,
		Spec:           spec,
		SessionID:      req.SessionID,
		IdempotencyKey: req.IdempotencyKey,
		RequestHash:    hash,
		Metadata:       req.Metadata,
		BatchID:        batchID,
		WebhookURL:     req.WebhookURL,
		MaxQueued:      limits.MaxQueued,
		TraceParent:    tracing.Traceparent(ctx),
	}, func(ctx context.Context, jobID string) (uint64, error) {
		seq, err := s.queue.publish(ctx, queue.RunMessage{JobID: jobID, TenantID: p.TenantID, SessionID: sessionID, MemoryMB: spec.Limits.MemoryMB}, jobID, limits.MaxRunning)
		if err == nil {
			published = jobID
		}
		return seq, err
	})
	endSpan(enqueue, err)
	if err != nil && published != "" {
		// The message is out and recording the row failed: if the commit
		// reached the database before it failed, the job exists and runs.
		return jobs.Job{}, false, &UncertainJob{JobID: published, Err: err}
	}
	if errors.Is(err, store.ErrSessionNotFound) {
		return jobs.Job{}, false, sessionNotFound(sessionID)
	}
	if errors.Is(err, store.ErrTooManyQueued) {
		return jobs.Job{}, false, &Error{Status: http.StatusTooManyRequests, Code: CodeRateLimited, RetryAfter: 5,
			Message: fmt.Sprintf("%v (%d): wait for some to finish", err, limits.MaxQueued)}
	}
	if err != nil {
		return jobs.Job{}, false, err
	}
	if created {
		s.metrics.submitted.WithLabelValues(spec.Language).Inc()
	}
	return job, created, nil
}

// fitSession fits a session job to its session: it runs in the session's
// environment (naming another is refused), and its memory fits the
// session's workspace, which is held in memory and counts against it: a
// job that does not say how much memory it needs gets at least the
// session's disk_mb; one that asks for less is refused.
func (s *Service) fitSession(ctx context.Context, p Principal, req jobs.Request, spec *jobs.Spec) error {
	sess, err := s.store.GetSession(ctx, p.TenantID, *req.SessionID)
	if errors.Is(err, store.ErrNotFound) {
		return sessionNotFound(*req.SessionID)
	}
	if err != nil {
		return err
	}
	env := sess.Environment
	if env == jobs.DefaultEnvironment {
		env = ""
	}
	if req.Environment != "" && spec.Environment != env {
		return BadRequest("environment", "a session's jobs run in the session's environment (%s); leave environment out", sess.Environment)
	}
	spec.Environment = env
	if spec.Kernel != "" && !sess.Stateful {
		return BadRequest("kernel", "needs a stateful session: a kernel lives in its live sandbox")
	}
	if sess.Stateful && spec.KernelCell() && spec.Stdin != "" {
		// The cell's code runs in the kernel, whose stdin is the agent's.
		return BadRequest("stdin", "a JavaScript or TypeScript cell of a stateful session runs in its kernel and reads no stdin; pass the data in the code, or as a file")
	}
	// The session's env, under the job's own; a stateful session's Python
	// jobs (cells of its interpreter) do not take the variables an
	// interpreter reads when it starts, which would run them in a new one.
	senv, err := s.sessionEnv(p.TenantID, sess)
	if err != nil {
		return err
	}
	if sess.Stateful && spec.Language == "python" {
		for k := range senv {
			if jobs.StartupVariable(k) {
				delete(senv, k)
			}
		}
	}
	if spec.Env, err = jobs.UnderEnv(spec.Env, senv); err != nil {
		return err
	}
	if spec.Limits.MemoryMB >= sess.DiskMB {
		return nil
	}
	if req.Limits != nil && req.Limits.MemoryMB != 0 {
		return BadRequest("limits.memory_mb", "must be at least the session's disk_mb (%d): its workspace is held in memory and counts against the job's memory", sess.DiskMB)
	}
	spec.Limits.MemoryMB = sess.DiskMB
	return nil
}

// BatchItem is one job of a batch: its request, or why it could not be
// read.
type BatchItem struct {
	Request jobs.Request
	Err     error
}

// Submitted is the outcome of one job of a batch: the queued job (as View
// shows it), or the error it would have had on its own.
type Submitted struct {
	Job jobs.Job
	Err *Error
}

// SubmitBatch queues up to Config.BatchMax jobs under one new batch id,
// each validated and queued on its own, in order (so that jobs of one
// session keep their order): an item's failure is its own. There is no
// batch-wide idempotency.
func (s *Service) SubmitBatch(ctx context.Context, p Principal, items []BatchItem) (batchID string, out []Submitted, err error) {
	switch {
	case len(items) == 0:
		return "", nil, BadRequest("jobs", "must hold at least one job")
	case len(items) > s.cfg.BatchMax:
		return "", nil, BadRequest("jobs", "has %d jobs; at most %d in one batch", len(items), s.cfg.BatchMax)
	}
	batchID = jobs.NewID("bat")
	out = make([]Submitted, len(items))
	for i, it := range items {
		err := it.Err
		var job jobs.Job
		if err == nil {
			job, _, err = s.submitJob(ctx, p, it.Request, batchID)
		}
		if err != nil {
			e, internal := ToError(err)
			if internal {
				s.log.Error("batch item failed", "index", i, "err", err)
			}
			out[i] = Submitted{Err: e}
			continue
		}
		out[i] = Submitted{Job: View(job)}
	}
	return batchID, out, nil
}

// publisher puts run messages on the job stream: the service for submissions
// and session edits, the maintenance for stranded jobs and stalled
// sessions.
type publisher struct {
	pub *queue.Publisher
	// limits reads a tenant's quotas; defaults stand where it set none.
	limits   limitsReader
	defaults jobs.TenantLimits
	log      *slog.Logger
	tracer   trace.Tracer
}

func newPublisher(nc *nats.Conn, js jetstream.JetStream, cfg queue.Config, limits limitsReader, defaults jobs.TenantLimits, log *slog.Logger, tp trace.TracerProvider) *publisher {
	return &publisher{pub: queue.NewPublisher(nc, js, cfg), limits: limits, defaults: defaults, log: log, tracer: tracing.Tracer(tp, tracerName)}
}

// limitsReader reads a tenant's quotas (the store).
type limitsReader interface {
	TenantLimits(ctx context.Context, tenantID string) (jobs.TenantLimits, error)
}

// publish puts the job on its tenant's queue (capped at maxRunning running
// jobs) and waits for JetStream's ack, and returns the message's stream
// sequence. msgID (the job id for a job's first message) lets the stream
// deduplicate a retried publish.
func (q *publisher) publish(ctx context.Context, m queue.RunMessage, msgID string, maxRunning int) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	seq, err := q.pub.Publish(ctx, m, msgID, maxRunning)
	log := q.log.With(tracing.LogAttrs(ctx)...)
	if errors.Is(err, queue.ErrFull) {
		log.Warn("job queue full; submission refused", "job_id", m.JobID, "err", err)
		e := Unavailable("the job queue is full; the job was not accepted, retry later")
		e.RetryAfter = 5
		return 0, e
	}
	if err != nil {
		log.Error("publish job", "job_id", m.JobID, "err", err)
		return 0, Unavailable("the job queue is unavailable; the job was not accepted, retry later")
	}
	return seq, nil
}

// publishFor publishes for a tenant whose quotas are not at hand.
func (q *publisher) publishFor(ctx context.Context, m queue.RunMessage, msgID string) (uint64, error) {
	l, err := q.limits.TenantLimits(ctx, m.TenantID)
	if err != nil {
		return 0, err
	}
	return q.publish(ctx, m, msgID, l.Or(q.defaults).MaxRunning)
}

// kickSession announces that a session has jobs to run.
func (q *publisher) kickSession(ctx context.Context, sessionID, tenantID string) {
	m := queue.RunMessage{JobID: jobs.NewID("job"), TenantID: tenantID, SessionID: sessionID}
	if _, err := q.publishFor(ctx, m, m.JobID); err != nil {
		q.log.Error("announce session jobs", "session_id", sessionID, "err", err)
	}
}

// Job returns the tenant's job; another tenant's job, like a missing one,
// is not found. Finished jobs are served from a cache.
func (s *Service) Job(ctx context.Context, p Principal, id string) (jobs.Job, error) {
	if !jobs.ValidID("job", id) {
		return jobs.Job{}, NotFound("job " + strconv.Quote(id))
	}
	if job, ok := s.done.get(p.TenantID, id); ok {
		return job, nil
	}
	job, err := s.store.GetJob(ctx, p.TenantID, id)
	if err == store.ErrNotFound {
		return jobs.Job{}, NotFound("job " + strconv.Quote(id))
	}
	if err == nil {
		s.done.put(p.TenantID, job)
	}
	return job, err
}

// CancelJob cancels the tenant's job: a queued one at once, a running one
// by telling its runner, waiting up to 5 s so that the answer usually shows
// the final state. A finished job is returned as it is. It is idempotent.
func (s *Service) CancelJob(ctx context.Context, p Principal, id string) (jobs.Job, error) {
	job, err := s.Job(ctx, p, id)
	if err != nil {
		return jobs.Job{}, err
	}
	outcome, err := s.store.CancelJob(ctx, p.TenantID, job.ID, s.cfg.Queue.AckWait)
	if err != nil {
		return jobs.Job{}, err
	}
	switch outcome {
	case store.CancelledQueued, store.CancelledOrphan:
		data, _ := json.Marshal(queue.StatusEvent{JobID: job.ID, Status: jobs.StatusCancelled})
		_ = s.nc.Publish(queue.StatusSubject(job.ID), data)
		if outcome == store.CancelledOrphan {
			// In case its runner is alive after all: it must stop.
			_ = s.nc.Publish(queue.CancelSubject(job.ID), nil)
		}
	case store.CancelRequested:
		_ = s.nc.Publish(queue.CancelSubject(job.ID), nil)
		return s.WaitJob(ctx, p, job, Watch{Until: time.Now().Add(5 * time.Second)})
	}
	return s.store.GetJob(ctx, p.TenantID, job.ID)
}

// WithdrawJob cancels the tenant's job if no runner has taken it yet, and
// never one that started: withdrawn says whether it was withdrawn, and job
// is the job as it is now. A withdrawn job never runs, so a caller may
// answer "retry" for it. An unknown job is not found (an UncertainJob's
// that was never recorded: it cannot run either).
func (s *Service) WithdrawJob(ctx context.Context, p Principal, id string) (job jobs.Job, withdrawn bool, err error) {
	if !jobs.ValidID("job", id) {
		return jobs.Job{}, false, NotFound("job " + strconv.Quote(id))
	}
	withdrawn, err = s.store.WithdrawJob(ctx, p.TenantID, id)
	if errors.Is(err, store.ErrNotFound) {
		return jobs.Job{}, false, NotFound("job " + strconv.Quote(id))
	}
	if err != nil {
		return jobs.Job{}, false, err
	}
	if withdrawn {
		data, _ := json.Marshal(queue.StatusEvent{JobID: id, Status: jobs.StatusCancelled})
		_ = s.nc.Publish(queue.StatusSubject(id), data)
	}
	job, err = s.store.GetJob(ctx, p.TenantID, id)
	return job, withdrawn, err
}

// UncertainJob is a submission whose job may have been recorded although
// SubmitJob failed: recording its row failed (the database stopped, say)
// after the job was put on the queue, and a commit that reached the
// database before it failed leaves a job that runs. The HTTP API
// answers it as a 503 naming the job; an adapter whose clients retry must
// withdraw the job (WithdrawJob) before it answers "retry".
type UncertainJob struct {
	JobID string
	Err   error
}

func (e *UncertainJob) Error() string {
	return fmt.Sprintf("job %s may have been recorded: %v", e.JobID, e.Err)
}

func (e *UncertainJob) Unwrap() error { return e.Err }

// PresignedURL is a download URL that needs no credentials, and when it
// stops working.
type PresignedURL struct {
	URL       string    `json:"url"`
	ExpiresAt time.Time `json:"expires_at"`
}

// ArtifactURL presigns a download URL for one of the tenant's artifacts
// (rawPath is cleaned first).
func (s *Service) ArtifactURL(ctx context.Context, p Principal, jobID, rawPath string) (PresignedURL, error) {
	job, err := s.Job(ctx, p, jobID)
	if err != nil {
		return PresignedURL{}, err
	}
	path, err := jobs.CleanPath(rawPath)
	if err != nil {
		return PresignedURL{}, BadRequest("path", "%v", err)
	}
	found := false
	for _, a := range job.Artifacts {
		if a.Path == path {
			found = true
			break
		}
	}
	if !found {
		return PresignedURL{}, NotFound("artifact " + strconv.Quote(path) + " of job " + job.ID)
	}
	expires := time.Now().Add(s.cfg.PresignExpiry).UTC().Truncate(time.Second)
	u, err := s.blobs.PresignGet(ctx, blob.ArtifactKey(p.TenantID, job.ID, path), s.cfg.PresignExpiry, lastSegment(path))
	if err != nil {
		return PresignedURL{}, err
	}
	return PresignedURL{URL: u.String(), ExpiresAt: expires}, nil
}

// ReadArtifact reads the first size bytes of one of a job's artifacts (a
// path of its manifest) from the object store into memory, held for the
// request until it ends (Hold: its error when they do not fit).
func (s *Service) ReadArtifact(ctx context.Context, p Principal, job jobs.Job, path string, size int64) ([]byte, error) {
	if _, err := Hold(ctx, size); err != nil {
		return nil, err
	}
	rc, err := s.blobs.Get(ctx, blob.ArtifactKey(p.TenantID, job.ID, path))
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(io.LimitReader(rc, size))
}

// View is a job as the API shows it: its artifacts' URLs filled in and
// its metadata an object even when empty. Webhook events show it too.
func View(j jobs.Job) jobs.Job {
	arts := make([]jobs.Artifact, len(j.Artifacts))
	for i, a := range j.Artifacts {
		a.URL = "/v1/jobs/" + j.ID + "/artifacts/" + escapePath(a.Path)
		arts[i] = a
	}
	j.Artifacts = arts
	if j.Metadata == nil {
		j.Metadata = map[string]string{}
	}
	return j
}

func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

func lastSegment(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}

func sessionNotFound(id string) *Error {
	return &Error{Status: http.StatusNotFound, Code: CodeNotFound, Field: "session_id",
		Message: fmt.Sprintf("session %q not found (it may have expired or been closed)", id)}
}

// sealEnv seals the spec's env values for the job about to be stored
// under jobID. Without a key they stay as they are (see sealPlainEnv).
func sealEnv(box *secret.Box, spec *jobs.Spec, tenantID, jobID string) error {
	if !box.Enabled() {
		return nil
	}
	return spec.SealEnv(box, tenantID, jobID)
}

// requestHash is the hash an idempotency key's request is known by. With
// a key, env values enter it as keyed hashes: a hash over the whole
// request, stored beside a spec that shows all the rest, would let a
// reader of the database try guesses of a short value offline.
func requestHash(box *secret.Box, tenantID string, req jobs.Request) ([]byte, error) {
	if len(req.Env) > 0 && box.Enabled() {
		keyed := make(map[string]string, len(req.Env))
		for k, v := range req.Env {
			h, err := box.Hash([]byte(v), "job-env-hash:"+tenantID)
			if err != nil {
				return nil, err
			}
			keyed[k] = hex.EncodeToString(h)
		}
		req.Env = keyed
	}
	return jobs.RequestHash(req), nil
}

// endSpan ends a span of the service, marking it failed when err is a
// failure of gantry's own (a caller's mistake, a 4xx, is the caller's:
// it is recorded as error.type only).
func endSpan(span trace.Span, err error) {
	if err != nil {
		e, internal := ToError(err)
		span.SetAttributes(attribute.String("error.type", string(e.Code)))
		if internal || e.Status >= 500 {
			span.SetStatus(codes.Error, e.Message)
		}
	}
	span.End()
}
