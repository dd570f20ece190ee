package store_test

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/store/storetest"
)

// TestClaimCountsRunsNotDeliveries: the attempt is counted by the claims
// that start a run. A message that is not the job's current one is
// dropped, a runner that still beats keeps its job, a lost runner's job is
// taken over as the next attempt, and the job is given up once its
// attempts are spent.
func TestClaimCountsRunsNotDeliveries(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	ctx := context.Background()
	a, _ := storetest.Tenant(t, st, "a")
	var pubs []string
	j, _, err := st.EnqueueJob(ctx, newJob(a, ""), published(&pubs))
	if err != nil {
		t.Fatal(err)
	}
	seq := uint64(len(pubs)) // the sequence EnqueueJob recorded
	req := func(runner string, msgSeq uint64, alive time.Duration) store.ClaimRequest {
		return store.ClaimRequest{JobID: j.ID, MsgSeq: msgSeq, RunnerID: runner, MaxAttempts: 3, Alive: alive}
	}
	claim := func(r store.ClaimRequest, want store.ClaimOutcome) store.Claim {
		t.Helper()
		c, out, err := st.ClaimJob(ctx, r)
		if err != nil || out != want {
			t.Fatalf("claim %+v: outcome %v (%v), want %v", r, out, err, want)
		}
		return c
	}
	if c := claim(req("r1", seq, time.Minute), store.Claimed); c.Attempt != 1 || c.TenantID != a {
		t.Fatalf("first claim: %+v", c)
	}
	claim(req("r2", seq+1, 0), store.ClaimStale)        // another message for the job
	claim(req("r2", seq, time.Minute), store.ClaimBusy) // r1 beat just now
	if c := claim(req("r2", seq, 0), store.Claimed); c.Attempt != 2 {
		t.Fatalf("takeover: attempt %d, want 2", c.Attempt)
	}
	if _, err := st.Heartbeat(ctx, j.ID, 1); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("heartbeat of the lost attempt: %v, want ErrNotFound", err)
	}
	if applied, _ := st.FinishJob(ctx, j.ID, 1, jobs.Result{Status: jobs.StatusSucceeded}); applied {
		t.Error("the lost attempt recorded its result")
	}
	claim(req("r3", seq, 0), store.Claimed)
	claim(req("r4", seq, 0), store.ClaimGaveUp)
	got, _ := st.GetJob(ctx, a, j.ID)
	if got.Status != jobs.StatusError || got.Attempt != 3 || got.Error == nil || got.Error.Message != store.GaveUpMessage(3) {
		t.Errorf("given up job = %+v %+v", got, got.Error)
	}
	claim(req("r5", seq, 0), store.ClaimDone)

	// A job handed back unrun (RequeueJob) keeps its count: the next
	// claim is the next attempt, and it is never "busy".
	j2, _, _ := st.EnqueueJob(ctx, newJob(a, ""), published(&pubs))
	c, out, _ := st.ClaimJob(ctx, store.ClaimRequest{JobID: j2.ID, RunnerID: "r", MaxAttempts: 3, Alive: time.Minute})
	if out != store.Claimed || c.Attempt != 1 {
		t.Fatalf("claim: %v %+v", out, c)
	}
	if err := st.RequeueJob(ctx, j2.ID, 1); err != nil {
		t.Fatal(err)
	}
	c, out, _ = st.ClaimJob(ctx, store.ClaimRequest{JobID: j2.ID, RunnerID: "r", MaxAttempts: 3, Alive: time.Minute})
	if out != store.Claimed || c.Attempt != 2 {
		t.Fatalf("claim after requeue: %v %+v", out, c)
	}
}

// TestHeartbeatBringsCancel: the heartbeat keeps the job alive and reports
// a cancel request.
func TestHeartbeatBringsCancel(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	ctx := context.Background()
	a, _ := storetest.Tenant(t, st, "a")
	var pubs []string
	j, _, _ := st.EnqueueJob(ctx, newJob(a, ""), published(&pubs))
	if _, ok, err := storetest.Claim(st, j.ID, "r"); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if err := storetest.Exec(st, `UPDATE jobs SET heartbeat_at = now() - interval '1 hour' WHERE id = $1`, j.ID); err != nil {
		t.Fatal(err)
	}
	if yes, err := st.Heartbeat(ctx, j.ID, 1); yes || err != nil {
		t.Fatalf("heartbeat: %v %v", yes, err)
	}
	// The heartbeat just now makes the runner alive: a cancel flags it.
	if out, err := st.CancelJob(ctx, a, j.ID, time.Minute); out != store.CancelRequested || err != nil {
		t.Fatalf("cancel: %v %v", out, err)
	}
	if yes, err := st.Heartbeat(ctx, j.ID, 1); !yes || err != nil {
		t.Errorf("heartbeat after cancel: %v %v", yes, err)
	}
}

