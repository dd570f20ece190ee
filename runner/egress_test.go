package runner

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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

// TestEgressInStatefulSession: a stateful session's runs reach the tenant's
// allow-list, from the session's interpreter (a cell) and from a program
// it runs (a shell step), and pip installs from an allowed index (the
// session's interpreter then imports it); a process of the sandbox
// reaches it between runs too, through the session's own proxy (on no
// job's record).
func TestEgressInStatefulSession(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker, Postgres, NATS and S3")
	}
	index := packageIndex(t)
	srv := serveOn(t, "127.0.0.2", false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/simple/") || strings.HasPrefix(r.URL.Path, "/files/") {
			index.ServeHTTP(w, r)
			return
		}
		fmt.Fprintf(w, "hello %s", r.URL.Path)
	}))
	h := newHarness(t, 1, func(_ *harness, c *Config) { c.Egress = EgressConfig{AllowPrivate: true} })
	hostport := strings.TrimPrefix(srv.URL, "http://")
	if err := h.st.SetTenantEgress(context.Background(), h.tenant, []string{hostport}); err != nil {
		t.Fatal(err)
	}
	sid := h.statefulSession(t)
	expect := func(j jobs.Job, stdout string, conns int) {
		t.Helper()
		if j.Status != jobs.StatusSucceeded || j.Stdout != stdout || len(j.Egress) != conns {
			t.Fatalf("%s\nstdout %q\nwant   %q\nstderr %q\negress %+v", j.Status, j.Stdout, stdout, j.Stderr, j.Egress)
		}
	}
	expect(h.in(t, sid, py(fmt.Sprintf(`import urllib.request
print(urllib.request.urlopen(%q).read().decode())
later = []
def fetch():
    import time
    time.sleep(1.5)
    try:
        urllib.request.urlopen(%q, timeout=5)
        later.append("reached")
    except OSError:
        later.append("refused")
import threading
threading.Thread(target=fetch).start()`, srv.URL+"/cell", srv.URL+"/later"))), "hello /cell\n", 1)
	time.Sleep(3 * time.Second)
	expect(h.in(t, sid, py(`print(later)`)), "['reached']\n", 0)
	expect(h.in(t, sid, bash(fmt.Sprintf(`python3 -c 'import urllib.request; print(urllib.request.urlopen("%s").read().decode())'`, srv.URL+"/step"))), "hello /step\n", 1)
	j := h.in(t, sid, bash(fmt.Sprintf(`pip install --quiet --no-warn-script-location --disable-pip-version-check --break-system-packages --user --index-url %s/simple/ gantry-egress-probe && python3 -c 'import gantry_egress_probe; print(gantry_egress_probe.WHO)'`, srv.URL)))
	if j.Status != jobs.StatusSucceeded || !strings.HasSuffix(j.Stdout, "installed through the egress proxy\n") {
		t.Fatalf("pip install: %s %q %q", j.Status, j.Stdout, j.Stderr)
	}
	// The session's interpreter imports it, as a new one would.
	expect(h.in(t, sid, py(`import gantry_egress_probe
print(gantry_egress_probe.WHO)`)), "installed through the egress proxy\n", 0)
}

// TestEgressPackageCache is the README's recipe for a session: pip
// installs into the workspace from an allowed index, with its cache there
// too, so the session's later jobs import the package and a second
// install takes the wheel from the cache.
func TestEgressPackageCache(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker, Postgres, NATS and S3")
	}
	var downloads atomic.Int32
	index := packageIndex(t)
	srv := serveOn(t, "127.0.0.2", false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/files/") {
			downloads.Add(1)
		}
		index.ServeHTTP(w, r)
	}))
	h := newHarness(t, 1, func(_ *harness, c *Config) { c.Egress = EgressConfig{AllowPrivate: true} })
	if err := h.st.SetTenantEgress(context.Background(), h.tenant, []string{strings.TrimPrefix(srv.URL, "http://")}); err != nil {
		t.Fatal(err)
	}
	req, _ := jobs.SessionRequest{DiskMB: 64}.Normalize()
	sess, err := h.st.CreateSession(context.Background(), h.tenant, req)
	if err != nil {
		t.Fatal(err)
	}
	// pip caches what it fetches over HTTPS, or from a --trusted-host: this
	// index is plain HTTP.
	install := bash(fmt.Sprintf(`export PIP_CACHE_DIR=/workspace/.cache/pip
pip install --quiet --disable-pip-version-check --break-system-packages --upgrade --force-reinstall --target /workspace/.packages --index-url %s/simple/ --trusted-host %s gantry-egress-probe`, srv.URL, strings.TrimPrefix(srv.URL, "http://")))
	use := jobs.Request{Language: "python", Code: "import gantry_egress_probe\nprint(gantry_egress_probe.WHO)", Env: map[string]string{"PYTHONPATH": "/workspace/.packages"}}
	for i := range 2 {
		if j := h.in(t, sess.ID, install); j.Status != jobs.StatusSucceeded {
			t.Fatalf("install %d: %s %q %q", i, j.Status, j.Stdout, j.Stderr)
		}
		if j := h.in(t, sess.ID, use); j.Status != jobs.StatusSucceeded || j.Stdout != "installed through the egress proxy\n" {
			t.Fatalf("import %d: %s %q %q", i, j.Status, j.Stdout, j.Stderr)
		}
	}
	if n := downloads.Load(); n != 1 {
		t.Errorf("the wheel was downloaded %d times; the second install should take it from the workspace's cache", n)
	}
}

