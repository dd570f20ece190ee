package ingress_test

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gantryhq/gantry/ingress"
	"github.com/gantryhq/gantry/ingress/service"
	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/secret"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/store/storetest"
)

type jobPage struct {
	Jobs       []jobs.Job `json:"jobs"`
	NextCursor *string    `json:"next_cursor"`
}

func (h *harness) list(t *testing.T, key, query string) jobPage {
	t.Helper()
	r := h.do(t, key, "GET", "/v1/jobs?"+query, "")
	if r.status != 200 {
		t.Fatalf("GET /v1/jobs?%s: %d %s", query, r.status, r.body)
	}
	var p jobPage
	r.json(t, &p)
	return p
}

func ids(list []jobs.Job) []string {
	out := []string{}
	for _, j := range list {
		out = append(out, j.ID)
	}
	return out
}

// TestHistorySearch: GET /v1/jobs filters by status, language, time and
// metadata, alone and together, with the cursor, within the tenant only;
// anything it does not understand is a 400 naming the parameter.
func TestHistorySearch(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	submit := func(key, body string) jobs.Job {
		t.Helper()
		r := h.do(t, key, "POST", "/v1/jobs", body)
		if r.status != 202 {
			t.Fatalf("submit: %d %s", r.status, r.body)
		}
		return r.job(t)
	}
	py := submit(h.keyA, `{"language":"python","code":"print(1)","metadata":{"run":"r1","agent":"eval"},"env":{"TOKEN":"tok-HIDDEN-1"}}`)
	sh := submit(h.keyA, `{"language":"bash","code":"exit 2","metadata":{"run":"r1"}}`)
	node := submit(h.keyA, `{"language":"node","command":["node","-e","1"],"metadata":{"run":"r2","agent":"eval"}}`)
	other := submit(h.keyB, `{"language":"python","code":"print(1)","metadata":{"run":"r1","agent":"eval"}}`)
	code1 := 1
	h.finish(t, py.ID, succeeded("1\n"))
	h.finish(t, sh.ID, jobs.Result{Status: jobs.StatusFailed, ExitCode: &code1})
	h.finish(t, other.ID, succeeded("1\n"))
	old := time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC)
	if err := storetest.Exec(h.st, `UPDATE jobs SET created_at = $2 WHERE id = $1`, py.ID, old); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		query string
		want  []string
	}{
		{"", []string{node.ID, sh.ID, py.ID}},
		{"status=succeeded", []string{py.ID}},
		{"status=failed,queued", []string{node.ID, sh.ID}},
		{"status=failed&status=succeeded", []string{sh.ID, py.ID}},
		{"language=python", []string{py.ID}},
		{"language=bash,node", []string{node.ID, sh.ID}},
		{"created_before=2026-01-03T00:00:00Z", []string{py.ID}},
		{"created_after=2026-01-02T15:00:00Z&created_before=2026-01-02T15:00:00.001Z", []string{py.ID}},
		{"created_after=2026-01-02T16:00:00%2B01:00&created_before=2026-01-02T15:00:01Z", []string{py.ID}},
		{"created_after=2026-01-03T00:00:00Z", []string{node.ID, sh.ID}},
		{"metadata.run=r1", []string{sh.ID, py.ID}},
		{"metadata.run=r1&metadata.agent=eval", []string{py.ID}},
		{"metadata.agent=eval&status=queued&language=node", []string{node.ID}},
		{"metadata.run=r1&status=succeeded&language=python&created_before=2026-02-01T00:00:00Z", []string{py.ID}},
		{"metadata.run=nope", []string{}},
	} {
		if got := ids(h.list(t, h.keyA, c.query).Jobs); !reflect.DeepEqual(got, c.want) {
			t.Errorf("?%s: %v, want %v", c.query, got, c.want)
		}
	}
	// Tenant B's filters only ever find B's jobs.
	if got := ids(h.list(t, h.keyB, "metadata.run=r1&metadata.agent=eval").Jobs); !reflect.DeepEqual(got, []string{other.ID}) {
		t.Errorf("B's metadata search: %v, want only %s", got, other.ID)
	}
	if got := ids(h.list(t, h.keyB, "language=bash,node").Jobs); len(got) != 0 {
		t.Errorf("B's language search found A's jobs: %v", got)
	}
	// The cursor pages a filtered listing; the filters go with it.
	p := h.list(t, h.keyA, "metadata.run=r1&limit=1")
	if ids(p.Jobs)[0] != sh.ID || p.NextCursor == nil {
		t.Fatalf("first page: %v", ids(p.Jobs))
	}
	p = h.list(t, h.keyA, "metadata.run=r1&limit=1&cursor="+*p.NextCursor)
	if !reflect.DeepEqual(ids(p.Jobs), []string{py.ID}) || p.NextCursor != nil {
		t.Errorf("second page: %v, next %v", ids(p.Jobs), p.NextCursor)
	}

	// include=spec: what ran, env names without values.
	r := h.do(t, h.keyA, "GET", "/v1/jobs?include=spec&metadata.agent=eval", "")
	if bytes.Contains(r.body, []byte("tok-HIDDEN-1")) {
		t.Fatalf("a listing shows an env value: %s", r.body)
	}
	var withSpec jobPage
	r.json(t, &withSpec)
	if len(withSpec.Jobs) != 2 || withSpec.Jobs[0].Spec == nil || withSpec.Jobs[1].Spec == nil {
		t.Fatalf("include=spec: %s", r.body)
	}
	if s := withSpec.Jobs[0].Spec; !reflect.DeepEqual(s.Command, []string{"node", "-e", "1"}) || s.Code != "" {
		t.Errorf("node's spec: %+v", s)
	}
	if s := withSpec.Jobs[1].Spec; s.Code != "print(1)" || !reflect.DeepEqual(s.EnvNames, []string{"TOKEN"}) || s.TimeoutMS == 0 || s.Limits.MemoryMB == 0 {
		t.Errorf("python's spec: %+v", s)
	}
	if p := h.list(t, h.keyA, "metadata.agent=eval"); p.Jobs[0].Spec != nil {
		t.Error("spec without include=spec")
	}
	r = h.do(t, h.keyA, "GET", "/v1/jobs/"+py.ID+"?include=spec", "")
	if j := r.job(t); r.status != 200 || j.Spec == nil || j.Spec.Code != "print(1)" || bytes.Contains(r.body, []byte("tok-HIDDEN-1")) {
		t.Errorf("GET the job with include=spec: %d %s", r.status, r.body)
	}
	if r := h.do(t, h.keyB, "GET", "/v1/jobs/"+py.ID+"?include=spec", ""); r.status != 404 {
		t.Errorf("B reads A's job's spec: %d", r.status)
	}

	for _, c := range []struct{ path, field string }{
		{"/v1/jobs?nope=1", "nope"},
		{"/v1/jobs?Status=failed", "Status"},
		{"/v1/jobs?status=done", "status"},
		{"/v1/jobs?status=failed,done", "status"},
		{"/v1/jobs?language=cobol", "language"},
		{"/v1/jobs?created_after=yesterday", "created_after"},
		{"/v1/jobs?created_before=2026-01-02", "created_before"},
		{"/v1/jobs?created_after=2026-01-02T00:00:00Z&created_before=2026-01-01T00:00:00Z", "created_before"},
		{"/v1/jobs?metadata.=x", "metadata."},
		{"/v1/jobs?metadata.run=a&metadata.run=b", "metadata.run"},
		{"/v1/jobs?metadata.k=" + strings.Repeat("v", 513), "metadata.k"},
		{"/v1/jobs?metadata.k=a%00b", "metadata.k"},
		{"/v1/jobs?limit=5&limit=6", "limit"},
		{"/v1/jobs?limit=0", "limit"},
		{"/v1/jobs?cursor=xyz", "cursor"},
		{"/v1/jobs?include=stdout", "include"},
		{"/v1/jobs?session_id=%ff", "session_id"},
		{"/v1/jobs/" + py.ID + "?include=env", "include"},
		{"/v1/jobs/" + py.ID + "?wiat=1s", "wiat"},
	} {
		r := h.do(t, h.keyA, "GET", c.path, "")
		var body struct{ Error service.Error }
		r.json(t, &body)
		if r.status != 400 || body.Error.Code != "invalid_argument" || body.Error.Field != c.field || !strings.Contains(body.Error.Message, c.field) {
			t.Errorf("GET %s: %d %s, want 400 naming %q", c.path, r.status, r.body, c.field)
		}
	}
	if r := h.do(t, h.keyA, "GET", "/v1/jobs?status=failed;language=bash", ""); r.status != 400 {
		t.Errorf("a malformed query string: %d %s", r.status, r.body)
	}

	// The MCP tool filters the same way.
	c := h.mcpClient(t, h.keyA, "2025-06-18")
	res := call(t, c, "list_jobs", map[string]any{"status": []string{"succeeded", "failed"}, "metadata": map[string]string{"run": "r1"}, "include_spec": true})
	var out struct {
		Jobs []struct {
			JobID string        `json:"job_id"`
			Spec  *jobs.JobSpec `json:"spec"`
		} `json:"jobs"`
	}
	structured(t, res, &out)
	if res.IsError || len(out.Jobs) != 2 || out.Jobs[0].JobID != sh.ID || out.Jobs[1].Spec == nil || out.Jobs[1].Spec.EnvNames[0] != "TOKEN" ||
		strings.Contains(text(res), "tok-HIDDEN-1") || !strings.Contains(text(res), "env: TOKEN") {
		t.Errorf("list_jobs with filters: %s", text(res))
	}
	res = call(t, c, "list_jobs", map[string]any{"language": []string{"python"}, "created_after": "2026-01-03T00:00:00Z"})
	structured(t, res, &out)
	if res.IsError || len(out.Jobs) != 0 {
		t.Errorf("list_jobs by language and time: %s", text(res))
	}
	if res := call(t, c, "list_jobs", map[string]any{"language": []string{"cobol"}}); !res.IsError || !strings.Contains(text(res), "cobol") {
		t.Errorf("list_jobs with a bad language: %s", text(res))
	}
	cb := h.mcpClient(t, h.keyB, "2025-06-18")
	res = call(t, cb, "list_jobs", map[string]any{"metadata": map[string]string{"run": "r1"}})
	structured(t, res, &out)
	if len(out.Jobs) != 1 || out.Jobs[0].JobID != other.ID {
		t.Errorf("B's list_jobs: %s", text(res))
	}
}

