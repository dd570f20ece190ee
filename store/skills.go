package store

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gantryhq/gantry/skills"
)

// ErrBuiltinSkill is an attempt to change or shadow a built-in skill.
var ErrBuiltinSkill = errors.New("built-in skill")

// SkillRecord is a stored version of a skill.
type SkillRecord struct {
	skills.Skill
	Builtin   bool      `json:"builtin"`
	CreatedAt time.Time `json:"created_at"`
}

// SkillHit is a search result.
type SkillHit struct {
	SkillRecord
	Score float64 `json:"score"`
}

const skillColumns = `name, version, description, license, compatibility, metadata, allowed_tools,
	tags, language, requires, body, files, tenant_id IS NULL, created_at`

// visibleSkills selects the current version of each skill a tenant sees:
// its own, and the built-ins it has none of the same name for.
const visibleSkills = `SELECT DISTINCT ON (name) * FROM skills WHERE tenant_id = $1 OR tenant_id IS NULL
	ORDER BY name, (tenant_id IS NULL), version DESC`

func scanSkill(row pgx.Row, extra ...any) (SkillRecord, error) {
	var r SkillRecord
	var files []byte
	dest := append([]any{&r.Name, &r.Version, &r.Description, &r.License, &r.Compatibility, &r.Metadata, &r.AllowedTools,
		&r.Tags, &r.Language, &r.Requires, &r.Body, &files, &r.Builtin, &r.CreatedAt}, extra...)
	if err := row.Scan(dest...); err != nil {
		return r, err
	}
	if err := json.Unmarshal(files, &r.Files); err != nil {
		return r, err
	}
	for i := range r.Files {
		if err := r.Files[i].Decode(); err != nil {
			return r, fmt.Errorf("skill %s file %s: %w", r.Name, r.Files[i].Path, err)
		}
	}
	if len(r.Metadata) == 0 {
		r.Metadata = nil
	}
	r.CreatedAt = r.CreatedAt.UTC()
	return r, nil
}

func skillHash(sk skills.Skill) []byte {
	h := sha256.New()
	v := sk
	v.Version = 0
	h.Write([]byte(v.Markdown()))
	for _, f := range sk.Files {
		fmt.Fprintf(h, "\x00%s\x00%d\x00%s", f.Path, len(f.Content), f.Content)
	}
	return h.Sum(nil)
}

// lockSkill holds the lock on one skill name of one scope (a tenant id, or
// "" for the built-ins) until tx ends; taking it again in tx does not block.
func lockSkill(ctx context.Context, tx pgx.Tx, scope, name string) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, "skill:"+scope+":"+name)
	return err
}

