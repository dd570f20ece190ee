package service

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/gantryhq/gantry/skills"
	"github.com/gantryhq/gantry/store"
)

// SkillView is a skill as the API shows it: the record plus its SKILL.md.
type SkillView struct {
	store.SkillRecord
	SkillMD string `json:"skill_md"`
}

// ViewSkill is the record as the API shows it.
func ViewSkill(r SkillRecord) SkillView {
	return SkillView{SkillRecord: r, SkillMD: r.Markdown()}
}

// SkillSummary is a skill in lists: no body or files.
type SkillSummary struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Version     int      `json:"version"`
	Tags        []string `json:"tags"`
	Language    string   `json:"language"`
	Builtin     bool     `json:"builtin"`
	// Score ranks a search's hits (absent outside a search).
	Score *float64 `json:"score,omitempty"`
}

// Summarize is the record in a list.
func Summarize(r SkillRecord) SkillSummary {
	return SkillSummary{Name: r.Name, Description: r.Description, Version: r.Version, Tags: r.Tags, Language: r.Language, Builtin: r.Builtin}
}

// Skills are the current version of every skill the tenant sees (its own
// and the built-ins it has none of the same name for), by name.
func (s *Service) Skills(ctx context.Context, p Principal) ([]SkillRecord, error) {
	return s.store.CurrentSkills(ctx, p.TenantID)
}

// SearchSkills ranks the skills the tenant sees against q's words, best
// first, at most limit.
func (s *Service) SearchSkills(ctx context.Context, p Principal, q string, limit int) ([]SkillSummary, error) {
	hits, err := s.store.SearchSkills(ctx, p.TenantID, q, limit)
	if err != nil {
		return nil, err
	}
	out := make([]SkillSummary, 0, len(hits))
	for _, h := range hits {
		sum := Summarize(h.SkillRecord)
		score := h.Score
		sum.Score = &score
		out = append(out, sum)
	}
	return out, nil
}

// Skill returns a version of a skill the tenant sees (0: the current one).
func (s *Service) Skill(ctx context.Context, p Principal, name string, version int) (SkillRecord, error) {
	if err := skills.CheckName(name); err != nil {
		return SkillRecord{}, err
	}
	rec, err := s.store.GetSkill(ctx, p.TenantID, name, version)
	if errors.Is(err, store.ErrNotFound) {
		if version > 0 {
			return rec, NotFound(fmt.Sprintf("version %d of skill %q", version, name))
		}
		return rec, NotFound("skill " + strconv.Quote(name))
	}
	return rec, err
}

// SaveSkill stores a new version of the tenant's skill. Text Postgres
// cannot store is refused here, naming the field; file contents may be
// binary (the store keeps those base64). A built-in's name is a conflict.
func (s *Service) SaveSkill(ctx context.Context, p Principal, sk skills.Skill) (SkillRecord, error) {
	if err := CheckText("description", sk.Description); err != nil {
		return SkillRecord{}, err
	}
	if err := CheckText("body", sk.Body); err != nil {
		return SkillRecord{}, err
	}
	return s.store.SaveSkill(ctx, p.TenantID, sk)
}

// DeleteSkill deletes every version of the tenant's skill.
func (s *Service) DeleteSkill(ctx context.Context, p Principal, name string) error {
	if err := skills.CheckName(name); err != nil {
		return err
	}
	err := s.store.DeleteSkill(ctx, p.TenantID, name)
	if errors.Is(err, store.ErrNotFound) {
		return NotFound("skill " + strconv.Quote(name))
	}
	return err
}

// SkillVersions lists the versions of a skill the tenant sees.
func (s *Service) SkillVersions(ctx context.Context, p Principal, name string) ([]SkillVersion, error) {
	if err := skills.CheckName(name); err != nil {
		return nil, err
	}
	vs, err := s.store.SkillVersions(ctx, p.TenantID, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, NotFound("skill " + strconv.Quote(name))
	}
	return vs, err
}
