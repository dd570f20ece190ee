package console

import (
	"encoding/base64"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/localapi"
)

// Jobs: history with the API's filters, a job's page with its live output,
// and the run form.

var statuses = []string{"queued", "running", "succeeded", "failed", "timed_out", "cancelled", "error"}

type jobList struct {
	Jobs                       []jobs.Job
	Status, SessionID, BatchID string
	Statuses                   []string
	Next                       string // the next page's URL
	Self                       string
	Live                       bool // some job on the page is not finished
}

func (c *Console) handleJobs(w http.ResponseWriter, r *http.Request, s *session) error {
	in := r.URL.Query()
	q := url.Values{}
	for _, k := range []string{"status", "session_id", "batch_id", "cursor"} {
		if v := strings.TrimSpace(in.Get(k)); v != "" {
			q.Set(k, v)
		}
	}
	q.Set("limit", "50")
	var page struct {
		Jobs       []jobs.Job `json:"jobs"`
		NextCursor *string    `json:"next_cursor"`
	}
	d := jobList{Status: q.Get("status"), SessionID: q.Get("session_id"), BatchID: q.Get("batch_id"), Statuses: statuses}
	err := s.api.JSON(r.Context(), http.MethodGet, "/v1/jobs?"+q.Encode(), nil, &page)
	if err != nil && (!isAPIError(err) || localapi.AsError(err).Status == http.StatusUnauthorized) {
		return err
	}
	d.Jobs = page.Jobs
	self := url.Values{}
	for k, v := range q {
		if k != "limit" {
			self[k] = v
		}
	}
	d.Self = Prefix + "jobs?" + self.Encode()
	if page.NextCursor != nil {
		self.Set("cursor", *page.NextCursor)
		d.Next = Prefix + "jobs?" + self.Encode()
	}
	for _, j := range d.Jobs {
		if !j.Status.Terminal() {
			d.Live = true
		}
	}
	status := http.StatusOK
	var apiErr *localapi.Error
	if err != nil { // a bad filter: show the form with the API's message
		apiErr = localapi.AsError(err)
		status = apiErr.Status
	}
	c.render(w, r, s, status, "jobs", "Jobs", "jobs", d, apiErr)
	return nil
}

// handleJob shows a job with what it ran (include=spec: its code or
// command, its input files' names and sizes, its env names).
func (c *Console) handleJob(w http.ResponseWriter, r *http.Request, s *session) error {
	var j jobs.Job
	if err := s.api.JSON(r.Context(), http.MethodGet, "/v1/jobs/"+url.PathEscape(r.PathValue("id"))+"?include=spec", nil, &j); err != nil {
		return err
	}
	c.render(w, r, s, http.StatusOK, "job", "Job "+j.ID, "jobs", j, nil)
	return nil
}

// handleJobLogs relays the job's live output (server-sent events) from the
// API to the page's EventSource.
func (c *Console) handleJobLogs(w http.ResponseWriter, r *http.Request, s *session) error {
	req, err := s.api.Request(r.Context(), http.MethodGet, "/v1/jobs/"+url.PathEscape(r.PathValue("id"))+"/logs", nil, "")
	if err != nil {
		return err
	}
	c.relay(w, r, s, req, nil)
	return nil
}

// handleArtifact relays the API's answer: a redirect to the presigned
// download URL.
func (c *Console) handleArtifact(w http.ResponseWriter, r *http.Request, s *session) error {
	req, err := s.api.Request(r.Context(), http.MethodGet,
		"/v1/jobs/"+url.PathEscape(r.PathValue("id"))+"/artifacts/"+localapi.PathEscape(r.PathValue("path")), nil, "")
	if err != nil {
		return err
	}
	c.relay(w, r, s, req, nil)
	return nil
}

func (c *Console) handleCancel(w http.ResponseWriter, r *http.Request, s *session) error {
	id := r.PathValue("id")
	if err := s.api.JSON(r.Context(), http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/cancel", nil, nil); err != nil {
		return err
	}
	http.Redirect(w, r, Prefix+"jobs/"+url.PathEscape(id), http.StatusSeeOther)
	return nil
}

