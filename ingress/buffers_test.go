package ingress_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gantryhq/gantry/ingress"
	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store/storetest"
)

// bigJob is a job of the key's tenant that finished having printed n
// bytes, which the store keeps in the object store.
func (h *harness) bigJob(t *testing.T, key string, n int) string {
	t.Helper()
	j := h.do(t, key, "POST", "/v1/jobs", pyJob).job(t)
	res := succeeded("")
	res.Stdout = []byte(strings.Repeat("x", n))
	h.finish(t, j.ID, res)
	return j.ID
}

// buffered is what the ingress at url says it holds for answers.
func buffered(t *testing.T, h *harness, url string) int64 {
	t.Helper()
	r := (&harness{url: url}).do(t, "", "GET", "/metrics", "")
	for _, line := range strings.Split(string(r.body), "\n") {
		if v, ok := strings.CutPrefix(line, "gantry_ingress_buffered_bytes "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return int64(f)
		}
	}
	t.Fatalf("no gantry_ingress_buffered_bytes in /metrics")
	return 0
}

// unread sends GET path with the key and never reads the answer: the
// ingress stays in the middle of writing it. Closing the connection ends
// the request.
func unread(t *testing.T, url, key, path string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", path, key)
	// Its status line has come once it started writing.
	line, err := bufio.NewReaderSize(c, 64).ReadString('\n')
	if err != nil || !strings.Contains(line, " 200 ") {
		t.Fatalf("GET %s: %q %v", path, line, err)
	}
	return c
}

// TestAnswerMemoryBudget: what the ingress holds in memory to answer —
// here a job's output read back from the object store, held as text and
// as JSON — is bounded per tenant and per ingress. A request that alone
// would hold more than a tenant may is refused with 413; while a tenant's
// requests hold its share, its next is refused with 429; while all hold
// the ingress's, anyone's with 503. Nothing is held once the answers are
// written.
func TestAnswerMemoryBudget(t *testing.T) {
	t.Parallel()
	const mb = 1 << 20
	h := newHarness(t, func(h *harness, cfg *ingress.Config) {
		cfg.TenantBufferBytes, cfg.BufferBytes = 64*mb, 100*mb
	})
	// An answer held while unread must not be buffered by a test wrapper.
	raw := httptest.NewServer(h.handler)
	t.Cleanup(raw.Close)
	_, keyC := storetest.Tenant(t, h.st, "c")
	a1, a2 := h.bigJob(t, h.keyA, 20*mb), h.bigJob(t, h.keyA, 20*mb)
	b, c := h.bigJob(t, h.keyB, 20*mb), h.bigJob(t, keyC, 20*mb)
	get := func(key, path string) response { return (&harness{url: raw.URL}).do(t, key, "GET", path, "") }
	code := func(r response) string {
		var body struct {
			Error struct{ Code, Message string }
		}
		r.json(t, &body)
		return body.Error.Code
	}

	// One job holds 40 MB (its output as text and JSON): it fits.
	if r := get(h.keyA, "/v1/jobs/"+a1); r.status != 200 || len(r.job(t).Stdout) != 20*mb {
		t.Fatalf("one job: %d", r.status)
	}
	// Two would hold 80 MB, more than a tenant's 64: ask for fewer.
	if r := get(h.keyA, "/v1/jobs?limit=2"); r.status != 413 || code(r) != "payload_too_large" || !strings.Contains(string(r.body), "fewer jobs") {
		t.Errorf("a page of two: %d %.300s", r.status, r.body)
	}
	if r := get(h.keyA, "/v1/jobs?limit=1"); r.status != 200 {
		t.Errorf("a page of one: %d %.300s", r.status, r.body)
	}
	if n := buffered(t, h, raw.URL); n != 0 {
		t.Errorf("%d bytes held with no request in progress", n)
	}

	// Tenant A's unread answer holds 40 MB: its next is refused, others'
	// are not.
	heldA := unread(t, raw.URL, h.keyA, "/v1/jobs/"+a1)
	if !eventually.Within(10*time.Second, func() bool { return buffered(t, h, raw.URL) >= 40*mb }) {
		t.Fatalf("the unread answer holds %d bytes", buffered(t, h, raw.URL))
	}
	if r := get(h.keyA, "/v1/jobs/"+a2); r.status != 429 || code(r) != "rate_limited" || r.header.Get("Retry-After") == "" {
		t.Errorf("tenant A past its share: %d %.300s", r.status, r.body)
	}
	heldB := unread(t, raw.URL, h.keyB, "/v1/jobs/"+b)
	if !eventually.Within(10*time.Second, func() bool { return buffered(t, h, raw.URL) >= 80*mb }) {
		t.Fatalf("two unread answers hold %d bytes", buffered(t, h, raw.URL))
	}
	// Tenant C holds nothing, but the ingress holds 80 of its 100 MB.
	if r := get(keyC, "/v1/jobs/"+c); r.status != 503 || code(r) != "unavailable" || r.header.Get("Retry-After") == "" {
		t.Errorf("the ingress past its limit: %d %.300s", r.status, r.body)
	}
	heldA.Close()
	if !eventually.Within(10*time.Second, func() bool { return buffered(t, h, raw.URL) <= 40*mb }) {
		t.Fatalf("a closed request still holds: %d bytes", buffered(t, h, raw.URL))
	}
	if r := get(keyC, "/v1/jobs/"+c); r.status != 200 {
		t.Errorf("tenant C once there is room: %d %.300s", r.status, r.body)
	}
	heldB.Close()
	if !eventually.Within(10*time.Second, func() bool { return buffered(t, h, raw.URL) == 0 }) {
		t.Errorf("%d bytes held after every request ended", buffered(t, h, raw.URL))
	}
}

