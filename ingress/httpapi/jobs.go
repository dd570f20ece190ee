package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gantryhq/gantry/ingress/service"
	"github.com/gantryhq/gantry/jobs"
)

func (s *Server) handleLanguages(w http.ResponseWriter, r *http.Request, _ service.Principal) error {
	WriteJSON(w, http.StatusOK, languageList{Languages: s.svc.Policy().Offered()})
	return nil
}

func (s *Server) handleEnvironments(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	envs, err := s.svc.Environments(r.Context(), p)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, environmentList{Environments: envs})
	return nil
}

// submit decodes a request body and queues the job.
func (s *Server) submit(r *http.Request, p service.Principal) (jobs.Job, error) {
	r.Body = http.MaxBytesReader(nil, r.Body, s.cfg.MaxBodyBytes)
	req, err := jobs.DecodeRequest(r.Body)
	if err != nil {
		return jobs.Job{}, err
	}
	if hk := r.Header.Get("Idempotency-Key"); hk != "" {
		if req.IdempotencyKey != "" && req.IdempotencyKey != hk {
			return jobs.Job{}, service.BadRequest("idempotency_key", "differs from the Idempotency-Key header")
		}
		req.IdempotencyKey = hk
	}
	job, _, err := s.svc.SubmitJob(r.Context(), p, req)
	return job, err
}

func (s *Server) handleSubmit(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	job, err := s.submit(r, p)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/jobs/"+job.ID)
	WriteJSON(w, http.StatusAccepted, service.View(job))
	return nil
}

func (s *Server) handleExecute(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	wait, err := parseWait(r, s.svc.MaxWait())
	if err != nil {
		return err
	}
	job, err := s.submit(r, p)
	if err != nil {
		return err
	}
	if wait == 0 {
		wait = s.svc.MaxWait()
	}
	job, err = s.svc.WaitJob(r.Context(), p, job, service.Watch{Until: time.Now().Add(wait)})
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/jobs/"+job.ID)
	status := http.StatusOK
	if !job.Status.Terminal() {
		status = http.StatusAccepted
	}
	WriteJSON(w, status, service.View(job))
	return nil
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request, p service.Principal) error {
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
	job, err := s.svc.Job(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	if wait > 0 && !job.Status.Terminal() {
		if job, err = s.svc.WaitJob(r.Context(), p, job, service.Watch{Until: time.Now().Add(wait)}); err != nil {
			return err
		}
	}
	out := []jobs.Job{service.View(job)}
	if spec {
		if err := s.svc.WithSpecs(r.Context(), p, out); err != nil {
			return err
		}
	}
	WriteJSON(w, http.StatusOK, out[0])
	return nil
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
			return 0, service.BadRequest("wait", "must be a duration such as 30s or 500ms, not %q", v)
		}
		d = time.Duration(secs * float64(time.Second))
	}
	if d < 0 || d > max {
		return 0, service.BadRequest("wait", "must be between 0s and %s", max)
	}
	return d, nil
}

// pageLimit reads ?limit= ("": the default).
func pageLimit(v string) (int, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 100 {
		return 0, service.BadRequest("limit", "limit must be a number between 1 and 100")
	}
	return n, nil
}

func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	job, err := s.svc.CancelJob(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, service.View(job))
	return nil
}

func (s *Server) handleArtifacts(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	job, err := s.svc.Job(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, artifactManifest{JobID: job.ID, Status: job.Status, Artifacts: service.View(job).Artifacts})
	return nil
}

func (s *Server) handleArtifact(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	u, err := s.svc.ArtifactURL(r.Context(), p, r.PathValue("id"), r.PathValue("path"))
	if err != nil {
		return err
	}
	if r.URL.Query().Get("redirect") == "false" {
		WriteJSON(w, http.StatusOK, u)
		return nil
	}
	http.Redirect(w, r, u.URL, http.StatusFound)
	return nil
}
