package service

import (
	"context"
	"encoding/base64"
	"strings"
	"time"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store"
)

// JobQuery is a search of the tenant's job history: every filter given
// must hold. Errors name the filter as the HTTP API's query parameters do
// (status, language, created_after, metadata.KEY, limit, cursor, ...).
type JobQuery struct {
	// Statuses and Languages: any of these (none: every one).
	Statuses  []string
	Languages []string
	// SessionID and BatchID: only jobs of this session or batch.
	SessionID string
	BatchID   string
	// CreatedAfter (inclusive) and CreatedBefore (exclusive) are RFC 3339
	// times ("": unbounded).
	CreatedAfter  string
	CreatedBefore string
	// Metadata pairs must all be in a job's metadata (at most 32).
	Metadata map[string]string
	// Limit is the page size, 1-100 (0: 20).
	Limit int
	// Cursor is the NextCursor of the previous page.
	Cursor string
	// IncludeSpec adds each job's spec (Job.Spec).
	IncludeSpec bool
}

// JobPage is a page of the history, newest first.
type JobPage struct {
	Jobs []jobs.Job
	// NextCursor continues the search ("": this was the last page).
	NextCursor string
}

// ListJobs searches the tenant's jobs, newest first, a page at a time.
// The jobs are as the store has them (View shows them as the API does).
func (s *Service) ListJobs(ctx context.Context, p Principal, q JobQuery) (JobPage, error) {
	f, err := q.Filter()
	if err != nil {
		return JobPage{}, err
	}
	list, next, err := s.store.ListJobs(ctx, p.TenantID, f)
	if err != nil {
		return JobPage{}, err
	}
	if q.IncludeSpec {
		if err := s.WithSpecs(ctx, p, list); err != nil {
			return JobPage{}, err
		}
	}
	return JobPage{Jobs: list, NextCursor: Cursor(next)}, nil
}

// WithSpecs fills in what each of the tenant's jobs ran (Job.Spec): the
// spec without file contents or env values, built in the database.
func (s *Service) WithSpecs(ctx context.Context, p Principal, list []jobs.Job) error {
	ids := make([]string, len(list))
	for i, j := range list {
		ids[i] = j.ID
	}
	specs, err := s.store.JobSpecs(ctx, p.TenantID, ids)
	if err != nil {
		return err
	}
	for i := range list {
		if v, ok := specs[list[i].ID]; ok {
			list[i].Spec = &v
		}
	}
	return nil
}

// Cursor is the cursor of the page after the one that ended at id (""
// for none).
func Cursor(id string) string {
	if id == "" {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString([]byte(id))
}

// page checks a page size (0: the default) and a cursor (one Cursor made
// from an id with this prefix), and returns the id the page starts after.
func page(limit int, cursor, idPrefix string) (int, string, error) {
	if limit == 0 {
		limit = 20
	}
	if limit < 1 || limit > 100 {
		return 0, "", BadRequest("limit", "limit must be a number between 1 and 100")
	}
	before := ""
	if cursor != "" {
		raw, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil || !jobs.ValidID(idPrefix, string(raw)) {
			return 0, "", BadRequest("cursor", "cursor is not one this API returned")
		}
		before = string(raw)
	}
	return limit, before, nil
}

// MetadataFilter prefixes the names the HTTP API takes metadata filters
// under (metadata.KEY=VALUE), and the field a bad one is reported as.
const MetadataFilter = "metadata."

// Filter checks the query and makes it the store's filter.
func (q JobQuery) Filter() (store.JobFilter, error) {
	if err := q.checkText(); err != nil {
		return store.JobFilter{}, err
	}
	limit, before, err := page(q.Limit, q.Cursor, "job")
	if err != nil {
		return store.JobFilter{}, err
	}
	f := store.JobFilter{Limit: limit, Before: before, SessionID: q.SessionID, BatchID: q.BatchID}
	for _, v := range q.Statuses {
		st := jobs.Status(v)
		if !st.Valid() {
			return f, BadRequest("status", "status: unknown status %q (one or several of %s, comma-separated)", v, StatusNames())
		}
		f.Statuses = append(f.Statuses, st)
	}
	for _, v := range q.Languages {
		lang, ok := jobs.LookupLanguage(v)
		if !ok {
			return f, BadRequest("language", "language: unknown language %q (one or several of %s, comma-separated)", v, LanguageNames())
		}
		f.Languages = append(f.Languages, lang.Name)
	}
	if f.CreatedAfter, err = timeParam("created_after", q.CreatedAfter); err != nil {
		return f, err
	}
	if f.CreatedBefore, err = timeParam("created_before", q.CreatedBefore); err != nil {
		return f, err
	}
	if !f.CreatedAfter.IsZero() && !f.CreatedBefore.IsZero() && !f.CreatedAfter.Before(f.CreatedBefore) {
		return f, BadRequest("created_before", "created_before must be later than created_after")
	}
	for key, val := range q.Metadata {
		name := MetadataFilter + key
		if key == "" || len(key) > 64 {
			return f, BadRequest(name, "%s: a metadata filter names a key of 1-64 bytes: metadata.KEY=VALUE", name)
		}
		if len(val) > 512 {
			return f, BadRequest(name, "%s is %d bytes; metadata values are at most 512", name, len(val))
		}
		if f.Metadata == nil {
			f.Metadata = map[string]string{}
		}
		f.Metadata[key] = val
	}
	if len(f.Metadata) > 32 {
		return f, BadRequest("metadata", "metadata: %d keys to filter by; at most 32", len(f.Metadata))
	}
	return f, nil
}

// checkText refuses text Postgres cannot hold anywhere in the query, in
// the words the HTTP API uses for its query string.
func (q JobQuery) checkText() error {
	type field struct {
		name string
		vals []string
	}
	fields := []field{
		{"status", q.Statuses}, {"language", q.Languages}, {"session_id", []string{q.SessionID}}, {"batch_id", []string{q.BatchID}},
		{"created_after", []string{q.CreatedAfter}}, {"created_before", []string{q.CreatedBefore}}, {"cursor", []string{q.Cursor}},
	}
	for k, v := range q.Metadata {
		fields = append(fields, field{MetadataFilter + k, []string{k, v}})
	}
	for _, f := range fields {
		for _, v := range f.vals {
			if CheckText(f.name, v) != nil {
				return BadRequest(f.name, "%s must be UTF-8 text without NUL bytes", f.name)
			}
		}
	}
	return nil
}

// timeParam reads an RFC 3339 time ("" leaves it zero). A '+' of the
// offset that arrived as a space (it was not percent-encoded in a query
// string) is taken back.
func timeParam(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil && strings.Contains(v, " ") {
		t, err = time.Parse(time.RFC3339Nano, strings.ReplaceAll(v, " ", "+"))
	}
	if err != nil {
		return time.Time{}, BadRequest(name, "%s must be an RFC 3339 time such as 2026-01-02T15:04:05Z, not %q", name, v)
	}
	return t, nil
}

// StatusNames lists the job statuses for a message: "queued, running, ...".
func StatusNames() string {
	names := make([]string, len(jobs.Statuses))
	for i, s := range jobs.Statuses {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// LanguageNames lists the languages jobs run in for a message.
func LanguageNames() string { return strings.Join(jobs.LanguageNames(), ", ") }
