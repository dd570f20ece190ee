package history_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gantryhq/gantry/blob"
	"github.com/gantryhq/gantry/blob/blobtest"
	"github.com/gantryhq/gantry/history"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/store/storetest"
)

type bundle struct {
	st     *store.Store
	blobs  *blob.Store
	r      *history.Retention
	tenant string
}

// setup is a store that keeps output past inlineMax in the object store,
// and the retention of cfg.
func setup(t testing.TB, inlineMax int, cfg history.Config) *bundle {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Postgres and S3")
	}
	b := &bundle{st: storetest.New(t), blobs: blobtest.New(t)}
	b.st.KeepOutput(history.NewOutput(b.blobs, slog.New(slog.NewTextHandler(io.Discard, nil))), inlineMax)
	b.r = history.NewRetention(b.st, b.blobs, cfg)
	b.tenant, _ = storetest.Tenant(t, b.st, "acme")
	return b
}

// running queues a job (as the ingress does)
// and claims it for attempt 1.
func (b *bundle) running(t *testing.T, key string) jobs.Job {
	t.Helper()
	ctx := context.Background()
	req := jobs.Request{Language: "python", Code: "print(1)", IdempotencyKey: key}
	spec, _ := jobs.DefaultPolicy().Normalize(req)
	j, _, err := b.st.EnqueueJob(ctx, store.NewJob{TenantID: b.tenant, Spec: spec, IdempotencyKey: key, RequestHash: jobs.RequestHash(req)},
		func(context.Context, string) (uint64, error) { return 0, nil })
	if err != nil {
		t.Fatal(err)
	}
	if c, out, err := b.st.ClaimJob(ctx, store.ClaimRequest{JobID: j.ID, RunnerID: "r", MaxAttempts: 3}); err != nil || out != store.Claimed || c.Attempt != 1 {
		t.Fatalf("claim: %v %v", out, err)
	}
	return j
}

// storedRow is a job's output as its row holds it.
type storedRow struct{ stdout, stdoutKey, stderr, stderrKey string }

func (b *bundle) row(t *testing.T, jobID string) storedRow {
	t.Helper()
	var r storedRow
	if err := storetest.QueryRow(b.st, `SELECT coalesce(convert_from(stdout, 'UTF8'), ''), coalesce(stdout_key, ''),
		coalesce(convert_from(stderr, 'UTF8'), ''), coalesce(stderr_key, '') FROM jobs WHERE id = $1`, jobID).
		Scan(&r.stdout, &r.stdoutKey, &r.stderr, &r.stderrKey); err != nil {
		t.Fatal(err)
	}
	return r
}

