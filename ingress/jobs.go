package ingress

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gantryhq/gantry/blob"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store"
)

func (s *Server) handleLanguages(w http.ResponseWriter, r *http.Request, _ store.Principal) error {
	writeJSON(w, http.StatusOK, languageList{Languages: jobs.Languages})
	return nil
}

// submit decodes a request body and queues the job.
func (s *Server) submit(r *http.Request, p store.Principal) (jobs.Job, bool, error) {
	r.Body = http.MaxBytesReader(nil, r.Body, s.cfg.MaxBodyBytes)
	req, err := jobs.DecodeRequest(r.Body)
	if err != nil {
		return jobs.Job{}, false, err
	}
	if hk := r.Header.Get("Idempotency-Key"); hk != "" {
		if req.IdempotencyKey != "" && req.IdempotencyKey != hk {
			return jobs.Job{}, false, badRequest("idempotency_key", "differs from the Idempotency-Key header")
		}
		req.IdempotencyKey = hk
	}
	return s.submitJob(r.Context(), p, req)
}

// submitJob validates a request, records the job and queues it. It is the
// one path by which jobs enter gantry, over HTTP and MCP alike.
func (s *Server) submitJob(ctx context.Context, p store.Principal, req jobs.Request) (jobs.Job, bool, error) {
	return s.submitJobIn(ctx, p, req, "")
}

// fitSession fits a session job's memory to the session's workspace,
// which is held in memory and counts against it: a job that does not say
// how much memory it needs gets at least the session's disk_mb; one that
// asks for less is refused.
func (s *Server) fitSession(ctx context.Context, p store.Principal, req jobs.Request, spec *jobs.Spec) error {
	sess, err := s.store.GetSession(ctx, p.TenantID, *req.SessionID)
	if errors.Is(err, store.ErrNotFound) {
		return sessionNotFound(*req.SessionID)
	}
	if err != nil {
		return err
	}
	if spec.Limits.MemoryMB >= sess.DiskMB {
		return nil
	}
	if req.Limits != nil && req.Limits.MemoryMB != 0 {
		return badRequest("limits.memory_mb", "must be at least the session's disk_mb (%d): its workspace is held in memory and counts against the job's memory", sess.DiskMB)
	}
	spec.Limits.MemoryMB = sess.DiskMB
	return nil
}

