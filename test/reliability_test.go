package test

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store/storetest"
)

// TestBinaryStdin sends stdin with NUL and non-UTF-8 bytes base64-encoded:
// the program reads exactly those bytes.
func TestBinaryStdin(t *testing.T) {
	d := startDev(t, "GANTRY_RUNNER_SLOTS=1", "GANTRY_POOL_MIN=1")
	raw := []byte("\x00\x01\xfe\xff text \x00\n")
	body, _ := json.Marshal(map[string]any{"language": "python", "stdin_encoding": "base64",
		"stdin": base64.StdEncoding.EncodeToString(raw),
		"code":  "import sys; print(sys.stdin.buffer.read().hex())"})
	j := d.job(t, "POST", "/v1/execute", string(body))
	if j.Status != jobs.StatusSucceeded || j.Stdout != "0001feff207465787420000a\n" {
		t.Fatalf("job = %+v", j)
	}
	// As text, a NUL is refused before anything runs.
	r := d.call(t, "POST", "/v1/jobs", `{"language":"python","code":"x","stdin":"a\u0000"}`)
	if r.status != 400 {
		t.Errorf("NUL in text stdin: %d %s", r.status, r.body)
	}
}

// TestPolicyMaxima: what the operator's maxima forbid is refused at once
// with a 400 naming the field; a bad maximum stops gantry at start, naming
// the variable.
func TestPolicyMaxima(t *testing.T) {
	d := startDev(t, "GANTRY_DEV_RUNNER=false", "GANTRY_MAX_CPUS=1.5", "GANTRY_MAX_MEMORY_MB=1024",
		"GANTRY_MAX_DISK_MB=600", "GANTRY_MAX_OUTPUT_BYTES=2097152", "GANTRY_MAX_TIMEOUT_MS=60000")
	cases := []struct{ path, body, field string }{
		{"/v1/jobs", `{"language":"python","code":"x","limits":{"cpus":2}}`, "limits.cpus"},
		{"/v1/jobs", `{"language":"python","code":"x","limits":{"memory_mb":2048}}`, "limits.memory_mb"},
		{"/v1/jobs", `{"language":"python","code":"x","limits":{"disk_mb":1000}}`, "limits.disk_mb"},
		{"/v1/jobs", `{"language":"python","code":"x","limits":{"output_bytes":4194304}}`, "limits.output_bytes"},
		{"/v1/execute", `{"language":"python","code":"x","timeout_ms":60001}`, "timeout_ms"},
		{"/v1/sessions", `{"language":"python","disk_mb":1000}`, "disk_mb"},
	}
	for _, c := range cases {
		r := d.call(t, "POST", c.path, c.body)
		var body struct{ Error struct{ Code, Field string } }
		_ = json.Unmarshal(r.body, &body)
		if r.status != 400 || body.Error.Field != c.field {
			t.Errorf("%s %s: %d %s, want 400 naming %s", c.path, c.body, r.status, r.body, c.field)
		}
	}
	if r := d.call(t, "POST", "/v1/jobs", `{"language":"python","code":"x","limits":{"cpus":1.5,"memory_mb":1024},"timeout_ms":60000}`); r.status != 202 {
		t.Errorf("a job at the maxima: %d %s", r.status, r.body)
	}

	bad := start(t, []string{"GANTRY_MAX_CPUS=many", "GANTRY_MAX_TIMEOUT_MS=10"}, "dev")
	<-bad.done
	out := bad.output()
	if bad.cmd.ProcessState.ExitCode() == 0 || !strings.Contains(out, "GANTRY_MAX_CPUS=") || !strings.Contains(out, "GANTRY_MAX_TIMEOUT_MS=") {
		t.Errorf("gantry started with bad maxima, or did not name them:\n%s", out)
	}
}

