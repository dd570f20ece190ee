package store_test

import (
	"context"
	"errors"
	"io/fs"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/migrations"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/store/storetest"
)

func newJob(tenantID, key string) store.NewJob {
	req := jobs.Request{Language: "python", Code: "print(1)", IdempotencyKey: key}
	spec, _ := jobs.DefaultPolicy().Normalize(req)
	return store.NewJob{TenantID: tenantID, Spec: spec, IdempotencyKey: key, RequestHash: jobs.RequestHash(req)}
}

// published records the ids of the jobs published; each message's
// sequence is its place in the list.
func published(ids *[]string) func(context.Context, string) (uint64, error) {
	return func(_ context.Context, id string) (uint64, error) {
		*ids = append(*ids, id)
		return uint64(len(*ids)), nil
	}
}

func TestAuthenticate(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	ctx := context.Background()
	tenantID, key := storetest.Tenant(t, st, "acme")

	p, err := st.Authenticate(ctx, key)
	if err != nil || p.TenantID != tenantID {
		t.Fatalf("Authenticate = %+v, %v", p, err)
	}
	if _, err := st.Authenticate(ctx, key+"x"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("wrong key: err = %v", err)
	}
	if _, err := st.RevokeAPIKey(ctx, p.KeyID); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Authenticate(ctx, key); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("revoked key still works: %v", err)
	}
	if _, err := st.CreateTenant(ctx, "acme"); !errors.Is(err, store.ErrConflict) {
		t.Errorf("duplicate tenant: %v", err)
	}
	if _, err := st.CreateTenant(ctx, "../bad"); err == nil {
		t.Error("bad tenant name accepted")
	}
	// A chosen key can be registered again for the same tenant, never for another.
	other, _ := storetest.Tenant(t, st, "other")
	if _, err := st.AddAPIKey(ctx, tenantID, "dev", "gk_chosen_dev_key_123"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddAPIKey(ctx, tenantID, "dev", "gk_chosen_dev_key_123"); err != nil {
		t.Fatalf("re-adding the same key: %v", err)
	}
	if _, err := st.AddAPIKey(ctx, other, "dev", "gk_chosen_dev_key_123"); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("key of another tenant: %v", err)
	}
}

func TestEnqueuePublishFailureLeavesNoJob(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	ctx := context.Background()
	tenantID, _ := storetest.Tenant(t, st, "acme")
	boom := errors.New("queue down")
	_, _, err := st.EnqueueJob(ctx, newJob(tenantID, ""), func(context.Context, string) (uint64, error) { return 0, boom })
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	list, _, err := st.ListJobs(ctx, tenantID, store.JobFilter{Limit: 10})
	if err != nil || len(list) != 0 {
		t.Fatalf("jobs after failed publish = %d (%v), want 0", len(list), err)
	}
}

func TestIdempotency(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	ctx := context.Background()
	tenantID, _ := storetest.Tenant(t, st, "acme")
	otherID, _ := storetest.Tenant(t, st, "other")

	var pubs []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	got := make([]jobs.Job, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j, _, err := st.EnqueueJob(ctx, newJob(tenantID, "k1"), func(_ context.Context, id string) (uint64, error) {
				mu.Lock()
				defer mu.Unlock()
				pubs = append(pubs, id)
				return uint64(len(pubs)), nil
			})
			if err != nil {
				t.Error(err)
			}
			got[i] = j
		}()
	}
	wg.Wait()
	for _, j := range got {
		if j.ID != got[0].ID {
			t.Fatalf("same key gave different jobs: %s vs %s", j.ID, got[0].ID)
		}
	}
	if len(pubs) != 1 {
		t.Errorf("published %d times, want once", len(pubs))
	}
	// Same key, different request: conflict.
	nj := newJob(tenantID, "k1")
	nj.RequestHash = []byte("different")
	if _, _, err := st.EnqueueJob(ctx, nj, published(&pubs)); !errors.Is(err, store.ErrConflict) {
		t.Errorf("reused key with another body: err = %v", err)
	}
	// Keys are per tenant.
	j, created, err := st.EnqueueJob(ctx, newJob(otherID, "k1"), published(&pubs))
	if err != nil || !created || j.ID == got[0].ID {
		t.Errorf("other tenant's key collided: %v %v", created, err)
	}
}