// submitJobIn is submitJob for a job of a batch ("" for none).
func (s *Server) submitJobIn(ctx context.Context, p store.Principal, req jobs.Request, batchID string) (jobs.Job, bool, error) {
	spec, err := s.cfg.Policy.Normalize(req)
	if err != nil {
		return jobs.Job{}, false, err
	}
	if err := s.checkWebhookURL("webhook_url", req.WebhookURL); err != nil {
		return jobs.Job{}, false, err
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
	hash, err := s.requestHash(p.TenantID, req)
	if err != nil {
		return jobs.Job{}, false, err
	}
	// The id is chosen here: the sealed env is bound to it.
	id := jobs.NewID("job")
	if err := s.sealEnv(&spec, p.TenantID, id); err != nil {
		return jobs.Job{}, false, err
	}
	limits := s.limits(p)
	job, created, err := s.store.EnqueueJob(ctx, store.NewJob{
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
	}, func(ctx context.Context, jobID string) (uint64, error) {
		return s.queue.publish(ctx, jobs.RunMessage{JobID: jobID, TenantID: p.TenantID, SessionID: sessionID}, jobID, limits.MaxRunning)
	})
	if errors.Is(err, store.ErrSessionNotFound) {
		return jobs.Job{}, false, sessionNotFound(sessionID)
	}
	if errors.Is(err, store.ErrTooManyQueued) {
		return jobs.Job{}, false, &APIError{Status: http.StatusTooManyRequests, Code: CodeRateLimited, RetryAfter: 5,
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

// queue puts run messages on the job stream: the HTTP side for
// submissions and session edits, the maintenance for stranded jobs and
// stalled sessions.
type queue struct {
	pub *jobs.Publisher
	// limits reads a tenant's quotas; defaults stand where it set none.
	limits   limitsReader
	defaults jobs.TenantLimits
	log      *slog.Logger
}

// limitsReader reads a tenant's quotas (the store).
type limitsReader interface {
	TenantLimits(ctx context.Context, tenantID string) (jobs.TenantLimits, error)
}

// publish puts the job on its tenant's queue (capped at maxRunning running
// jobs) and waits for JetStream's ack, and returns the message's stream
// sequence. msgID (the job id for a job's first message) lets the stream
// deduplicate a retried publish.
func (q *queue) publish(ctx context.Context, m jobs.RunMessage, msgID string, maxRunning int) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	seq, err := q.pub.Publish(ctx, m, msgID, maxRunning)
	if errors.Is(err, jobs.ErrQueueFull) {
		q.log.Warn("job queue full; submission refused", "job_id", m.JobID, "err", err)
		e := unavailable("the job queue is full; the job was not accepted, retry later")
		e.RetryAfter = 5
		return 0, e
	}
	if err != nil {
		q.log.Error("publish job", "job_id", m.JobID, "err", err)
		return 0, unavailable("the job queue is unavailable; the job was not accepted, retry later")
	}
	return seq, nil
}

// publishFor publishes for a tenant whose quotas are not at hand.
func (q *queue) publishFor(ctx context.Context, m jobs.RunMessage, msgID string) (uint64, error) {
	l, err := q.limits.TenantLimits(ctx, m.TenantID)
	if err != nil {
		return 0, err
	}
	return q.publish(ctx, m, msgID, l.Or(q.defaults).MaxRunning)
}

// kickSession announces that a session has jobs to run.
func (q *queue) kickSession(ctx context.Context, sessionID, tenantID string) {
	m := jobs.RunMessage{JobID: jobs.NewID("job"), TenantID: tenantID, SessionID: sessionID}
	if _, err := q.publishFor(ctx, m, m.JobID); err != nil {
		q.log.Error("announce session jobs", "session_id", sessionID, "err", err)
	}
}

func (s *Server) handleSubmit(w http.ResponseWriter, r *http.Request, p store.Principal) error {
	job, _, err := s.submit(r, p)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/jobs/"+job.ID)
	writeJSON(w, http.StatusAccepted, s.view(job))
	return nil
}

func (s *Server) handleExecute(w http.ResponseWriter, r *http.Request, p store.Principal) error {
	wait, err := parseWait(r, s.cfg.MaxExecuteWait)
	if err != nil {
		return err
	}
	job, _, err := s.submit(r, p)
	if err != nil {
		return err
	}
	if wait == 0 {
		wait = s.cfg.MaxExecuteWait
	}
	job, err = s.waitFor(r.Context(), p.TenantID, job, wait)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/jobs/"+job.ID)
	status := http.StatusOK
	if !job.Status.Terminal() {
		status = http.StatusAccepted
	}
	writeJSON(w, status, s.view(job))
	return nil
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request, p store.Principal) error {
	q, err := strictQuery(r.URL.RawQuery, getParams)
	if err != nil {
		return err
	}
	spec, err := includeSpec(q)
	if err != nil {
		return err
	}
	wait, err := parseWait(r, s.cfg.MaxWait)
	if err != nil {
		return err
	}
	job, err := s.getJob(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	if wait > 0 && !job.Status.Terminal() {
		if job, err = s.waitFor(r.Context(), p.TenantID, job, wait); err != nil {
			return err
		}
	}
	out := []jobs.Job{s.view(job)}
	if spec {
		if err := s.withSpecs(r.Context(), p.TenantID, out); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, out[0])
	return nil
}

// getJob loads the tenant's job; another tenant's job, like a missing one,
// is 404.
func (s *Server) getJob(ctx context.Context, p store.Principal, id string) (jobs.Job, error) {
	if !jobs.ValidID("job", id) {
		return jobs.Job{}, notFound("job " + strconv.Quote(id))
	}
	if job, ok := s.done.get(p.TenantID, id); ok {
		return job, nil
	}
	job, err := s.store.GetJob(ctx, p.TenantID, id)
	if err == store.ErrNotFound {
		return jobs.Job{}, notFound("job " + strconv.Quote(id))
	}
	if err == nil {
		s.done.put(p.TenantID, job)
	}
	return job, err
}

// waitFor waits until the job is finished, the wait ends or the client
// goes away, and returns the job as it then is.
func (s *Server) waitFor(ctx context.Context, tenantID string, job jobs.Job, wait time.Duration) (jobs.Job, error) {
	return s.hub.await(ctx, job, s.jobReader(tenantID, job.ID), jobWait{Until: time.Now().Add(wait)})
}

// jobReader reads the tenant's job afresh from the store, for await.
func (s *Server) jobReader(tenantID, id string) func(context.Context) (jobs.Job, error) {
	return func(ctx context.Context) (jobs.Job, error) { return s.store.GetJob(ctx, tenantID, id) }
}

func parseWait(r *http.Request, max time.Duration) (time.Duration, error) {
	v := r.URL.Query().Get("wait")
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		secs, err2 := strconv.ParseFloat(v, 64)
		if err2 != nil {
			return 0, badRequest("wait", "must be a duration such as 30s or 500ms, not %q", v)
		}
		d = time.Duration(secs * float64(time.Second))
	}
	if d < 0 || d > max {
		return 0, badRequest("wait", "must be between 0s and %s", max)
	}
	return d, nil
}

// pageParams reads ?limit= (1-100, default 20) and ?cursor= (a cursor this
// API returned: the last id of a page of objects with this id prefix).
func pageParams(q url.Values, idPrefix string) (limit int, before string, err error) {
	limit = 20
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return 0, "", badRequest("limit", "limit must be a number between 1 and 100")
		}
		limit = n
	}
	if v := q.Get("cursor"); v != "" {
		raw, err := base64.RawURLEncoding.DecodeString(v)
		if err != nil || !jobs.ValidID(idPrefix, string(raw)) {
			return 0, "", badRequest("cursor", "cursor is not one this API returned")
		}
		before = string(raw)
	}
	return limit, before, nil
}

func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request, p store.Principal) error {
	job, err := s.cancelJob(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.view(job))
	return nil
}

