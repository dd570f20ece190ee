package test

import (
	"strings"
	"testing"
	"time"

	"github.com/gantryhq/gantry/internal/eventually"
)

// TestOperatorCLI creates a tenant and a key with the CLI, uses the key,
// and revokes it.
func TestOperatorCLI(t *testing.T) {
	d := startDev(t, "GANTRY_DEV_RUNNER=false")
	gantry := func(args ...string) string { t.Helper(); return d.cli(t, args...) }
	gantry("tenants", "create", "acme")
	if list := gantry("tenants", "list"); !strings.Contains(list, "acme") || !strings.Contains(list, "default") {
		t.Errorf("tenants list:\n%s", list)
	}
	key := gantry("keys", "create", "acme", "ci")
	if !strings.HasPrefix(key, "gk_") {
		t.Fatalf("key = %q", key)
	}
	acme := &dev{proc: d.proc, url: d.url, key: key}
	if r := acme.call(t, "GET", "/v1/jobs", ""); r.status != 200 || !strings.Contains(string(r.body), `"jobs":[]`) {
		t.Fatalf("new tenant's key: %d %s", r.status, r.body)
	}
	// The new tenant does not see the dev tenant's jobs.
	j := d.submit(t, map[string]any{"language": "python", "code": "print(1)"})
	if r := acme.call(t, "GET", "/v1/jobs/"+j.ID, ""); r.status != 404 {
		t.Errorf("acme read the default tenant's job: %d", r.status)
	}
	fields := strings.Fields(strings.Split(gantry("keys", "list", "acme"), "\n")[1])
	gantry("keys", "revoke", fields[0])
	// Ingresses cache key lookups for 5 s: the revocation applies within that.
	var r resp
	if !eventually.Within(10*time.Second, func() bool {
		r = acme.call(t, "GET", "/v1/jobs", "")
		return r.status == 401
	}) {
		t.Fatalf("revoked key still works: %d %s", r.status, r.body)
	}
}

// TestTenantLimitsCLI: the operator sets a tenant's quotas with the CLI
// (and puts them back to the defaults); bad values are refused naming the
// flag; the API applies them.
func TestTenantLimitsCLI(t *testing.T) {
	d := startDev(t, "GANTRY_DEV_RUNNER=false", "GANTRY_TENANT_RPS=100")
	if out := d.cli(t, "tenants", "set-limits", "default", "--rps", "1", "--max-queued", "2", "--max-running", "3"); !strings.Contains(out, "1 requests/s, 2 queued, 3 running") {
		t.Errorf("set-limits: %q", out)
	}
	if list := d.cli(t, "tenants", "list"); !strings.Contains(list, "MAX RUNNING") || !strings.Contains(list, "default") {
		t.Errorf("tenants list:\n%s", list)
	}
	for _, bad := range [][]string{{"--rps", "0"}, {"--max-queued", "x"}, {"--max-running", "-1"}} {
		out, err := d.cliErr(append([]string{"tenants", "set-limits", "default"}, bad...)...)
		if err == nil || !strings.Contains(out, bad[0]) {
			t.Errorf("set-limits %v: %v %q", bad, err, out)
		}
	}
	// The key cache holds the old quotas up to 5 s.
	eventually.True(t, 10*time.Second, "1 request/s to be enforced", func() bool {
		return d.call(t, "GET", "/v1/jobs", "").status == 429
	})
	if out := d.cli(t, "tenants", "set-limits", "default", "--rps", "default"); !strings.Contains(out, "100 (default) requests/s, 2 queued") {
		t.Errorf("back to the default: %q", out)
	}
}

// TestLiveSessionCap: a tenant's stateful sessions stop at its cap (set
// with the CLI); stateless ones do not count.
func TestLiveSessionCap(t *testing.T) {
	d := startDev(t, "GANTRY_DEV_RUNNER=false")
	if out := d.cli(t, "tenants", "set-limits", "default", "--max-live-sessions", "1"); !strings.Contains(out, "1 live sessions") {
		t.Errorf("set-limits --max-live-sessions: %q", out)
	}
	var r resp
	eventually.True(t, 10*time.Second, "the cap on stateful sessions to be enforced", func() bool {
		if r = d.call(t, "POST", "/v1/sessions", `{"stateful": true}`); r.status == 201 {
			return false
		}
		return r.status == 429
	})
	if !strings.Contains(string(r.body), "stateful sessions") {
		t.Errorf("past the cap: %d %s", r.status, r.body)
	}
	if r := d.call(t, "POST", "/v1/sessions", `{}`); r.status != 201 {
		t.Errorf("a stateless session at the cap: %d %s", r.status, r.body)
	}
}
