package ingress_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gantryhq/gantry/ingress"
	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
	"github.com/gantryhq/gantry/secret"
)

// TestE2BControlPlane: E2B's API, on an ingress without a runner, over
// sessions made with gantry's own API: what a sandbox shows, its access
// token and who it opens, timeouts, listing, killing, and E2B's error body
// for what gantry does not offer. (test/e2b_test.go drives E2B's SDKs
// against a whole gantry.)
func TestE2BControlPlane(t *testing.T) {
	box, _ := secret.New(bytes.Repeat([]byte{7}, secret.KeySize))
	h := newHarness(t, func(_ *harness, c *ingress.Config) { c.Box = box })
	// e2b and stateful take the test that calls them: subtests do.
	e2b := func(t *testing.T, key, method, path, body string, hdr ...string) response {
		t.Helper()
		return h.do(t, "", method, "/compat/e2b"+path, body, append([]string{"X-API-Key", key}, hdr...)...)
	}
	stateful := func(t *testing.T, key string, meta map[string]string) jobs.Session {
		t.Helper()
		req := map[string]any{"stateful": true}
		if meta != nil {
			req["metadata"] = meta
		}
		b, _ := json.Marshal(req)
		r := h.do(t, key, "POST", "/v1/sessions", string(b))
		var s jobs.Session
		if r.status != 201 {
			t.Fatalf("create session: %d %s", r.status, r.body)
		}
		r.json(t, &s)
		return s
	}
	type sandbox struct {
		SandboxID       string            `json:"sandboxID"`
		TemplateID      string            `json:"templateID"`
		EnvdAccessToken string            `json:"envdAccessToken"`
		EnvdVersion     string            `json:"envdVersion"`
		State           string            `json:"state"`
		Metadata        map[string]string `json:"metadata"`
		EndAt           time.Time         `json:"endAt"`
	}
	var e2bErr struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}

	a := stateful(t, h.keyA, map[string]string{"team": "x"})
	r := e2b(t, h.keyA, "GET", "/sandboxes/"+a.ID, "")
	var sa sandbox
	r.json(t, &sa)
	if r.status != 200 || sa.SandboxID != a.ID || sa.State != "running" || sa.EnvdVersion == "" || !strings.HasPrefix(sa.EnvdAccessToken, "gst_") ||
		sa.Metadata["team"] != "x" || sa.TemplateID != "default" {
		t.Fatalf("getInfo: %d %s", r.status, r.body)
	}
	if again := e2b(t, h.keyA, "GET", "/sandboxes/"+a.ID, ""); !bytes.Contains(again.body, []byte(sa.EnvdAccessToken)) {
		t.Error("a sandbox's token changed between two reads")
	}

	t.Run("the access token opens its sandbox only", func(t *testing.T) {
		health := func(sid, token string) int {
			t.Helper()
			return h.do(t, "", "GET", "/compat/e2b/sandbox/health", "", "E2b-Sandbox-Id", sid, "X-Access-Token", token).status
		}
		if got := health(a.ID, sa.EnvdAccessToken); got != 204 {
			t.Errorf("with its token: %d", got)
		}
		b := stateful(t, h.keyB, nil)
		var sb sandbox
		e2b(t, h.keyB, "GET", "/sandboxes/"+b.ID, "").json(t, &sb)
		a2 := stateful(t, h.keyA, nil)
		var sa2 sandbox
		e2b(t, h.keyA, "GET", "/sandboxes/"+a2.ID, "").json(t, &sa2)
		for name, token := range map[string]string{
			"none": "", "another tenant's sandbox's": sb.EnvdAccessToken, "another sandbox's of the tenant": sa2.EnvdAccessToken,
			"a key": h.keyA, "tampered": sa.EnvdAccessToken[:len(sa.EnvdAccessToken)-2] + "xx", "garbage": "gst_x.y",
		} {
			if got := health(a.ID, token); got != 401 {
				t.Errorf("%s token: %d", name, got)
			}
		}
		// Their key sees nothing of it.
		for _, c := range []struct{ method, path string }{{"GET", "/sandboxes/" + a.ID}, {"DELETE", "/sandboxes/" + a.ID},
			{"POST", "/sandboxes/" + a.ID + "/timeout"}, {"POST", "/v2/sandboxes/" + a.ID + "/connect"}} {
			if r := e2b(t, h.keyB, c.method, c.path, `{"timeout": 60}`); r.status != 404 || bytes.Contains(r.body, []byte("gst_")) {
				t.Errorf("%s %s with another tenant's key: %d %s", c.method, c.path, r.status, r.body)
			}
		}
		if r := e2b(t, "gk_wrong", "GET", "/sandboxes/"+a.ID, ""); r.status != 401 {
			t.Errorf("a wrong key: %d", r.status)
		}
	})

	t.Run("timeout, listing, errors", func(t *testing.T) {
		if r := e2b(t, h.keyA, "POST", "/sandboxes/"+a.ID+"/timeout", `{"timeout": 900}`); r.status != 204 {
			t.Fatalf("setTimeout: %d %s", r.status, r.body)
		}
		var got sandbox
		e2b(t, h.keyA, "GET", "/sandboxes/"+a.ID, "").json(t, &got)
		if left := time.Until(got.EndAt); left < 890*time.Second || left > 910*time.Second {
			t.Errorf("ends in %s after setTimeout(900 s)", left)
		}
		for i := range 3 {
			stateful(t, h.keyA, map[string]string{"team": "y", "n": fmt.Sprint(i)})
		}
		h.do(t, h.keyA, "POST", "/v1/sessions", `{"metadata": {"team": "y"}}`) // not stateful: not a sandbox
		var page []sandbox
		r := e2b(t, h.keyA, "GET", "/v2/sandboxes?metadata=team%3Dy&limit=2", "")
		r.json(t, &page)
		next := r.header.Get("X-Next-Token")
		if r.status != 200 || len(page) != 2 || next == "" {
			t.Fatalf("first page: %d %s next %q", r.status, r.body, next)
		}
		var rest []sandbox
		r = e2b(t, h.keyA, "GET", "/v2/sandboxes?metadata=team%3Dy&limit=2&nextToken="+next, "")
		r.json(t, &rest)
		if len(rest) != 1 || r.header.Get("X-Next-Token") != "" || rest[0].SandboxID == page[0].SandboxID || rest[0].SandboxID == page[1].SandboxID {
			t.Errorf("second page: %s", r.body)
		}
		if r := e2b(t, h.keyA, "GET", "/v2/sandboxes?state=paused", ""); r.status != 200 || string(bytes.TrimSpace(r.body)) != "[]" {
			t.Errorf("paused sandboxes: %s", r.body)
		}
		for path, status := range map[string]int{"/sandboxes/" + a.ID + "/metrics": 501, "/nowhere": 404} {
			r := e2b(t, h.keyA, "GET", path, "")
			r.json(t, &e2bErr)
			if r.status != status || e2bErr.Code != status || e2bErr.Message == "" {
				t.Errorf("GET %s: %d %s", path, r.status, r.body)
			}
		}
		r = e2b(t, h.keyA, "POST", "/v2/sandboxes", `{"templateID": "base", "network": {"egressProxy": {"address": "proxy.example.com:1080"}}}`)
		r.json(t, &e2bErr)
		if r.status != 501 || !strings.Contains(e2bErr.Message, "SOCKS5") {
			t.Errorf("an egress proxy of one's own: %d %s", r.status, r.body)
		}
		r = e2b(t, h.keyA, "POST", "/v2/sandboxes", `{"templateID": "base", "network": {"rules": {"api.example.com": [{"transform": {"headers": {"Bad Name": "x"}}}]}}}`)
		r.json(t, &e2bErr)
		if r.status != 400 || !strings.Contains(e2bErr.Message, "header name") {
			t.Errorf("a bad rule: %d %s", r.status, r.body)
		}
	})

	t.Run("kill", func(t *testing.T) {
		if r := e2b(t, h.keyA, "DELETE", "/sandboxes/"+a.ID, ""); r.status != 204 {
			t.Fatalf("kill: %d %s", r.status, r.body)
		}
		if r := e2b(t, h.keyA, "DELETE", "/sandboxes/"+a.ID, ""); r.status != 404 {
			t.Errorf("kill again: %d", r.status)
		}
		if r := h.do(t, "", "GET", "/compat/e2b/sandbox/health", "", "E2b-Sandbox-Id", a.ID, "X-Access-Token", sa.EnvdAccessToken); r.status != 502 {
			t.Errorf("a killed sandbox's health: %d %s", r.status, r.body)
		}
	})
}

