package test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store/storetest"
)

// hookReceiver is a webhook endpoint as a customer would write it: it
// verifies each message's signature and timestamp itself (Standard
// Webhooks), answering 401 to a bad one and, while failing is set, 503 to
// good ones.
type hookReceiver struct {
	*httptest.Server
	mu       sync.Mutex
	secret   []byte
	failing  bool
	verified []hookCall // good signatures, whatever was answered
	accepted int        // 2xx answers
	bad      []string   // why messages were refused
}

type hookCall struct {
	id    string
	event struct {
		Type      string
		Timestamp time.Time
		Data      jobs.Job
	}
}

func newHookReceiver(t *testing.T) *hookReceiver {
	h := &hookReceiver{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		defer h.mu.Unlock()
		id, ts, sigs := r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp"), r.Header.Get("webhook-signature")
		sent, err := strconv.ParseInt(ts, 10, 64)
		if err != nil || time.Since(time.Unix(sent, 0)).Abs() > 5*time.Minute {
			h.bad = append(h.bad, "timestamp "+ts)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		mac := hmac.New(sha256.New, h.secret)
		fmt.Fprintf(mac, "%s.%s.%s", id, ts, body)
		want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
		if !strings.Contains(" "+sigs+" ", " "+want+" ") {
			h.bad = append(h.bad, "signature "+sigs)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var c hookCall
		c.id = id
		if err := json.Unmarshal(body, &c.event); err != nil {
			h.bad = append(h.bad, "body "+string(body))
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		h.verified = append(h.verified, c)
		if h.failing {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		h.accepted++
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.Close)
	return h
}

// useSecret fetches the tenant's signing secret from the API.
func (h *hookReceiver) useSecret(t *testing.T, d *dev) {
	t.Helper()
	var s struct{ Secret string }
	r := d.call(t, "GET", "/v1/settings/webhook-secret", "")
	if r.status != 200 || json.Unmarshal(r.body, &s) != nil || !strings.HasPrefix(s.Secret, "whsec_") {
		t.Fatalf("webhook secret: %d %s", r.status, r.body)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s.Secret, "whsec_"))
	if err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	h.secret = key
	h.mu.Unlock()
}

func (h *hookReceiver) state() (verified []hookCall, accepted int, bad []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookCall(nil), h.verified...), h.accepted, append([]string(nil), h.bad...)
}

// awaitWebhook waits until the job's webhook satisfies cond.
func (d *dev) awaitWebhook(t *testing.T, id string, within time.Duration, cond func(*jobs.WebhookDelivery) bool) jobs.Job {
	t.Helper()
	var j jobs.Job
	if !eventually.Within(within, func() bool {
		j = d.job(t, "GET", "/v1/jobs/"+id, "")
		return j.Webhook != nil && cond(j.Webhook)
	}) {
		t.Fatalf("job %s: webhook %+v after %s", id, j.Webhook, within)
	}
	return j
}

// TestWebhooksAndBatches: a batch's jobs call the tenant's default webhook
// or their own when they finish, signed so a receiver can check them.
func TestWebhooksAndBatches(t *testing.T) {
	d := startDev(t, "GANTRY_RUNNER_SLOTS=2")
	hook := newHookReceiver(t)
	hook.useSecret(t, d)
	if r := d.call(t, "PATCH", "/v1/settings", `{"webhook_url":"`+hook.URL+`/default"}`); r.status != 200 {
		t.Fatalf("settings: %d %s", r.status, r.body)
	}
	r := d.call(t, "POST", "/v1/jobs/batch", `{"jobs": [
		{"language":"python","code":"print(6*7)"},
		{"language":"bash","code":"exit 4","webhook_url":"`+hook.URL+`/own"},
		{"language":"python","code":""}
	]}`)
	var b struct {
		BatchID string `json:"batch_id"`
		Jobs    []struct {
			Status int
			Job    *jobs.Job
			Error  *struct{ Code, Field string }
		}
	}
	if r.status != 200 || json.Unmarshal(r.body, &b) != nil || len(b.Jobs) != 3 {
		t.Fatalf("batch: %d %s", r.status, r.body)
	}
	if b.Jobs[0].Status != 202 || b.Jobs[1].Status != 202 || b.Jobs[2].Status != 400 || b.Jobs[2].Error.Field != "code" {
		t.Fatalf("batch items: %s", r.body)
	}
	var list struct{ Jobs []jobs.Job }
	_ = json.Unmarshal(d.call(t, "GET", "/v1/jobs?batch_id="+b.BatchID, "").body, &list)
	if len(list.Jobs) != 2 {
		t.Errorf("GET /v1/jobs?batch_id= lists %d jobs, want 2", len(list.Jobs))
	}

	want := map[string]struct {
		status jobs.Status
		url    string
	}{b.Jobs[0].Job.ID: {jobs.StatusSucceeded, hook.URL + "/default"}, b.Jobs[1].Job.ID: {jobs.StatusFailed, hook.URL + "/own"}}
	for id, w := range want {
		j := d.awaitWebhook(t, id, 2*time.Minute, (*jobs.WebhookDelivery).Settled)
		if j.Webhook.Status != jobs.WebhookDelivered || j.Webhook.URL != w.url || len(j.Webhook.Attempts) != 1 || j.Webhook.Attempts[0].StatusCode != 204 {
			t.Errorf("job %s: webhook %+v", id, j.Webhook)
		}
	}
	calls, accepted, bad := hook.state()
	if len(bad) > 0 || accepted != 2 || len(calls) != 2 {
		t.Fatalf("receiver: %d accepted, refused %v", accepted, bad)
	}
	for _, c := range calls {
		w, ok := want[c.event.Data.ID]
		if !ok || c.event.Type != "job.finished" || c.event.Data.Status != w.status || c.id != "msg_"+c.event.Data.ID[4:] {
			t.Errorf("event %+v", c)
		}
		if c.event.Data.ID == b.Jobs[0].Job.ID && c.event.Data.Stdout != "42\n" {
			t.Errorf("event stdout %q", c.event.Data.Stdout)
		}
	}
}

// TestWebhookSurvivesRestarts: the runner dies mid-job and the ingress
// dies while the receiver is down; the webhook still arrives, once,
// signed, after the restart.
func TestWebhookSurvivesRestarts(t *testing.T) {
	same := []string{
		"GANTRY_DATA_DIR=" + t.TempDir(), "GANTRY_DATABASE_URL=" + storetest.DatabaseURL(t),
		"GANTRY_DEV_RUNNER=false", "GANTRY_ACK_WAIT=2s",
		"GANTRY_WEBHOOK_BACKOFF=200ms", "GANTRY_WEBHOOK_TIMEOUT=1s",
	}
	d := startDev(t, same...)
	hook := newHookReceiver(t)
	hook.useSecret(t, d)
	hook.failing = true
	runner := func(id string) *proc {
		p := start(t, append(d.env, "GANTRY_RUNNER_ID="+id, "GANTRY_RUNNER_SLOTS=1", "GANTRY_DRAIN_TIMEOUT=1s"), "runner")
		p.waitOutput(t, regexp.MustCompile(`runner started`), 30*time.Second)
		return p
	}
	suffix := jobs.NewID("r")[2:10]
	a := runner("e2e-hook-a-" + suffix)
	j := d.submit(t, map[string]any{"language": "python", "webhook_url": hook.URL + "/h",
		"code": "import time\nprint('start', flush=True)\ntime.sleep(2)\nprint('end')"})
	d.await(t, j.ID, time.Minute, func(j jobs.Job) bool { return j.Status == jobs.StatusRunning })
	a.kill()
	runner("e2e-hook-b-" + suffix)
	j = d.await(t, j.ID, 2*time.Minute, terminal)
	if j.Status != jobs.StatusSucceeded || j.Attempt != 2 {
		t.Fatalf("job after its runner died: %+v", j)
	}
	// The receiver is down: attempts fail and are recorded.
	d.awaitWebhook(t, j.ID, 30*time.Second, func(w *jobs.WebhookDelivery) bool { return len(w.Attempts) >= 2 })
	d.kill()

	hook.mu.Lock()
	hook.failing = false
	hook.mu.Unlock()
	d = startDev(t, same...)
	j = d.awaitWebhook(t, j.ID, time.Minute, (*jobs.WebhookDelivery).Settled)
	w := j.Webhook
	if w.Status != jobs.WebhookDelivered || w.Attempts[len(w.Attempts)-1].StatusCode != 204 || w.Attempts[0].StatusCode != 503 {
		t.Errorf("webhook after the restart: %+v", w)
	}
	calls, accepted, bad := hook.state()
	if accepted != 1 || len(bad) > 0 {
		t.Errorf("receiver accepted %d messages (want 1), refused %v", accepted, bad)
	}
	for _, c := range calls {
		if c.id != w.ID || c.event.Data.ID != j.ID || c.event.Data.Stdout != "start\nend\n" {
			t.Errorf("call %+v", c)
		}
	}
	t.Logf("delivered after %d attempts across the restart", len(w.Attempts))
}
