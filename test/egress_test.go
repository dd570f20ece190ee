package test

import (
	"encoding/json"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/gantryhq/gantry/jobs"
)

// TestEgressEndToEnd: a tenant lists hosts in its settings (bad entries
// are 400s naming egress.allow) and its jobs reach exactly those, through
// gantry's proxy, each connection on the job; and npm installs a package
// from the npm registry in a session through an allow-list naming it, its
// cache in the workspace for the session's later jobs (the README's
// recipe). The registry is the one public host this test reaches.
func TestEgressEndToEnd(t *testing.T) {
	d := startDev(t)
	for _, body := range []string{`{"egress":{"allow":["http://x"]}}`, `{"egress":{"allow":["*"]}}`, `{"egress":{"allow":["a..b"]}}`} {
		if r := d.call(t, "PATCH", "/v1/settings", body); r.status != 400 || !strings.Contains(string(r.body), `"field":"egress.allow"`) {
			t.Errorf("PATCH %s: %d %s", body, r.status, r.body)
		}
	}
	r := d.call(t, "PATCH", "/v1/settings", `{"egress":{"allow":["registry.npmjs.org"]}}`)
	if r.status != 200 || !strings.Contains(string(r.body), `"egress":{"allow":["registry.npmjs.org"]}`) {
		t.Fatalf("PATCH egress: %d %s", r.status, r.body)
	}
	if _, err := net.LookupHost("registry.npmjs.org"); err != nil {
		t.Skipf("this machine cannot resolve the npm registry (%v): the rest needs it", err)
	}
	var s jobs.Session
	r = d.call(t, "POST", "/v1/sessions", `{"language":"bash","disk_mb":256}`)
	if r.status != 201 {
		t.Fatalf("session: %d %s", r.status, r.body)
	}
	if err := json.Unmarshal(r.body, &s); err != nil {
		t.Fatal(err)
	}
	install := `export npm_config_cache=/workspace/.npm
npm install --no-audit --no-fund --prefix /workspace/app is-number@7.0.0 >/dev/null 2>npm.err || { cat npm.err; exit 1; }
node -e "console.log(require('/workspace/app/node_modules/is-number')(5))"
curl -s -o /dev/null -w '%{http_code}\n' https://example.com/ 2>/dev/null || python3 -c "
import urllib.request, urllib.error
try:
    urllib.request.urlopen('https://example.com/', timeout=10)
except urllib.error.URLError as e:
    print('refused:', e.reason)"
`
	req := map[string]any{"language": "bash", "code": install, "session_id": s.ID, "timeout_ms": 240000}
	// Behind a TLS-inspecting proxy (this machine's network is one), the
	// job trusts its CA as the README's recipe says.
	if ca := caBundle(); ca != "" {
		req["files"] = []map[string]string{{"path": "ca.pem", "content": ca}}
		req["env"] = map[string]string{"NODE_EXTRA_CA_CERTS": "/workspace/ca.pem"}
	}
	j := d.job(t, "POST", "/v1/execute?wait=5m", mustJSON(req))
	if j.Status != jobs.StatusSucceeded || !strings.HasPrefix(j.Stdout, "true\n") || !strings.Contains(j.Stdout, "403") && !strings.Contains(j.Stdout, "refused") {
		t.Fatalf("npm install through the proxy: %s %q %q", j.Status, j.Stdout, j.Stderr)
	}
	sawRegistry, sawRefusal := false, false
	for _, c := range j.Egress {
		sawRegistry = sawRegistry || (c.Host == "registry.npmjs.org" && c.Allowed && c.BytesIn > 0)
		sawRefusal = sawRefusal || (c.Host == "example.com" && !c.Allowed)
	}
	if !sawRegistry || !sawRefusal {
		t.Errorf("the job's egress record: %+v", j.Egress)
	}
	// The session's next job finds the package and the cache.
	j = d.job(t, "POST", "/v1/execute", mustJSON(map[string]any{"language": "bash", "session_id": s.ID,
		"code": "node -e \"console.log(require('/workspace/app/node_modules/is-number')('x'))\"; test -d /workspace/.npm && echo cached"}))
	if j.Stdout != "false\ncached\n" {
		t.Errorf("the session's next job: %s %q %q", j.Status, j.Stdout, j.Stderr)
	}
	// The list removed: no network again.
	if r := d.call(t, "PATCH", "/v1/settings", `{"egress":{"allow":[]}}`); r.status != 200 {
		t.Fatalf("PATCH: %d %s", r.status, r.body)
	}
	j = d.job(t, "POST", "/v1/execute", mustJSON(map[string]any{"language": "bash", "code": `echo "${HTTPS_PROXY:-none}"`}))
	if j.Stdout != "none\n" || j.Egress != nil {
		t.Errorf("after removing the list: %q %+v", j.Stdout, j.Egress)
	}
}

// caBundle is the CA bundle this machine's own programs trust
// (NODE_EXTRA_CA_CERTS, SSL_CERT_FILE, else the system's), "" if none.
func caBundle() string {
	for _, p := range []string{os.Getenv("NODE_EXTRA_CA_CERTS"), os.Getenv("SSL_CERT_FILE"), "/etc/ssl/certs/ca-certificates.crt"} {
		if p == "" {
			continue
		}
		if b, err := os.ReadFile(p); err == nil {
			return string(b)
		}
	}
	return ""
}
