package console

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/gantryhq/gantry/localapi"
	"github.com/gantryhq/gantry/skills"
	"github.com/gantryhq/gantry/store"
)

// Skills: search, read, upload a folder as a zip, versions, delete.

type skillSummary struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Version     int      `json:"version"`
	Tags        []string `json:"tags"`
	Language    string   `json:"language"`
	Builtin     bool     `json:"builtin"`
	Score       *float64 `json:"score"`
}

type skillList struct {
	Skills []skillSummary
	Query  string
	Name   string // the upload form's name, kept on an error
}

func (c *Console) handleSkills(w http.ResponseWriter, r *http.Request, s *session) error {
	return c.showSkills(w, r, s, http.StatusOK, "", nil)
}

func (c *Console) showSkills(w http.ResponseWriter, r *http.Request, s *session, status int, name string, apiErr *localapi.Error) error {
	d := skillList{Query: strings.TrimSpace(r.URL.Query().Get("q")), Name: name}
	q := url.Values{"limit": {"100"}}
	if d.Query != "" {
		q.Set("q", d.Query)
	}
	var out struct {
		Skills []skillSummary `json:"skills"`
	}
	if err := s.api.JSON(r.Context(), http.MethodGet, "/v1/skills?"+q.Encode(), nil, &out); err != nil {
		e := localapi.AsError(err)
		if !isAPIError(err) || e.Status == http.StatusUnauthorized || apiErr != nil {
			return err
		}
		status, apiErr = e.Status, e // a bad query: show it with the form
	}
	d.Skills = out.Skills
	c.render(w, r, s, status, "skills", "Skills", "skills", d, apiErr)
	return nil
}

// handleUploadSkill saves a skill folder uploaded as a zip (or tar) as a
// new version. The name is the form's, else the archive's file name.
func (c *Console) handleUploadSkill(w http.ResponseWriter, r *http.Request, s *session) error {
	if err := r.ParseMultipartForm(8 << 20); err != nil {
		return c.showSkills(w, r, s, http.StatusBadRequest, "", badForm("archive", "the upload could not be read: %v", err))
	}
	name := strings.TrimSpace(r.FormValue("name"))
	fhs := r.MultipartForm.File["archive"]
	if len(fhs) == 0 || fhs[0].Filename == "" {
		return c.showSkills(w, r, s, http.StatusBadRequest, name, badForm("archive", "choose a zip of the skill's folder"))
	}
	fh := fhs[0]
	base := path.Base(fh.Filename)
	ctype := "application/zip"
	switch {
	case strings.HasSuffix(base, ".tar.gz") || strings.HasSuffix(base, ".tgz"):
		ctype = "application/gzip"
	case strings.HasSuffix(base, ".tar"):
		ctype = "application/x-tar"
	case strings.HasSuffix(strings.ToLower(base), ".md"):
		ctype = "text/markdown"
	}
	if name == "" {
		name = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(base, ".zip"), ".tar.gz"), ".tgz"), ".tar")
	}
	if err := skills.CheckName(name); err != nil {
		return c.showSkills(w, r, s, http.StatusBadRequest, name, badForm("name", "%v", err))
	}
	if fh.Size > skills.MaxArchiveBytes {
		return c.showSkills(w, r, s, http.StatusRequestEntityTooLarge, name, &localapi.Error{Status: http.StatusRequestEntityTooLarge, Code: "payload_too_large", Field: "archive",
			Message: "the archive is larger than " + strconv.Itoa(skills.MaxArchiveBytes) + " bytes"})
	}
	f, err := fh.Open()
	if err != nil {
		return err
	}
	b, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		return err
	}
	resp, err := s.api.Do(r.Context(), http.MethodPut, "/v1/skills/"+url.PathEscape(name), bytes.NewReader(b), ctype)
	if err != nil {
		return err
	}
	if err := resp.Err(); err != nil {
		if e := localapi.AsError(err); e.Status != http.StatusUnauthorized {
			return c.showSkills(w, r, s, e.Status, name, e)
		}
		return err
	}
	http.Redirect(w, r, Prefix+"skills/"+url.PathEscape(name), http.StatusSeeOther)
	return nil
}

type skillPage struct {
	Skill    store.SkillRecord
	SkillMD  string
	Versions []store.SkillVersion
	Current  bool // the current version is shown
}

func (c *Console) handleSkill(w http.ResponseWriter, r *http.Request, s *session) error {
	name := url.PathEscape(r.PathValue("name"))
	q := ""
	if v := r.URL.Query().Get("version"); v != "" {
		q = "?version=" + url.QueryEscape(v)
	}
	var sk struct {
		store.SkillRecord
		SkillMD string `json:"skill_md"`
	}
	if err := s.api.JSON(r.Context(), http.MethodGet, "/v1/skills/"+name+q, nil, &sk); err != nil {
		return err
	}
	var vs struct {
		Versions []store.SkillVersion `json:"versions"`
	}
	if err := s.api.JSON(r.Context(), http.MethodGet, "/v1/skills/"+name+"/versions", nil, &vs); err != nil {
		return err
	}
	d := skillPage{Skill: sk.SkillRecord, SkillMD: sk.SkillMD, Versions: vs.Versions, Current: len(vs.Versions) == 0 || vs.Versions[0].Version == sk.Version}
	c.render(w, r, s, http.StatusOK, "skill", "Skill "+sk.Name, "skills", d, nil)
	return nil
}

func (c *Console) handleSkillDownload(w http.ResponseWriter, r *http.Request, s *session) error {
	q := url.Values{"format": {"zip"}}
	if v := r.URL.Query().Get("version"); v != "" {
		q.Set("version", v)
	}
	req, err := s.api.Request(r.Context(), http.MethodGet, "/v1/skills/"+url.PathEscape(r.PathValue("name"))+"?"+q.Encode(), nil, "")
	if err != nil {
		return err
	}
	c.relay(w, r, s, req, nil)
	return nil
}

func (c *Console) handleDeleteSkill(w http.ResponseWriter, r *http.Request, s *session) error {
	if err := s.api.JSON(r.Context(), http.MethodDelete, "/v1/skills/"+url.PathEscape(r.PathValue("name")), nil, nil); err != nil {
		return err
	}
	http.Redirect(w, r, Prefix+"skills", http.StatusSeeOther)
	return nil
}
