package ingress

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/gantryhq/gantry/skills"
	"github.com/gantryhq/gantry/store"
)

// skillView is a skill as the API shows it: the record plus its SKILL.md.
type skillView struct {
	store.SkillRecord
	SkillMD string `json:"skill_md"`
}

func viewSkill(r store.SkillRecord) skillView {
	return skillView{SkillRecord: r, SkillMD: r.Markdown()}
}

// skillSummary is a skill in lists: no body or files.
type skillSummary struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Version     int      `json:"version"`
	Tags        []string `json:"tags"`
	Language    string   `json:"language"`
	Builtin     bool     `json:"builtin"`
	Score       *float64 `json:"score,omitempty"`
}

func summarize(r store.SkillRecord) skillSummary {
	return skillSummary{Name: r.Name, Description: r.Description, Version: r.Version, Tags: r.Tags, Language: r.Language, Builtin: r.Builtin}
}

// checkSkillName checks a name to look a skill up by: a standard name, or
// one a skill saved before gantry followed the standard may still have.
func checkSkillName(name string) error {
	if skills.KnownName(name) {
		return nil
	}
	return skills.CheckName(name)
}

func (s *Server) handleListSkills(w http.ResponseWriter, r *http.Request, p store.Principal) error {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	limit := 100
	if q != "" {
		limit = 20
	}
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return badRequest("limit", "must be a number between 1 and 100")
		}
		limit = n
	}
	out := []skillSummary{}
	if q != "" {
		if len(q) > 500 {
			return badRequest("q", "is longer than 500 characters")
		}
		if err := checkText("q", q); err != nil {
			return err
		}
		hits, err := s.store.SearchSkills(r.Context(), p.TenantID, q, limit)
		if err != nil {
			return err
		}
		for _, h := range hits {
			sum := summarize(h.SkillRecord)
			score := h.Score
			sum.Score = &score
			out = append(out, sum)
		}
	} else {
		all, err := s.store.CurrentSkills(r.Context(), p.TenantID)
		if err != nil {
			return err
		}
		for _, rec := range all[:min(limit, len(all))] {
			out = append(out, summarize(rec))
		}
	}
	writeJSON(w, http.StatusOK, skillList{Skills: out})
	return nil
}

func (s *Server) getSkill(ctx context.Context, p store.Principal, name string, version int) (store.SkillRecord, error) {
	if err := checkSkillName(name); err != nil {
		return store.SkillRecord{}, err
	}
	rec, err := s.store.GetSkill(ctx, p.TenantID, name, version)
	if errors.Is(err, store.ErrNotFound) {
		if version > 0 {
			return rec, notFound(fmt.Sprintf("version %d of skill %q", version, name))
		}
		return rec, notFound("skill " + strconv.Quote(name))
	}
	return rec, err
}

func (s *Server) handleGetSkill(w http.ResponseWriter, r *http.Request, p store.Principal) error {
	version := 0
	if v := r.URL.Query().Get("version"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return badRequest("version", "must be a positive whole number")
		}
		version = n
	}
	format, err := skillFormat(r)
	if err != nil {
		return err
	}
	rec, err := s.getSkill(r.Context(), p, r.PathValue("name"), version)
	if err != nil {
		return err
	}
	if format == "json" {
		writeJSON(w, http.StatusOK, viewSkill(rec))
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
			return "", badRequest("format", "must be json, zip or tar, not %q", f)
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

// saveSkill stores a new version of the tenant's skill, over HTTP and MCP
// alike. Text Postgres cannot store is refused here, naming the field;
// file contents may be binary (the store keeps those base64).
func (s *Server) saveSkill(ctx context.Context, p store.Principal, sk skills.Skill) (store.SkillRecord, error) {
	if err := checkText("description", sk.Description); err != nil {
		return store.SkillRecord{}, err
	}
	if err := checkText("body", sk.Body); err != nil {
		return store.SkillRecord{}, err
	}
	return s.store.SaveSkill(ctx, p.TenantID, sk)
}

func (s *Server) handlePutSkill(w http.ResponseWriter, r *http.Request, p store.Principal) error {
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
		if err := decodeStrict(raw, &put); err != nil {
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
		return badRequest("name", "the front matter names %q but the URL %q", sk.Name, name)
	}
	rec, err := s.saveSkill(r.Context(), p, sk)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if rec.Version == 1 {
		status = http.StatusCreated
	}
	w.Header().Set("Location", "/v1/skills/"+name+"?version="+strconv.Itoa(rec.Version))
	writeJSON(w, status, viewSkill(rec))
	return nil
}

func (s *Server) handleDeleteSkill(w http.ResponseWriter, r *http.Request, p store.Principal) error {
	name := r.PathValue("name")
	if err := checkSkillName(name); err != nil {
		return err
	}
	if err := s.store.DeleteSkill(r.Context(), p.TenantID, name); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return notFound("skill " + strconv.Quote(name))
		}
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) handleSkillVersions(w http.ResponseWriter, r *http.Request, p store.Principal) error {
	name := r.PathValue("name")
	if err := checkSkillName(name); err != nil {
		return err
	}
	vs, err := s.store.SkillVersions(r.Context(), p.TenantID, name)
	if errors.Is(err, store.ErrNotFound) {
		return notFound("skill " + strconv.Quote(name))
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, skillVersions{Name: name, Versions: vs})
	return nil
}

// skillsPromptBudget caps the skills section of agent_system_prompt, in
// characters (about a quarter as many tokens): however many skills a tenant
// has, the prompt stays small, and the full text is fetched on demand.
const skillsPromptBudget = 4000

// skillsPromptSection lists skills one line each within the budget.
func skillsPromptSection(recs []store.SkillRecord) string {
	if len(recs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\nSkills (reusable know-how; each is mounted read-only at /skills/<name>/ in every run, and Python imports its code with hyphens as underscores: data-analysis is `from skills.data_analysis import helpers`). " +
		"Read one with get_skill before using it; find more with search_skills:\n")
	for i, r := range recs {
		line := "- " + r.Summary()
		if len(line) > 160 {
			line = line[:157] + "..."
		}
		line += "\n"
		if b.Len()+len(line) > skillsPromptBudget-80 {
			fmt.Fprintf(&b, "- ...and %d more: search_skills finds them.\n", len(recs)-i)
			break
		}
		b.WriteString(line)
	}
	return b.String()
}