// TestSlowBodyCutOff: a body that trickles in is cut off after
// GANTRY_BODY_TIMEOUT with 408.
func TestSlowBodyCutOff(t *testing.T) {
	d := startDev(t, "GANTRY_DEV_RUNNER=false", "GANTRY_BODY_TIMEOUT=1s")
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() {
		pw.Write([]byte(`{"language":"python",`)) //nolint:errcheck
		// A byte every 300 ms: far slower than the body timeout allows.
		tick := time.NewTicker(300 * time.Millisecond)
		defer tick.Stop()
		for i := 0; i < 100; i++ {
			<-tick.C
			if _, err := pw.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	req, _ := http.NewRequest("POST", d.url+"/v1/jobs", pr)
	req.ContentLength = 1000
	req.Header.Set("Authorization", "Bearer "+d.key)
	start := time.Now()
	r, err := httpClient.Do(req)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("after %s: %v", took, err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusRequestTimeout || took > 5*time.Second {
		t.Errorf("slow body: %d after %s, want 408 after about 1s", r.StatusCode, took)
	}
}

// TestRevokedKeyAcrossReplicas: `gantry keys revoke` tells every ingress
// through NATS, so a revoked key stops working on all replicas at once,
// not when their caches expire; without NATS it warns and the key stops
// within the cache's lifetime.
func TestRevokedKeyAcrossReplicas(t *testing.T) {
	d := startDev(t, "GANTRY_DEV_RUNNER=false")
	replica := start(t, append(d.env, "GANTRY_ADDR=127.0.0.1:0"), "ingress")
	m := replica.waitOutput(t, regexp.MustCompile(`ingress listening.*addr=(\S+)`), 30*time.Second)
	urls := []string{d.url, "http://" + m[1]}

	cli := func(env []string, args ...string) (stdout, stderr string) {
		t.Helper()
		cmd := exec.Command(gantryBin(t), args...)
		cmd.Env = append(append(cmd.Environ(), d.env...), env...)
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("gantry %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errOut.String())
		}
		return strings.TrimSpace(out.String()), errOut.String()
	}
	newKey := func() (key, id string) {
		key, msg := cli(nil, "keys", "create", "default", "revoke-test")
		id = regexp.MustCompile(`key_\S+`).FindString(msg)
		if !strings.HasPrefix(key, "gk_") || id == "" {
			t.Fatalf("keys create: %q %q", key, msg)
		}
		return key, id
	}
	status := func(url, key string) int {
		req, _ := http.NewRequest("GET", url+"/v1/jobs", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		r, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		return r.StatusCode
	}
	// Every replica refuses the key within the given time.
	refusedWithin := func(key string, within time.Duration) time.Duration {
		t.Helper()
		start := time.Now()
		for _, u := range urls {
			if !eventually.Within(within-time.Since(start), func() bool { return status(u, key) == 401 }) {
				t.Fatalf("%s still accepts the revoked key %s after the revocation", u, time.Since(start))
			}
		}
		return time.Since(start)
	}

	key, id := newKey()
	for _, u := range urls {
		if s := status(u, key); s != 200 { // and now cached
			t.Fatalf("%s: %d", u, s)
		}
	}
	if _, warn := cli(nil, "keys", "revoke", id); warn != "" {
		t.Errorf("revoke with NATS reachable warned: %s", warn)
	}
	took := refusedWithin(key, time.Second)
	t.Logf("revoked key refused by both replicas %s after the CLI returned (cache TTL 5s)", took)

	// NATS out of reach: the CLI still revokes, and says how long the key
	// may live on in caches.
	key, id = newKey()
	for _, u := range urls {
		status(u, key)
	}
	_, warn := cli([]string{"GANTRY_NATS_URL=nats://127.0.0.1:1"}, "keys", "revoke", id)
	if !strings.Contains(warn, "could not be told") || !strings.Contains(warn, "5s") {
		t.Errorf("revoke without NATS: warning %q", warn)
	}
	refusedWithin(key, 8*time.Second)
}

// TestPresignedLinkSurvivesDevRestart: gantry dev keeps its S3 credentials
// in the data dir, so a download link made before a restart still works
// after it (until it expires).
func TestPresignedLinkSurvivesDevRestart(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s3Addr := l.Addr().String()
	l.Close()
	same := []string{
		"GANTRY_DATA_DIR=" + t.TempDir(), "GANTRY_DATABASE_URL=" + storetest.DatabaseURL(t),
		"GANTRY_DEV_S3_ADDR=" + s3Addr, "GANTRY_S3_ACCESS_KEY=", "GANTRY_S3_SECRET_KEY=", // dev's own
		"GANTRY_RUNNER_SLOTS=1", "GANTRY_POOL_MIN=0",
	}
	d := startDev(t, same...)
	j := d.job(t, "POST", "/v1/execute", `{"language":"bash","code":"mkdir -p out; echo kept > out/a.txt"}`)
	if j.Status != jobs.StatusSucceeded || len(j.Artifacts) != 1 {
		t.Fatalf("job: %+v", j)
	}
	var link struct{ URL string }
	if r := d.call(t, "GET", j.Artifacts[0].URL+"?redirect=false", ""); r.status != 200 || json.Unmarshal(r.body, &link) != nil {
		t.Fatalf("link: %d %s", r.status, r.body)
	}
	get := func() (int, string) {
		r, err := http.Get(link.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return r.StatusCode, string(b)
	}
	if code, body := get(); code != 200 || body != "kept\n" {
		t.Fatalf("before the restart: %d %q", code, body)
	}
	d.stop()

	start := time.Now()
	startDev(t, same...)
	if code, body := get(); code != 200 || body != "kept\n" {
		t.Errorf("the link made before the restart answers %d %q", code, body)
	}
	t.Logf("restart took %s", time.Since(start))
}
