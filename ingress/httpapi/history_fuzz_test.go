package httpapi

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gantryhq/gantry/ingress/service"
	"github.com/gantryhq/gantry/jobs"
)

// FuzzJobQuery: any query string of GET /v1/jobs is either refused with a
// 400 naming what is wrong, or read into a filter Postgres can take.
func FuzzJobQuery(f *testing.F) {
	for _, s := range []string{
		"", "status=failed,error&language=python", "status=failed&status=error", "metadata.run=7&metadata.agent=x",
		"created_after=2026-01-02T15:00:00+01:00&created_before=2026-01-03T00:00:00Z", "include=spec&limit=5",
		"cursor=AAAA", "metadata.=x", "nope=1", "limit=1&limit=2", "session_id=%00", "status=%ff", "a;b",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := strictQuery(raw, listParams, metadataParam)
		var jq service.JobQuery
		if err == nil {
			jq, err = jobQuery(q)
		}
		if err == nil {
			_, err = jq.Filter()
		}
		if err != nil {
			e, internal := service.ToError(err)
			if internal || e.Status != 400 || e.Message == "" {
				t.Fatalf("%q: %v (status %d)", raw, err, e.Status)
			}
			return
		}
		fl, _ := jq.Filter()
		if fl.Limit < 1 || fl.Limit > 100 {
			t.Fatalf("%q: limit %d", raw, fl.Limit)
		}
		for _, s := range fl.Statuses {
			if !s.Valid() {
				t.Fatalf("%q: status %q", raw, s)
			}
		}
		for _, l := range fl.Languages {
			if _, ok := jobs.LookupLanguage(l); !ok {
				t.Fatalf("%q: language %q", raw, l)
			}
		}
		for k, v := range fl.Metadata {
			for _, s := range []string{k, v} {
				if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
					t.Fatalf("%q: metadata %q=%q", raw, k, v)
				}
			}
		}
		for _, s := range []string{fl.SessionID, fl.BatchID} {
			if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
				t.Fatalf("%q: %q", raw, s)
			}
		}
		if !fl.CreatedAfter.IsZero() && !fl.CreatedBefore.IsZero() && !fl.CreatedAfter.Before(fl.CreatedBefore) {
			t.Fatalf("%q: an empty time range", raw)
		}
	})
}
