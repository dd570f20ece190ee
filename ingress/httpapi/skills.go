package httpapi

import (
	"bytes"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/gantryhq/gantry/ingress/service"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/skills"
)

func (s *Server) handleListSkills(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	limit := 100
	if q != "" {
		limit = 20
	}
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return service.BadRequest("limit", "must be a number between 1 and 100")
		}
		limit = n
	}
	out := []service.SkillSummary{}
	if q != "" {
		if len(q) > 500 {
			return service.BadRequest("q", "is longer than 500 characters")
		}
		if err := service.CheckText("q", q); err != nil {
			return err
		}
		hits, err := s.svc.SearchSkills(r.Context(), p, q, limit)
		if err != nil {
			return err
		}
		out = append(out, hits...)
	} else {
		all, err := s.svc.Skills(r.Context(), p)
		if err != nil {
			return err
		}
		for _, rec := range all[:min(limit, len(all))] {
			out = append(out, service.Summarize(rec))
		}
	}
	WriteJSON(w, http.StatusOK, SkillList{Skills: out})
	return nil
}

func (s *Server) handleGetSkill(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	version := 0
	if v := r.URL.Query().Get("version"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return service.BadRequest("version", "must be a positive whole number")
		}
		version = n
	}
	format, err := skillFormat(r)
	if err != nil {
		return err
	}
	rec, err := s.svc.Skill(r.Context(), p, r.PathValue("name"), version)
	if err != nil {
		return err
	}
	if format == "json" {
		WriteJSON(w, http.StatusOK, service.ViewSkill(rec))
		return nil
	}
	var buf bytes.Buffer
	if err := skills.WriteArchive(&buf, format, rec.Skill, rec.CreatedAt); err != nil {
		return err
	}
	w.Header().Set("Content-Type", archiveTypes[format])
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": rec.Name + "." + format}))
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	_, _ = buf.WriteTo(w)
	return nil
}

// archiveTypes are the media types of the archive formats.
var archiveTypes = map[string]string{skills.FormatZip: "application/zip", skills.FormatTar: "application/x-tar"}

// skillFormat is how GET /v1/skills/{name} answers: ?format= (json, zip,
// tar), else the first archive type Accept names, else JSON.
func skillFormat(r *http.Request) (string, error) {
	if f := r.URL.Query().Get("format"); f != "" {
		if f != "json" && archiveTypes[f] == "" {
			return "", service.BadRequest("format", "must be json, zip or tar, not %q", f)
		}
		return f, nil
	}
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		t, _, _ := mime.ParseMediaType(strings.TrimSpace(part))
		switch t {
		case "application/json":
			return "json", nil
		case "application/zip":
			return skills.FormatZip, nil
		case "application/x-tar":
			return skills.FormatTar, nil
		}
	}
	return "json", nil
}

// skillPut is the JSON form of PUT /v1/skills/{name}: either a whole
// SKILL.md, or its fields; files either way.
type skillPut struct {
	SkillMD       string            `json:"skill_md,omitempty"`
	Description   string            `json:"description,omitempty"`
	License       string            `json:"license,omitempty"`
	Compatibility string            `json:"compatibility,omitempty"`
	Metadata      map[string]string `json:"metadata,omitempty"`
	AllowedTools  string            `json:"allowed_tools,omitempty"`
	Body          string            `json:"body,omitempty"`
	Tags          []string          `json:"tags,omitempty"`
	Language      string            `json:"language,omitempty"`
	Requires      []string          `json:"requires,omitempty"`
	Version       int               `json:"version,omitempty"`
	Files         []skills.File     `json:"files,omitempty"`
}

// maxSkillJSON bounds a JSON skill: the skill's limits with files in
// base64, plus room for the rest.
const maxSkillJSON = skills.MaxTotalBytes/3*4 + 2*skills.MaxSkillMD + 64<<10

// uploadFormat maps the media types of a skill folder upload to its
// archive format.
var uploadFormat = map[string]string{
	"application/zip": skills.FormatZip, "application/x-zip-compressed": skills.FormatZip,
	"application/x-tar": skills.FormatTar, "application/gzip": skills.FormatTar, "application/x-gzip": skills.FormatTar,
	"application/x-gtar": skills.FormatTar,
}

func (s *Server) handlePutSkill(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	name := r.PathValue("name")
	if err := skills.CheckName(name); err != nil {
		return err
	}
	ctype, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	archive := uploadFormat[ctype]
	limit := int64(maxSkillJSON)
	if archive != "" {
		limit = skills.MaxArchiveBytes
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		return err
	}
	var sk skills.Skill
	switch {
	case archive != "":
		if sk, err = skills.ReadArchive(archive, raw); err != nil {
			return err
		}
	case ctype == "text/markdown" || ctype == "text/plain" || ctype == "text/x-markdown":
		if sk, err = skills.Parse(raw); err != nil {
			return err
		}
	default:
		var put skillPut
		if err := jobs.DecodeStrict(bytes.NewReader(raw), &put); err != nil {
			return err
		}
		if put.SkillMD != "" {
			if sk, err = skills.Parse([]byte(put.SkillMD)); err != nil {
				return err
			}
		} else {
			sk = skills.Skill{Name: name, Description: put.Description, License: put.License, Compatibility: put.Compatibility,
				Metadata: put.Metadata, AllowedTools: put.AllowedTools, Body: put.Body, Tags: put.Tags,
				Language: put.Language, Requires: put.Requires, Version: put.Version}
		}
		sk.Files = put.Files
	}
	if sk.Name == "" {
		sk.Name = name
	}
	if sk.Name != name {
		return service.BadRequest("name", "the front matter names %q but the URL %q", sk.Name, name)
	}
	rec, err := s.svc.SaveSkill(r.Context(), p, sk)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if rec.Version == 1 {
		status = http.StatusCreated
	}
	w.Header().Set("Location", "/v1/skills/"+name+"?version="+strconv.Itoa(rec.Version))
	WriteJSON(w, status, service.ViewSkill(rec))
	return nil
}

func (s *Server) handleDeleteSkill(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	if err := s.svc.DeleteSkill(r.Context(), p, r.PathValue("name")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) handleSkillVersions(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	name := r.PathValue("name")
	vs, err := s.svc.SkillVersions(r.Context(), p, name)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, skillVersions{Name: name, Versions: vs})
	return nil
}