func TestTenantScoping(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	ctx := context.Background()
	a, _ := storetest.Tenant(t, st, "a")
	b, _ := storetest.Tenant(t, st, "b")
	var pubs []string
	j, _, err := st.EnqueueJob(ctx, newJob(a, ""), published(&pubs))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetJob(ctx, b, j.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("tenant b read a's job: %v", err)
	}
	if _, err := st.CancelJob(ctx, b, j.ID, time.Minute); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("tenant b cancelled a's job: %v", err)
	}
	if list, _, _ := st.ListJobs(ctx, b, store.JobFilter{Limit: 10}); len(list) != 0 {
		t.Errorf("tenant b lists %d jobs", len(list))
	}
	if got, _ := st.GetJob(ctx, a, j.ID); got.Status != jobs.StatusQueued {
		t.Errorf("status = %s", got.Status)
	}
}

func TestClaimFinishFencing(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	ctx := context.Background()
	a, _ := storetest.Tenant(t, st, "a")
	var pubs []string
	j, _, _ := st.EnqueueJob(ctx, newJob(a, ""), published(&pubs))

	c, ok, err := storetest.Claim(st, j.ID, "r1")
	if err != nil || !ok || c.TenantID != a || c.Spec.Code != "print(1)" {
		t.Fatalf("claim 1: %+v %v %v", c, ok, err)
	}
	// The runner is lost; the redelivery is claimed by another runner.
	if _, ok, err := storetest.Claim(st, j.ID, "r2"); err != nil || !ok {
		t.Fatalf("claim 2: %v %v", ok, err)
	}
	code := 0
	if applied, err := st.FinishJob(ctx, j.ID, 1, jobs.Result{Status: jobs.StatusSucceeded, ExitCode: &code}); err != nil || applied {
		t.Fatalf("stale attempt recorded: %v %v", applied, err)
	}
	res := jobs.Result{Status: jobs.StatusSucceeded, ExitCode: &code, Stdout: []byte("ok\xff\n"),
		Artifacts: []jobs.Artifact{{Path: "out/a.txt", Size: 2, SHA256: "x", ContentType: "text/plain"}}}
	if applied, err := st.FinishJob(ctx, j.ID, 2, res); err != nil || !applied {
		t.Fatalf("finish: %v %v", applied, err)
	}
	got, _ := st.GetJob(ctx, a, j.ID)
	if got.Status != jobs.StatusSucceeded || got.Attempt != 2 || got.Stdout != "ok\uFFFD\n" || len(got.Artifacts) != 1 {
		t.Errorf("job = %+v", got)
	}
	// Finished jobs are not claimed again, and never change.
	if _, ok, err := storetest.Claim(st, j.ID, "r3"); err != nil || ok {
		t.Errorf("claimed a finished job: %v %v", ok, err)
	}
	if applied, _ := st.FailJob(ctx, j.ID, 3, "x"); applied {
		t.Error("FailJob changed a finished job")
	}
	if _, _, err := storetest.Claim(st, jobs.NewID("job"), "r"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("claim of unknown job: %v", err)
	}
}