// TestCancelOrphanedJob: cancel ends a running job whose runner is gone
// (no heartbeat; for a session's job, no owner) at once, with a message
// that says so.
func TestCancelOrphanedJob(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	ctx := context.Background()
	a, _ := storetest.Tenant(t, st, "a")
	var pubs []string
	j, _, _ := st.EnqueueJob(ctx, newJob(a, ""), published(&pubs))
	if _, ok, _ := storetest.Claim(st, j.ID, "r"); !ok {
		t.Fatal("claim")
	}
	if err := storetest.Exec(st, `UPDATE jobs SET heartbeat_at = now() - interval '2 minutes' WHERE id = $1`, j.ID); err != nil {
		t.Fatal(err)
	}
	if out, err := st.CancelJob(ctx, a, j.ID, time.Minute); out != store.CancelledOrphan || err != nil {
		t.Fatalf("cancel: %v %v", out, err)
	}
	got, _ := st.GetJob(ctx, a, j.ID)
	if got.Status != jobs.StatusCancelled || got.FinishedAt == nil || got.Error == nil ||
		got.Error.Message != "cancelled; the runner that was running it had stopped responding" {
		t.Errorf("job = %+v %+v", got, got.Error)
	}
	if applied, _ := st.FinishJob(ctx, j.ID, 1, jobs.Result{Status: jobs.StatusSucceeded}); applied {
		t.Error("a result overwrote the cancel")
	}

	// A session's running job whose session has no owner.
	sess, err := st.CreateSession(ctx, a, jobs.SessionRequest{Language: "python", TTLSeconds: 600, DiskMB: 64})
	if err != nil {
		t.Fatal(err)
	}
	ids := queueSessionJobs(t, st, a, sess.ID, &pubs, "x")
	if _, ok, err := st.AcquireSession(ctx, sess.ID, "o1", time.Minute); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if _, ok, err := st.NextSessionJob(ctx, sess.ID, "o1", "r", 3); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if out, _ := st.CancelJob(ctx, a, ids[0], time.Minute); out != store.CancelRequested {
		t.Fatalf("cancel with a live owner: %v", out)
	}
	if err := storetest.Exec(st, `UPDATE sessions SET owner_until = now() - interval '1 second' WHERE id = $1`, sess.ID); err != nil {
		t.Fatal(err)
	}
	if out, _ := st.CancelJob(ctx, a, ids[0], time.Minute); out != store.CancelledOrphan {
		t.Fatalf("cancel without an owner: %v", out)
	}
}

