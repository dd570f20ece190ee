package ingress

import (
	"context"
	"encoding/hex"
	"net/http"
	"net/url"
	"reflect"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store"
)

// History search: GET /v1/jobs filters, ?include=spec, and env values
// sealed at rest.

// metadataParam prefixes the query parameters that filter by metadata
// (metadata.KEY=VALUE).
const metadataParam = "metadata."

// listJobsParams are GET /v1/jobs's query parameters: the route table
// documents them and strictQuery allows them (queryNames), so a parameter
// is added in one place.
var listJobsParams = []param{
	{in: "query", name: "status", schema: statusListSchema(), more: js{"style": "form", "explode": true}, desc: "Only jobs with one of these statuses: one, several repeated, or several comma-separated (failed,error)."},
	{in: "query", name: "session_id", schema: js{"type": "string"}, desc: "Only jobs of this session."},
	{in: "query", name: "batch_id", schema: js{"type": "string"}, desc: "Only jobs of this batch (POST /v1/jobs/batch)."},
	{in: "query", name: "language", schema: js{"type": "array", "items": js{"type": "string"}}, more: js{"style": "form", "explode": true}, desc: "Only jobs in one of these languages (" + languageNames() + "): one, several repeated, or comma-separated."},
	{in: "query", name: "created_after", schema: js{"type": "string", "format": "date-time"}, desc: "Only jobs created at or after this time (RFC 3339, e.g. 2026-01-02T15:04:05Z; percent-encode a + offset as %2B)."},
	{in: "query", name: "created_before", schema: js{"type": "string", "format": "date-time"}, desc: "Only jobs created strictly before this time (RFC 3339). Must be later than created_after."},
	{in: "query", name: metadataParam + "KEY", schema: js{"type": "string"}, desc: "Only jobs whose metadata has KEY with this value (replace KEY by the key: metadata.agent=demo). Several are ANDed; at most 32."},
	{in: "query", name: "include", schema: includeSchema, more: js{"style": "form", "explode": false}, desc: "spec: each job carries spec, what it ran (code or command, file names and sizes, stdin, env names but never values, timeout, limits)."},
	{in: "query", name: "limit", schema: js{"type": "integer", "minimum": 1, "maximum": 100, "default": 20}, desc: "Page size."},
	{in: "query", name: "cursor", schema: js{"type": "string"}, desc: "The next_cursor of the previous page (opaque)."},
}

// statusListSchema is ?status='s: statuses, each item one or several
// comma-separated (the form kin-openapi and the JSON Schema can both check).
func statusListSchema() js {
	names := strings.ReplaceAll(statusNames(), ", ", "|")
	return js{"type": "array", "items": js{"type": "string", "pattern": "^(" + names + ")(,(" + names + "))*$",
		"description": "A JobStatus, or several comma-separated."}}
}

// includeSchema is ?include='s: the extra parts a job answer may carry.
var includeSchema = js{"type": "array", "items": js{"type": "string", "enum": []any{"spec"}}}

// listParams are the names listJobsParams allows (metadata.KEY aside: any
// metadata.* name is allowed); multi says which may be given several times.
var listParams = queryNames(listJobsParams)

// getJobParams are GET /v1/jobs/{id}'s query parameters.
var getJobParams = []param{
	{in: "query", name: "wait", schema: js{"type": "string"}, examples: js{"seconds": js{"value": "30s"}, "millis": js{"value": "500ms"}, "plain": js{"value": "30"}}, desc: `Long-poll: if the job is not finished, wait up to this long for it to finish, then answer with the job as it is. A Go duration such as "30s", "500ms" or "1m30s", or a plain number of seconds such as "2" or "0.5". At most 60s (the server's MaxWait, configurable); more, or a negative or unparsable value, is 400. Absent or 0 answers at once.`},
	{in: "query", name: "include", schema: includeSchema, more: js{"style": "form", "explode": false}, desc: "spec: the job carries spec, what it ran (never the env values). Unknown query parameters are refused with 400."},
}

var getParams = queryNames(getJobParams)