// TestUsageAndCompileRecorded: what a job used and its compile step are
// kept with its result, and absent (null) for a job that has none.
func TestUsageAndCompileRecorded(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	a, _ := storetest.Tenant(t, st, "a")
	var pubs []string
	one, _, _ := st.EnqueueJob(ctx, newJob(a, ""), published(&pubs))
	two, _, _ := st.EnqueueJob(ctx, newJob(a, ""), published(&pubs))
	for _, id := range []string{one.ID, two.ID} {
		if _, ok, err := storetest.Claim(st, id, "r1"); err != nil || !ok {
			t.Fatalf("claim: %v %v", ok, err)
		}
	}
	code, zero := 1, 0
	res := jobs.Result{Status: jobs.StatusFailed, ExitCode: &code,
		Usage: &jobs.ProgramUsage{CPUTime: 1234567 * time.Microsecond, PeakMemoryKB: ptr(int64(204800))},
		Compile: &jobs.Compile{Status: jobs.CompileSucceeded, ExitCode: &zero, DurationMS: 812,
			CPUTimeMS: ptr(int64(790)), PeakMemoryKB: ptr(int64(150000)), OutputTruncated: true},
		CompileOutput: []byte("main.c:3: warning: \xff unused\n")}
	if applied, err := st.FinishJob(ctx, one.ID, 1, res); err != nil || !applied {
		t.Fatalf("finish: %v %v", applied, err)
	}
	got, err := st.GetJob(ctx, a, one.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.CPUTimeMS == nil || *got.CPUTimeMS != 1235 || got.PeakMemoryKB == nil || *got.PeakMemoryKB != 204800 {
		t.Errorf("usage: cpu %v peak %v", got.CPUTimeMS, got.PeakMemoryKB)
	}
	if c := got.Compile; c == nil || c.Status != jobs.CompileSucceeded || *c.ExitCode != 0 || c.DurationMS != 812 ||
		*c.CPUTimeMS != 790 || *c.PeakMemoryKB != 150000 || !c.OutputTruncated {
		t.Errorf("compile: %+v", got.Compile)
	}
	if got.CompileOutput != "main.c:3: warning: \uFFFD unused\n" {
		t.Errorf("compile output %q", got.CompileOutput)
	}

	if applied, err := st.FinishJob(ctx, two.ID, 1, jobs.Result{Status: jobs.StatusSucceeded, ExitCode: &zero}); err != nil || !applied {
		t.Fatalf("finish: %v %v", applied, err)
	}
	got, _ = st.GetJob(ctx, a, two.ID)
	if got.CPUTimeMS != nil || got.PeakMemoryKB != nil || got.Compile != nil || got.CompileOutput != "" {
		t.Errorf("a job without them: cpu %v peak %v compile %+v output %q", got.CPUTimeMS, got.PeakMemoryKB, got.Compile, got.CompileOutput)
	}
}

func ptr[T any](v T) *T { return &v }

func TestCancel(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	ctx := context.Background()
	a, _ := storetest.Tenant(t, st, "a")
	var pubs []string
	queued, _, _ := st.EnqueueJob(ctx, newJob(a, ""), published(&pubs))
	if out, err := st.CancelJob(ctx, a, queued.ID, time.Minute); err != nil || out != store.CancelledQueued {
		t.Fatalf("cancel queued: %v %v", out, err)
	}
	if _, ok, _ := storetest.Claim(st, queued.ID, "r"); ok {
		t.Error("a cancelled job was claimed")
	}
	running, _, _ := st.EnqueueJob(ctx, newJob(a, ""), published(&pubs))
	_, _, _ = storetest.Claim(st, running.ID, "r")
	if out, err := st.CancelJob(ctx, a, running.ID, time.Minute); err != nil || out != store.CancelRequested {
		t.Fatalf("cancel running: %v %v", out, err)
	}
	if yes, _ := st.Heartbeat(ctx, running.ID, 1); !yes {
		t.Error("cancel not flagged")
	}
	if out, _ := st.CancelJob(ctx, a, queued.ID, time.Minute); out != store.AlreadyFinished {
		t.Errorf("second cancel: %v", out)
	}
}

// TestWithdraw: a withdrawal cancels a queued job, which no runner can then
// take, and leaves alone one a runner took, whatever its state; another
// tenant's job, like a missing one, is not found.
func TestWithdraw(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	ctx := context.Background()
	a, _ := storetest.Tenant(t, st, "a")
	b, _ := storetest.Tenant(t, st, "b")
	var pubs []string
	queued, _, _ := st.EnqueueJob(ctx, newJob(a, ""), published(&pubs))
	if _, err := st.WithdrawJob(ctx, b, queued.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another tenant's withdrawal: %v", err)
	}
	if ok, err := st.WithdrawJob(ctx, a, queued.ID); !ok || err != nil {
		t.Fatalf("withdraw a queued job: %v %v", ok, err)
	}
	if _, ok, _ := storetest.Claim(st, queued.ID, "r"); ok {
		t.Error("a withdrawn job was taken")
	}
	if j, _ := st.GetJob(ctx, a, queued.ID); j.Status != jobs.StatusCancelled || j.StartedAt != nil || j.Error == nil || j.Error.Message != "withdrawn before it started" {
		t.Errorf("the withdrawn job: %s %v %+v", j.Status, j.StartedAt, j.Error)
	}
	running, _, _ := st.EnqueueJob(ctx, newJob(a, ""), published(&pubs))
	if _, ok, _ := storetest.Claim(st, running.ID, "r"); !ok {
		t.Fatal("claim")
	}
	if ok, err := st.WithdrawJob(ctx, a, running.ID); ok || err != nil {
		t.Errorf("withdraw a running job: %v %v", ok, err)
	}
	if yes, _ := st.Heartbeat(ctx, running.ID, 1); yes {
		t.Error("a withdrawal asked a running job to stop")
	}
	if j, _ := st.GetJob(ctx, a, running.ID); j.Status != jobs.StatusRunning {
		t.Errorf("the running job is %s", j.Status)
	}
	if _, err := st.WithdrawJob(ctx, a, jobs.NewID("job")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("withdraw a missing job: %v", err)
	}
}

func TestListPagination(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	ctx := context.Background()
	a, _ := storetest.Tenant(t, st, "a")
	var pubs []string
	for range 7 {
		if _, _, err := st.EnqueueJob(ctx, newJob(a, ""), published(&pubs)); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	cursor := ""
	pages := 0
	for {
		list, next, err := st.ListJobs(ctx, a, store.JobFilter{Limit: 3, Before: cursor})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for i, j := range list {
			if seen[j.ID] {
				t.Fatalf("job %s listed twice", j.ID)
			}
			seen[j.ID] = true
			if i > 0 && list[i-1].ID < j.ID {
				t.Fatal("not newest first")
			}
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if len(seen) != 7 || pages != 3 {
		t.Errorf("saw %d jobs in %d pages", len(seen), pages)
	}
	if list, _, _ := st.ListJobs(ctx, a, store.JobFilter{Limit: 10, Statuses: []jobs.Status{jobs.StatusSucceeded}}); len(list) != 0 {
		t.Errorf("status filter: %d", len(list))
	}
}

// TestMigrateConcurrently is replicas starting together on a fresh
// database: the migrations are applied once, every replica comes up, and
// the schema version says so.
func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := storetest.DatabaseURL(t)
	const replicas = 3
	stores := make([]*store.Store, replicas)
	for i := range stores {
		st, err := store.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(st.Close)
		stores[i] = st
	}
	files, _ := fs.Glob(migrations.FS, "*.sql")
	// The newest version is the highest file's number (numbers may skip
	// one another branch has taken).
	newest, _ := strconv.ParseInt(strings.SplitN(files[len(files)-1], "_", 2)[0], 10, 64)
	cur, want, err := stores[0].SchemaVersion(ctx)
	if err != nil || cur != 0 || want != newest {
		t.Fatalf("fresh database: version %d of %d, %v", cur, want, err)
	}
	type result struct {
		applied []string
		err     error
	}
	results := make(chan result, replicas)
	for _, st := range stores {
		go func() {
			applied, err := st.Migrate(ctx)
			results <- result{applied, err}
		}()
	}
	total := 0
	for range replicas {
		r := <-results
		if r.err != nil {
			t.Fatalf("migrate: %v", r.err)
		}
		total += len(r.applied)
	}
	if total != len(files) {
		t.Errorf("%d replicas applied %d migrations in all, want each of the %d once", replicas, total, len(files))
	}
	if cur, want, err := stores[1].SchemaVersion(ctx); err != nil || cur != want {
		t.Errorf("after: version %d of %d, %v", cur, want, err)
	}
}

// TestMigrateOutOfOrder is a database migrated by a build that lacked a
// migration another branch numbered lower (17 landed after 18): the next
// build applies it, and until then the schema counts as behind it.
func TestMigrateOutOfOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := storetest.DatabaseURL(t)
	st, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	// As a database that never had 17: its Down, and no record of it.
	db, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	for _, q := range []string{`ALTER TABLE jobs DROP COLUMN egress`, `ALTER TABLE tenants DROP COLUMN egress_allow`,
		`DELETE FROM goose_db_version WHERE version_id = 17`} {
		if _, err := db.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	cur, want, err := st.SchemaVersion(ctx)
	if err != nil || cur != 16 || want <= 17 {
		t.Fatalf("with 17 missing: version %d of %d, %v", cur, want, err)
	}
	applied, err := st.Migrate(ctx)
	if err != nil || len(applied) != 1 || !strings.HasPrefix(applied[0], "00017_") {
		t.Fatalf("migrate: %v %v", applied, err)
	}
	if cur, want, err := st.SchemaVersion(ctx); err != nil || cur != want {
		t.Fatalf("after: version %d of %d, %v", cur, want, err)
	}
}