// cancelJob cancels the tenant's job: a queued one at once, a running one by
// telling its runner, waiting briefly so that the answer usually shows the
// final state. It is idempotent.
func (s *Server) cancelJob(ctx context.Context, p store.Principal, id string) (jobs.Job, error) {
	job, err := s.getJob(ctx, p, id)
	if err != nil {
		return jobs.Job{}, err
	}
	outcome, err := s.store.CancelJob(ctx, p.TenantID, job.ID, s.cfg.Queue.AckWait)
	if err != nil {
		return jobs.Job{}, err
	}
	switch outcome {
	case store.CancelledQueued, store.CancelledOrphan:
		data, _ := json.Marshal(jobs.StatusEvent{JobID: job.ID, Status: jobs.StatusCancelled})
		_ = s.nc.Publish(jobs.StatusSubject(job.ID), data)
		if outcome == store.CancelledOrphan {
			// In case its runner is alive after all: it must stop.
			_ = s.nc.Publish(jobs.CancelSubject(job.ID), nil)
		}
	case store.CancelRequested:
		_ = s.nc.Publish(jobs.CancelSubject(job.ID), nil)
		return s.waitFor(ctx, p.TenantID, job, 5*time.Second)
	}
	return s.store.GetJob(ctx, p.TenantID, job.ID)
}

func (s *Server) handleArtifacts(w http.ResponseWriter, r *http.Request, p store.Principal) error {
	job, err := s.getJob(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, artifactManifest{JobID: job.ID, Status: job.Status, Artifacts: s.view(job).Artifacts})
	return nil
}

func (s *Server) handleArtifact(w http.ResponseWriter, r *http.Request, p store.Principal) error {
	u, expires, err := s.artifactURL(r.Context(), p, r.PathValue("id"), r.PathValue("path"))
	if err != nil {
		return err
	}
	if r.URL.Query().Get("redirect") == "false" {
		writeJSON(w, http.StatusOK, presignedURL{URL: u, ExpiresAt: expires})
		return nil
	}
	http.Redirect(w, r, u, http.StatusFound)
	return nil
}

// artifactURL presigns a download URL for one of the tenant's artifacts.
func (s *Server) artifactURL(ctx context.Context, p store.Principal, jobID, rawPath string) (string, time.Time, error) {
	job, err := s.getJob(ctx, p, jobID)
	if err != nil {
		return "", time.Time{}, err
	}
	path, err := jobs.CleanPath(rawPath)
	if err != nil {
		return "", time.Time{}, badRequest("path", "%v", err)
	}
	found := false
	for _, a := range job.Artifacts {
		if a.Path == path {
			found = true
			break
		}
	}
	if !found {
		return "", time.Time{}, notFound("artifact " + strconv.Quote(path) + " of job " + job.ID)
	}
	expires := time.Now().Add(s.cfg.PresignExpiry).UTC().Truncate(time.Second)
	u, err := s.blobs.PresignGet(ctx, blob.ArtifactKey(p.TenantID, job.ID, path), s.cfg.PresignExpiry, lastSegment(path))
	if err != nil {
		return "", time.Time{}, err
	}
	return u.String(), expires, nil
}

// view prepares a job for a response: artifact URLs filled in.
func (s *Server) view(j jobs.Job) jobs.Job {
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

func sessionNotFound(id string) *APIError {
	return &APIError{Status: http.StatusNotFound, Code: CodeNotFound, Field: "session_id",
		Message: fmt.Sprintf("session %q not found (it may have expired or been closed)", id)}
}
