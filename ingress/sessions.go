package ingress

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store"
)

func (s *Server) getSession(ctx context.Context, p store.Principal, id string) (jobs.Session, error) {
	if !jobs.ValidID("ses", id) {
		return jobs.Session{}, notFound("session " + strconv.Quote(id))
	}
	sess, err := s.store.GetSession(ctx, p.TenantID, id)
	if errors.Is(err, store.ErrNotFound) {
		return sess, notFound("session " + strconv.Quote(id) + " (it may have expired or been closed)")
	}
	return sess, err
}

func (s *Server) createSession(ctx context.Context, p store.Principal, req jobs.SessionRequest) (jobs.Session, error) {
	req, err := req.Normalize()
	if err != nil {
		return jobs.Session{}, err
	}
	if maxMB := s.cfg.Policy.MaxLimits.DiskMB; req.DiskMB > maxMB {
		return jobs.Session{}, badRequest("disk_mb", "must be between 1 and %d", maxMB)
	}
	return s.store.CreateSession(ctx, p.TenantID, req)
}

func (s *Server) handleCreateSession(w http.ResponseWriter, r *http.Request, p store.Principal) error {
	var req jobs.SessionRequest
	if err := jobs.DecodeStrict(http.MaxBytesReader(w, r.Body, 64<<10), &req); err != nil {
		return err
	}
	sess, err := s.createSession(r.Context(), p, req)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/sessions/"+sess.ID)
	writeJSON(w, http.StatusCreated, sess)
	return nil
}

func (s *Server) handleGetSession(w http.ResponseWriter, r *http.Request, p store.Principal) error {
	sess, err := s.getSession(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sess)
	return nil
}

func (s *Server) handleListSessions(w http.ResponseWriter, r *http.Request, p store.Principal) error {
	limit, before, err := pageParams(r.URL.Query(), "ses")
	if err != nil {
		return err
	}
	list, next, err := s.store.ListSessions(r.Context(), p.TenantID, limit, before)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sessionList{Sessions: list, NextCursor: nextCursor(next)})
	return nil
}

func (s *Server) handleDeleteSession(w http.ResponseWriter, r *http.Request, p store.Principal) error {
	if err := s.closeSession(r.Context(), p, r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// closeSession closes the tenant's session and reclaims what it held.
func (s *Server) closeSession(ctx context.Context, p store.Principal, id string) error {
	if !jobs.ValidID("ses", id) {
		return notFound("session " + strconv.Quote(id))
	}
	ref, err := s.store.CloseSession(ctx, p.TenantID, id)
	if errors.Is(err, store.ErrNotFound) {
		return notFound("session " + strconv.Quote(id))
	}
	if err != nil {
		return err
	}
	s.reclaim(context.WithoutCancel(ctx), ref)
	return nil
}

// reclaim finishes closing a session: stops its running job and any warm
// container, deletes its objects and, once no runner holds it, its row.
// What fails here is retried by the sweeper.
func (s *Server) reclaim(ctx context.Context, ref store.SessionRef) {
	log := s.log.With("session_id", ref.ID)
	for _, jobID := range ref.RunningJobs {
		_ = s.nc.Publish(jobs.CancelSubject(jobID), nil)
	}
	_ = s.nc.Publish(jobs.SessionClosedSubject(ref.ID), nil)
	if _, err := s.blobs.DeletePrefix(ctx, jobs.SessionPrefix(ref.TenantID, ref.ID)); err != nil {
		log.Warn("delete session objects; the sweeper will retry", "err", err)
		return
	}
	done, err := s.store.FinishClosing(ctx, ref.ID)
	if err != nil {
		log.Warn("delete session row; the sweeper will retry", "err", err)
		return
	}
	if !done {
		log.Info("session still held by a runner; the sweeper will finish closing it")
	}
}

func (s *Server) handleListFiles(w http.ResponseWriter, r *http.Request, p store.Principal) error {
	files, err := s.listFiles(r.Context(), p, r.PathValue("id"), r.URL.Query().Get("path"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, fileList{Files: files})
	return nil
}

func (s *Server) handleGetFile(w http.ResponseWriter, r *http.Request, p store.Principal) error {
	return s.readFile(r.Context(), p, r.PathValue("id"), r.PathValue("path"), func(fi FileInfo, content io.Reader) error {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.FormatInt(fi.Size, 10))
		w.Header().Set("Last-Modified", fi.ModifiedAt.Format(http.TimeFormat))
		w.WriteHeader(http.StatusOK)
		_, err := io.Copy(w, content)
		if err != nil {
			panic(http.ErrAbortHandler) // headers are out: abort the response
		}
		return nil
	})
}

// maxFileBytes caps one file written through the API.
const maxFileBytes = 32 << 20

func (s *Server) handlePutFile(w http.ResponseWriter, r *http.Request, p store.Principal) error {
	limit := min(s.cfg.MaxBodyBytes, maxFileBytes)
	content, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		return err
	}
	fi, err := s.writeFile(r.Context(), p, r.PathValue("id"), r.PathValue("path"), content)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, fi)
	return nil
}

func (s *Server) handleDeleteFile(w http.ResponseWriter, r *http.Request, p store.Principal) error {
	if err := s.deleteFile(r.Context(), p, r.PathValue("id"), r.PathValue("path")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// sweep closes expired sessions, finishes closings that were interrupted,
// and, when settled, re-announces sessions whose jobs nobody is running.
// It is safe to run on every replica at once.
func (s *Server) sweep(ctx context.Context, settled bool) {
	expired, err := s.store.ExpireSessions(ctx, 100)
	if err != nil {
		s.log.Warn("expire sessions", "err", err)
	}
	for _, ref := range expired {
		s.log.Info("session expired", "session_id", ref.ID)
		s.reclaim(ctx, ref)
	}
	if stuck, err := s.store.ClosingSessions(ctx, 10*time.Second, 100); err == nil {
		for _, ref := range stuck {
			s.reclaim(ctx, ref)
		}
	}
	if !settled {
		return
	}
	if stalled, err := s.store.StalledSessions(ctx, 100); err == nil {
		for _, ref := range stalled {
			s.kickSession(ctx, ref.ID, ref.TenantID)
		}
	}
}

// sweepHistory deletes finished jobs past the history's TTL, in batches,
// with their objects.
func (s *Server) sweepHistory(ctx context.Context) {
	if s.cfg.History == nil {
		return
	}
	n, err := s.cfg.History.Sweep(ctx)
	if n > 0 {
		s.metrics.historyDeleted.Add(float64(n))
		s.log.Info("deleted expired job history", "jobs", n, "ttl", s.cfg.History.TTL())
	}
	if err != nil && ctx.Err() == nil {
		s.log.Warn("sweep job history; the next sweep retries", "err", err)
	}
}

// runSweeper runs the maintenance passes every interval. After Postgres
// was unreachable, the passes that act on missing signs of life
// (re-announcing stalled sessions, reconciling jobs) wait one ack wait:
// every lease and heartbeat lapsed during the outage, and live runners
// need a moment to renew theirs.
func (s *Server) runSweeper(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
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
		err := s.store.Ping(pctx)
		cancel()
		if err != nil {
			down = true
			continue
		}
		if down {
			down, back = false, time.Now()
			s.log.Info("database back; maintenance resumes", "settling", s.cfg.Queue.AckWait)
		}
		settled := back.IsZero() || time.Since(back) >= s.cfg.Queue.AckWait
		s.sweep(ctx, settled)
		if settled {
			s.reconcile(ctx)
		}
		s.sweepCodeMode(ctx)
		s.sweepHistory(ctx)
	}
}
