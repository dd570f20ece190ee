package ingress_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gantryhq/gantry/ingress"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/secret"
	"github.com/gantryhq/gantry/store/storetest"
)

// TestSecretsAPI: a tenant's secrets are set (sealed at rest), listed and
// read without their values, and deleted; another tenant sees none and
// cannot name one in its rules; a session's network is replaced and
// checked like a job's; without GANTRY_SECRET_KEY there are no secrets.
func TestSecretsAPI(t *testing.T) {
	box, _ := secret.New(bytes.Repeat([]byte{9}, secret.KeySize))
	h := newHarness(t, func(_ *harness, c *ingress.Config) { c.Box = box })
	const value = "sk-ingress-test-value"
	r := h.do(t, h.keyA, "PUT", "/v1/secrets/API_KEY", `{"value":"`+value+`"}`)
	if r.status != 201 || r.header.Get("Location") != "/v1/secrets/API_KEY" || strings.Contains(string(r.body), value) {
		t.Fatalf("put: %d %s", r.status, r.body)
	}
	if r := h.do(t, h.keyA, "PUT", "/v1/secrets/API_KEY", `{"value":"`+value+`2"}`); r.status != 200 {
		t.Fatalf("replace: %d %s", r.status, r.body)
	}
	var sealed []byte
	if err := storetest.QueryRow(h.st, `SELECT sealed FROM secrets WHERE name = 'API_KEY'`).Scan(&sealed); err != nil || bytes.Contains(sealed, []byte(value)) {
		t.Fatalf("stored in the clear, or not at all: %v", err)
	}
	for path, want := range map[string]string{"/v1/secrets": `{"secrets":[{"name":"API_KEY"`, "/v1/secrets/API_KEY": `{"name":"API_KEY"`} {
		if r := h.do(t, h.keyA, "GET", path, ""); r.status != 200 || !strings.HasPrefix(string(r.body), want) || strings.Contains(string(r.body), value) {
			t.Errorf("GET %s: %d %s", path, r.status, r.body)
		}
	}
	for _, c := range []struct{ method, path, body string }{
		{"PUT", "/v1/secrets/_hidden", `{"value":"x"}`}, {"PUT", "/v1/secrets/A", `{"value":"a\rb"}`},
		{"PUT", "/v1/secrets/A", `{"value":"x","extra":1}`}, {"PUT", "/v1/secrets/A", `{"value":"` + strings.Repeat("x", jobs.MaxSecretBytes+1) + `"}`},
	} {
		if r := h.do(t, h.keyA, c.method, c.path, c.body); r.status != 400 {
			t.Errorf("%s %s: %d %s", c.method, c.path, r.status, r.body)
		}
	}

	// Another tenant.
	if r := h.do(t, h.keyB, "GET", "/v1/secrets", ""); r.status != 200 || string(bytes.TrimSpace(r.body)) != `{"secrets":[]}` {
		t.Errorf("b's list: %d %s", r.status, r.body)
	}
	for _, m := range []string{"GET", "DELETE"} {
		if r := h.do(t, h.keyB, m, "/v1/secrets/API_KEY", ""); r.status != 404 {
			t.Errorf("b %s a's secret: %d %s", m, r.status, r.body)
		}
	}
	rules := `"rules":{"api.example.com":[{"headers":{"Authorization":"Bearer ${secrets.API_KEY}"}}]}`
	if r := h.do(t, h.keyB, "POST", "/v1/jobs", `{"language":"python","code":"1","network":{`+rules+`}}`); r.status != 400 || !strings.Contains(string(r.body), "API_KEY") {
		t.Errorf("b names a's secret: %d %s", r.status, r.body)
	}
	if r := h.do(t, h.keyA, "POST", "/v1/jobs", `{"language":"python","code":"1","network":{"allow_out":["api.example.com"],"deny_out":["0.0.0.0/0"],`+rules+`}}`); r.status != 202 {
		t.Errorf("a's job with a rule: %d %s", r.status, r.body)
	}
	for body, field := range map[string]string{
		`{"rules":{"10.0.0.1":[{}]}}`:                        `network.rules[\"10.0.0.1\"]`,
		`{"rules":{"a.example":[{"headers":{"Host":"x"}}]}}`: `network.rules[\"a.example\"][0].headers[\"Host\"]`,
		`{"allow_out":["http://x"]}`:                         "network.allow_out",
	} {
		if r := h.do(t, h.keyA, "POST", "/v1/jobs", `{"language":"python","code":"1","network":`+body+`}`); r.status != 400 || !strings.Contains(string(r.body), `"field":"`+field+`"`) {
			t.Errorf("%s: %d %s", body, r.status, r.body)
		}
	}

	// A session's network.
	s := h.newSession(t, h.keyA)
	r = h.do(t, h.keyA, "PUT", "/v1/sessions/"+s.ID+"/network", `{"deny_out":["0.0.0.0/0"],`+rules+`}`)
	if r.status != 200 || !strings.Contains(string(r.body), `"network":{"deny_out":["0.0.0.0/0"]`) {
		t.Fatalf("set a session's network: %d %s", r.status, r.body)
	}
	if r := h.do(t, h.keyA, "GET", "/v1/sessions/"+s.ID, ""); !strings.Contains(string(r.body), "${secrets.API_KEY}") {
		t.Errorf("the session's network: %s", r.body)
	}
	if r := h.do(t, h.keyA, "PUT", "/v1/sessions/"+s.ID+"/network", `{}`); r.status != 200 || strings.Contains(string(r.body), `"network"`) {
		t.Errorf("clear it: %d %s", r.status, r.body)
	}
	if r := h.do(t, h.keyB, "PUT", "/v1/sessions/"+s.ID+"/network", `{}`); r.status != 404 {
		t.Errorf("b sets a's session's network: %d %s", r.status, r.body)
	}
	if r := h.do(t, h.keyA, "PUT", "/v1/sessions/"+s.ID+"/network", `{"rules":{"a.example":[{"headers":{"X":"${secrets.NOPE}"}}]}}`); r.status != 400 {
		t.Errorf("a session naming a missing secret: %d %s", r.status, r.body)
	}

	if r := h.do(t, h.keyA, "DELETE", "/v1/secrets/API_KEY", ""); r.status != 204 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	if r := h.do(t, h.keyA, "GET", "/v1/secrets/API_KEY", ""); r.status != 404 {
		t.Errorf("after delete: %d %s", r.status, r.body)
	}

	bare := newHarness(t)
	if r := bare.do(t, bare.keyA, "PUT", "/v1/secrets/API_KEY", `{"value":"x"}`); r.status != 503 || !strings.Contains(string(r.body), "GANTRY_SECRET_KEY") {
		t.Errorf("without a key: %d %s", r.status, r.body)
	}
}
