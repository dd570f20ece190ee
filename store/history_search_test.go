package store_test

import (
	"bytes"
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/secret"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/store/storetest"
)

// searchJob queues a job of the tenant and returns its id.
func searchJob(t *testing.T, st *store.Store, tenantID string, req jobs.Request) string {
	t.Helper()
	spec, err := jobs.DefaultPolicy().Normalize(req)
	if err != nil {
		t.Fatal(err)
	}
	j, _, err := st.EnqueueJob(context.Background(), store.NewJob{TenantID: tenantID, Spec: spec, Metadata: req.Metadata},
		func(context.Context, string) (uint64, error) { return 1, nil })
	if err != nil {
		t.Fatal(err)
	}
	return j.ID
}

func listIDs(t *testing.T, st *store.Store, tenantID string, f store.JobFilter) []string {
	t.Helper()
	if f.Limit == 0 {
		f.Limit = 100
	}
	list, _, err := st.ListJobs(context.Background(), tenantID, f)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(list))
	for i, j := range list {
		ids[i] = j.ID
	}
	return ids
}

// TestListJobsFilters: each filter of the history alone, together, with
// the cursor, and never across tenants.
func TestListJobsFilters(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	ctx := context.Background()
	a, _ := storetest.Tenant(t, st, "a")
	b, _ := storetest.Tenant(t, st, "b")

	py1 := searchJob(t, st, a, jobs.Request{Language: "python", Code: "print(1)", Metadata: map[string]string{"run": "7", "agent": "x"}})
	sh := searchJob(t, st, a, jobs.Request{Language: "bash", Code: "exit 1", Metadata: map[string]string{"run": "7"}})
	py2 := searchJob(t, st, a, jobs.Request{Language: "python", Code: "print(2)", Metadata: map[string]string{"run": "8", "agent": "x"}})
	node := searchJob(t, st, a, jobs.Request{Language: "node", Code: "1"})
	// Tenant B's jobs look the same as A's.
	bpy := searchJob(t, st, b, jobs.Request{Language: "python", Code: "print(1)", Metadata: map[string]string{"run": "7", "agent": "x"}})

	// Statuses: py1 succeeded, sh failed, py2 errored, node queued.
	code0, code1 := 0, 1
	for _, c := range []struct {
		id  string
		res jobs.Result
	}{
		{py1, jobs.Result{Status: jobs.StatusSucceeded, ExitCode: &code0}},
		{sh, jobs.Result{Status: jobs.StatusFailed, ExitCode: &code1}},
		{py2, jobs.Result{Status: jobs.StatusError, Error: &jobs.ErrorInfo{Code: "infrastructure", Message: "x"}}},
		{bpy, jobs.Result{Status: jobs.StatusFailed, ExitCode: &code1}},
	} {
		if _, ok, err := storetest.Claim(st, c.id, "r"); !ok || err != nil {
			t.Fatalf("claim %s: %v", c.id, err)
		}
		if ok, err := st.FinishJob(ctx, c.id, 1, c.res); !ok || err != nil {
			t.Fatalf("finish %s: %v", c.id, err)
		}
	}
	// Creation times an hour apart: py1 3h ago, sh 2h ago, py2 1h ago, node now.
	base := time.Now().Truncate(time.Second)
	for i, id := range []string{py1, sh, py2} {
		if err := storetest.Exec(st, `UPDATE jobs SET created_at = $2 WHERE id = $1`, id, base.Add(time.Duration(i-3)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}

	for _, c := range []struct {
		name string
		f    store.JobFilter
		want []string
	}{
		{"all", store.JobFilter{}, []string{node, py2, sh, py1}},
		{"one status", store.JobFilter{Statuses: []jobs.Status{jobs.StatusFailed}}, []string{sh}},
		{"statuses", store.JobFilter{Statuses: []jobs.Status{jobs.StatusFailed, jobs.StatusError}}, []string{py2, sh}},
		{"language", store.JobFilter{Languages: []string{"python"}}, []string{py2, py1}},
		{"languages", store.JobFilter{Languages: []string{"bash", "node"}}, []string{node, sh}},
		{"after", store.JobFilter{CreatedAfter: base.Add(-2 * time.Hour)}, []string{node, py2, sh}},
		{"before", store.JobFilter{CreatedBefore: base.Add(-2 * time.Hour)}, []string{py1}},
		{"between", store.JobFilter{CreatedAfter: base.Add(-150 * time.Minute), CreatedBefore: base.Add(-30 * time.Minute)}, []string{py2, sh}},
		{"metadata", store.JobFilter{Metadata: map[string]string{"run": "7"}}, []string{sh, py1}},
		{"metadata pairs", store.JobFilter{Metadata: map[string]string{"run": "7", "agent": "x"}}, []string{py1}},
		{"metadata empty value", store.JobFilter{Metadata: map[string]string{"agent": ""}}, nil},
		{"together", store.JobFilter{Languages: []string{"python"}, Statuses: []jobs.Status{jobs.StatusSucceeded, jobs.StatusError},
			Metadata: map[string]string{"agent": "x"}, CreatedAfter: base.Add(-90 * time.Minute)}, []string{py2}},
		{"none", store.JobFilter{Languages: []string{"bash"}, Statuses: []jobs.Status{jobs.StatusSucceeded}}, nil},
	} {
		got := listIDs(t, st, a, c.f)
		if len(got) == 0 && len(c.want) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}

	// Tenant B's search never sees A's jobs, nor A's B's.
	if got := listIDs(t, st, b, store.JobFilter{Metadata: map[string]string{"run": "7", "agent": "x"}}); !reflect.DeepEqual(got, []string{bpy}) {
		t.Errorf("B's metadata search: %v, want only %s", got, bpy)
	}
	if got := listIDs(t, st, a, store.JobFilter{Statuses: []jobs.Status{jobs.StatusFailed}, Languages: []string{"python"}}); len(got) != 0 {
		t.Errorf("A's search found B's job: %v", got)
	}

	// The cursor pages through a filtered listing.
	first, next, err := st.ListJobs(ctx, a, store.JobFilter{Languages: []string{"python", "bash"}, Limit: 2})
	if err != nil || len(first) != 2 || next == "" {
		t.Fatalf("first page: %d jobs, next %q, %v", len(first), next, err)
	}
	rest := listIDs(t, st, a, store.JobFilter{Languages: []string{"python", "bash"}, Limit: 2, Before: next})
	if !reflect.DeepEqual(rest, []string{py1}) || first[0].ID != py2 || first[1].ID != sh {
		t.Errorf("pages: %s %s, then %v", first[0].ID, first[1].ID, rest)
	}
}

// TestJobSpecsAndSealedEnv: what the API shows of a spec never holds env
// values or file contents; env sealed by the caller is not in the row, and
// rows stored in the clear are sealed by SealPlainEnv.
func TestJobSpecsAndSealedEnv(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	ctx := context.Background()
	a, _ := storetest.Tenant(t, st, "a")
	b, _ := storetest.Tenant(t, st, "b")
	box, err := secret.New(bytes.Repeat([]byte{9}, secret.KeySize))
	if err != nil {
		t.Fatal(err)
	}

	req := jobs.Request{Language: "python", Code: "import os\nprint(os.environ['TOKEN'])",
		Files: []jobs.File{{Path: "data.csv", Content: "a,b\n1,2\n"}, {Path: "x.bin", Content: "AAEC", Encoding: "base64"}},
		Stdin: "line\n", Env: map[string]string{"TOKEN": "tok-SEALED-value", "DEBUG": "1"}}
	spec, err := jobs.DefaultPolicy().Normalize(req)
	if err != nil {
		t.Fatal(err)
	}
	id := jobs.NewID("job")
	if err := spec.SealEnv(box, a, id); err != nil {
		t.Fatal(err)
	}
	j, _, err := st.EnqueueJob(ctx, store.NewJob{ID: id, TenantID: a, Spec: spec}, func(context.Context, string) (uint64, error) { return 1, nil })
	if err != nil || j.ID != id {
		t.Fatalf("enqueue: %s %v", j.ID, err)
	}
	// A job stored in the clear, as before env was sealed.
	plain := searchJob(t, st, a, jobs.Request{Language: "bash", Code: "echo $OLD", Env: map[string]string{"OLD": "old-PLAIN-value"}})

	rowHolds := func(id, value string) bool {
		var n int
		if err := storetest.QueryRow(st, `SELECT count(*) FROM jobs WHERE id = $1 AND spec::text LIKE '%' || $2 || '%'`, id, value).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	}
	if rowHolds(id, "tok-SEALED-value") || !rowHolds(plain, "old-PLAIN-value") {
		t.Fatal("the sealed value is in the row, or the plain one is not (the test's premise)")
	}

	specs, err := st.JobSpecs(ctx, a, []string{id, plain, jobs.NewID("job")})
	if err != nil {
		t.Fatal(err)
	}
	want := jobs.JobSpec{Code: req.Code, Files: []jobs.FileInfo{{Path: "data.csv", Size: 8}, {Path: "x.bin", Size: 3}},
		Stdin: "line\n", StdinEncoding: "utf8", EnvNames: []string{"DEBUG", "TOKEN"},
		TimeoutMS: spec.TimeoutMS, Limits: spec.Limits, Artifacts: spec.Artifacts, Environment: jobs.DefaultEnvironment}
	if len(specs) != 2 || !reflect.DeepEqual(specs[id], want) {
		t.Errorf("spec view = %+v\nwant %+v", specs[id], want)
	}
	if got := specs[plain].EnvNames; !reflect.DeepEqual(got, []string{"OLD"}) || specs[plain].Files == nil {
		t.Errorf("plain job's view: %+v", specs[plain])
	}
	if other, err := st.JobSpecs(ctx, b, []string{id, plain}); err != nil || len(other) != 0 {
		t.Errorf("tenant B reads A's specs: %v %v", other, err)
	}

	// The runner's claim carries the sealed env; it opens with the key.
	c, ok, err := storetest.Claim(st, id, "r")
	if err != nil || !ok {
		t.Fatalf("claim: %v", err)
	}
	if c.Spec.Env != nil || c.Spec.SealedEnv == nil {
		t.Fatalf("claimed spec: env %v sealed %v", c.Spec.Env, c.Spec.SealedEnv)
	}
	if err := c.Spec.OpenEnv(box, c.TenantID, id); err != nil || c.Spec.Env["TOKEN"] != "tok-SEALED-value" {
		t.Fatalf("open claimed env: %v %v", c.Spec.Env, err)
	}

	// The sweep seals the plain row, once; its claim opens the same.
	n, err := st.SealPlainEnv(ctx, 10, func(tenantID, jobID string, spec *jobs.Spec) error {
		return spec.SealEnv(box, tenantID, jobID)
	})
	if err != nil || n != 1 {
		t.Fatalf("SealPlainEnv = %d, %v; want 1", n, err)
	}
	if rowHolds(plain, "old-PLAIN-value") {
		t.Error("the older job's env value is still in its row")
	}
	if n, err := st.SealPlainEnv(ctx, 10, func(string, string, *jobs.Spec) error { return nil }); err != nil || n != 0 {
		t.Errorf("second SealPlainEnv = %d, %v; want 0", n, err)
	}
	c, ok, err = storetest.Claim(st, plain, "r")
	if err != nil || !ok {
		t.Fatalf("claim: %v", err)
	}
	if err := c.Spec.OpenEnv(box, c.TenantID, plain); err != nil || c.Spec.Env["OLD"] != "old-PLAIN-value" {
		t.Errorf("open the resealed env: %v %v", c.Spec.Env, err)
	}
	if specs, _ := st.JobSpecs(ctx, a, []string{plain}); !reflect.DeepEqual(specs[plain].EnvNames, []string{"OLD"}) {
		t.Errorf("names after sealing: %v", specs[plain].EnvNames)
	}
}
