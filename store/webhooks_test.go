package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/store/storetest"
)

// TestWebhookOutbox: every way a job finishes writes its delivery with the
// result — the job's own URL, else the tenant's default, else none.
func TestWebhookOutbox(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	ctx := context.Background()
	tenantID, _ := storetest.Tenant(t, st, "acme")
	enqueue := func(url string) string {
		t.Helper()
		nj := newJob(tenantID, "")
		nj.WebhookURL = url
		j, _, err := st.EnqueueJob(ctx, nj, func(context.Context, string) (uint64, error) { return 1, nil })
		if err != nil {
			t.Fatal(err)
		}
		if (j.WebhookURL == nil) != (url == "") || j.Webhook != nil {
			t.Fatalf("queued job = %+v", j)
		}
		return j.ID
	}
	finish := func(id string) {
		t.Helper()
		_, out, err := st.ClaimJob(ctx, store.ClaimRequest{JobID: id, RunnerID: "r", MaxAttempts: 3, Alive: time.Minute})
		if err != nil || out != store.Claimed {
			t.Fatalf("claim: %v %v", out, err)
		}
		if ok, err := st.FinishJob(ctx, id, 1, jobs.Result{Status: jobs.StatusSucceeded}); err != nil || !ok {
			t.Fatalf("finish: %v %v", ok, err)
		}
	}
	webhook := func(id string) *jobs.WebhookDelivery {
		t.Helper()
		j, err := st.GetJob(ctx, tenantID, id)
		if err != nil {
			t.Fatal(err)
		}
		return j.Webhook
	}

	none := enqueue("")
	finish(none)
	if w := webhook(none); w != nil {
		t.Errorf("job without a webhook got a delivery: %+v", w)
	}

	own := enqueue("https://hooks.example.com/own")
	if w := webhook(own); w != nil {
		t.Errorf("an unfinished job has a delivery: %+v", w)
	}
	finish(own)
	w := webhook(own)
	if w == nil || w.URL != "https://hooks.example.com/own" || w.Status != jobs.WebhookPending || len(w.Attempts) != 0 ||
		w.NextAttemptAt == nil || w.ID != "msg_"+own[4:] {
		t.Fatalf("delivery = %+v", w)
	}

	if err := st.SetTenantWebhookURL(ctx, tenantID, "https://hooks.example.com/default"); err != nil {
		t.Fatal(err)
	}
	byDefault := enqueue("")
	cancelled := enqueue("")
	failed := enqueue("https://hooks.example.com/failed")
	finish(byDefault)
	if _, err := st.CancelJob(ctx, tenantID, cancelled, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := st.FailJob(ctx, failed, 4, "gave up"); err != nil {
		t.Fatal(err)
	}
	for id, url := range map[string]string{byDefault: "https://hooks.example.com/default",
		cancelled: "https://hooks.example.com/default", failed: "https://hooks.example.com/failed"} {
		if w := webhook(id); w == nil || w.URL != url {
			t.Errorf("job %s: delivery %+v, want one to %s", id, w, url)
		}
	}
	if u, err := st.TenantWebhookURL(ctx, tenantID); err != nil || u != "https://hooks.example.com/default" {
		t.Errorf("TenantWebhookURL = %q, %v", u, err)
	}

	// Claims: each due delivery goes to one claimer, and not again while
	// its lease runs.
	a, err := st.ClaimWebhooks(ctx, 2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	b, err := st.ClaimWebhooks(ctx, 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != 2 || len(b) != 2 {
		t.Fatalf("claimed %d then %d, want 2 and 2", len(a), len(b))
	}
	seen := map[string]bool{}
	for _, d := range append(a, b...) {
		if seen[d.ID] {
			t.Errorf("delivery %s claimed twice", d.ID)
		}
		seen[d.ID] = true
	}
	if c, _ := st.ClaimWebhooks(ctx, 10, time.Minute); len(c) != 0 {
		t.Errorf("claimed %d deliveries under lease", len(c))
	}

	// Attempts are recorded on the job's delivery.
	d := a[0]
	at := time.Now().UTC().Truncate(time.Millisecond)
	if err := st.RecordWebhookAttempt(ctx, d.ID, jobs.WebhookAttempt{At: at, StatusCode: 500, Error: "HTTP 500", DurationMS: 12},
		jobs.WebhookPending, time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	again, _ := st.ClaimWebhooks(ctx, 10, time.Minute)
	if len(again) != 1 || again[0].ID != d.ID || again[0].Attempts != 1 {
		t.Fatalf("after a failed attempt due again: %+v", again)
	}
	if err := st.RecordWebhookAttempt(ctx, d.ID, jobs.WebhookAttempt{At: at.Add(time.Second), StatusCode: 204, DurationMS: 3},
		jobs.WebhookDelivered, time.Time{}); err != nil {
		t.Fatal(err)
	}
	w = webhook(d.JobID)
	if w.Status != jobs.WebhookDelivered || w.FinishedAt == nil || w.NextAttemptAt != nil || len(w.Attempts) != 2 ||
		w.Attempts[0].StatusCode != 500 || !w.Attempts[0].At.Equal(at) || w.Attempts[1].StatusCode != 204 {
		t.Errorf("delivered = %+v", w)
	}
	// A settled delivery takes no more attempts.
	_ = st.RecordWebhookAttempt(ctx, d.ID, jobs.WebhookAttempt{At: at, StatusCode: 500}, jobs.WebhookFailed, time.Time{})
	if w := webhook(d.JobID); w.Status != jobs.WebhookDelivered || len(w.Attempts) != 2 {
		t.Errorf("a settled delivery changed: %+v", w)
	}
}

func TestWebhookSecrets(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	ctx := context.Background()
	tenantID, _ := storetest.Tenant(t, st, "acme")
	if w, err := st.WebhookSecrets(ctx, tenantID); err != nil || w.Current != nil {
		t.Fatalf("new tenant: %+v %v", w, err)
	}
	w, err := st.InitWebhookSecret(ctx, tenantID, []byte("one"))
	if err != nil || string(w.Current) != "one" {
		t.Fatalf("init: %+v %v", w, err)
	}
	if w, _ := st.InitWebhookSecret(ctx, tenantID, []byte("two")); string(w.Current) != "one" {
		t.Errorf("a second init replaced the secret: %+v", w)
	}
	w, err = st.RotateWebhookSecret(ctx, tenantID, []byte("three"), time.Hour)
	if err != nil || string(w.Current) != "three" || string(w.Previous) != "one" || w.PreviousUntil == nil ||
		time.Until(*w.PreviousUntil) < 59*time.Minute {
		t.Fatalf("rotate: %+v %v", w, err)
	}
	// The previous secret stops signing when its overlap ends.
	w, _ = st.RotateWebhookSecret(ctx, tenantID, []byte("four"), 0)
	if string(w.Current) != "four" || w.Previous != nil {
		t.Errorf("rotate without overlap: %+v", w)
	}
}

func TestListByBatch(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	ctx := context.Background()
	tenantID, _ := storetest.Tenant(t, st, "acme")
	other, _ := storetest.Tenant(t, st, "other")
	batch := jobs.NewID("bat")
	var want []string
	for i, tid := range []string{tenantID, tenantID, tenantID, other} {
		nj := newJob(tid, "")
		if i != 1 {
			nj.BatchID = batch
		}
		j, _, err := st.EnqueueJob(ctx, nj, func(context.Context, string) (uint64, error) { return 1, nil })
		if err != nil {
			t.Fatal(err)
		}
		if i != 1 && tid == tenantID {
			want = append([]string{j.ID}, want...)
			if j.BatchID == nil || *j.BatchID != batch {
				t.Errorf("job batch = %v", j.BatchID)
			}
		}
	}
	list, _, err := st.ListJobs(ctx, tenantID, store.JobFilter{BatchID: batch, Limit: 10})
	if err != nil || len(list) != 2 || list[0].ID != want[0] || list[1].ID != want[1] {
		t.Fatalf("batch listing = %d jobs (%v), want %v", len(list), err, want)
	}
}
