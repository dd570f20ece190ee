package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gantryhq/gantry/blob"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
	"github.com/gantryhq/gantry/store"
)

// Session returns the tenant's session; another tenant's, a closed or an
// expired one is not found.
func (s *Service) Session(ctx context.Context, p Principal, id string) (jobs.Session, error) {
	if !jobs.ValidID("ses", id) {
		return jobs.Session{}, NotFound("session " + strconv.Quote(id))
	}
	sess, err := s.store.GetSession(ctx, p.TenantID, id)
	if errors.Is(err, store.ErrNotFound) {
		return sess, NotFound("session " + strconv.Quote(id) + " (it may have expired or been closed)")
	}
	return sess, err
}

// CreateSession starts a session for the tenant.
func (s *Service) CreateSession(ctx context.Context, p Principal, req jobs.SessionRequest) (jobs.Session, error) {
	if req.Durable == nil && s.cfg.Durable && (req.Stateful || req.Snapshot != "") {
		req.Durable = new(true)
	}
	req, err := s.cfg.Policy.NormalizeSession(req)
	if err != nil {
		return jobs.Session{}, err
	}
	// The workspace is held in memory: its jobs need at least disk_mb of
	// it, which no job could have past the operator's maximum.
	if maxMB := s.cfg.Policy.MaxLimits.MemoryMB; req.DiskMB > maxMB {
		return jobs.Session{}, BadRequest("disk_mb", "must be at most %d, the most memory a job may have (GANTRY_MAX_MEMORY_MB): the workspace is held in memory and counts against its jobs' memory", maxMB)
	}
	if err := s.checkEnvironment(ctx, p, req.Environment); err != nil {
		return jobs.Session{}, err
	}
	if err := s.checkNetwork(ctx, p, "network", req.Network, "", req.Secrets); err != nil {
		return jobs.Session{}, err
	}
	if len(req.Env) > 0 {
		if !s.cfg.Box.Enabled() {
			return jobs.Session{}, BadRequest("env", "a session's env is sealed at rest, which needs GANTRY_SECRET_KEY: this server was started without it")
		}
		plain, _ := json.Marshal(req.Env)
		if req.SealedEnv, err = s.cfg.Box.Seal(plain, sessionEnvContext(p.TenantID)); err != nil {
			return jobs.Session{}, err
		}
	}
	req.MaxLive = s.Limits(p).MaxLiveSessions
	if req.Snapshot != "" {
		if req, err = s.fromSnapshot(ctx, p, req); err != nil {
			return jobs.Session{}, err
		}
	}
	sess, err := s.store.CreateSession(ctx, p.TenantID, req)
	if err != nil && req.Workspace != nil {
		_ = s.blobs.Delete(context.WithoutCancel(ctx), req.Workspace.Key) // the copy no session took
	}
	if errors.Is(err, store.ErrTooManyLive) {
		return sess, &Error{Status: http.StatusTooManyRequests, Code: CodeRateLimited, RetryAfter: 5,
			Message: fmt.Sprintf("%v (%d): close one (DELETE /v1/sessions/{id}) or let one expire", err, req.MaxLive)}
	}
	if err == nil && len(req.Secrets) > 0 {
		if err := s.putSessionSecrets(ctx, p, sess.ID, req.Secrets); err != nil {
			_, _ = s.store.CloseSession(ctx, p.TenantID, sess.ID)
			return jobs.Session{}, err
		}
	}
	return sess, err
}

func sessionEnvContext(tenantID string) string { return "session-env:" + tenantID }

// sessionEnv opens a session's env (nil: it has none).
func (s *Service) sessionEnv(tenantID string, sess jobs.Session) (map[string]string, error) {
	if len(sess.SealedEnv) == 0 {
		return nil, nil
	}
	plain, err := s.cfg.Box.Open(sess.SealedEnv, sessionEnvContext(tenantID))
	if err != nil {
		return nil, fmt.Errorf("open session %s's env: %w", sess.ID, err)
	}
	var env map[string]string
	if err := json.Unmarshal(plain, &env); err != nil {
		return nil, fmt.Errorf("decode session %s's env: %w", sess.ID, err)
	}
	return env, nil
}

