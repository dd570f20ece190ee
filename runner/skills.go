package runner

import (
	"context"
	"sync"

	"github.com/gantryhq/gantry/agent/wire"
	"github.com/gantryhq/gantry/skills"
	"github.com/gantryhq/gantry/store"
)

// SkillStore is what the runner needs to mount a tenant's skills.
type SkillStore interface {
	SkillsStamp(ctx context.Context, tenantID string) (string, error)
	CurrentSkills(ctx context.Context, tenantID string) ([]store.SkillRecord, error)
}

// skillCache keeps, per tenant, the files of the skills it sees, rebuilt
// when the tenant's skills stamp changes. Only the tenant's own skills and
// the built-ins are ever loaded for it.
type skillCache struct {
	st SkillStore

	mu sync.Mutex
	m  map[string]cachedSkills
}

type cachedSkills struct {
	stamp string
	files []wire.File
}

func newSkillCache(st SkillStore) *skillCache {
	return &skillCache{st: st, m: map[string]cachedSkills{}}
}

// files returns /skills/<name>/SKILL.md and each skill's files for the
// tenant's current skills.
func (c *skillCache) files(ctx context.Context, tenantID string) ([]wire.File, error) {
	_, files, err := c.get(ctx, tenantID)
	return files, err
}

// get returns the tenant's skill files and their stamp. The tenant ""
// (no tenant) sees the built-ins alone: the warm pool mounts those ahead
// of time, and a tenant whose stamp equals theirs needs nothing more.
func (c *skillCache) get(ctx context.Context, tenantID string) (string, []wire.File, error) {
	stamp, err := c.st.SkillsStamp(ctx, tenantID)
	if err != nil {
		return "", nil, err
	}
	c.mu.Lock()
	cached, ok := c.m[tenantID]
	c.mu.Unlock()
	if ok && cached.stamp == stamp {
		return stamp, cached.files, nil
	}
	recs, err := c.st.CurrentSkills(ctx, tenantID)
	if err != nil {
		return "", nil, err
	}
	var files []wire.File
	for _, r := range recs {
		dir := SkillsDir + "/" + r.Name + "/"
		files = append(files, wire.File{Path: dir + skills.SkillFileName, Data: []byte(r.Markdown())})
		for _, f := range r.Files {
			files = append(files, wire.File{Path: dir + f.Path, Data: []byte(f.Content)})
		}
	}
	c.mu.Lock()
	c.m[tenantID] = cachedSkills{stamp: stamp, files: files}
	c.mu.Unlock()
	return stamp, files, nil
}
