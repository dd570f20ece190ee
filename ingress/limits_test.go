package ingress_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gantryhq/gantry/ingress"
	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
	"github.com/gantryhq/gantry/store"
)

// TestRateLimit: a tenant past its requests per second gets 429 with
// Retry-After; another tenant, and the same one after waiting, does not. A
// tenant's own limit overrides the default.
func TestRateLimit(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(_ *harness, c *ingress.Config) { c.TenantLimits = jobs.TenantLimits{RequestsPerSecond: 2} })
	many := 1000.0
	if _, err := h.st.SetTenantLimits(context.Background(), h.tenantB, store.LimitsUpdate{RequestsPerSecond: &many}); err != nil {
		t.Fatal(err)
	}
	var limited response
	ok := 0
	start := time.Now()
	for i := 0; i < 10; i++ {
		r := h.do(t, h.keyA, "GET", "/v1/jobs", "")
		if r.status == 429 {
			limited = r
			break
		}
		ok++
	}
	// The burst, and what refilled while the requests were made (a slow
	// machine takes longer over them).
	if refilled := int(2 * time.Since(start).Seconds()); ok < 4 || ok > 5+refilled || limited.status != 429 || !strings.Contains(string(limited.body), `"code":"rate_limited"`) {
		t.Fatalf("after %d requests: %d %s, want 429 after a burst of 4 (twice the rate, and what refilled meanwhile)", ok, limited.status, limited.body)
	}
	wait, err := strconv.Atoi(limited.header.Get("Retry-After"))
	if err != nil || wait < 1 || limited.header.Get("WWW-Authenticate") != "" {
		t.Errorf("429 headers: %v", limited.header)
	}
	// MCP requests count too.
	if r := h.do(t, h.keyA, "POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "Content-Type", "application/json",
		"Accept", "application/json, text/event-stream"); r.status != 429 {
		t.Errorf("MCP request past the rate: %d %s", r.status, r.body)
	}
	for i := 0; i < 20; i++ {
		if r := h.do(t, h.keyB, "GET", "/v1/jobs", ""); r.status != 200 {
			t.Fatalf("tenant b, request %d: %d %s", i, r.status, r.body)
		}
	}
	// Within Retry-After (and a second of slack) the tenant may go on.
	limitedAt := time.Now()
	eventually.True(t, time.Duration(wait+1)*time.Second, "the tenant's rate to allow a request after Retry-After", func() bool {
		return h.do(t, h.keyA, "GET", "/v1/jobs", "").status == 200
	})
	if d := time.Since(limitedAt); d > time.Duration(wait+1)*time.Second {
		t.Errorf("allowed again after %s; Retry-After said %d s", d, wait)
	}
}

// TestQueuedAndRunningCaps: a tenant with its queued jobs at the cap gets
// 429 until one leaves the queue (a retry with an idempotency key still
// returns its job); its queue in JetStream caps its running jobs.
func TestQueuedAndRunningCaps(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(_ *harness, c *ingress.Config) { c.TenantLimits = jobs.TenantLimits{MaxQueued: 3, MaxRunning: 2} })
	ctx := context.Background()
	five := 5
	if _, err := h.st.SetTenantLimits(ctx, h.tenantB, store.LimitsUpdate{MaxRunning: &five}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 3 {
		r := h.do(t, h.keyA, "POST", "/v1/jobs", fmt.Sprintf(`{"language":"python","code":"print(%d)","idempotency_key":"k%d"}`, i, i))
		if r.status != 202 {
			t.Fatalf("job %d: %d %s", i, r.status, r.body)
		}
		ids = append(ids, r.job(t).ID)
	}
	r := h.do(t, h.keyA, "POST", "/v1/jobs", pyJob)
	if r.status != 429 || r.header.Get("Retry-After") == "" || !strings.Contains(string(r.body), "3 queued jobs") {
		t.Fatalf("past the queued cap: %d %s", r.status, r.body)
	}
	if r := h.do(t, h.keyA, "POST", "/v1/jobs", `{"language":"python","code":"print(0)","idempotency_key":"k0"}`); r.status != 202 || r.job(t).ID != ids[0] {
		t.Errorf("retry of an accepted job: %d %s", r.status, r.body)
	}
	if r := h.do(t, h.keyB, "POST", "/v1/jobs", pyJob); r.status != 202 {
		t.Errorf("another tenant: %d %s", r.status, r.body)
	}
	h.finish(t, ids[0], succeeded("0\n"))
	if r := h.do(t, h.keyA, "POST", "/v1/jobs", pyJob); r.status != 202 {
		t.Errorf("after a job left the queue: %d %s", r.status, r.body)
	}

	for tenant, want := range map[string]int{h.tenantA: 2, h.tenantB: 5} {
		cons, err := h.js.Consumer(ctx, queue.StreamName, queue.TenantConsumer(tenant))
		if err != nil {
			t.Fatal(err)
		}
		if got := cons.CachedInfo().Config.MaxAckPending; got != want {
			t.Errorf("tenant %s: its queue lets %d jobs run at once, want %d", tenant, got, want)
		}
	}
}

// TestQueueFull: when the stream holds its maximum, a submission answers
// 503 with Retry-After and leaves no job behind.
func TestQueueFull(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(_ *harness, c *ingress.Config) { c.Queue.MaxMsgs = 2 })
	for i := range 2 {
		if r := h.do(t, h.keyA, "POST", "/v1/jobs", pyJob); r.status != 202 {
			t.Fatalf("job %d: %d %s", i, r.status, r.body)
		}
	}
	r := h.do(t, h.keyB, "POST", "/v1/jobs", pyJob)
	if r.status != 503 || r.header.Get("Retry-After") != "5" || !strings.Contains(string(r.body), "queue is full") {
		t.Fatalf("full queue: %d %s %v", r.status, r.body, r.header)
	}
	var list struct{ Jobs []jobs.Job }
	h.do(t, h.keyB, "GET", "/v1/jobs", "").json(t, &list)
	if len(list.Jobs) != 0 {
		t.Errorf("a refused job was kept: %+v", list.Jobs)
	}
}