// TestE2BNeedsSecretKey: without GANTRY_SECRET_KEY there are no access
// tokens, so no E2B sandboxes; the answer says why.
func TestE2BNeedsSecretKey(t *testing.T) {
	h := newHarness(t)
	r := h.do(t, "", "POST", "/compat/e2b/v2/sandboxes", `{"templateID": "base"}`, "X-API-Key", h.keyA)
	if r.status != 503 || !bytes.Contains(r.body, []byte("GANTRY_SECRET_KEY")) {
		t.Errorf("create without a secret key: %d %s", r.status, r.body)
	}
	if r := h.do(t, h.keyA, "POST", "/v1/sessions", `{"env": {"A": "1"}}`); r.status != 400 || !bytes.Contains(r.body, []byte("GANTRY_SECRET_KEY")) {
		t.Errorf("a session's env without a secret key: %d %s", r.status, r.body)
	}
}

// TestE2BAccessTokenLifetime: a sandbox's access token dies with the API
// key that asked for it (and only that key's tokens do), and at the
// timeout a key holder set: the session's jobs, which keep the session
// itself alive, do not keep its token alive.
func TestE2BAccessTokenLifetime(t *testing.T) {
	box, _ := secret.New(bytes.Repeat([]byte{7}, secret.KeySize))
	h := newHarness(t, func(_ *harness, c *ingress.Config) { c.Box = box })
	ctx := context.Background()
	// The helpers take the test that calls them: subtests do.
	e2b := func(t *testing.T, key, method, path, body string) response {
		t.Helper()
		return h.do(t, "", method, "/compat/e2b"+path, body, "X-API-Key", key)
	}
	token := func(t *testing.T, key, sid string) string {
		t.Helper()
		var sb struct {
			EnvdAccessToken string `json:"envdAccessToken"`
		}
		r := e2b(t, key, "GET", "/sandboxes/"+sid, "")
		r.json(t, &sb)
		if r.status != 200 || sb.EnvdAccessToken == "" {
			t.Fatalf("getInfo: %d %s", r.status, r.body)
		}
		return sb.EnvdAccessToken
	}
	health := func(t *testing.T, sid, tok string) int {
		t.Helper()
		return h.do(t, "", "GET", "/compat/e2b/sandbox/health", "", "E2b-Sandbox-Id", sid, "X-Access-Token", tok).status
	}
	session := func(t *testing.T, ttl int) string {
		t.Helper()
		r := h.do(t, h.keyA, "POST", "/v1/sessions", fmt.Sprintf(`{"stateful": true, "ttl_seconds": %d}`, ttl))
		var s jobs.Session
		r.json(t, &s)
		if r.status != 201 {
			t.Fatalf("create session: %d %s", r.status, r.body)
		}
		return s.ID
	}

	t.Run("revoking a key kills the tokens it asked for", func(t *testing.T) {
		second, k, err := h.st.CreateAPIKey(ctx, h.tenantA, "second")
		if err != nil {
			t.Fatal(err)
		}
		sid := session(t, 600)
		mine, theirs := token(t, h.keyA, sid), token(t, second, sid)
		if mine == theirs {
			t.Fatal("two keys were given the same token")
		}
		for _, tok := range []string{mine, theirs} {
			if got := health(t, sid, tok); got != 204 {
				t.Fatalf("before the revocation: %d", got)
			}
		}
		// As `gantry keys revoke` does: revoke in the store, announce it.
		rk, err := h.st.RevokeAPIKey(ctx, k.ID)
		if err != nil {
			t.Fatal(err)
		}
		ev, _ := json.Marshal(queue.KeyRevoked{KeyID: rk.ID, TenantID: rk.TenantID, KeyEpoch: rk.KeyEpoch})
		if err := h.nc.Publish(queue.KeyRevokedSubject, ev); err != nil {
			t.Fatal(err)
		}
		eventually.True(t, 10*time.Second, "the revoked key's token to be refused", func() bool { return health(t, sid, theirs) == 401 })
		if got := health(t, sid, mine); got != 204 {
			t.Errorf("another key's token after the revocation: %d", got)
		}
		if r := e2b(t, second, "GET", "/sandboxes/"+sid, ""); r.status != 401 {
			t.Errorf("the revoked key asks for a token again: %d %s", r.status, r.body)
		}
	})

	t.Run("a token dies at the timeout, whatever runs meanwhile", func(t *testing.T) {
		sid := session(t, 600)
		if r := e2b(t, h.keyA, "POST", "/sandboxes/"+sid+"/timeout", `{"timeout": 10}`); r.status != 204 {
			t.Fatalf("setTimeout: %d %s", r.status, r.body)
		}
		tok := token(t, h.keyA, sid)
		// Jobs of the session (no runner takes them) keep extending the
		// session past the timeout; the token must stop at it all the same.
		var last int
		eventually.True(t, 60*time.Second, "the token to stop at its sandbox's timeout", func() bool {
			if r := h.do(t, h.keyA, "POST", "/v1/jobs", fmt.Sprintf(`{"language": "python", "code": "pass", "session_id": %q}`, sid)); r.status != 202 {
				t.Fatalf("a job of the session: %d %s", r.status, r.body)
			}
			last = health(t, sid, tok)
			return last != 204
		})
		if last != 502 {
			t.Errorf("a token past its sandbox's timeout: %d, want 502 (gone, as E2B says of a sandbox timed out)", last)
		}
		if r := h.do(t, h.keyA, "GET", "/v1/sessions/"+sid, ""); r.status != 200 {
			t.Fatalf("the session itself (extended by its jobs): %d %s", r.status, r.body)
		}
		// A key holder extends it: the same token opens it again.
		if r := e2b(t, h.keyA, "POST", "/sandboxes/"+sid+"/timeout", `{"timeout": 300}`); r.status != 204 {
			t.Fatalf("setTimeout: %d %s", r.status, r.body)
		}
		eventually.True(t, 10*time.Second, "the token to open its sandbox after setTimeout", func() bool { return health(t, sid, tok) == 204 })
		if again := token(t, h.keyA, sid); again != tok {
			t.Errorf("the token changed: %s, then %s", tok, again)
		}
	})
}
