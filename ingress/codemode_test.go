package ingress_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/gantryhq/gantry/codemode"
	"github.com/gantryhq/gantry/codemode/codemodetest"
	"github.com/gantryhq/gantry/ingress"
	"github.com/gantryhq/gantry/secret"
)

func withCodeMode(h *harness, c *ingress.Config) {
	box, _ := secret.New(bytes.Repeat([]byte{5}, secret.KeySize))
	log := slog.New(slog.DiscardHandler)
	c.CodeMode = codemode.NewRegistry(h.st, box, codemode.NewUpstreams(codemode.Config{AllowPrivate: true}, log), log)
	c.Privacy = true
}

func TestCodeModeAPI(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withCodeMode)
	crm := codemodetest.ServeHTTP(t, codemodetest.CRM(codemodetest.CredentialOK))
	reg, _ := json.Marshal(map[string]any{"name": "crm", "url": crm, "headers": map[string]string{"Authorization": "Bearer " + codemodetest.Token}})
	if r := h.do(t, h.keyA, "POST", "/v1/mcp-servers", string(reg)); r.status != 201 || r.header.Get("Location") != "/v1/mcp-servers/crm" {
		t.Fatalf("register: %d %s", r.status, r.body)
	}

	// Bad input gets a clear 4xx naming the field.
	bad := []struct {
		method, path, body string
		status             int
		want               string
	}{
		{"POST", "/v1/mcp-servers", `{"name":"x","url":"` + crm + `","headers":{"Authorization":"a\nb"}}`, 400, `"field":"headers"`},
		{"POST", "/v1/mcp-servers", `{"name":"x","url":"` + crm + `","timeout_ms":"soon"}`, 400, `"field":"timeout_ms"`},
		{"POST", "/v1/mcp-servers", `[1]`, 400, `invalid_argument`},
		{"POST", "/v1/mcp-servers", `{"name":"x","url":"http://127.0.0.1:1/mcp"}`, 502, `upstream_error`},
		{"PATCH", "/v1/mcp-servers/crm", `{"deny_tools":["["]}`, 400, `"field":"deny_tools"`},
		{"PATCH", "/v1/mcp-servers/crm", `{"nme":"y"}`, 400, `unknown field`},
		{"PATCH", "/v1/mcp-servers/nope", `{}`, 404, `MCP server \"nope\" not found`},
		{"GET", "/v1/mcp-servers/crm?detail=everything", ``, 400, `"field":"detail"`},
		{"GET", "/v1/tools?limit=0", ``, 400, `"field":"limit"`},
		{"GET", "/v1/tools?q=" + strings.Repeat("a", 501), ``, 400, `"field":"q"`},
		{"PATCH", "/v1/settings", `{"pii_tokens":"yes"}`, 400, `pii_tokens`},
	}
	for _, c := range bad {
		r := h.do(t, h.keyA, c.method, c.path, c.body)
		if r.status != c.status || !strings.Contains(string(r.body), c.want) {
			t.Errorf("%s %s %s: %d %s (want %d with %s)", c.method, c.path, c.body, r.status, r.body, c.status, c.want)
		}
	}

	// Another tenant sees nothing of a's server.
	for _, c := range []struct{ method, path string }{{"GET", "/v1/mcp-servers/crm"}, {"PATCH", "/v1/mcp-servers/crm"},
		{"DELETE", "/v1/mcp-servers/crm"}, {"POST", "/v1/mcp-servers/crm/refresh"}} {
		if r := h.do(t, h.keyB, c.method, c.path, `{}`); r.status != 404 {
			t.Errorf("tenant b %s %s: %d %s", c.method, c.path, r.status, r.body)
		}
	}
	if r := h.do(t, h.keyB, "GET", "/v1/tools?q=customer", ""); r.status != 200 || string(bytes.TrimSpace(r.body)) != `{"tools":[]}` {
		t.Errorf("tenant b search: %s", r.body)
	}

	// a's view: tools listed, credential by name only, update and refresh.
	r := h.do(t, h.keyA, "GET", "/v1/mcp-servers/crm?detail=name", "")
	if r.status != 200 || strings.Contains(string(r.body), codemodetest.Token) || !strings.Contains(string(r.body), `{"server":"crm","name":"find_customer"}`) {
		t.Fatalf("get: %d %s", r.status, r.body)
	}
	r = h.do(t, h.keyA, "PATCH", "/v1/mcp-servers/crm", `{"allow_tools":["find_*"],"timeout_ms":5000}`)
	var srv codemode.Server
	r.json(t, &srv)
	if r.status != 200 || srv.Tools != 1 || srv.TimeoutMS != 5000 || len(srv.Headers) != 1 {
		t.Fatalf("patch: %d %s", r.status, r.body)
	}
	if r := h.do(t, h.keyA, "POST", "/v1/mcp-servers/crm/refresh", ""); r.status != 200 {
		t.Errorf("refresh: %d %s", r.status, r.body)
	}
	// Changing the credential to a wrong one fails and keeps the old one.
	if r := h.do(t, h.keyA, "PATCH", "/v1/mcp-servers/crm", `{"headers":{"Authorization":"Bearer wrong"}}`); r.status != 502 {
		t.Errorf("wrong credential: %d %s", r.status, r.body)
	}
	if r := h.do(t, h.keyA, "POST", "/v1/mcp-servers/crm/refresh", ""); r.status != 200 {
		t.Errorf("refresh after a refused change: %d %s", r.status, r.body)
	}

	// Settings.
	if r := h.do(t, h.keyA, "PATCH", "/v1/settings", `{"pii_tokens":true}`); r.status != 200 || !strings.Contains(string(r.body), `"pii_tokens":true`) {
		t.Errorf("settings: %d %s", r.status, r.body)
	}
	if r := h.do(t, h.keyB, "GET", "/v1/settings", ""); !strings.Contains(string(r.body), `"pii_tokens":false`) {
		t.Errorf("tenant b settings: %s", r.body)
	}

	if r := h.do(t, h.keyA, "DELETE", "/v1/mcp-servers/crm", ""); r.status != 204 {
		t.Errorf("delete: %d %s", r.status, r.body)
	}
	if r := h.do(t, h.keyA, "GET", "/v1/mcp-servers", ""); string(bytes.TrimSpace(r.body)) != `{"servers":[]}` {
		t.Errorf("after delete: %s", r.body)
	}
}

func TestCodeModeOff(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, p := range []string{"/v1/mcp-servers", "/v1/tools"} {
		if r := h.do(t, h.keyA, "GET", p, ""); r.status != 503 || !strings.Contains(string(r.body), "code mode is not configured") {
			t.Errorf("GET %s: %d %s", p, r.status, r.body)
		}
	}
	if r := h.do(t, h.keyA, "PATCH", "/v1/settings", `{"pii_tokens":true}`); r.status != 503 {
		t.Errorf("privacy without a key: %d %s", r.status, r.body)
	}
}