// TestEnvSealedAtRest: with a secret key, a job's env values are not in
// its row nor derivable from its request hash, the API shows their names
// only, idempotent retries still work, and rows stored in the clear are
// sealed by the sweeper.
func TestEnvSealedAtRest(t *testing.T) {
	t.Parallel()
	box, err := secret.New(bytes.Repeat([]byte{3}, secret.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, func(h *harness, c *ingress.Config) { c.Box = box; h.maint.Interval = 50 * time.Millisecond })
	ctx := context.Background()
	const value = "tok-AT-REST-42"
	body := `{"language":"python","code":"import os; print(os.environ['TOKEN'])","env":{"TOKEN":"` + value + `","MODE":"x"},"idempotency_key":"k1"}`
	r := h.do(t, h.keyA, "POST", "/v1/jobs", body)
	if r.status != 202 || bytes.Contains(r.body, []byte(value)) {
		t.Fatalf("submit: %d %s", r.status, r.body)
	}
	j := r.job(t)
	var spec string
	var hash []byte
	if err := storetest.QueryRow(h.st, `SELECT spec::text, request_hash FROM jobs WHERE id = $1`, j.ID).Scan(&spec, &hash); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(spec, value) || !strings.Contains(spec, `"sealed_env"`) {
		t.Fatalf("the row's spec holds the value, or no sealed env: %s", spec)
	}
	var req jobs.Request
	_ = json.Unmarshal([]byte(body), &req)
	if bytes.Equal(hash, jobs.RequestHash(req)) {
		t.Error("the request hash is the plain hash of the request: a short env value could be guessed from it")
	}
	// A retry is the same job; the same key with another value is not.
	if r := h.do(t, h.keyA, "POST", "/v1/jobs", body); r.status != 202 || r.job(t).ID != j.ID {
		t.Errorf("retry: %d %s", r.status, r.body)
	}
	if r := h.do(t, h.keyA, "POST", "/v1/jobs", strings.Replace(body, value, "other", 1)); r.status != 409 {
		t.Errorf("same key, another env value: %d %s", r.status, r.body)
	}
	// The runner's claim opens it.
	c, ok, err := storetest.Claim(h.st, j.ID, "r")
	if err != nil || !ok {
		t.Fatal(err)
	}
	if err := c.Spec.OpenEnv(box, c.TenantID, j.ID); err != nil || c.Spec.Env["TOKEN"] != value {
		t.Errorf("open: %v %v", c.Spec.Env, err)
	}
	r = h.do(t, h.keyA, "GET", "/v1/jobs/"+j.ID+"?include=spec", "")
	if got := r.job(t); got.Spec == nil || !reflect.DeepEqual(got.Spec.EnvNames, []string{"MODE", "TOKEN"}) || bytes.Contains(r.body, []byte(value)) {
		t.Errorf("include=spec: %s", r.body)
	}

	// A job stored in the clear (an older gantry) is sealed by the sweeper.
	plainSpec, _ := jobs.DefaultPolicy().Normalize(jobs.Request{Language: "bash", Code: "echo $OLD", Env: map[string]string{"OLD": "old-CLEAR-7"}})
	old, _, err := h.st.EnqueueJob(ctx, store.NewJob{TenantID: h.tenantB, Spec: plainSpec}, func(context.Context, string) (uint64, error) { return 1, nil })
	if err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 10*time.Second, "the sweeper to seal the older job's env", func() bool {
		var clear bool
		if err := storetest.QueryRow(h.st, `SELECT spec::text LIKE '%old-CLEAR-7%' FROM jobs WHERE id = $1`, old.ID).Scan(&clear); err != nil {
			t.Fatal(err)
		}
		return !clear
	})
	c, ok, err = storetest.Claim(h.st, old.ID, "r")
	if err != nil || !ok {
		t.Fatal(err)
	}
	if err := c.Spec.OpenEnv(box, h.tenantB, old.ID); err != nil || c.Spec.Env["OLD"] != "old-CLEAR-7" {
		t.Errorf("open the sealed older env: %v %v", c.Spec.Env, err)
	}
}