// queryNames is the set of query parameter names of ps for strictQuery:
// true for those that may repeat (an array schema). A name with a
// metadataParam prefix is left to strictQuery's prefixes.
func queryNames(ps []param) map[string]bool {
	names := map[string]bool{}
	for _, p := range ps {
		if p.in != "query" || strings.HasPrefix(p.name, metadataParam) {
			continue
		}
		multi := p.schema["type"] == "array" || (p.of != nil && p.of.Kind() == reflect.Slice)
		names[p.name] = multi
	}
	return names
}

// strictQuery parses a query string, refusing parameters the route does
// not take (as unknown body fields are refused), single-valued ones given
// twice, and text Postgres cannot hold: a typo must not widen a search
// silently.
func strictQuery(raw string, allowed map[string]bool, prefixes ...string) (url.Values, error) {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return nil, badRequest("", "the query string is malformed: %v", err)
	}
	for name, vals := range q {
		multi, ok := allowed[name]
		if !ok {
			for _, p := range prefixes {
				ok = ok || strings.HasPrefix(name, p)
			}
		}
		if !ok {
			return nil, badRequest(name, "unknown query parameter %q (this route takes %s)", name, paramNames(allowed, prefixes))
		}
		if len(vals) > 1 && !multi {
			return nil, badRequest(name, "%s is given %d times; give it once", name, len(vals))
		}
		for _, v := range append([]string{name}, vals...) {
			if strings.ContainsRune(v, 0) || !utf8.ValidString(v) {
				return nil, badRequest(name, "%s must be UTF-8 text without NUL bytes", name)
			}
		}
	}
	return q, nil
}