// insertSkill stores sk as the next version for tenantID (nil: built-in),
// serialised per skill by an advisory lock. If sk.Version is set it must be
// that next version (optimistic concurrency), else ErrConflict.
func insertSkill(ctx context.Context, tx pgx.Tx, tenantID *string, sk skills.Skill) (SkillRecord, error) {
	scope := ""
	if tenantID != nil {
		scope = *tenantID
	}
	if err := lockSkill(ctx, tx, scope, sk.Name); err != nil {
		return SkillRecord{}, err
	}
	var latest int
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM skills WHERE coalesce(tenant_id, '') = $1 AND name = $2`,
		scope, sk.Name).Scan(&latest); err != nil {
		return SkillRecord{}, err
	}
	if sk.Version != 0 && sk.Version != latest+1 {
		return SkillRecord{}, fmt.Errorf("skill %s is at version %d; saving version %d would skip or overwrite one: %w", sk.Name, latest, sk.Version, ErrConflict)
	}
	sk.Version = latest + 1
	files, err := json.Marshal(sk.Files)
	if err != nil {
		return SkillRecord{}, err
	}
	metadata := sk.Metadata
	if metadata == nil {
		metadata = map[string]string{}
	}
	return scanSkill(tx.QueryRow(ctx, `
		INSERT INTO skills (tenant_id, name, version, description, license, compatibility, metadata, allowed_tools,
			tags, language, requires, body, files, content_hash, tags_text, size_bytes)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
		RETURNING `+skillColumns,
		tenantID, sk.Name, sk.Version, sk.Description, sk.License, sk.Compatibility, metadata, sk.AllowedTools,
		sk.Tags, sk.Language, sk.Requires, sk.Body, files, skillHash(sk), strings.Join(sk.Tags, " "), sk.Size()))
}

// SaveSkill saves a new version of the tenant's skill. A name used by a
// built-in skill is refused with ErrBuiltinSkill; a version that would take
// the tenant's current skills past skills.MaxTenantBytes (all of them are
// mounted into every sandbox) with a *skills.Error.
func (s *Store) SaveSkill(ctx context.Context, tenantID string, sk skills.Skill) (SkillRecord, error) {
	if err := sk.Validate(); err != nil {
		return SkillRecord{}, err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return SkillRecord{}, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	var builtin bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM skills WHERE tenant_id IS NULL AND name = $1)`, sk.Name).Scan(&builtin); err != nil {
		return SkillRecord{}, err
	}
	if builtin {
		return SkillRecord{}, fmt.Errorf("%q is a built-in skill; save yours under another name: %w", sk.Name, ErrBuiltinSkill)
	}
	// Serialised per tenant, so that two saves cannot both pass the cap.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, "skills:"+tenantID); err != nil {
		return SkillRecord{}, err
	}
	var others int64
	if err := tx.QueryRow(ctx, `SELECT coalesce(sum(size_bytes), 0) FROM (
		SELECT DISTINCT ON (name) size_bytes FROM skills WHERE tenant_id = $1 AND name <> $2 ORDER BY name, version DESC) v`,
		tenantID, sk.Name).Scan(&others); err != nil {
		return SkillRecord{}, err
	}
	if size := int64(sk.Size()); others+size > skills.MaxTenantBytes {
		return SkillRecord{}, &skills.Error{Field: "files", Message: fmt.Sprintf(
			"your skills would hold %d bytes in all (this one %d); at most %d: every sandbox mounts them all, so delete skills you no longer use",
			others+size, size, skills.MaxTenantBytes)}
	}
	rec, err := insertSkill(ctx, tx, &tenantID, sk)
	if err != nil {
		return SkillRecord{}, err
	}
	return rec, tx.Commit(ctx)
}

