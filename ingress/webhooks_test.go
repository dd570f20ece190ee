package ingress_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gantryhq/gantry/ingress"
	"github.com/gantryhq/gantry/ingress/service"
	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/secret"
	"github.com/gantryhq/gantry/webhook"
)

func withWebhooks(allowPrivate bool) func(*harness, *ingress.Config) {
	return func(h *harness, c *ingress.Config) {
		c.Box, _ = secret.New(make([]byte, 32))
		c.Webhooks = webhook.Config{AllowPrivate: allowPrivate, Backoff: 20 * time.Millisecond, Poll: 20 * time.Millisecond}
	}
}

type hookMessage struct {
	header http.Header
	body   []byte
}

// hookReceiver records what it is sent and answers 204.
func hookReceiver(t *testing.T) (*httptest.Server, func() []hookMessage) {
	var mu sync.Mutex
	var got []hookMessage
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, hookMessage{r.Header.Clone(), b})
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []hookMessage {
		mu.Lock()
		defer mu.Unlock()
		return append([]hookMessage(nil), got...)
	}
}

// awaitWebhook polls the job until its webhook delivery settles.
func (h *harness) awaitWebhook(t *testing.T, key, id string) jobs.Job {
	t.Helper()
	var j jobs.Job
	if !eventually.Within(10*time.Second, func() bool {
		j = h.do(t, key, "GET", "/v1/jobs/"+id, "").job(t)
		return j.Webhook != nil && j.Webhook.Settled()
	}) {
		t.Fatalf("webhook of %s not settled: %+v", id, j.Webhook)
	}
	return j
}

func TestWebhooks(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withWebhooks(true))
	srv, received := hookReceiver(t)

	j := h.do(t, h.keyA, "POST", "/v1/jobs", `{"language":"python","code":"print(6*7)","webhook_url":"`+srv.URL+`/job"}`).job(t)
	if j.WebhookURL == nil || *j.WebhookURL != srv.URL+"/job" || j.Webhook != nil {
		t.Fatalf("queued job = %+v", j)
	}
	h.finish(t, j.ID, succeeded("42\n"))
	j = h.awaitWebhook(t, h.keyA, j.ID)
	if j.Webhook.Status != jobs.WebhookDelivered || len(j.Webhook.Attempts) != 1 || j.Webhook.Attempts[0].StatusCode != 204 {
		t.Fatalf("webhook = %+v", j.Webhook)
	}

	var sec webhook.Secrets
	r := h.do(t, h.keyA, "GET", "/v1/settings/webhook-secret", "")
	r.json(t, &sec)
	if r.status != 200 || !strings.HasPrefix(sec.Secret, "whsec_") {
		t.Fatalf("secret: %d %s", r.status, r.body)
	}
	msgs := received()
	if len(msgs) != 1 {
		t.Fatalf("receiver got %d messages", len(msgs))
	}
	if err := webhook.Verify(sec.Secret, msgs[0].header, msgs[0].body, time.Now()); err != nil {
		t.Errorf("message does not verify with the tenant's secret: %v", err)
	}
	var ev webhook.Event
	if err := json.Unmarshal(msgs[0].body, &ev); err != nil || ev.Type != "job.finished" || ev.Data.ID != j.ID || ev.Data.Stdout != "42\n" {
		t.Errorf("event: %s (%v)", msgs[0].body, err)
	}
	// Tenant B's secret is its own: A's messages do not verify under it.
	var secB webhook.Secrets
	h.do(t, h.keyB, "GET", "/v1/settings/webhook-secret", "").json(t, &secB)
	if secB.Secret == sec.Secret || webhook.Verify(secB.Secret, msgs[0].header, msgs[0].body, time.Now()) == nil {
		t.Error("tenants share a secret")
	}

	// The tenant's default applies to jobs without their own URL, and can
	// be removed.
	r = h.do(t, h.keyA, "PATCH", "/v1/settings", `{"webhook_url":"`+srv.URL+`/default"}`)
	if r.status != 200 || !strings.Contains(string(r.body), `"webhook_url":"`+srv.URL+`/default"`) {
		t.Fatalf("set default: %d %s", r.status, r.body)
	}
	j2 := h.do(t, h.keyA, "POST", "/v1/jobs", pyJob).job(t)
	h.do(t, h.keyA, "POST", "/v1/jobs/"+j2.ID+"/cancel", "")
	if j2 = h.awaitWebhook(t, h.keyA, j2.ID); j2.Webhook.URL != srv.URL+"/default" {
		t.Errorf("default webhook: %+v", j2.Webhook)
	}
	if r := h.do(t, h.keyA, "PATCH", "/v1/settings", `{"webhook_url":""}`); !strings.Contains(string(r.body), `"webhook_url":null`) {
		t.Errorf("remove default: %s", r.body)
	}
	j3 := h.do(t, h.keyA, "POST", "/v1/jobs", pyJob).job(t)
	h.finish(t, j3.ID, succeeded(""))
	if j3 = h.do(t, h.keyA, "GET", "/v1/jobs/"+j3.ID, "").job(t); j3.Webhook != nil {
		t.Errorf("a webhook after the default was removed: %+v", j3.Webhook)
	}

	// Rotating: the new secret and the old one both sign for a while.
	var rotated webhook.Secrets
	h.do(t, h.keyA, "POST", "/v1/settings/webhook-secret/rotate", "").json(t, &rotated)
	if rotated.Secret == sec.Secret || rotated.PreviousExpiresAt == nil {
		t.Errorf("rotated = %+v", rotated)
	}
	j4 := h.do(t, h.keyA, "POST", "/v1/jobs", `{"language":"python","code":"print(6*7)","webhook_url":"`+srv.URL+`/job"}`).job(t)
	h.finish(t, j4.ID, succeeded(""))
	h.awaitWebhook(t, h.keyA, j4.ID)
	last := received()[len(received())-1]
	for _, s := range []string{sec.Secret, rotated.Secret} {
		if err := webhook.Verify(s, last.header, last.body, time.Now()); err != nil {
			t.Errorf("after rotation: %v", err)
		}
	}
}