// listValues reads a parameter that takes several values, given as
// repeats (status=a&status=b), comma-separated (status=a,b) or both.
func listValues(q url.Values, name string) []string {
	var out []string
	for _, v := range q[name] {
		for _, part := range strings.Split(v, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
	}
	return out
}

// includeSpec reads ?include=: "spec" is the one thing that can be
// included.
func includeSpec(q url.Values) (bool, error) {
	spec := false
	for _, v := range listValues(q, "include") {
		if v != "spec" {
			return false, badRequest("include", "include: unknown value %q (the one thing to include is spec)", v)
		}
		spec = true
	}
	return spec, nil
}

// jobFilter reads the filters of GET /v1/jobs.
func jobFilter(q url.Values) (store.JobFilter, error) {
	limit, before, err := pageParams(q, "job")
	if err != nil {
		return store.JobFilter{}, err
	}
	f := store.JobFilter{Limit: limit, Before: before, SessionID: q.Get("session_id"), BatchID: q.Get("batch_id")}
	for _, v := range listValues(q, "status") {
		st := jobs.Status(v)
		if !st.Valid() {
			return f, badRequest("status", "status: unknown status %q (one or several of %s, comma-separated)", v, statusNames())
		}
		f.Statuses = append(f.Statuses, st)
	}
	for _, v := range listValues(q, "language") {
		lang, ok := jobs.LookupLanguage(v)
		if !ok {
			return f, badRequest("language", "language: unknown language %q (one or several of %s, comma-separated)", v, languageNames())
		}
		f.Languages = append(f.Languages, lang.Name)
	}
	if f.CreatedAfter, err = timeParam(q, "created_after"); err != nil {
		return f, err
	}
	if f.CreatedBefore, err = timeParam(q, "created_before"); err != nil {
		return f, err
	}
	if !f.CreatedAfter.IsZero() && !f.CreatedBefore.IsZero() && !f.CreatedAfter.Before(f.CreatedBefore) {
		return f, badRequest("created_before", "created_before must be later than created_after")
	}
	for name, vals := range q {
		key, ok := strings.CutPrefix(name, metadataParam)
		if !ok {
			continue
		}
		if key == "" || len(key) > 64 {
			return f, badRequest(name, "%s: a metadata filter names a key of 1-64 bytes: metadata.KEY=VALUE", name)
		}
		if len(vals[0]) > 512 {
			return f, badRequest(name, "%s is %d bytes; metadata values are at most 512", name, len(vals[0]))
		}
		if f.Metadata == nil {
			f.Metadata = map[string]string{}
		}
		f.Metadata[key] = vals[0]
	}
	if len(f.Metadata) > 32 {
		return f, badRequest("metadata", "metadata: %d keys to filter by; at most 32", len(f.Metadata))
	}
	return f, nil
}

// timeParam reads an RFC 3339 time ("" leaves it zero). A '+' of the
// offset that arrived as a space (it was not percent-encoded) is taken
// back.
func timeParam(q url.Values, name string) (time.Time, error) {
	v := q.Get(name)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil && strings.Contains(v, " ") {
		t, err = time.Parse(time.RFC3339Nano, strings.ReplaceAll(v, " ", "+"))
	}
	if err != nil {
		return time.Time{}, badRequest(name, "%s must be an RFC 3339 time such as 2026-01-02T15:04:05Z, not %q", name, v)
	}
	return t, nil
}

// paramNames lists a route's query parameters for a message.
func paramNames(allowed map[string]bool, prefixes []string) string {
	names := make([]string, 0, len(allowed)+len(prefixes))
	for n := range allowed {
		names = append(names, n)
	}
	for _, p := range prefixes {
		names = append(names, p+"KEY")
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func statusNames() string {
	names := make([]string, len(jobs.Statuses))
	for i, s := range jobs.Statuses {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// languageEnum lists the languages jobs run in.
func languageEnum() []any {
	names := make([]any, len(jobs.Languages))
	for i, l := range jobs.Languages {
		names[i] = l.Name
	}
	return names
}

func languageNames() string {
	names := make([]string, len(jobs.Languages))
	for i, l := range jobs.Languages {
		names[i] = l.Name
	}
	return strings.Join(names, ", ")
}

// withSpecs fills in what each job ran (?include=spec).
func (s *Server) withSpecs(ctx context.Context, tenantID string, list []jobs.Job) error {
	ids := make([]string, len(list))
	for i, j := range list {
		ids[i] = j.ID
	}
	specs, err := s.store.JobSpecs(ctx, tenantID, ids)
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

func (s *Server) handleList(w http.ResponseWriter, r *http.Request, p store.Principal) error {
	q, err := strictQuery(r.URL.RawQuery, listParams, metadataParam)
	if err != nil {
		return err
	}
	f, err := jobFilter(q)
	if err != nil {
		return err
	}
	spec, err := includeSpec(q)
	if err != nil {
		return err
	}
	list, next, err := s.store.ListJobs(r.Context(), p.TenantID, f)
	if err != nil {
		return err
	}
	out := make([]jobs.Job, len(list))
	for i, j := range list {
		out[i] = s.view(j)
	}
	if spec {
		if err := s.withSpecs(r.Context(), p.TenantID, out); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, jobList{Jobs: out, NextCursor: nextCursor(next)})
	return nil
}

// sealEnv seals the spec's env values for the job about to be stored
// under jobID. Without a key they stay as they are (see sealPlainEnv).
func (s *Server) sealEnv(spec *jobs.Spec, tenantID, jobID string) error {
	if !s.cfg.Box.Enabled() {
		return nil
	}
	return spec.SealEnv(s.cfg.Box, tenantID, jobID)
}

// requestHash is the hash an idempotency key's request is known by. With
// a key, env values enter it as keyed hashes: a hash over the whole
// request, stored beside a spec that shows all the rest, would let a
// reader of the database try guesses of a short value offline.
func (s *Server) requestHash(tenantID string, req jobs.Request) ([]byte, error) {
	if len(req.Env) > 0 && s.cfg.Box.Enabled() {
		keyed := make(map[string]string, len(req.Env))
		for k, v := range req.Env {
			h, err := s.cfg.Box.Hash([]byte(v), "job-env-hash:"+tenantID)
			if err != nil {
				return nil, err
			}
			keyed[k] = hex.EncodeToString(h)
		}
		req.Env = keyed
	}
	return jobs.RequestHash(req), nil
}

// sealPlainEnv seals the env of jobs stored with it in the clear (before
// env was sealed, or while gantry ran without a key), a batch per sweep.
