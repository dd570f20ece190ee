package ingress

import (
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

func checkSkillName(name string) error {
	if !skills.NameRE.MatchString(name) {
		return badRequest("name", "%q is not a skill name: a lowercase letter, then lowercase letters, digits or _ (at most 64)", name)
	}
	return nil
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
	writeJSON(w, http.StatusOK, map[string]any{"skills": out})
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
	rec, err := s.getSkill(r.Context(), p, r.PathValue("name"), version)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewSkill(rec))
	return nil
}

// skillPut is the JSON form of PUT /v1/skills/{name}: either a whole
// SKILL.md, or its fields.
type skillPut struct {
	SkillMD     string        `json:"skill_md,omitempty"`
	Description string        `json:"description,omitempty"`
	Body        string        `json:"body,omitempty"`
	Tags        []string      `json:"tags,omitempty"`
	Language    string        `json:"language,omitempty"`
	Requires    []string      `json:"requires,omitempty"`
	Version     int           `json:"version,omitempty"`
	Files       []skills.File `json:"files,omitempty"`
}

// saveSkill stores a new version of the tenant's skill, over HTTP and MCP
// alike. Text Postgres cannot store is refused here, naming the field.
func (s *Server) saveSkill(ctx context.Context, p store.Principal, sk skills.Skill) (store.SkillRecord, error) {
	if err := checkText("description", sk.Description); err != nil {
		return store.SkillRecord{}, err
	}
	if err := checkText("body", sk.Body); err != nil {
		return store.SkillRecord{}, err
	}
	for i, f := range sk.Files {
		if err := checkText(fmt.Sprintf("files[%d].content", i), f.Content); err != nil {
			return store.SkillRecord{}, err
		}
	}
	return s.store.SaveSkill(ctx, p.TenantID, sk)
}

func (s *Server) handlePutSkill(w http.ResponseWriter, r *http.Request, p store.Principal) error {
	name := r.PathValue("name")
	if err := checkSkillName(name); err != nil {
		return err
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, skills.MaxTotalBytes+skills.MaxSkillMD+64<<10))
	if err != nil {
		return err
	}
	ctype, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var sk skills.Skill
	switch ctype {
	case "text/markdown", "text/plain", "text/x-markdown":
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
			sk = skills.Skill{Name: name, Description: put.Description, Body: put.Body, Tags: put.Tags,
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
	writeJSON(w, http.StatusOK, map[string]any{"name": name, "versions": vs})
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
	b.WriteString("\nSkills (reusable know-how; each is mounted read-only at /skills/<name>/ in every run, and Python can `from skills.<name> import helpers`). " +
		"Read one with get_skill before using it; find more with search_skills:\n")
	for i, r := range recs {
		line := "- " + r.Name + ": " + r.Description
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
