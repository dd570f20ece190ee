package webhook_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/secret"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/store/storetest"
	"github.com/gantryhq/gantry/webhook"
)

// receiver is a webhook endpoint that verifies what it gets with the
// tenant's secret and answers with the statuses it is told, in turn.
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	statuses []int
	got      []received
}

type received struct {
	header http.Header
	body   []byte
}

func newReceiver(t *testing.T, statuses ...int) *receiver {
	r := &receiver{statuses: statuses}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, received{req.Header.Clone(), body})
		status := http.StatusNoContent
		if len(r.statuses) > 0 {
			status, r.statuses = r.statuses[0], r.statuses[1:]
		}
		r.mu.Unlock()
		w.WriteHeader(status)
		_, _ = w.Write([]byte("receiver says hi"))
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) received() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

type fixture struct {
	st       *store.Store
	d        *webhook.Dispatcher
	tenantID string
}

func setup(t *testing.T, cfg webhook.Config) fixture {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Postgres")
	}
	st := storetest.New(t)
	box, _ := secret.New(make([]byte, 32))
	d, err := webhook.New(cfg, st, box, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	tenantID, _ := storetest.Tenant(t, st, "acme")
	return fixture{st: st, d: d, tenantID: tenantID}
}

// finishedJob queues a job with the webhook URL and finishes it.
func (f fixture) finishedJob(t *testing.T, url string) jobs.Job {
	t.Helper()
	ctx := context.Background()
	req := jobs.Request{Language: "python", Code: "print(1)"}
	spec, _ := jobs.DefaultPolicy().Normalize(req)
	j, _, err := f.st.EnqueueJob(ctx, store.NewJob{TenantID: f.tenantID, Spec: spec, RequestHash: jobs.RequestHash(req), WebhookURL: url},
		func(context.Context, string) (uint64, error) { return 1, nil })
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.st.ClaimJob(ctx, store.ClaimRequest{JobID: j.ID, RunnerID: "r", MaxAttempts: 3, Alive: time.Minute}); err != nil {
		t.Fatal(err)
	}
	code := 0
	if _, err := f.st.FinishJob(ctx, j.ID, 1, jobs.Result{Status: jobs.StatusSucceeded, ExitCode: &code, Stdout: []byte("42\n")}); err != nil {
		t.Fatal(err)
	}
	return j
}

func (f fixture) delivery(t *testing.T, jobID string) *jobs.WebhookDelivery {
	t.Helper()
	j, err := f.st.GetJob(context.Background(), f.tenantID, jobID)
	if err != nil {
		t.Fatal(err)
	}
	return j.Webhook
}

// runUntil runs rounds until the delivery settles.
func (f fixture) runUntil(t *testing.T, jobID string, within time.Duration) *jobs.WebhookDelivery {
	t.Helper()
	var w *jobs.WebhookDelivery
	if !eventually.Within(within, func() bool {
		if _, err := f.d.RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		w = f.delivery(t, jobID)
		return w.Settled()
	}) {
		t.Fatalf("delivery not settled: %+v", w)
	}
	return w
}