func TestWebhookURLChecks(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withWebhooks(false))
	for _, c := range []struct{ body, want string }{
		{`{"language":"python","code":"x","webhook_url":"http://127.0.0.1:9/x"}`, "GANTRY_WEBHOOK_ALLOW_PRIVATE"},
		{`{"language":"python","code":"x","webhook_url":"http://localhost/x"}`, "not public"},
		{`{"language":"python","code":"x","webhook_url":"ftp://example.com/"}`, "http or https"},
	} {
		r := h.do(t, h.keyA, "POST", "/v1/jobs", c.body)
		var e struct{ Error service.Error }
		_ = json.Unmarshal(r.body, &e)
		if r.status != 400 || e.Error.Field != "webhook_url" || !strings.Contains(e.Error.Message, c.want) {
			t.Errorf("%s: %d %s", c.body, r.status, r.body)
		}
	}
	if r := h.do(t, h.keyA, "PATCH", "/v1/settings", `{"webhook_url":"http://10.1.2.3/"}`); r.status != 400 {
		t.Errorf("private default: %d %s", r.status, r.body)
	}
	if r := h.do(t, h.keyA, "POST", "/v1/jobs", `{"language":"python","code":"x","webhook_url":"https://hooks.example.com/x"}`); r.status != 202 {
		t.Errorf("public URL: %d %s", r.status, r.body)
	}

	// Without a secret key there are no webhooks, and the refusal says why.
	off := newHarness(t)
	r := off.do(t, off.keyA, "POST", "/v1/jobs", `{"language":"python","code":"x","webhook_url":"https://hooks.example.com/x"}`)
	if r.status != 400 || !strings.Contains(string(r.body), "GANTRY_SECRET_KEY") {
		t.Errorf("webhook without a key: %d %s", r.status, r.body)
	}
	// A malformed URL is refused for its form first, webhooks on or off.
	r = off.do(t, off.keyA, "POST", "/v1/jobs", `{"language":"python","code":"x","webhook_url":"ftp://example.com/"}`)
	if r.status != 400 || !strings.Contains(string(r.body), "http or https") {
		t.Errorf("malformed webhook without a key: %d %s", r.status, r.body)
	}
	if r := off.do(t, off.keyA, "GET", "/v1/settings/webhook-secret", ""); r.status != 503 {
		t.Errorf("secret without a key: %d %s", r.status, r.body)
	}
}
