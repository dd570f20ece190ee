package httpapi

import (
	"net/http"

	"github.com/gantryhq/gantry/ingress/service"
	"github.com/gantryhq/gantry/jobs"
)

// The live state of stateful sessions: pause, resume, snapshots, forks
// (service/livestate.go).

func (s *Server) handlePauseSession(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	sess, err := s.svc.Sandboxes().Pause(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, sess)
	return nil
}

func (s *Server) handleResumeSession(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	sess, err := s.svc.Sandboxes().Resume(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, sess)
	return nil
}

func (s *Server) handleSnapshotSession(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	var req jobs.SnapshotRequest
	if err := decodeOptional(w, r, &req); err != nil {
		return err
	}
	snap, err := s.svc.Sandboxes().Snapshot(r.Context(), p, r.PathValue("id"), req)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/snapshots/"+snap.ID)
	WriteJSON(w, http.StatusCreated, snap)
	return nil
}

func (s *Server) handleForkSession(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	var req jobs.ForkRequest
	if err := decodeOptional(w, r, &req); err != nil {
		return err
	}
	fork, err := s.svc.Sandboxes().Fork(r.Context(), p, r.PathValue("id"), req)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusCreated, fork)
	return nil
}

func (s *Server) handleListSnapshots(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	q := r.URL.Query()
	limit, err := pageLimit(q.Get("limit"))
	if err != nil {
		return err
	}
	page, err := s.svc.Snapshots(r.Context(), p, limit, q.Get("cursor"))
	if err != nil {
		return err
	}
	if page.Snapshots == nil {
		page.Snapshots = []jobs.Snapshot{}
	}
	WriteJSON(w, http.StatusOK, snapshotList{Snapshots: page.Snapshots, NextCursor: nilIfEmpty(page.NextCursor)})
	return nil
}

func (s *Server) handleGetSnapshot(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	snap, err := s.svc.Snapshot(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, snap)
	return nil
}

func (s *Server) handleDeleteSnapshot(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	if err := s.svc.DeleteSnapshot(r.Context(), p, r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// decodeOptional decodes a small JSON body strictly; an empty body is the
// zero request.
func decodeOptional(w http.ResponseWriter, r *http.Request, v any) error {
	if r.ContentLength == 0 {
		return nil
	}
	return jobs.DecodeStrict(http.MaxBytesReader(w, r.Body, 64<<10), v)
}
