package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gantryhq/gantry/blob"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/store/storetest"
)

func newSession(t *testing.T, st *store.Store, tenantID string, ttl int) jobs.Session {
	t.Helper()
	req, err := jobs.SessionRequest{TTLSeconds: ttl}.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	sess, err := st.CreateSession(context.Background(), tenantID, req)
	if err != nil {
		t.Fatal(err)
	}
	return sess
}

func sessionJob(tenantID, sessionID, code string) store.NewJob {
	nj := newJob(tenantID, "")
	nj.Spec.Code = code
	nj.SessionID = &sessionID
	return nj
}

// queueSessionJobs queues one job per code in the session and returns
// their ids in submission order.
func queueSessionJobs(t *testing.T, st *store.Store, tenantID, sessionID string, pubs *[]string, codes ...string) []string {
	t.Helper()
	var ids []string
	for _, code := range codes {
		j, _, err := st.EnqueueJob(context.Background(), sessionJob(tenantID, sessionID, code), published(pubs))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	return ids
}

func TestSessionQueueAndOwnership(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	ctx := context.Background()
	a, _ := storetest.Tenant(t, st, "a")
	b, _ := storetest.Tenant(t, st, "b")
	sess := newSession(t, st, a, 3600)
	var pubs []string

	// Another tenant cannot queue into the session.
	if _, _, err := st.EnqueueJob(ctx, sessionJob(b, sess.ID, "x"), published(&pubs)); !errors.Is(err, store.ErrSessionNotFound) {
		t.Fatalf("foreign session: %v", err)
	}
	ids := queueSessionJobs(t, st, a, sess.ID, &pubs, "one", "two", "three")
	if got, _ := st.GetSession(ctx, a, sess.ID); got.Queued != 3 {
		t.Errorf("queued = %d", got.Queued)
	}

	state, ok, err := st.AcquireSession(ctx, sess.ID, "r1", time.Minute)
	if err != nil || !ok || state.TenantID != a {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	if _, ok, _ := st.AcquireSession(ctx, sess.ID, "r2", time.Minute); ok {
		t.Fatal("two owners at once")
	}
	// Jobs come out in submission order; an owner cannot let go while
	// jobs wait.
	lastKey := ""
	for i, want := range ids {
		if released, _, _ := st.ReleaseSession(ctx, sess.ID, "r1", false); released {
			t.Fatalf("released with %d jobs queued", len(ids)-i)
		}
		sj, ok, err := st.NextSessionJob(ctx, sess.ID, "r1", "runner-1", 3)
		if err != nil || !ok || sj.JobID != want || sj.Attempt != 1 {
			t.Fatalf("next %d: %+v %v %v", i, sj, ok, err)
		}
		snap := &store.Snapshot{Version: int64(i + 1), Key: blob.NewSessionKey(a, sess.ID, int64(i+1)), Bytes: 10}
		prevKey := lastKey
		lastKey = snap.Key
		code := 0
		applied, snapApplied, replaced, err := st.FinishSessionJob(ctx, sj.JobID, 1, jobs.Result{Status: jobs.StatusSucceeded, ExitCode: &code}, sess.ID, "r1", snap, nil)
		if err != nil || !applied || !snapApplied {
			t.Fatalf("finish %d: %v %v %v", i, applied, snapApplied, err)
		}
		if i > 0 && replaced != prevKey {
			t.Errorf("replaced = %q", replaced)
		}
	}
	if _, ok, _ := st.NextSessionJob(ctx, sess.ID, "r1", "runner-1", 3); ok {
		t.Fatal("a job after the last")
	}
	if released, _, err := st.ReleaseSession(ctx, sess.ID, "r1", false); err != nil || !released {
		t.Fatalf("release: %v %v", released, err)
	}
	got, _ := st.GetSession(ctx, a, sess.ID)
	if got.Version != 3 || got.LastJobID == nil || *got.LastJobID != ids[2] || got.Queued != 0 {
		t.Errorf("session after three jobs: %+v", got)
	}
}

func TestSessionLostOwnerAndAttempts(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	ctx := context.Background()
	a, _ := storetest.Tenant(t, st, "a")
	sess := newSession(t, st, a, 3600)
	var pubs []string
	j, _, _ := st.EnqueueJob(ctx, sessionJob(a, sess.ID, "x"), published(&pubs))
	for attempt := 1; attempt <= 2; attempt++ {
		// Each owner dies holding the job; its lease runs out.
		if _, ok, err := st.AcquireSession(ctx, sess.ID, "r", 0); err != nil || !ok {
			t.Fatalf("acquire: %v %v", ok, err)
		}
		sj, ok, err := st.NextSessionJob(ctx, sess.ID, "r", "r", 2)
		if err != nil || !ok || sj.JobID != j.ID || sj.Attempt != attempt {
			t.Fatalf("attempt %d: %+v %v %v", attempt, sj, ok, err)
		}
	}
	if _, ok, _ := st.AcquireSession(ctx, sess.ID, "r3", time.Minute); !ok {
		t.Fatal("expired lease not taken over")
	}
	if _, ok, _ := st.NextSessionJob(ctx, sess.ID, "r3", "r3", 2); ok {
		t.Fatal("a job past its attempts was run again")
	}
	got, _ := st.GetJob(ctx, a, j.ID)
	if got.Status != jobs.StatusError || got.Error == nil {
		t.Errorf("job after its attempts: %+v", got)
	}
}

func TestSessionCloseAndExpiry(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	ctx := context.Background()
	a, _ := storetest.Tenant(t, st, "a")
	b, _ := storetest.Tenant(t, st, "b")
	sess := newSession(t, st, a, 3600)
	var pubs []string
	queued, _, _ := st.EnqueueJob(ctx, sessionJob(a, sess.ID, "x"), published(&pubs))

	if _, err := st.CloseSession(ctx, b, sess.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another tenant closed the session: %v", err)
	}
	ref, err := st.CloseSession(ctx, a, sess.ID)
	if err != nil || ref.TenantID != a {
		t.Fatal(err)
	}
	if _, err := st.GetSession(ctx, a, sess.ID); !errors.Is(err, store.ErrNotFound) {
		t.Error("a closing session is still visible")
	}
	if j, _ := st.GetJob(ctx, a, queued.ID); j.Status != jobs.StatusCancelled {
		t.Errorf("queued job of a closed session: %s", j.Status)
	}
	if _, _, err := st.EnqueueJob(ctx, sessionJob(a, sess.ID, "y"), published(&pubs)); !errors.Is(err, store.ErrSessionNotFound) {
		t.Errorf("job into a closed session: %v", err)
	}
	if done, err := st.FinishClosing(ctx, sess.ID); err != nil || !done {
		t.Fatalf("finish closing: %v %v", done, err)
	}

	short := newSession(t, st, a, 10)
	if refs, _ := st.ExpireSessions(ctx, 10); len(refs) != 0 {
		t.Fatalf("expired a live session: %+v", refs)
	}
	// Age the session past its TTL.
	if err := storetest.Exec(st, `UPDATE sessions SET expires_at = now() - interval '1 second' WHERE id = $1`, short.ID); err != nil {
		t.Fatal(err)
	}
	refs, err := st.ExpireSessions(ctx, 10)
	if err != nil || len(refs) != 1 || refs[0].ID != short.ID {
		t.Fatalf("expire: %+v %v", refs, err)
	}
	if done, _ := st.FinishClosing(ctx, short.ID); !done {
		t.Error("expired session not deleted")
	}
}

// TestStatefulSessionCap: a tenant's stateful sessions stop at its cap,
// counted per tenant (another tenant's and stateless sessions are not in
// it), and a closed one frees its place.
func TestStatefulSessionCap(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	a, _ := storetest.Tenant(t, st, "a")
	b, _ := storetest.Tenant(t, st, "b")
	create := func(tenant string, stateful bool) (jobs.Session, error) {
		req, err := jobs.SessionRequest{Stateful: stateful}.Normalize()
		if err != nil {
			t.Fatal(err)
		}
		req.MaxLive = 2
		return st.CreateSession(ctx, tenant, req)
	}
	first, err := create(a, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := create(a, true); err != nil {
		t.Fatal(err)
	}
	if _, err := create(a, true); !errors.Is(err, store.ErrTooManyLive) {
		t.Fatalf("a third stateful session: %v, want ErrTooManyLive", err)
	}
	if _, err := create(a, false); err != nil {
		t.Fatalf("a stateless session at the cap: %v", err)
	}
	if _, err := create(b, true); err != nil {
		t.Fatalf("another tenant's stateful session: %v", err)
	}
	if _, err := st.CloseSession(ctx, a, first.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := create(a, true); err != nil {
		t.Fatalf("after closing one: %v", err)
	}
}
