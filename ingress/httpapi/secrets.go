package httpapi

import (
	"net/http"

	"github.com/gantryhq/gantry/ingress/service"
	"github.com/gantryhq/gantry/jobs"
)

// secretList is GET /v1/secrets's answer.
type secretList struct {
	Secrets []jobs.Secret `json:"secrets"`
}

// maxSecretBody caps PUT /v1/secrets/{name}'s body: the value, as JSON.
const maxSecretBody = 64 << 10

func (s *Server) handlePutSecret(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	var req jobs.SecretRequest
	if err := jobs.DecodeStrict(http.MaxBytesReader(w, r.Body, maxSecretBody), &req); err != nil {
		return err
	}
	sec, created, err := s.svc.PutSecret(r.Context(), p, r.PathValue("name"), req.Value)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", "/v1/secrets/"+sec.Name)
	}
	WriteJSON(w, status, sec)
	return nil
}

func (s *Server) handleGetSecret(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	sec, err := s.svc.Secret(r.Context(), p, r.PathValue("name"))
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, sec)
	return nil
}

func (s *Server) handleListSecrets(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	list, err := s.svc.ListSecrets(r.Context(), p)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, secretList{Secrets: list})
	return nil
}

func (s *Server) handleDeleteSecret(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	if err := s.svc.DeleteSecret(r.Context(), p, r.PathValue("name")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) handlePutSessionNetwork(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	var n jobs.Network
	if err := jobs.DecodeStrict(http.MaxBytesReader(w, r.Body, 64<<10), &n); err != nil {
		return err
	}
	sess, err := s.svc.SetSessionNetwork(r.Context(), p, r.PathValue("id"), &n, nil)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, sess)
	return nil
}