// SyncBuiltins stores each built-in skill whose content differs from its
// latest stored version, removes built-ins that no longer ship (a renamed
// one lives on under its new name), and returns how many it stored.
// Replicas may run it at once: each skill is compared and stored under the
// skill's lock, so two ingresses starting together store a new version once.
func (s *Store) SyncBuiltins(ctx context.Context, builtins []skills.Skill) (int, error) {
	names := make([]string, len(builtins))
	for i, sk := range builtins {
		names[i] = sk.Name
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM skills WHERE tenant_id IS NULL AND NOT (name = ANY($1))`, names); err != nil {
		return 0, fmt.Errorf("remove retired built-in skills: %w", err)
	}
	n := 0
	for _, sk := range builtins {
		stored, err := s.syncBuiltin(ctx, sk)
		if err != nil {
			return n, fmt.Errorf("store built-in skill %s: %w", sk.Name, err)
		}
		if stored {
			n++
		}
	}
	return n, nil
}

// syncBuiltin stores sk as a new version unless its latest version has the
// same content. The comparison happens under the skill's lock, so replicas
// starting at once store one version, not one each.
func (s *Store) syncBuiltin(ctx context.Context, sk skills.Skill) (bool, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if err := lockSkill(ctx, tx, "", sk.Name); err != nil {
		return false, err
	}
	var same bool
	err = tx.QueryRow(ctx, `SELECT content_hash = $2 FROM skills WHERE tenant_id IS NULL AND name = $1
		ORDER BY version DESC LIMIT 1`, sk.Name, skillHash(sk)).Scan(&same)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return false, err
	}
	if same {
		return false, nil
	}
	sk.Version = 0
	if _, err := insertSkill(ctx, tx, nil, sk); err != nil {
		return false, err
	}
	return true, tx.Commit(ctx)
}

// GetSkill returns a version of a skill the tenant sees (0: the current
// one), or ErrNotFound.
func (s *Store) GetSkill(ctx context.Context, tenantID, name string, version int) (SkillRecord, error) {
	var row pgx.Row
	if version == 0 {
		row = s.pool.QueryRow(ctx, `SELECT `+skillColumns+` FROM (`+visibleSkills+`) v WHERE name = $2`, tenantID, name)
	} else {
		row = s.pool.QueryRow(ctx, `SELECT `+skillColumns+` FROM skills WHERE (tenant_id = $1 OR tenant_id IS NULL) AND name = $2 AND version = $3
			ORDER BY (tenant_id IS NULL) LIMIT 1`, tenantID, name, version)
	}
	rec, err := scanSkill(row)
	return rec, notFound(err)
}

// CurrentSkills returns the current version of every skill the tenant sees.
func (s *Store) CurrentSkills(ctx context.Context, tenantID string) ([]SkillRecord, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+skillColumns+` FROM (`+visibleSkills+`) v ORDER BY (tenant_id IS NULL), name`, tenantID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []SkillRecord{}
	for rows.Next() {
		r, err := scanSkill(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// SkillsStamp changes whenever the set of skills the tenant sees changes:
// runners key their cache of mounted skills on it.
func (s *Store) SkillsStamp(ctx context.Context, tenantID string) (string, error) {
	var n, maxID int64
	err := s.pool.QueryRow(ctx, `SELECT count(*), coalesce(max(id), 0) FROM skills WHERE tenant_id = $1 OR tenant_id IS NULL`, tenantID).Scan(&n, &maxID)
	return fmt.Sprintf("%d-%d", n, maxID), err
}

// SearchSkills ranks the tenant's current skills by relevance to q: any of
// its words may match; name and description weigh most, then tags, then the
// body.
func (s *Store) SearchSkills(ctx context.Context, tenantID, q string, limit int) ([]SkillHit, error) {
	rows, err := s.pool.Query(ctx, `
		WITH q AS (SELECT nullif(replace(plainto_tsquery('english', $2)::text, '&', '|'), '')::tsquery AS q)
		SELECT `+skillColumns+`, ts_rank_cd(v.search, q.q) AS score
		FROM (`+visibleSkills+`) v, q
		WHERE q.q IS NOT NULL AND v.search @@ q.q
		ORDER BY score DESC, name LIMIT $3`, tenantID, q, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []SkillHit{}
	for rows.Next() {
		var h SkillHit
		rec, err := scanSkill(rows, &h.Score)
		if err != nil {
			return nil, err
		}
		h.SkillRecord = rec
		out = append(out, h)
	}
	return out, rows.Err()
}

// SkillVersion describes one stored version.
type SkillVersion struct {
	Version     int       `json:"version"`
	Description string    `json:"description"`
	CreatedAt   time.Time `json:"created_at"`
}

// SkillVersions lists the versions of a skill the tenant sees, newest first.
func (s *Store) SkillVersions(ctx context.Context, tenantID, name string) ([]SkillVersion, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT version, description, created_at FROM skills
		WHERE name = $2 AND coalesce(tenant_id, '') = (
			SELECT coalesce(tenant_id, '') FROM skills WHERE name = $2 AND (tenant_id = $1 OR tenant_id IS NULL)
			ORDER BY (tenant_id IS NULL) LIMIT 1)
		ORDER BY version DESC`, tenantID, name)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []SkillVersion
	for rows.Next() {
		var v SkillVersion
		if err := rows.Scan(&v.Version, &v.Description, &v.CreatedAt); err != nil {
			return nil, err
		}
		v.CreatedAt = v.CreatedAt.UTC()
		out = append(out, v)
	}
	if len(out) == 0 && rows.Err() == nil {
		return nil, ErrNotFound
	}
	return out, rows.Err()
}

// DeleteSkill deletes every version of the tenant's skill. Built-ins cannot
// be deleted (ErrBuiltinSkill).
func (s *Store) DeleteSkill(ctx context.Context, tenantID, name string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM skills WHERE tenant_id = $1 AND name = $2`, tenantID, name)
	if err != nil {
		return err
	}
	if tag.RowsAffected() > 0 {
		return nil
	}
	var builtin bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM skills WHERE tenant_id IS NULL AND name = $1)`, name).Scan(&builtin); err != nil {
		return err
	}
	if builtin {
		return fmt.Errorf("%q is a built-in skill and cannot be deleted: %w", name, ErrBuiltinSkill)
	}
	return ErrNotFound
}
