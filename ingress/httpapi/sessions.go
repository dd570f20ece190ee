package httpapi

import (
	"io"
	"net/http"
	"strconv"

	"github.com/gantryhq/gantry/ingress/service"
	"github.com/gantryhq/gantry/jobs"
)

func (s *Server) handleCreateSession(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	var req jobs.SessionRequest
	if err := jobs.DecodeStrict(http.MaxBytesReader(w, r.Body, 64<<10), &req); err != nil {
		return err
	}
	sess, err := s.svc.CreateSession(r.Context(), p, req)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/sessions/"+sess.ID)
	WriteJSON(w, http.StatusCreated, sess)
	return nil
}

func (s *Server) handleGetSession(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	sess, err := s.svc.Session(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, sess)
	return nil
}

func (s *Server) handleListSessions(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	q := r.URL.Query()
	limit, err := pageLimit(q.Get("limit"))
	if err != nil {
		return err
	}
	page, err := s.svc.ListSessions(r.Context(), p, limit, q.Get("cursor"))
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, sessionList{Sessions: page.Sessions, NextCursor: nilIfEmpty(page.NextCursor)})
	return nil
}

func (s *Server) handleDeleteSession(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	if err := s.svc.CloseSession(r.Context(), p, r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) handleListFiles(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	files, err := s.svc.ListFiles(r.Context(), p, r.PathValue("id"), r.URL.Query().Get("path"))
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, FileList{Files: files})
	return nil
}

func (s *Server) handleGetFile(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	return s.svc.ReadFile(r.Context(), p, r.PathValue("id"), r.PathValue("path"), func(fi service.FileInfo, content io.Reader) error {
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

func (s *Server) handlePutFile(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	limit := min(s.cfg.MaxBodyBytes, maxFileBytes)
	content, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		return err
	}
	fi, err := s.svc.WriteFile(r.Context(), p, r.PathValue("id"), r.PathValue("path"), content)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, fi)
	return nil
}

func (s *Server) handleDeleteFile(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	if err := s.svc.DeleteFile(r.Context(), p, r.PathValue("id"), r.PathValue("path")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