// packageIndex is a PEP 503 package index holding one wheel built here,
// gantry-egress-probe 1.0: pip installs from it as from PyPI.
func packageIndex(t *testing.T) http.Handler {
	t.Helper()
	const name, version = "gantry_egress_probe", "1.0"
	dist := name + "-" + version + ".dist-info/"
	files := []struct{ path, body string }{
		{name + "/__init__.py", "WHO = 'installed through the egress proxy'\n"},
		{dist + "METADATA", "Metadata-Version: 2.1\nName: gantry-egress-probe\nVersion: " + version + "\n"},
		{dist + "WHEEL", "Wheel-Version: 1.0\nGenerator: gantry-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record strings.Builder
	for _, f := range files {
		w, err := zw.Create(f.path)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(w, f.body)
		sum := sha256.Sum256([]byte(f.body))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.path, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.body))
	}
	record.WriteString(dist + "RECORD,,\n")
	w, err := zw.Create(dist + "RECORD")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(w, record.String())
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	wheel := name + "-" + version + "-py3-none-any.whl"
	sum := sha256.Sum256(buf.Bytes())
	mux := http.NewServeMux()
	mux.HandleFunc("/simple/gantry-egress-probe/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!DOCTYPE html><html><body><a href="/files/%s#sha256=%x">%s</a></body></html>`, wheel, sum, wheel)
	})
	mux.HandleFunc("/files/"+wheel, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=365000000, immutable, public") // as PyPI's files host says
		_, _ = w.Write(buf.Bytes())
	})
	return mux
}

// TestEgressJobTimeoutMeasured: a job with an egress allow-list runs
// behind the sandbox's egress relay; killed at its timeout it is measured
// all the same (its CPU time and peak memory, as TestUsage's timed-out
// job): in Python (forked from the warm interpreter, or under bubblewrap
// while that loads) and in a shell that becomes its program (bubblewrap).
// (A shell's command killed as the shell is, with the shell, is not
// measured, egress or not: its orphan dies with the pid namespace.)
func TestEgressJobTimeoutMeasured(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker, Postgres, NATS and S3")
	}
	srv := serveOn(t, "127.0.0.2", false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "hi") }))
	h := newHarness(t, 1, func(_ *harness, c *Config) { c.Egress = EgressConfig{AllowPrivate: true} })
	if err := h.st.SetTenantEgress(context.Background(), h.tenant, []string{strings.TrimPrefix(srv.URL, "http://")}); err != nil {
		t.Fatal(err)
	}
	burn := fmt.Sprintf("import urllib.request\nprint(urllib.request.urlopen(%q).read().decode(), flush=True)\n"+
		"b = bytearray(64 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nwhile True: pass", srv.URL)
	for _, req := range []jobs.Request{
		{Language: "python", TimeoutMS: 2000, Code: burn},
		{Language: "bash", TimeoutMS: 2000, Code: "exec python3 -c '" + strings.ReplaceAll(burn, "'", `'"'"'`) + "'"},
	} {
		j := h.run(t, req)
		if j.Status != jobs.StatusTimedOut || j.Stdout != "hi\n" || len(j.Egress) != 1 {
			t.Fatalf("%s: %s %q %q %+v", req.Language, j.Status, j.Stdout, j.Stderr, j.Egress)
		}
		if j.CPUTimeMS == nil || *j.CPUTimeMS < 200 || j.PeakMemoryKB == nil || *j.PeakMemoryKB < 64<<10-rssSlackKB {
			t.Errorf("%s timed out with egress: cpu %v peak %v", req.Language, deref(j.CPUTimeMS), deref(j.PeakMemoryKB))
		}
	}
}
