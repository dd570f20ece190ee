package test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gantryhq/gantry/jobs"
)

func sha256hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// localTLS serves h over HTTPS as localhost, with a certificate of a CA of
// its own, whose PEM it returns.
func localTLS(t *testing.T, h http.Handler) (*httptest.Server, []byte) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test's own CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"}, DNSNames: []string{"localhost"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{leafDER}, PrivateKey: key}}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
}

// TestSandboxNetworkAndSecrets is issue 36's points 2 and 3 as a user
// meets them, through the built binary: a tenant's secrets (stored, listed
// without values, another tenant's unreachable), jobs and sessions
// narrowing the tenant's allow-list and getting a header set at the proxy
// over HTTPS (a local server with its own CA, which only the runner
// trusts) and HTTP, the secret in no job record, output or log; then E2B's
// SDK doing the same per sandbox (see e2b.mjs's network scenario). The
// servers are on loopback, which GANTRY_EGRESS_PRIVATE opens.
func TestSandboxNetworkAndSecrets(t *testing.T) {
	const secret = "sk-test-7c1e0a9b44d2"
	check := func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("X-Api-Key") {
		case secret:
			_, _ = io.WriteString(w, "key ok")
		case "":
			_, _ = io.WriteString(w, "key missing")
		default:
			_, _ = io.WriteString(w, "key wrong")
		}
	}
	tlsSrv, caPEM := localTLS(t, http.HandlerFunc(check))
	plainSrv := httptest.NewServer(http.HandlerFunc(check))
	defer plainSrv.Close()
	port := func(u string) string { _, p, _ := net.SplitHostPort(u[strings.LastIndex(u, "/")+1:]); return p }
	tlsURL, plainURL, plainIP := "https://localhost:"+port(tlsSrv.URL), "http://localhost:"+port(plainSrv.URL), plainSrv.URL
	// The runner checks the host's certificate against its own roots:
	// this test's CA.
	roots := filepath.Join(t.TempDir(), "roots.pem")
	if err := os.WriteFile(roots, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDev(t, "GANTRY_EGRESS_PRIVATE=127.0.0.0/8,localhost", "SSL_CERT_FILE="+roots, "GANTRY_RUNNER_SLOTS=3")
	allow := []string{"localhost:" + port(tlsSrv.URL), "localhost:" + port(plainSrv.URL), strings.TrimPrefix(plainIP, "http://")}
	if r := d.call(t, "PATCH", "/v1/settings", mustJSON(map[string]any{"egress": map[string]any{"allow": allow}})); r.status != 200 {
		t.Fatalf("allow-list: %d %s", r.status, r.body)
	}
	d.cli(t, "tenants", "create", "net-other")
	otherKey := regexp.MustCompile(`gk_\S+`).FindString(d.cli(t, "keys", "create", "net-other", "net test"))
	other := &dev{proc: d.proc, url: d.url, key: otherKey}

	// fetch is a job's program: it prints what each URL answered.
	fetch := func(urls ...string) string {
		return fmt.Sprintf(`import os, urllib.request, urllib.error
for k in ("no_proxy", "NO_PROXY"):
    os.environ.pop(k, None)  # these servers are the runner's, not the sandbox's loopback
for u in %s:
    try:
        print(urllib.request.urlopen(u, timeout=20).read().decode())
    except urllib.error.HTTPError as e:
        print(e.code, e.read().decode().strip())
    except Exception as e:
        print("error", type(e).__name__, e)
`, mustJSON(urls))
	}
	rules := map[string]any{"localhost": []any{map[string]any{"headers": map[string]string{"X-Api-Key": "${secrets.API_KEY}"}}}}

	t.Run("native", func(t *testing.T) {
		// Secrets: set, replaced, listed and read without their values.
		if r := d.call(t, "PUT", "/v1/secrets/API_KEY", `{"value": "first-value"}`); r.status != 201 || strings.Contains(string(r.body), "first-value") {
			t.Fatalf("PUT secret: %d %s", r.status, r.body)
		}
		if r := d.call(t, "PUT", "/v1/secrets/API_KEY", mustJSON(map[string]string{"value": secret})); r.status != 200 || strings.Contains(string(r.body), secret) {
			t.Fatalf("replace secret: %d %s", r.status, r.body)
		}
		for path, want := range map[string]string{"/v1/secrets": `"name":"API_KEY"`, "/v1/secrets/API_KEY": `"name":"API_KEY"`} {
			if r := d.call(t, "GET", path, ""); r.status != 200 || !strings.Contains(string(r.body), want) || strings.Contains(string(r.body), secret) {
				t.Errorf("GET %s: %d %s", path, r.status, r.body)
			}
		}
		for _, bad := range []struct{ path, body string }{{"/v1/secrets/9bad", `{"value":"x"}`}, {"/v1/secrets/OK", `{"value":"a\nb"}`}, {"/v1/secrets/OK", `{"value":""}`}} {
			if r := d.call(t, "PUT", bad.path, bad.body); r.status != 400 {
				t.Errorf("PUT %s %s: %d %s", bad.path, bad.body, r.status, r.body)
			}
		}
		// Another tenant sees, reaches and deletes none of them.
		if r := other.call(t, "GET", "/v1/secrets", ""); r.status != 200 || strings.Contains(string(r.body), "API_KEY") {
			t.Errorf("another tenant's list: %s", r.body)
		}
		for _, m := range []string{"GET", "DELETE"} {
			if r := other.call(t, m, "/v1/secrets/API_KEY", ""); r.status != 404 {
				t.Errorf("another tenant's %s: %d %s", m, r.status, r.body)
			}
		}
		r := other.call(t, "POST", "/v1/jobs", mustJSON(map[string]any{"language": "python", "code": "print(1)", "network": map[string]any{"rules": rules}}))
		if r.status != 400 || !strings.Contains(string(r.body), `"field":"network.rules"`) || !strings.Contains(string(r.body), "API_KEY") {
			t.Errorf("another tenant naming the secret: %d %s", r.status, r.body)
		}
		if r := d.call(t, "POST", "/v1/jobs", mustJSON(map[string]any{"language": "python", "code": "1", "network": map[string]any{"deny_out": []string{"http://x"}}})); r.status != 400 || !strings.Contains(string(r.body), "network.deny_out") {
			t.Errorf("a bad deny_out: %d %s", r.status, r.body)
		}

		// A job's own rules and narrowing.
		j := d.job(t, "POST", "/v1/execute?wait=2m", mustJSON(map[string]any{"language": "python", "timeout_ms": 60000,
			"code":    fetch(tlsURL+"/check", plainURL+"/check", plainIP+"/check") + fmt.Sprintf("import hashlib\nprint('leak' if any(hashlib.sha256(v.encode()).hexdigest() == %q for v in os.environ.values()) else 'clean')\n", sha256hex(secret)),
			"network": map[string]any{"allow_out": []string{"localhost"}, "deny_out": []string{jobs.AllTraffic}, "rules": rules}}))
		want := "key ok\nkey ok\n403 gantry egress: 127.0.0.1 is refused by this sandbox's or job's own network rules (allow_out, deny_out)\nclean\n"
		if j.Status != jobs.StatusSucceeded || j.Stdout != want {
			t.Errorf("a job with rules:\n%s %q\nwant %q\nstderr %q", j.Status, j.Stdout, want, j.Stderr)
		}
		if r := d.call(t, "GET", "/v1/jobs/"+j.ID, ""); strings.Contains(string(r.body), secret) {
			t.Errorf("the job's record holds the secret: %s", r.body)
		}
		// Refused by name: a tunnel's refusal is the CONNECT's 403.
		j = d.job(t, "POST", "/v1/execute?wait=2m", mustJSON(map[string]any{"language": "python", "timeout_ms": 60000, "code": fetch(plainURL+"/check", tlsURL+"/check", plainIP+"/check"),
			"network": map[string]any{"deny_out": []string{"localhost"}}}))
		if lines := strings.Split(j.Stdout, "\n"); len(lines) != 4 || !strings.HasPrefix(lines[0], "403 gantry egress: localhost is refused") ||
			!strings.Contains(lines[1], "Tunnel connection failed: 403") || lines[2] != "key missing" {
			t.Errorf("deny by name: %s %q %q", j.Status, j.Stdout, j.Stderr)
		}

		// A stateful session's network, replaced while it lives.
		r = d.call(t, "POST", "/v1/sessions", mustJSON(map[string]any{"language": "python", "stateful": true, "network": map[string]any{"rules": rules}}))
		var s jobs.Session
		if r.status != 201 || json.Unmarshal(r.body, &s) != nil || s.Network == nil {
			t.Fatalf("session: %d %s", r.status, r.body)
		}
		in := func(code string) jobs.Job {
			return d.job(t, "POST", "/v1/execute?wait=2m", mustJSON(map[string]any{"language": "python", "session_id": s.ID, "code": code, "timeout_ms": 60000}))
		}
		if j := in(fetch(tlsURL + "/check")); j.Stdout != "key ok\n" {
			t.Errorf("the session's rule: %s %q %q", j.Status, j.Stdout, j.Stderr)
		}
		if r := d.call(t, "PUT", "/v1/sessions/"+s.ID+"/network", `{"deny_out": ["localhost"]}`); r.status != 200 || strings.Contains(string(r.body), "rules") {
			t.Fatalf("replace the network: %d %s", r.status, r.body)
		}
		if j := in(fetch(plainURL+"/check", plainIP+"/check")); !strings.HasPrefix(j.Stdout, "403 gantry egress: localhost is refused") || !strings.HasSuffix(j.Stdout, "key missing\n") {
			t.Errorf("after the change: %s %q %q", j.Status, j.Stdout, j.Stderr)
		}
		if r := other.call(t, "PUT", "/v1/sessions/"+s.ID+"/network", `{}`); r.status != 404 {
			t.Errorf("another tenant's change: %d %s", r.status, r.body)
		}

		// A deleted secret: its rule's host is refused, not reached bare.
		if r := d.call(t, "DELETE", "/v1/secrets/API_KEY", ""); r.status != 204 {
			t.Fatalf("delete: %d %s", r.status, r.body)
		}
		if r := d.call(t, "POST", "/v1/jobs", mustJSON(map[string]any{"language": "python", "code": "1", "network": map[string]any{"rules": rules}})); r.status != 400 {
			t.Errorf("a job naming a deleted secret: %d %s", r.status, r.body)
		}
	})

	t.Run("E2B SDK", func(t *testing.T) {
		var got struct {
			CellTLS, CellPlain, CellDenied, CmdTLS, CmdDenied, Background string
			Leaked                                                        bool
			DumpBytes                                                     int
			CaVars                                                        []string
			Info                                                          struct {
				AllowInternetAccess bool `json:"allowInternetAccess"`
				Network             struct {
					AllowOut, DenyOut []string
					Rules             map[string][]struct {
						Transform struct{ Headers map[string]string }
					}
				}
			}
			AfterUpdate struct{ CmdIP, CmdTLS, CellIP string }
			DenyName    struct{ Name, IP string }
			NoInternet  string
			OtherTenant string
		}
		driveE2B(t, d, otherKey, []string{"NET_TLS=" + tlsURL, "NET_PLAIN=" + plainURL, "NET_PLAIN_IP=" + plainIP, "NET_SECRET=" + secret}, "network", &got)
		refusedIP := "403 gantry egress: 127.0.0.1 is refused by this sandbox's or job's own network rules (allow_out, deny_out)"
		// Each answer, as the sandbox printed it, starts with what is wanted.
		for name, c := range map[string][2]string{
			"runCode over HTTPS":                   {got.CellTLS, "key ok"},
			"runCode over HTTP":                    {got.CellPlain, "key ok"},
			"runCode to a denied address":          {got.CellDenied, refusedIP},
			"commands.run over HTTPS":              {got.CmdTLS, "key ok"},
			"commands.run to a denied address":     {got.CmdDenied, refusedIP},
			"a background command":                 {got.Background, "key ok"},
			"after updateNetwork, by address":      {got.AfterUpdate.CmdIP, "key missing"},
			"after updateNetwork, in code":         {got.AfterUpdate.CellIP, "key missing"},
			"denyOut by name, the name":            {got.DenyName.Name, "403 gantry egress: localhost is refused by this sandbox's or job's own network rules (allow_out, deny_out)"},
			"denyOut by name, the address":         {got.DenyName.IP, "key missing"},
			"allowInternetAccess false":            {got.NoInternet, refusedIP},
			"another tenant (no allow-list)":       {got.OtherTenant, "error URLError"},
			"after updateNetwork, the name denied": {got.AfterUpdate.CmdTLS, "error URLError: <urlopen error Tunnel connection failed: 403"},
		} {
			if !strings.HasPrefix(c[0], c[1]) || c[1] == "key ok" && c[0] != c[1] {
				t.Errorf("%s: %q, want %q", name, c[0], c[1])
			}
		}
		if got.Leaked || got.DumpBytes < 100_000 {
			t.Errorf("the secret in the sandbox: %v (searched %d bytes)", got.Leaked, got.DumpBytes)
		}
		if len(got.CaVars) != 3 {
			t.Errorf("a command's CA variables: %v", got.CaVars)
		}
		h := got.Info.Network.Rules["localhost"]
		if !got.Info.AllowInternetAccess || len(h) != 1 || h[0].Transform.Headers["X-Api-Key"] == "" || h[0].Transform.Headers["X-Api-Key"] == secret {
			t.Errorf("getInfo: %+v", got.Info)
		}
	})
	if out := d.output(); strings.Contains(out, secret) {
		t.Errorf("gantry's log holds the secret")
	}
}
