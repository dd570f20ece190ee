package runner

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store/storetest"
)

// TestEgress: with an allow-list naming one local server, a job reaches it
// (plain HTTP and HTTPS through CONNECT), is refused by another, and a raw
// socket to the allowed one fails; every connection is on the job's
// record; another tenant's jobs reach nothing; removing the list closes it
// again.
func TestEgress(t *testing.T) {
	allowed := serveOn(t, "127.0.0.2", false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "allowed saw %s %s %q", r.Method, r.URL.Path, b)
	}))
	secure := serveOn(t, "127.0.0.2", true, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "secure hello") }))
	other := serveOn(t, "127.0.0.2", false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Error("the other server was reached") }))
	hostport := func(u string) string { return strings.TrimPrefix(strings.TrimPrefix(u, "http://"), "https://") }

	h := newHarness(t, 2, func(_ *harness, c *Config) { c.Egress = EgressConfig{AllowPrivate: true} })
	ctx := context.Background()
	if err := h.st.SetTenantEgress(ctx, h.tenant, []string{hostport(allowed.URL), hostport(secure.URL)}); err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(hostport(allowed.URL))
	code := fmt.Sprintf(`
import os, socket, ssl, urllib.request, urllib.error
print(urllib.request.urlopen(urllib.request.Request(%[1]q, data=b"ping")).read().decode())
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
print(urllib.request.urlopen(%[2]q, context=ctx).read().decode())
try:
    urllib.request.urlopen(%[3]q)
except urllib.error.HTTPError as e:
    print("refused", e.code, e.read().decode().strip())
try:
    socket.create_connection(("127.0.0.2", %[4]s), timeout=2)
    print("raw socket connected")
except OSError as e:
    print("raw socket failed")
print(os.environ.get("HTTPS_PROXY"))
`, allowed.URL+"/x", secure.URL+"/", other.URL+"/", port)
	j := h.run(t, jobs.Request{Language: "python", Code: code})
	want := "allowed saw POST /x \"ping\"\nsecure hello\nrefused 403 gantry egress: " + hostport(other.URL) +
		" is not on this tenant's egress allow-list\nraw socket failed\nhttp://127.0.0.1:3128\n"
	if j.Status != jobs.StatusSucceeded || j.Stdout != want {
		t.Fatalf("%s\nstdout %q\nwant   %q\nstderr %q", j.Status, j.Stdout, want, j.Stderr)
	}
	if len(j.Egress) != 3 {
		t.Fatalf("egress record: %+v", j.Egress)
	}
	byHost := map[string]jobs.EgressConnection{}
	for _, c := range j.Egress {
		byHost[net.JoinHostPort(c.Host, fmt.Sprint(c.Port))] = c
	}
	if c := byHost[hostport(allowed.URL)]; !c.Allowed || c.BytesOut != 4 || c.BytesIn == 0 {
		t.Errorf("the allowed connection: %+v", c)
	}
	if c := byHost[hostport(secure.URL)]; !c.Allowed || c.BytesIn == 0 {
		t.Errorf("the tunnel: %+v", c)
	}
	if c := byHost[hostport(other.URL)]; c.Allowed || !strings.Contains(c.Reason, "allow-list") {
		t.Errorf("the refusal: %+v", c)
	}
	if n := h.metric(t, "gantry_egress_connections_total", map[string]string{"decision": "allowed"}); n != 2 {
		t.Errorf("allowed connections counted: %v", n)
	}

	// Another tenant, without a list: no proxy, no network.
	other2, _ := storetest.Tenant(t, h.st, "t2")
	probe := fmt.Sprintf(`
import os, urllib.request
print(os.environ.get("HTTP_PROXY"))
try:
    urllib.request.urlopen(%q, timeout=2)
    print("reached")
except OSError:
    print("no network")
`, allowed.URL)
	j = h.waitFor(t, h.submitFor(t, other2, jobs.Request{Language: "python", Code: probe}), func(j jobs.Job) bool { return j.Status.Terminal() })
	if j.Stdout != "None\nno network\n" || j.Egress != nil {
		t.Fatalf("another tenant: %s %q %q %+v", j.Status, j.Stdout, j.Stderr, j.Egress)
	}
	// The list removed, the tenant has no network again.
	if err := h.st.SetTenantEgress(ctx, h.tenant, nil); err != nil {
		t.Fatal(err)
	}
	if j = h.run(t, jobs.Request{Language: "python", Code: probe}); j.Stdout != "None\nno network\n" {
		t.Fatalf("after removing the list: %s %q %q", j.Status, j.Stdout, j.Stderr)
	}
}

// serveOn serves h on a loopback address of its own (the job's own
// 127.0.0.1 bypasses the proxy, as NO_PROXY says), over TLS when secure.
func serveOn(t *testing.T, ip string, secure bool, h http.Handler) *httptest.Server {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = ln
	if secure {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv
}
