package store_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/skills"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/store/storetest"
)

// TestUnavailableTerminatedBackend: a query whose backend is terminated (as
// in a fast shutdown: SQLSTATE 57P01) is an outage, not a failed query.
func TestUnavailableTerminatedBackend(t *testing.T) {
	t.Parallel()
	url := storetest.DatabaseURL(t)
	ctx := context.Background()
	st, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(ctx) })

	victim, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { victim.Close(ctx) })
	errc := make(chan error, 1)
	go func() {
		_, err := victim.Exec(ctx, `SELECT pg_sleep(30) /* victim */`)
		errc <- err
	}()
	eventually.True(t, 10*time.Second, "the victim's query to start (and be terminated)", func() bool {
		var n int
		if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND query LIKE '%/* victim */%' AND pid <> pg_backend_pid()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
	err = <-errc
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "57P01" {
		t.Fatalf("err = %v, want SQLSTATE 57P01", err)
	}
	if !store.Unavailable(err) {
		t.Errorf("Unavailable(%v) = false", err)
	}
	for _, code := range []string{"08006", "57P03", "53300"} {
		if !store.Unavailable(&pgconn.PgError{Code: code}) {
			t.Errorf("Unavailable(%s) = false", code)
		}
	}
	for _, code := range []string{"22P05", "23505", "42P01"} {
		if store.Unavailable(&pgconn.PgError{Code: code}) {
			t.Errorf("Unavailable(%s) = true: a retry cannot fix it", code)
		}
	}
}

// TestBinaryStdinStored: stdin with NUL and invalid UTF-8 goes into the
// jobs table and comes back to the runner's claim byte for byte.
func TestBinaryStdinStored(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	ctx := context.Background()
	tenantID, _ := storetest.Tenant(t, st, "acme")
	nj := newJob(tenantID, "")
	nj.Spec.Stdin = "\x00\x01\xff\xfe\n"
	var ids []string
	job, _, err := st.EnqueueJob(ctx, nj, published(&ids))
	if err != nil {
		t.Fatal(err)
	}
	c, ok, err := storetest.Claim(st, job.ID, "r")
	if err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if c.Spec.Stdin != nj.Spec.Stdin {
		t.Errorf("claimed stdin %q, want %q", c.Spec.Stdin, nj.Spec.Stdin)
	}
}

// TestSyncBuiltinsConcurrent: ingresses starting together store each
// built-in skill once (ten rounds of eight at once, each on a fresh table).
func TestSyncBuiltinsConcurrent(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	ctx := context.Background()
	builtins, err := skills.Builtins()
	if err != nil {
		t.Fatal(err)
	}
	const replicas = 8
	for round := 0; round < 10; round++ {
		if err := storetest.Exec(st, `DELETE FROM skills WHERE tenant_id IS NULL`); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		stored := make(chan int, replicas)
		for i := 0; i < replicas; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				n, err := st.SyncBuiltins(ctx, builtins)
				if err != nil {
					t.Error(err)
				}
				stored <- n
			}()
		}
		close(start)
		wg.Wait()
		close(stored)
		total := 0
		for n := range stored {
			total += n
		}
		if total != len(builtins) {
			t.Fatalf("round %d: %d replicas stored %d versions of %d built-ins; want each stored once", round, replicas, total, len(builtins))
		}
	}
	for _, sk := range builtins {
		vs, err := st.SkillVersions(ctx, "", sk.Name)
		if err != nil || len(vs) != 1 {
			t.Errorf("built-in %s has %d versions (%v)", sk.Name, len(vs), err)
		}
	}
}

