package ingress

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store"
)

// batchRequest is the body of POST /v1/jobs/batch. Items are decoded one
// by one, so that a bad item fails alone, with its own error.
type batchRequest struct {
	Jobs []json.RawMessage `json:"jobs"`
}

// batchItem is the outcome of one job of a batch: the queued job, or the
// error body it would have had on its own.
type batchItem struct {
	Status int       `json:"status"`
	Job    *jobs.Job `json:"job,omitempty"`
	Error  *APIError `json:"error,omitempty"`
}

// handleBatch queues up to BatchMax jobs, each validated and queued on its
// own, in order, under one batch id.
func (s *Server) handleBatch(w http.ResponseWriter, r *http.Request, p store.Principal) error {
	if r.Header.Get("Idempotency-Key") != "" {
		return badRequest("Idempotency-Key", "is not taken for a batch: give each job its own idempotency_key")
	}
	r.Body = http.MaxBytesReader(nil, r.Body, s.cfg.MaxBodyBytes)
	var in batchRequest
	if err := jobs.DecodeStrict(r.Body, &in); err != nil {
		return err
	}
	switch {
	case len(in.Jobs) == 0:
		return badRequest("jobs", "must hold at least one job")
	case len(in.Jobs) > s.cfg.BatchMax:
		return badRequest("jobs", "has %d jobs; at most %d in one batch", len(in.Jobs), s.cfg.BatchMax)
	}
	batchID := jobs.NewID("bat")
	items := make([]batchItem, len(in.Jobs))
	for i, raw := range in.Jobs {
		req, err := jobs.DecodeRequest(bytes.NewReader(raw))
		var job jobs.Job
		if err == nil {
			job, _, err = s.submitJobIn(r.Context(), p, req, batchID)
		}
		if err != nil {
			e, internal := toAPIError(err)
			if internal {
				s.log.Error("batch item failed", "index", i, "err", err)
			}
			items[i] = batchItem{Status: e.Status, Error: e}
			continue
		}
		v := s.view(job)
		items[i] = batchItem{Status: http.StatusAccepted, Job: &v}
	}
	writeJSON(w, http.StatusOK, batchResponse{BatchID: batchID, Jobs: items})
	return nil
}