func (b *bundle) objects(t *testing.T, jobID string) int {
	t.Helper()
	n, err := b.blobs.Count(context.Background(), "tenants/"+b.tenant+"/jobs/"+jobID+"/")
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Output beyond the threshold lives in the object store, the row keeps its
// key, and every read gives it back whole.
func TestLongOutputMovesToTheObjectStore(t *testing.T) {
	t.Parallel()
	b := setup(t, 1024, history.Config{})
	ctx := context.Background()
	long := strings.Repeat("a line of output\n", 1000) // 17,000 bytes
	j := b.running(t, "k1")
	res := jobs.Result{Status: jobs.StatusSucceeded, Stdout: []byte(long), Stderr: []byte("short\n")}
	if applied, err := b.st.FinishJob(ctx, j.ID, 1, res); err != nil || !applied {
		t.Fatalf("FinishJob = %v, %v", applied, err)
	}
	// The row holds the key, not the bytes; the object holds the bytes.
	raw := b.row(t, j.ID)
	if raw.stdout != "" || raw.stdoutKey != blob.OutputKey(b.tenant, j.ID, 1, "stdout") || raw.stderr != "short\n" || raw.stderrKey != "" {
		t.Fatalf("row: stdout %d bytes, key %q; stderr %q, key %q", len(raw.stdout), raw.stdoutKey, raw.stderr, raw.stderrKey)
	}
	rc, err := b.blobs.Get(ctx, raw.stdoutKey)
	if err != nil {
		t.Fatal(err)
	}
	stored, _ := io.ReadAll(rc)
	rc.Close()
	if string(stored) != long {
		t.Fatalf("object holds %d bytes, want %d", len(stored), len(long))
	}
	// Every way of reading the job gives the whole output.
	got, err := b.st.GetJob(ctx, b.tenant, j.ID)
	if err != nil || got.Stdout != long || got.Stderr != "short\n" {
		t.Fatalf("GetJob: %d bytes of stdout, %v", len(got.Stdout), err)
	}
	list, _, err := b.st.ListJobs(ctx, b.tenant, store.JobFilter{Limit: 10})
	if err != nil || len(list) != 1 || list[0].Stdout != long {
		t.Fatalf("ListJobs: %d jobs, %v", len(list), err)
	}
	req := jobs.Request{Language: "python", Code: "print(1)", IdempotencyKey: "k1"}
	spec, _ := jobs.DefaultPolicy().Normalize(req)
	again, created, err := b.st.EnqueueJob(ctx, store.NewJob{TenantID: b.tenant, Spec: spec, IdempotencyKey: "k1", RequestHash: jobs.RequestHash(req)},
		func(context.Context, string) (uint64, error) { return 0, nil })
	if err != nil || created || again.ID != j.ID || again.Stdout != long {
		t.Fatalf("idempotent retry: created=%v, %d bytes, %v", created, len(again.Stdout), err)
	}

	// An attempt that lost its job leaves nothing behind.
	j2 := b.running(t, "")
	if c, out, _ := b.st.ClaimJob(ctx, store.ClaimRequest{JobID: j2.ID, RunnerID: "r2", MaxAttempts: 3}); out != store.Claimed || c.Attempt != 2 {
		t.Fatal("reclaim")
	}
	if applied, err := b.st.FinishJob(ctx, j2.ID, 1, res); err != nil || applied {
		t.Fatalf("stale FinishJob = %v, %v", applied, err)
	}
	if n := b.objects(t, j2.ID); n != 0 {
		t.Errorf("a stale attempt left %d objects", n)
	}
	// Output within the threshold stays in the row, with no object.
	j3 := b.running(t, "")
	if _, err := b.st.FinishJob(ctx, j3.ID, 1, jobs.Result{Status: jobs.StatusSucceeded, Stdout: []byte(strings.Repeat("x", 1024))}); err != nil {
		t.Fatal(err)
	}
	if raw := b.row(t, j3.ID); raw.stdoutKey != "" || len(raw.stdout) != 1024 || b.objects(t, j3.ID) != 0 {
		t.Errorf("short output moved: key %q, %d objects", raw.stdoutKey, b.objects(t, j3.ID))
	}
}

// Output that is not UTF-8 is kept as written and read as the store reads
// it from a row: invalid bytes as U+FFFD.
func TestMovedOutputIsReadLikeTheRow(t *testing.T) {
	t.Parallel()
	b := setup(t, 4, history.Config{})
	ctx := context.Background()
	j := b.running(t, "")
	if _, err := b.st.FinishJob(ctx, j.ID, 1, jobs.Result{Status: jobs.StatusFailed, Stderr: []byte("bad \xff byte")}); err != nil {
		t.Fatal(err)
	}
	got, err := b.st.GetJob(ctx, b.tenant, j.ID)
	if err != nil || got.Stderr != "bad \uFFFD byte" {
		t.Fatalf("stderr %q, %v", got.Stderr, err)
	}
}

// The sweep deletes jobs that finished before the TTL, with their
// artifacts and output (earlier attempts' too), in batches, and nothing
// else; two replicas sweeping at once share the work.
func TestSweep(t *testing.T) {
	t.Parallel()
	b := setup(t, 8, history.Config{TTL: time.Hour, Batch: 3})
	ctx := context.Background()
	put := func(key string) {
		if err := b.blobs.Put(ctx, key, bytes.NewReader([]byte("x")), 1, "text/plain"); err != nil {
			t.Fatal(err)
		}
	}
	var old []string
	for i := 0; i < 10; i++ {
		j := b.running(t, "")
		put(blob.ArtifactKey(b.tenant, j.ID, "out/a.txt"))
		res := jobs.Result{Status: jobs.StatusSucceeded, Stdout: []byte("long enough to move"),
			Artifacts: []jobs.Artifact{{Path: "out/a.txt", Size: 1}}}
		if i == 0 {
			// A redelivered job: attempt 1 left output, attempt 2 recorded.
			put(blob.OutputKey(b.tenant, j.ID, 1, "stdout"))
			if c, out, _ := b.st.ClaimJob(ctx, store.ClaimRequest{JobID: j.ID, RunnerID: "r2", MaxAttempts: 3}); out != store.Claimed || c.Attempt != 2 {
				t.Fatal("reclaim")
			}
			if _, err := b.st.FinishJob(ctx, j.ID, 2, res); err != nil {
				t.Fatal(err)
			}
		} else if _, err := b.st.FinishJob(ctx, j.ID, 1, res); err != nil {
			t.Fatal(err)
		}
		old = append(old, j.ID)
	}
	if err := storetest.Exec(b.st, `UPDATE jobs SET finished_at = now() - interval '2 hours' WHERE id = ANY($1)`, old); err != nil {
		t.Fatal(err)
	}
	young := b.running(t, "")
	if _, err := b.st.FinishJob(ctx, young.ID, 1, jobs.Result{Status: jobs.StatusSucceeded, Stdout: []byte("long enough to move")}); err != nil {
		t.Fatal(err)
	}
	unfinished := b.running(t, "")
	if err := storetest.Exec(b.st, `UPDATE jobs SET created_at = now() - interval '2 days' WHERE id = $1`, unfinished.ID); err != nil {
		t.Fatal(err)
	}
	if n := b.objects(t, old[0]); n != 3 {
		t.Fatalf("the redelivered job has %d objects, want 3", n)
	}

	var wg sync.WaitGroup
	var mu sync.Mutex
	deleted := 0
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := b.r.Sweep(ctx)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			deleted += n
			mu.Unlock()
		}()
	}
	wg.Wait()
	if deleted != len(old) {
		t.Errorf("two sweeps deleted %d jobs, want %d", deleted, len(old))
	}
	for _, id := range old {
		if _, err := b.st.GetJob(ctx, b.tenant, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("expired job %s: %v", id, err)
		}
		if n := b.objects(t, id); n != 0 {
			t.Errorf("expired job %s left %d objects", id, n)
		}
	}
	for _, id := range []string{young.ID, unfinished.ID} {
		if _, err := b.st.GetJob(ctx, b.tenant, id); err != nil {
			t.Errorf("job %s was swept: %v", id, err)
		}
	}
	if n := b.objects(t, young.ID); n != 1 {
		t.Errorf("the young job has %d objects, want 1", n)
	}
	if n, err := b.r.Sweep(ctx); n != 0 || err != nil {
		t.Errorf("a sweep with nothing to do: %d, %v", n, err)
	}
}

// Without a TTL nothing is ever deleted.
func TestNoTTLKeepsEverything(t *testing.T) {
	t.Parallel()
	b := setup(t, history.DefaultInlineMax, history.Config{})
	ctx := context.Background()
	j := b.running(t, "")
	if _, err := b.st.FinishJob(ctx, j.ID, 1, jobs.Result{Status: jobs.StatusSucceeded}); err != nil {
		t.Fatal(err)
	}
	_ = storetest.Exec(b.st, `UPDATE jobs SET finished_at = now() - interval '20 years'`)
	if n, err := b.r.Sweep(ctx); n != 0 || err != nil {
		t.Fatalf("Sweep = %d, %v", n, err)
	}
	if _, err := b.st.GetJob(ctx, b.tenant, j.ID); err != nil {
		t.Fatal(err)
	}
}