// TestKeyEpoch: every revocation of one of a tenant's keys moves the
// tenant's key epoch on, and claims (plain and session jobs) carry it.
func TestKeyEpoch(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	ctx := context.Background()
	a, _ := storetest.Tenant(t, st, "a")
	b, _ := storetest.Tenant(t, st, "b")
	_, k1, _ := st.CreateAPIKey(ctx, a, "one")
	_, k2, _ := st.CreateAPIKey(ctx, a, "two")
	var pubs []string
	claimEpoch := func(tenantID string) int64 {
		t.Helper()
		j, _, err := st.EnqueueJob(ctx, newJob(tenantID, ""), published(&pubs))
		if err != nil {
			t.Fatal(err)
		}
		c, ok, err := storetest.Claim(st, j.ID, "r")
		if err != nil || !ok {
			t.Fatalf("claim: %v %v", ok, err)
		}
		return c.KeyEpoch
	}
	if e := claimEpoch(a); e != 0 {
		t.Errorf("epoch before any revocation = %d", e)
	}
	rk, err := st.RevokeAPIKey(ctx, k1.ID)
	if err != nil || rk.TenantID != a || rk.KeyEpoch != 1 {
		t.Fatalf("revoke one: %+v %v", rk, err)
	}
	if e := claimEpoch(a); e != 1 {
		t.Errorf("epoch after one revocation = %d", e)
	}
	if rk, err = st.RevokeAPIKey(ctx, k2.ID); err != nil || rk.KeyEpoch != 2 {
		t.Fatalf("revoke two: %+v %v", rk, err)
	}
	if _, err := st.RevokeAPIKey(ctx, k1.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("revoking a revoked key: %v", err)
	}
	if e := claimEpoch(a); e != 2 {
		t.Errorf("epoch after two revocations (and a repeated one) = %d", e)
	}
	if e := claimEpoch(b); e != 0 {
		t.Errorf("another tenant's epoch moved: %d", e)
	}
	// A session job's claim carries it too.
	sess := newSession(t, st, a, 3600)
	if _, _, err := st.EnqueueJob(ctx, sessionJob(a, sess.ID, "x"), published(&pubs)); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := st.AcquireSession(ctx, sess.ID, "r1", time.Minute); err != nil || !ok {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	sj, ok, err := st.NextSessionJob(ctx, sess.ID, "r1", "runner", 3)
	if err != nil || !ok || sj.Claim.KeyEpoch != 2 {
		t.Errorf("session claim: %+v %v %v", sj.Claim, ok, err)
	}
}

// TestSessionQueuedExact: the count of a session's queued jobs is exact
// whatever ends them: cancelled ones are not counted, so the owner's view
// (acquire, release) and the API's agree with the jobs.
func TestSessionQueuedExact(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	ctx := context.Background()
	a, _ := storetest.Tenant(t, st, "a")
	sess := newSession(t, st, a, 3600)
	var pubs []string
	ids := queueSessionJobs(t, st, a, sess.ID, &pubs, "one", "two", "three")
	if out, err := st.CancelJob(ctx, a, ids[1], time.Minute); err != nil || out != store.CancelledQueued {
		t.Fatalf("cancel: %v %v", out, err)
	}
	state, ok, err := st.AcquireSession(ctx, sess.ID, "r1", time.Minute)
	if err != nil || !ok || state.Queued != 2 {
		t.Errorf("acquire: queued %d (%v %v), want 2", state.Queued, ok, err)
	}
	if got, _ := st.GetSession(ctx, a, sess.ID); got.Queued != 2 {
		t.Errorf("session shows %d queued, want 2", got.Queued)
	}
	// With jobs queued the owner cannot let go, unless forced.
	if released, queued, err := st.ReleaseSession(ctx, sess.ID, "r1", false); err != nil || released || queued != 2 {
		t.Errorf("release with 2 queued: %v %d %v", released, queued, err)
	}
	if _, _, err := st.ReleaseSession(ctx, sess.ID, "r1", true); err != nil {
		t.Fatal(err)
	}
	// Cancel the rest: nothing is queued, and the count says so at once.
	for _, id := range []string{ids[0], ids[2]} {
		if _, err := st.CancelJob(ctx, a, id, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if state, ok, _ = st.AcquireSession(ctx, sess.ID, "r2", time.Minute); !ok || state.Queued != 0 {
		t.Errorf("acquire after cancelling all: queued %d, want 0", state.Queued)
	}
	if released, queued, err := st.ReleaseSession(ctx, sess.ID, "r2", false); err != nil || !released || queued != 0 {
		t.Errorf("release with none queued: %v %d %v", released, queued, err)
	}
}