// runForm is the run page's form, kept when it is shown again with an error.
type runForm struct {
	Languages []jobs.Language
	Sessions  []jobs.Session
	Language  string
	Code      string
	Timeout   string
	SessionID string
}

func (c *Console) runForm(r *http.Request, s *session, f runForm) (runForm, error) {
	var langs struct {
		Languages []jobs.Language `json:"languages"`
	}
	if err := s.api.JSON(r.Context(), http.MethodGet, "/v1/languages", nil, &langs); err != nil {
		return f, err
	}
	var sess struct {
		Sessions []jobs.Session `json:"sessions"`
	}
	if err := s.api.JSON(r.Context(), http.MethodGet, "/v1/sessions?limit=100", nil, &sess); err != nil {
		return f, err
	}
	f.Languages, f.Sessions = langs.Languages, sess.Sessions
	if f.Language == "" {
		f.Language = "python"
	}
	if f.Timeout == "" {
		f.Timeout = "30"
	}
	return f, nil
}

func (c *Console) handleRunPage(w http.ResponseWriter, r *http.Request, s *session) error {
	f, err := c.runForm(r, s, runForm{Language: r.URL.Query().Get("language"), SessionID: r.URL.Query().Get("session_id")})
	if err != nil {
		return err
	}
	c.render(w, r, s, http.StatusOK, "run", "Run", "run", f, nil)
	return nil
}

// handleRun submits the form as a job (attached files go in its files,
// base64 when they are not text) and shows the job.
func (c *Console) handleRun(w http.ResponseWriter, r *http.Request, s *session) error {
	if err := r.ParseMultipartForm(8 << 20); err != nil {
		return badForm("files", "the form could not be read: %v", err)
	}
	f := runForm{Language: r.FormValue("language"), Code: r.FormValue("code"), Timeout: strings.TrimSpace(r.FormValue("timeout")), SessionID: r.FormValue("session_id")}
	again := func(err error) error {
		if !isAPIError(err) {
			return err
		}
		e := localapi.AsError(err)
		if e.Status == http.StatusUnauthorized {
			return err
		}
		form, ferr := c.runForm(r, s, f)
		if ferr != nil {
			return ferr
		}
		c.render(w, r, s, e.Status, "run", "Run", "run", form, e)
		return nil
	}
	req := map[string]any{"language": f.Language, "code": f.Code, "metadata": map[string]string{"source": "console"}}
	if f.Timeout != "" {
		secs, err := strconv.ParseFloat(f.Timeout, 64)
		if err != nil || !(secs > 0) || secs > 24*3600 { // NaN and Inf too
			return again(badForm("timeout", "timeout must be a number of seconds, such as 30"))
		}
		req["timeout_ms"] = int(secs * 1000)
	}
	if f.SessionID != "" {
		req["session_id"] = f.SessionID
	}
	var specs []map[string]string
	if r.MultipartForm != nil {
		for _, fh := range r.MultipartForm.File["files"] {
			if fh.Filename == "" {
				continue
			}
			fr, err := fh.Open()
			if err != nil {
				return err
			}
			b, err := io.ReadAll(fr)
			fr.Close()
			if err != nil {
				return err
			}
			spec := map[string]string{"path": fh.Filename, "content": string(b)}
			if !utf8.Valid(b) || strings.ContainsRune(string(b), 0) {
				spec["content"], spec["encoding"] = base64.StdEncoding.EncodeToString(b), "base64"
			}
			specs = append(specs, spec)
		}
	}
	if len(specs) > 0 {
		req["files"] = specs
	}
	var j jobs.Job
	if err := s.api.JSON(r.Context(), http.MethodPost, "/v1/jobs", req, &j); err != nil {
		return again(err)
	}
	http.Redirect(w, r, Prefix+"jobs/"+url.PathEscape(j.ID), http.StatusSeeOther)
	return nil
}
