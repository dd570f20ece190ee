package httpapi

import (
	"net/http"
	"net/url"
	"reflect"
	"sort"
	"strings"

	"github.com/gantryhq/gantry/ingress/openapi"
	"github.com/gantryhq/gantry/ingress/service"
	"github.com/gantryhq/gantry/jobs"
)

// History search: GET /v1/jobs's query string, read strictly into the
// service's JobQuery, and ?include=spec.

// metadataParam prefixes the query parameters that filter by metadata
// (metadata.KEY=VALUE).
const metadataParam = service.MetadataFilter

// listJobsParams are GET /v1/jobs's query parameters: the route table
// documents them and strictQuery allows them (queryNames), so a parameter
// is added in one place.
var listJobsParams = []openapi.Param{
	{In: "query", Name: "status", Schema: statusListSchema(), More: js{"style": "form", "explode": true}, Description: "Only jobs with one of these statuses: one, several repeated, or several comma-separated (failed,error)."},
	{In: "query", Name: "session_id", Schema: js{"type": "string"}, Description: "Only jobs of this session."},
	{In: "query", Name: "batch_id", Schema: js{"type": "string"}, Description: "Only jobs of this batch (POST /v1/jobs/batch)."},
	{In: "query", Name: "language", Schema: js{"type": "array", "items": js{"type": "string"}}, More: js{"style": "form", "explode": true}, Description: "Only jobs in one of these languages (" + service.LanguageNames() + "): one, several repeated, or comma-separated."},
	{In: "query", Name: "created_after", Schema: js{"type": "string", "format": "date-time"}, Description: "Only jobs created at or after this time (RFC 3339, e.g. 2026-01-02T15:04:05Z; percent-encode a + offset as %2B)."},
	{In: "query", Name: "created_before", Schema: js{"type": "string", "format": "date-time"}, Description: "Only jobs created strictly before this time (RFC 3339). Must be later than created_after."},
	{In: "query", Name: metadataParam + "KEY", Schema: js{"type": "string"}, Description: "Only jobs whose metadata has KEY with this value (replace KEY by the key: metadata.agent=demo). Several are ANDed; at most 32."},
	{In: "query", Name: "include", Schema: includeSchema, More: js{"style": "form", "explode": false}, Description: "spec: each job carries spec, what it ran (code or command, file names and sizes, stdin, env names but never values, timeout, limits)."},
	{In: "query", Name: "limit", Schema: js{"type": "integer", "minimum": 1, "maximum": 100, "default": 20}, Description: "Page size."},
	{In: "query", Name: "cursor", Schema: js{"type": "string"}, Description: "The next_cursor of the previous page (opaque)."},
}

// usageParams are GET /v1/usage's query parameters.
var usageParams = []openapi.Param{
	{In: "query", Name: "from", Schema: js{"type": "string", "format": "date-time"}, Description: "The range's start (RFC 3339), rounded down to its bucket's start. Default: 7 days before `to` by the day, 24 hours by the hour."},
	{In: "query", Name: "to", Schema: js{"type": "string", "format": "date-time"}, Description: "The range's end (RFC 3339, exclusive), rounded up to a bucket's end. Default: now."},
	{In: "query", Name: "by", Schema: js{"type": "string", "enum": []any{"day", "hour"}, "default": "day"}, Description: "The buckets: days or hours, in UTC. At most 1000 buckets."},
}

var usageParamNames = queryNames(usageParams)

func (s *Server) handleUsage(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	q, err := strictQuery(r.URL.RawQuery, usageParamNames)
	if err != nil {
		return err
	}
	u, err := s.svc.Usage(r.Context(), p, service.UsageQuery{From: q.Get("from"), To: q.Get("to"), By: q.Get("by")})
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, u)
	return nil
}

// statusListSchema is ?status='s: statuses, each item one or several
// comma-separated (the form kin-openapi and the JSON Schema can both check).
func statusListSchema() js {
	names := strings.ReplaceAll(service.StatusNames(), ", ", "|")
	return js{"type": "array", "items": js{"type": "string", "pattern": "^(" + names + ")(,(" + names + "))*$",
		"description": "A JobStatus, or several comma-separated."}}
}

// includeSchema is ?include='s: the extra parts a job answer may carry.
var includeSchema = js{"type": "array", "items": js{"type": "string", "enum": []any{"spec"}}}

