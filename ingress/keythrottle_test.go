package ingress_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestInvalidKeysThrottled: a source that presents many invalid keys is
// answered 429 with Retry-After (no lookup) once past its allowance, while
// a key that checked out stays usable from the same address.
func TestInvalidKeysThrottled(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	if r := h.do(t, h.keyA, "GET", "/v1/languages", ""); r.status != 200 {
		t.Fatalf("valid key: %d", r.status)
	}
	counts := map[int]int{}
	start := time.Now()
	for i := range 200 {
		r := h.do(t, "gk_guess_"+strings.Repeat("x", 10)+string(rune('a'+i%26)), "GET", "/v1/jobs", "")
		counts[r.status]++
		if r.status == 429 && r.header.Get("Retry-After") == "" {
			t.Fatalf("429 without Retry-After: %s", r.body)
		}
	}
	// A burst of 10 invalid keys, then 5 a second: 200 guesses get the
	// burst and what refilled while they were made (a slow machine takes
	// longer over them), the rest 429.
	allowed := 10 + int(5*time.Since(start).Seconds()) + 1
	if counts[401] > allowed || counts[401]+counts[429] != 200 {
		t.Errorf("200 invalid keys: %v, want at most %d lookups", counts, allowed)
	}
	if r := h.do(t, h.keyA, "GET", "/v1/languages", ""); r.status != 200 {
		t.Errorf("a valid key while its address is throttled: %d %s", r.status, r.body)
	}
}

// TestMCPSessionBoundToTenant: an MCP transport session answers only the
// tenant that opened it; another tenant's key with its id is answered as
// if the session did not exist.
func TestMCPSessionBoundToTenant(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	initialize := func(key, sid string) (int, string) {
		body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
		hdr := []string{"Content-Type", "application/json", "Accept", "application/json, text/event-stream"}
		if sid != "" {
			hdr = append(hdr, "Mcp-Session-Id", sid)
		}
		r := h.do(t, key, "POST", "/mcp", body, hdr...)
		return r.status, r.header.Get("Mcp-Session-Id")
	}
	status, sid := initialize(h.keyA, "")
	if status != 200 || sid == "" {
		t.Fatalf("initialize: %d session %q", status, sid)
	}
	list := func(key string) (int, string) {
		r := h.do(t, key, "POST", "/mcp", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
			"Content-Type", "application/json", "Accept", "application/json, text/event-stream", "Mcp-Session-Id", sid, "Mcp-Protocol-Version", "2025-11-25")
		return r.status, string(r.body)
	}
	if status, body := list(h.keyB); status != http.StatusNotFound || !strings.Contains(body, "not_found") {
		t.Errorf("tenant B with A's session: %d %s", status, body)
	}
	r := h.do(t, h.keyB, "DELETE", "/mcp", "", "Mcp-Session-Id", sid)
	if r.status != http.StatusNotFound {
		t.Errorf("tenant B deleting A's session: %d %s", r.status, r.body)
	}
	status, body := list(h.keyA)
	var msg struct{ Result json.RawMessage }
	if i := strings.LastIndex(body, "data: "); i >= 0 {
		body = body[i+6:]
	}
	if status != 200 || json.Unmarshal([]byte(body), &msg) != nil || !strings.Contains(string(msg.Result), "execute_code") {
		t.Errorf("tenant A with its session: %d %s", status, body)
	}
}