func TestDeliverRetriesUntilAccepted(t *testing.T) {
	t.Parallel()
	f := setup(t, webhook.Config{AllowPrivate: true, Backoff: 20 * time.Millisecond})
	r := newReceiver(t, 500, 503, 200)
	j := f.finishedJob(t, r.URL+"/hook?token=abc")
	w := f.runUntil(t, j.ID, 10*time.Second)
	if w.Status != jobs.WebhookDelivered || len(w.Attempts) != 3 {
		t.Fatalf("delivery = %+v", w)
	}
	if a := w.Attempts[0]; a.StatusCode != 500 || a.Error != "HTTP 500: receiver says hi" {
		t.Errorf("first attempt = %+v", a)
	}
	if a := w.Attempts[2]; a.StatusCode != 200 || a.Error != "" {
		t.Errorf("last attempt = %+v", a)
	}
	// Backoff doubles: the second wait is at least twice the first.
	if gap1, gap2 := w.Attempts[1].At.Sub(w.Attempts[0].At), w.Attempts[2].At.Sub(w.Attempts[1].At); gap1 < 20*time.Millisecond || gap2 < 40*time.Millisecond {
		t.Errorf("waits %s then %s, want ≥ 20ms then ≥ 40ms", gap1, gap2)
	}

	sec, err := f.d.Secret(context.Background(), f.tenantID)
	if err != nil {
		t.Fatal(err)
	}
	got := r.received()
	if len(got) != 3 {
		t.Fatalf("receiver got %d requests", len(got))
	}
	for i, m := range got {
		if err := webhook.Verify(sec.Secret, m.header, m.body, time.Now()); err != nil {
			t.Errorf("request %d does not verify: %v", i, err)
		}
		if m.header.Get("webhook-id") != w.ID || string(m.body) != string(got[0].body) {
			t.Errorf("request %d: id %s, body differs: the same message must be resent", i, m.header.Get("webhook-id"))
		}
	}
	var ev struct {
		Type string
		Data jobs.Job
	}
	if err := json.Unmarshal(got[0].body, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Type != "job.finished" || ev.Data.ID != j.ID || ev.Data.Status != jobs.StatusSucceeded || ev.Data.Stdout != "42\n" || ev.Data.Webhook != nil {
		t.Errorf("event = %s", got[0].body)
	}
}

func TestDeliverGivesUp(t *testing.T) {
	t.Parallel()
	f := setup(t, webhook.Config{AllowPrivate: true, Backoff: 50 * time.Millisecond, RetryFor: 300 * time.Millisecond})
	r := newReceiver(t, 500, 500, 500, 500, 500, 500, 500, 500)
	j := f.finishedJob(t, r.URL)
	w := f.runUntil(t, j.ID, 10*time.Second)
	if w.Status != jobs.WebhookFailed || len(w.Attempts) < 2 || w.FinishedAt == nil {
		t.Fatalf("delivery = %+v", w)
	}
}

// TestPrivateAddressesRefused: without the operator's leave, a receiver on
// a private address is never called, whether named by address or by name.
func TestPrivateAddressesRefused(t *testing.T) {
	t.Parallel()
	f := setup(t, webhook.Config{Backoff: time.Hour})
	r := newReceiver(t)
	for _, u := range []string{r.URL, strings.Replace(r.URL, "127.0.0.1", "localhost", 1)} {
		if err := webhook.NewSender(false).CheckURL("webhook_url", u); err == nil || !strings.Contains(err.Error(), "GANTRY_WEBHOOK_ALLOW_PRIVATE") {
			t.Errorf("CheckURL(%s) = %v", u, err)
		}
	}
	// A name that resolves to a private address passes the check but is
	// refused when dialled (the outbox does not re-check old URLs either).
	j := f.finishedJob(t, r.URL)
	if _, err := f.d.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	w := f.delivery(t, j.ID)
	if len(w.Attempts) != 1 || !strings.Contains(w.Attempts[0].Error, "not public") || len(r.received()) != 0 {
		t.Errorf("delivery to a private address: %+v, receiver got %d", w, len(r.received()))
	}
}

// TestRotation: after a rotation both secrets sign until the overlap ends.
func TestRotation(t *testing.T) {
	t.Parallel()
	f := setup(t, webhook.Config{AllowPrivate: true})
	ctx := context.Background()
	old, err := f.d.Secret(ctx, f.tenantID)
	if err != nil || old.PreviousExpiresAt != nil {
		t.Fatal(old, err)
	}
	if again, _ := f.d.Secret(ctx, f.tenantID); again.Secret != old.Secret {
		t.Fatal("the secret changed without a rotation")
	}
	cur, err := f.d.Rotate(ctx, f.tenantID)
	if err != nil || cur.Secret == old.Secret || cur.PreviousExpiresAt == nil {
		t.Fatal(cur, err)
	}
	r := newReceiver(t)
	j := f.finishedJob(t, r.URL)
	f.runUntil(t, j.ID, 5*time.Second)
	m := r.received()[0]
	if sigs := strings.Fields(m.header.Get("webhook-signature")); len(sigs) != 2 {
		t.Errorf("signatures = %v, want two", sigs)
	}
	for _, s := range []string{old.Secret, cur.Secret} {
		if err := webhook.Verify(s, m.header, m.body, time.Now()); err != nil {
			t.Errorf("does not verify under %s…: %v", s[:10], err)
		}
	}
}
