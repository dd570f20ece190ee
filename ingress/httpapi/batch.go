package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/gantryhq/gantry/ingress/service"
	"github.com/gantryhq/gantry/jobs"
)

// batchRequest is the body of POST /v1/jobs/batch. Items are decoded one
// by one, so that a bad item fails alone, with its own error.
type batchRequest struct {
	Jobs []json.RawMessage `json:"jobs"`
}

// batchItem is the outcome of one job of a batch: the queued job, or the
// error body it would have had on its own.
type batchItem struct {
	Status int            `json:"status"`
	Job    *jobs.Job      `json:"job,omitempty"`
	Error  *service.Error `json:"error,omitempty"`
}

// handleBatch queues the batch's jobs, each decoded, validated and queued
// on its own, in order, under one batch id.
func (s *Server) handleBatch(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	if r.Header.Get("Idempotency-Key") != "" {
		return service.BadRequest("Idempotency-Key", "is not taken for a batch: give each job its own idempotency_key")
	}
	r.Body = http.MaxBytesReader(nil, r.Body, s.cfg.MaxBodyBytes)
	var in batchRequest
	if err := jobs.DecodeStrict(r.Body, &in); err != nil {
		return err
	}
	items := make([]service.BatchItem, len(in.Jobs))
	for i, raw := range in.Jobs {
		items[i].Request, items[i].Err = jobs.DecodeRequest(bytes.NewReader(raw))
	}
	batchID, done, err := s.svc.SubmitBatch(r.Context(), p, items)
	if err != nil {
		return err
	}
	out := make([]batchItem, len(done))
	for i, d := range done {
		if d.Err != nil {
			out[i] = batchItem{Status: d.Err.Status, Error: d.Err}
			continue
		}
		out[i] = batchItem{Status: http.StatusAccepted, Job: &d.Job}
	}
	WriteJSON(w, http.StatusOK, batchResponse{BatchID: batchID, Jobs: out})
	return nil
}
