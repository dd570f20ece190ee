package test

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestOperatorCLI creates a tenant and a key with the CLI, uses the key,
// and revokes it.
func TestOperatorCLI(t *testing.T) {
	d := startDev(t, "GANTRY_DEV_RUNNER=false")
	gantry := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(gantryBin(t), args...)
		cmd.Env = append(cmd.Environ(), d.env...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("gantry %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
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
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := acme.call(t, "GET", "/v1/jobs", "")
		if r.status == 401 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("revoked key still works: %d %s", r.status, r.body)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
