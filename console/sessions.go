package console

import (
	"bytes"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/localapi"
	"github.com/gantryhq/gantry/snapshot"
)

// Sessions: the list, one session's files (upload, download, delete), a
// program run in it, and closing it.

type sessionList struct {
	Sessions  []jobs.Session
	Languages []jobs.Language
	Next      string
}

func (c *Console) handleSessions(w http.ResponseWriter, r *http.Request, s *session) error {
	return c.showSessions(w, r, s, http.StatusOK, nil)
}

func (c *Console) showSessions(w http.ResponseWriter, r *http.Request, s *session, status int, apiErr *localapi.Error) error {
	q := url.Values{"limit": {"50"}}
	if cur := r.URL.Query().Get("cursor"); cur != "" {
		q.Set("cursor", cur)
	}
	var page struct {
		Sessions   []jobs.Session `json:"sessions"`
		NextCursor *string        `json:"next_cursor"`
	}
	if err := s.api.JSON(r.Context(), http.MethodGet, "/v1/sessions?"+q.Encode(), nil, &page); err != nil {
		return err
	}
	var langs struct {
		Languages []jobs.Language `json:"languages"`
	}
	if err := s.api.JSON(r.Context(), http.MethodGet, "/v1/languages", nil, &langs); err != nil {
		return err
	}
	d := sessionList{Sessions: page.Sessions, Languages: langs.Languages}
	if page.NextCursor != nil {
		d.Next = Prefix + "sessions?cursor=" + url.QueryEscape(*page.NextCursor)
	}
	c.render(w, r, s, status, "sessions", "Sessions", "sessions", d, apiErr)
	return nil
}

func (c *Console) handleCreateSession(w http.ResponseWriter, r *http.Request, s *session) error {
	req := map[string]any{"language": r.PostFormValue("language"), "metadata": map[string]string{"source": "console"}}
	if snp := r.PostFormValue("snapshot"); snp != "" {
		// From a snapshot: its language and live state.
		req = map[string]any{"snapshot": snp, "metadata": map[string]string{"source": "console"}}
	}
	if v := strings.TrimSpace(r.PostFormValue("ttl_minutes")); v != "" {
		m, err := strconv.Atoi(v)
		if err != nil || m <= 0 {
			return c.showSessions(w, r, s, http.StatusBadRequest, badForm("ttl_minutes", "the time to live must be a whole number of minutes"))
		}
		req["ttl_seconds"] = m * 60
	}
	var sess jobs.Session
	if err := s.api.JSON(r.Context(), http.MethodPost, "/v1/sessions", req, &sess); err != nil {
		if e := localapi.AsError(err); isAPIError(err) && e.Status != http.StatusUnauthorized {
			return c.showSessions(w, r, s, e.Status, e)
		}
		return err
	}
	http.Redirect(w, r, Prefix+"sessions/"+url.PathEscape(sess.ID), http.StatusSeeOther)
	return nil
}

type sessionPage struct {
	Session jobs.Session
	Files   []snapshot.Entry
	Jobs    []jobs.Job
}

func (c *Console) handleSession(w http.ResponseWriter, r *http.Request, s *session) error {
	return c.showSession(w, r, s, http.StatusOK, nil)
}

func (c *Console) showSession(w http.ResponseWriter, r *http.Request, s *session, status int, apiErr *localapi.Error) error {
	id := url.PathEscape(r.PathValue("id"))
	var d sessionPage
	if err := s.api.JSON(r.Context(), http.MethodGet, "/v1/sessions/"+id, nil, &d.Session); err != nil {
		return err
	}
	var files struct {
		Files []snapshot.Entry `json:"files"`
	}
	if err := s.api.JSON(r.Context(), http.MethodGet, "/v1/sessions/"+id+"/files", nil, &files); err != nil {
		return err
	}
	d.Files = files.Files
	var js struct {
		Jobs []jobs.Job `json:"jobs"`
	}
	if err := s.api.JSON(r.Context(), http.MethodGet, "/v1/jobs?limit=10&session_id="+url.QueryEscape(r.PathValue("id")), nil, &js); err != nil {
		return err
	}
	d.Jobs = js.Jobs
	c.render(w, r, s, status, "session", "Session "+d.Session.ID, "sessions", d, apiErr)
	return nil
}

// formError shows err on the session's page (an API or form error), or
// hands it on.
func (c *Console) sessionError(w http.ResponseWriter, r *http.Request, s *session, err error) error {
	if e := localapi.AsError(err); isAPIError(err) && e.Status != http.StatusUnauthorized && e.Status != http.StatusNotFound {
		return c.showSession(w, r, s, e.Status, e)
	}
	return err
}

func (c *Console) handleCloseSession(w http.ResponseWriter, r *http.Request, s *session) error {
	if err := s.api.JSON(r.Context(), http.MethodDelete, "/v1/sessions/"+url.PathEscape(r.PathValue("id")), nil, nil); err != nil {
		return err
	}
	http.Redirect(w, r, Prefix+"sessions", http.StatusSeeOther)
	return nil
}

// handleUpload writes an uploaded file into the workspace, at dir/name.
func (c *Console) handleUpload(w http.ResponseWriter, r *http.Request, s *session) error {
	id := r.PathValue("id")
	if err := r.ParseMultipartForm(8 << 20); err != nil {
		return c.sessionError(w, r, s, badForm("file", "the upload could not be read: %v", err))
	}
	fhs := r.MultipartForm.File["file"]
	if len(fhs) == 0 || fhs[0].Filename == "" {
		return c.sessionError(w, r, s, badForm("file", "choose a file to upload"))
	}
	for _, fh := range fhs {
		dest := path.Join(strings.Trim(strings.TrimSpace(r.FormValue("dir")), "/"), fh.Filename)
		f, err := fh.Open()
		if err != nil {
			return err
		}
		b, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			return err
		}
		resp, err := s.api.Do(r.Context(), http.MethodPut, "/v1/sessions/"+url.PathEscape(id)+"/files/"+localapi.PathEscape(dest), bytes.NewReader(b), "application/octet-stream")
		if err != nil {
			return err
		}
		if err := resp.Err(); err != nil {
			return c.sessionError(w, r, s, err)
		}
	}
	http.Redirect(w, r, Prefix+"sessions/"+url.PathEscape(id), http.StatusSeeOther)
	return nil
}

func (c *Console) handleDeleteFile(w http.ResponseWriter, r *http.Request, s *session) error {
	id := r.PathValue("id")
	p := r.PostFormValue("path")
	if p == "" {
		return c.sessionError(w, r, s, badForm("path", "no file named"))
	}
	if err := s.api.JSON(r.Context(), http.MethodDelete, "/v1/sessions/"+url.PathEscape(id)+"/files/"+localapi.PathEscape(p), nil, nil); err != nil {
		return c.sessionError(w, r, s, err)
	}
	http.Redirect(w, r, Prefix+"sessions/"+url.PathEscape(id), http.StatusSeeOther)
	return nil
}

// handleDownload relays a workspace file as an attachment, never rendered
// in the console's origin (a file may be HTML or script).
func (c *Console) handleDownload(w http.ResponseWriter, r *http.Request, s *session) error {
	p := r.PathValue("path")
	req, err := s.api.Request(r.Context(), http.MethodGet, "/v1/sessions/"+url.PathEscape(r.PathValue("id"))+"/files/"+localapi.PathEscape(p), nil, "")
	if err != nil {
		return err
	}
	c.relay(w, r, s, req, http.Header{
		"Content-Disposition":     {mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(p)})},
		"Content-Security-Policy": {"sandbox; default-src 'none'"},
	})
	return nil
}
