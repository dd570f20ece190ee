package ingress

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/nats-io/nats.go"

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
	// The workspace is held in memory: its jobs need at least disk_mb of
	// it, which no job could have past the operator's maximum.
	if maxMB := s.cfg.Policy.MaxLimits.MemoryMB; req.DiskMB > maxMB {
		return jobs.Session{}, badRequest("disk_mb", "must be at most %d, the most memory a job may have (GANTRY_MAX_MEMORY_MB): the workspace is held in memory and counts against its jobs' memory", maxMB)
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
	s.closer.reclaim(context.WithoutCancel(ctx), ref)
	return nil
}

// closer finishes closing sessions: the HTTP side after a DELETE, the
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
		_ = c.nc.Publish(jobs.CancelSubject(jobID), nil)
	}
	_ = c.nc.Publish(jobs.SessionClosedSubject(ref.ID), nil)
	if _, err := c.blobs.DeletePrefix(ctx, jobs.SessionPrefix(ref.TenantID, ref.ID)); err != nil {
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