// TestCompatAnswerEncodingCounted: the compatible APIs count what their
// answers make of output besides its text and JSON: Judge0's base64, and
// Piston's output field (stdout and stderr again). With 2 MB a tenant,
// 400 KB of Judge0 output fits as text and not as base64, and Piston's
// answer of 600 KB of output does not fit.
func TestCompatAnswerEncodingCounted(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(h *harness, cfg *ingress.Config) {
		cfg.TenantBufferBytes, cfg.BufferBytes = 2<<20, 64<<20
	})
	r := h.do(t, "", "POST", "/compat/judge0/submissions", `{"source_code": "print(1)", "language_id": 71}`, "X-Auth-Token", h.keyA)
	id := r.header.Get("X-Gantry-Job-Id")
	if r.status != 201 || id == "" {
		t.Fatalf("judge0 submission: %d %s", r.status, r.body)
	}
	var sub struct{ Token string }
	r.json(t, &sub)
	res := succeeded(strings.Repeat("y", 400_000))
	h.finish(t, id, res)
	r = h.do(t, "", "GET", "/compat/judge0/submissions/"+sub.Token+"?base64_encoded=true", "", "X-Auth-Token", h.keyA)
	if r.status != 413 {
		t.Errorf("judge0, base64: %d %.300s", r.status, r.body)
	}
	r = h.do(t, "", "GET", "/compat/judge0/submissions/"+sub.Token, "", "X-Auth-Token", h.keyA)
	if r.status != 200 || !strings.Contains(string(r.body), strings.Repeat("y", 1000)) {
		t.Errorf("judge0, text: %d %.300s", r.status, r.body)
	}

	for _, c := range []struct {
		n      int
		status int
	}{{400_000, 200}, {600_000, 413}} {
		done := make(chan response, 1)
		go func() {
			r, err := h.request(nil, h.keyA, "POST", "/compat/piston/api/v2/execute", `{"language": "python", "version": "*", "files": [{"content": "print(1)"}]}`)
			if err != nil {
				t.Error(err)
			}
			done <- r
		}()
		var list struct{ Jobs []jobs.Job }
		if !eventually.Within(10*time.Second, func() bool {
			h.do(t, h.keyA, "GET", "/v1/jobs?status=queued&metadata.compat=piston", "").json(t, &list)
			return len(list.Jobs) == 1
		}) {
			t.Fatal("the piston job is not queued")
		}
		h.finish(t, list.Jobs[0].ID, succeeded(strings.Repeat("z", c.n)))
		if r := <-done; r.status != c.status {
			t.Errorf("piston, %d bytes of output: %d %.300s, want %d", c.n, r.status, r.body, c.status)
		}
	}
}