// listParams are the names listJobsParams allows (metadata.KEY aside: any
// metadata.* name is allowed); multi says which may be given several times.
var listParams = queryNames(listJobsParams)

// getJobParams are GET /v1/jobs/{id}'s query parameters.
var getJobParams = []openapi.Param{
	{In: "query", Name: "wait", Schema: js{"type": "string"}, Examples: js{"seconds": js{"value": "30s"}, "millis": js{"value": "500ms"}, "plain": js{"value": "30"}}, Description: `Long-poll: if the job is not finished, wait up to this long for it to finish, then answer with the job as it is. A Go duration such as "30s", "500ms" or "1m30s", or a plain number of seconds such as "2" or "0.5". At most 60s (the server's MaxWait, configurable); more, or a negative or unparsable value, is 400. Absent or 0 answers at once.`},
	{In: "query", Name: "include", Schema: includeSchema, More: js{"style": "form", "explode": false}, Description: "spec: the job carries spec, what it ran (never the env values). Unknown query parameters are refused with 400."},
}

var getParams = queryNames(getJobParams)

// queryNames is the set of query parameter names of ps for strictQuery:
// true for those that may repeat (an array schema). A name with a
// metadataParam prefix is left to strictQuery's prefixes.
func queryNames(ps []openapi.Param) map[string]bool {
	names := map[string]bool{}
	for _, p := range ps {
		if p.In != "query" || strings.HasPrefix(p.Name, metadataParam) {
			continue
		}
		multi := p.Schema["type"] == "array" || (p.Of != nil && p.Of.Kind() == reflect.Slice)
		names[p.Name] = multi
	}
	return names
}

// strictQuery parses a query string, refusing parameters the route does
// not take (as unknown body fields are refused) and single-valued ones
// given twice: a typo must not widen a search silently. What reaches
// Postgres as text the service checks (JobQuery.Filter); the rest is
// parsed, and refused when it does not parse.
func strictQuery(raw string, allowed map[string]bool, prefixes ...string) (url.Values, error) {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return nil, service.BadRequest("", "the query string is malformed: %v", err)
	}
	for name, vals := range q {
		multi, ok := allowed[name]
		if !ok {
			for _, p := range prefixes {
				ok = ok || strings.HasPrefix(name, p)
			}
		}
		if !ok {
			return nil, service.BadRequest(name, "unknown query parameter %q (this route takes %s)", name, paramNames(allowed, prefixes))
		}
		if len(vals) > 1 && !multi {
			return nil, service.BadRequest(name, "%s is given %d times; give it once", name, len(vals))
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
			return false, service.BadRequest("include", "include: unknown value %q (the one thing to include is spec)", v)
		}
		spec = true
	}
	return spec, nil
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

// jobQuery reads GET /v1/jobs's filters (a query strictQuery let through).
func jobQuery(q url.Values) (service.JobQuery, error) {
	limit, err := pageLimit(q.Get("limit"))
	if err != nil {
		return service.JobQuery{}, err
	}
	spec, err := includeSpec(q)
	if err != nil {
		return service.JobQuery{}, err
	}
	jq := service.JobQuery{
		Statuses: listValues(q, "status"), Languages: listValues(q, "language"),
		SessionID: q.Get("session_id"), BatchID: q.Get("batch_id"),
		CreatedAfter: q.Get("created_after"), CreatedBefore: q.Get("created_before"),
		Limit: limit, Cursor: q.Get("cursor"), IncludeSpec: spec,
	}
	for name, vals := range q {
		if key, ok := strings.CutPrefix(name, metadataParam); ok {
			if jq.Metadata == nil {
				jq.Metadata = map[string]string{}
			}
			jq.Metadata[key] = vals[0]
		}
	}
	return jq, nil
}

func (s *Server) handleList(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	q, err := strictQuery(r.URL.RawQuery, listParams, metadataParam)
	if err != nil {
		return err
	}
	jq, err := jobQuery(q)
	if err != nil {
		return err
	}
	page, err := s.svc.ListJobs(r.Context(), p, jq)
	if err != nil {
		return err
	}
	out := make([]jobs.Job, len(page.Jobs))
	for i, j := range page.Jobs {
		out[i] = service.View(j)
		out[i].Spec = j.Spec
	}
	WriteJSON(w, http.StatusOK, jobList{Jobs: out, NextCursor: nilIfEmpty(page.NextCursor)})
	return nil
}

func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