// TestReconcileJobs: the reconciler is handed the unfinished jobs with no
// sign of life — queued, or running without a recent heartbeat; not a
// session's, not a young one — oldest check first, and what it decides is
// applied. Concurrent reconcilers see disjoint jobs.
func TestReconcileJobs(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	ctx := context.Background()
	a, _ := storetest.Tenant(t, st, "a")
	var pubs []string
	enqueue := func() string {
		j, _, err := st.EnqueueJob(ctx, newJob(a, ""), published(&pubs))
		if err != nil {
			t.Fatal(err)
		}
		return j.ID
	}
	queued, lost, beating, young := enqueue(), enqueue(), enqueue(), enqueue()
	for _, id := range []string{lost, beating} {
		if _, ok, _ := storetest.Claim(st, id, "r"); !ok {
			t.Fatal("claim")
		}
	}
	sess, _ := st.CreateSession(ctx, a, jobs.SessionRequest{Language: "python", TTLSeconds: 600, DiskMB: 64})
	queueSessionJobs(t, st, a, sess.ID, &pubs, "x")
	age := func(q string, args ...any) {
		t.Helper()
		if err := storetest.Exec(st, q, args...); err != nil {
			t.Fatal(err)
		}
	}
	age(`UPDATE jobs SET created_at = now() - interval '5 minutes' WHERE id <> $1`, young)
	age(`UPDATE jobs SET heartbeat_at = now() - interval '2 minutes' WHERE id = $1`, lost)
	opt := store.ReconcileOptions{Stale: time.Minute, Recheck: time.Minute, Limit: 10}

	var seen []string
	n, err := st.ReconcileJobs(ctx, opt, func(_ context.Context, u store.Unfinished) (store.Repair, error) {
		seen = append(seen, u.ID)
		switch u.ID {
		case queued:
			if u.Status != jobs.StatusQueued || u.MsgSeq == 0 {
				t.Errorf("queued job handed over as %+v", u)
			}
			return store.Repair{Republished: 99}, nil
		case lost:
			if u.Status != jobs.StatusRunning || u.Attempt != 1 {
				t.Errorf("lost job handed over as %+v", u)
			}
			return store.Repair{Fail: "gone for good"}, nil
		}
		return store.Repair{}, nil
	})
	sort.Strings(seen)
	want := []string{queued, lost}
	sort.Strings(want)
	if err != nil || n != 2 || len(seen) != 2 || seen[0] != want[0] || seen[1] != want[1] {
		t.Fatalf("reconcile: %d %v, saw %v, want %v", n, err, seen, want)
	}
	if got, _ := st.GetJob(ctx, a, lost); got.Status != jobs.StatusError || got.Error.Message != "gone for good" {
		t.Errorf("lost job = %+v", got)
	}
	// The republished job's message is its current one now.
	if _, out, _ := st.ClaimJob(ctx, store.ClaimRequest{JobID: queued, MsgSeq: 99, RunnerID: "r", MaxAttempts: 3}); out != store.Claimed {
		t.Errorf("claim with the new message: %v", out)
	}
	// Checked jobs wait for the next recheck.
	age(`UPDATE jobs SET status = 'queued' WHERE id = $1`, queued)
	if n, err := st.ReconcileJobs(ctx, opt, func(_ context.Context, u store.Unfinished) (store.Repair, error) {
		t.Errorf("handed over again at once: %s", u.ID)
		return store.Repair{}, nil
	}); n != 0 || err != nil {
		t.Errorf("second pass: %d %v", n, err)
	}

	// Two reconcilers at once never hold the same job.
	for range 6 {
		enqueue()
	}
	age(`UPDATE jobs SET created_at = now() - interval '5 minutes', checked_at = NULL WHERE status = 'queued'`)
	var mu sync.Mutex
	counts := map[string]int{}
	// Each reconciler waits in its first repair until the other is in its
	// own: both hold their rows at once.
	var both sync.WaitGroup
	both.Add(2)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			first := true
			_, err := st.ReconcileJobs(ctx, store.ReconcileOptions{Stale: time.Minute, Recheck: time.Minute, Limit: 4},
				func(_ context.Context, u store.Unfinished) (store.Repair, error) {
					mu.Lock()
					counts[u.ID]++
					mu.Unlock()
					if first {
						first = false
						both.Done()
						both.Wait()
					}
					return store.Repair{}, nil
				})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if len(counts) != 8 {
		t.Errorf("the two reconcilers saw %d queued jobs, want all 8 (4 each)", len(counts))
	}
	for id, c := range counts {
		if c != 1 {
			t.Errorf("job %s handed over %d times", id, c)
		}
	}
}

// TestClaimWaitsForTheCommit: a job's message is published before its row
// commits; a claim made in between waits for the commit and takes the job,
// rather than finding no row; a claim of an enqueue that rolled back finds
// none.
func TestClaimWaitsForTheCommit(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	ctx := context.Background()
	a, _ := storetest.Tenant(t, st, "a")
	type claimed struct {
		ok  bool
		err error
	}
	for _, commit := range []bool{true, false} {
		got := make(chan claimed, 1)
		var id string
		_, _, err := st.EnqueueJob(ctx, newJob(a, ""), func(_ context.Context, jobID string) (uint64, error) {
			id = jobID
			go func() {
				_, ok, err := storetest.Claim(st, jobID, "r1")
				got <- claimed{ok, err}
			}()
			select {
			case c := <-got:
				t.Fatalf("the claim did not wait for the commit: %+v", c)
			case <-time.After(300 * time.Millisecond):
			}
			if !commit {
				return 0, errors.New("the publish failed")
			}
			return 1, nil
		})
		if commit != (err == nil) {
			t.Fatalf("enqueue (commit %v): %v", commit, err)
		}
		c := <-got
		switch {
		case commit && (c.err != nil || !c.ok):
			t.Errorf("claim after the commit: %+v", c)
		case !commit && !errors.Is(c.err, store.ErrNotFound):
			t.Errorf("claim after the rollback of %s: %+v, want not found", id, c)
		}
	}
}