// SetSessionTTL changes the tenant's session's idle timeout to ttlSeconds
// (within the session bounds) and makes it expire that long from now.
func (s *Service) SetSessionTTL(ctx context.Context, p Principal, id string, ttlSeconds int) (jobs.Session, error) {
	if ttlSeconds < jobs.MinSessionTTL || ttlSeconds > jobs.MaxSessionTTL {
		return jobs.Session{}, BadRequest("ttl_seconds", "must be between %d and %d", jobs.MinSessionTTL, jobs.MaxSessionTTL)
	}
	if !jobs.ValidID("ses", id) {
		return jobs.Session{}, NotFound("session " + strconv.Quote(id))
	}
	sess, err := s.store.SetSessionTTL(ctx, p.TenantID, id, ttlSeconds)
	if errors.Is(err, store.ErrNotFound) {
		return sess, NotFound("session " + strconv.Quote(id) + " (it may have expired or been closed)")
	}
	if err == nil && sess.Live != "" {
		// The runner keeps the live sandbox's container until the session
		// would expire, as it was when the container was parked: it is told
		// (best effort: a runner that is gone has nothing to keep).
		keep, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := s.sandboxes.keepFor(keep, sess, ttlSeconds); err != nil && !errors.Is(err, nats.ErrNoResponders) {
			s.log.Warn("keep a live sandbox for its session's new timeout", "session_id", sess.ID, "err", err)
		}
	}
	return sess, err
}

// SessionPage is a page of the tenant's sessions, newest first.
type SessionPage struct {
	Sessions []jobs.Session
	// NextCursor continues the listing ("": this was the last page).
	NextCursor string
}

// ListSessions lists the tenant's open sessions, limit (1-100; 0: 20) at a
// time, after the page cursor names.
func (s *Service) ListSessions(ctx context.Context, p Principal, limit int, cursor string) (SessionPage, error) {
	limit, before, err := page(limit, cursor, "ses")
	if err != nil {
		return SessionPage{}, err
	}
	list, next, err := s.store.ListSessions(ctx, p.TenantID, limit, before)
	if err != nil {
		return SessionPage{}, err
	}
	return SessionPage{Sessions: list, NextCursor: Cursor(next)}, nil
}

// CloseSession closes the tenant's session: its queued jobs are cancelled,
// its running one stopped, and what it held is reclaimed.
func (s *Service) CloseSession(ctx context.Context, p Principal, id string) error {
	if !jobs.ValidID("ses", id) {
		return NotFound("session " + strconv.Quote(id))
	}
	ref, err := s.store.CloseSession(ctx, p.TenantID, id)
	if errors.Is(err, store.ErrNotFound) {
		return NotFound("session " + strconv.Quote(id))
	}
	if err != nil {
		return err
	}
	s.sandboxes.ports.routes.Remove(id) // before any runner lets it go
	s.closer.reclaim(context.WithoutCancel(ctx), ref)
	return nil
}

// closer finishes closing sessions: the service after a close, the
// maintenance for expired sessions and closings left half done.
type closer struct {
	log   *slog.Logger
	nc    *nats.Conn
	blobs SessionObjects
	store interface {
		FinishClosing(ctx context.Context, id string) (bool, error)
	}
}

// reclaim finishes closing a session: stops its running job and any warm
// container, deletes its objects and, once no runner holds it, its row.
// What fails here is retried by the maintenance's sweep.
func (c *closer) reclaim(ctx context.Context, ref store.SessionRef) {
	log := c.log.With("session_id", ref.ID)
	for _, jobID := range ref.RunningJobs {
		_ = c.nc.Publish(queue.CancelSubject(jobID), nil)
	}
	_ = c.nc.Publish(queue.SessionClosedSubject(ref.ID), nil)
	if _, err := c.blobs.DeletePrefix(ctx, blob.SessionPrefix(ref.TenantID, ref.ID)); err != nil {
		log.Warn("delete session objects; the sweeper will retry", "err", err)
		return
	}
	done, err := c.store.FinishClosing(ctx, ref.ID)
	if err != nil {
		log.Warn("delete session row; the sweeper will retry", "err", err)
		return
	}
	if !done {
		log.Info("session still held by a runner; the sweeper will finish closing it")
	}
}
