package test

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gantryhq/gantry/internal/eventually"
)

// portsApp is a web app a test runs in a sandbox (python3 app.py PORT, on
// 127.0.0.1): / says hello, /headers answers the request's headers as
// JSON, POST echoes its body, /stream sends a line, waits for /release,
// then sends another (so a test sees it streamed without timing it), /ws
// is a WebSocket that echoes each message as "echo: " and it.
const portsApp = `import base64, hashlib, json, struct, sys, threading
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
release = threading.Event()
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def send(self, code, body, ctype="text/plain"):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_POST(self):
        self.send(200, self.rfile.read(int(self.headers.get("Content-Length", 0))))
    def do_GET(self):
        self.path = self.path.split("?")[0]
        if self.path == "/":
            return self.send(200, b"hello from the sandbox\n")
        if self.path == "/headers":
            return self.send(200, json.dumps({k.lower(): v for k, v in self.headers.items()}).encode(), "application/json")
        if self.path == "/release":
            release.set()
            return self.send(200, b"released\n")
        if self.path == "/stream":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            def chunk(b):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(b), b))
                self.wfile.flush()
            chunk(b"first\n")
            release.wait(60)
            chunk(b"second\n")
            self.wfile.write(b"0\r\n\r\n")
            return
        if self.path == "/ws" and self.headers.get("Upgrade", "").lower() == "websocket":
            self.close_connection = True
            accept = base64.b64encode(hashlib.sha1((self.headers["Sec-WebSocket-Key"] + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
            self.send_response(101)
            self.send_header("Upgrade", "websocket")
            self.send_header("Connection", "Upgrade")
            self.send_header("Sec-WebSocket-Accept", accept)
            self.end_headers()
            self.wfile.flush()
            while True:
                h = self.rfile.read(2)
                if len(h) < 2:
                    return
                op, n = h[0] & 15, h[1] & 127
                if n == 126:
                    n = struct.unpack(">H", self.rfile.read(2))[0]
                elif n == 127:
                    n = struct.unpack(">Q", self.rfile.read(8))[0]
                mask = self.rfile.read(4) if h[1] & 128 else b"\0\0\0\0"
                data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(n)))
                if op == 8:
                    self.wfile.write(b"\x88\x00")
                    self.wfile.flush()
                    return
                if op in (1, 2):
                    reply = b"echo: " + data
                    size = bytes([len(reply)]) if len(reply) < 126 else b"\x7e" + struct.pack(">H", len(reply))
                    self.wfile.write(bytes([0x80 | op]) + size + reply)
                    self.wfile.flush()
        self.send(404, b"no such page\n")
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
`

// startApp starts portsApp on port in the stateful session sid (a job
// leaves it running) and waits until its path form answers.
func startApp(t *testing.T, d *dev, sid string, port int) {
	t.Helper()
	code := "cat > /tmp/app.py <<'EOF'\n" + portsApp + "EOF\nnohup python3 /tmp/app.py " + fmt.Sprint(port) + " >/tmp/app.log 2>&1 &\n"
	b, _ := json.Marshal(map[string]any{"language": "bash", "code": code, "session_id": sid})
	j := d.job(t, "POST", "/v1/execute?wait=60s", string(b))
	if j.Status != "succeeded" {
		t.Fatalf("starting the app: %+v", j)
	}
	eventually.True(t, 30*time.Second, "the app answers", func() bool {
		r := d.call(t, "GET", fmt.Sprintf("/v1/sessions/%s/ports/%d/", sid, port), "")
		return r.status == 200
	})
}

// hostGet requests path of the sandbox's port by its host (PORT-ID.DOMAIN)
// from the ingress, as a browser or curl would with wildcard DNS.
func hostGet(t *testing.T, d *dev, host, path string, header http.Header) resp {
	t.Helper()
	req, err := http.NewRequest("GET", d.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for k, v := range header {
		req.Header[k] = v
	}
	r, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	body, _ := io.ReadAll(r.Body)
	return resp{r.StatusCode, r.Header, body}
}

// wsEcho opens a WebSocket at path on the ingress with Host host, sends
// each message and returns what came back for each.
func wsEcho(t *testing.T, d *dev, host, path string, header http.Header, msgs ...string) ([]string, *http.Response) {
	t.Helper()
	u, _ := url.Parse(d.url)
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	var key [16]byte
	_, _ = rand.Read(key[:])
	var b strings.Builder
	fmt.Fprintf(&b, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\n",
		path, host, base64.StdEncoding.EncodeToString(key[:]))
	for k, vs := range header {
		for _, v := range vs {
			fmt.Fprintf(&b, "%s: %s\r\n", k, v)
		}
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(c, b.String()); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusSwitchingProtocols {
		return nil, res
	}
	var got []string
	for _, m := range msgs {
		var mask [4]byte
		_, _ = rand.Read(mask[:])
		frame := []byte{0x81}
		if len(m) < 126 {
			frame = append(frame, 0x80|byte(len(m)))
		} else {
			frame = append(frame, 0x80|126)
			frame = binary.BigEndian.AppendUint16(frame, uint16(len(m)))
		}
		frame = append(frame, mask[:]...)
		for i := range len(m) {
			frame = append(frame, m[i]^mask[i%4])
		}
		if _, err := c.Write(frame); err != nil {
			t.Fatal(err)
		}
		var h [2]byte
		if _, err := io.ReadFull(br, h[:]); err != nil {
			t.Fatal(err)
		}
		n := int(h[1] & 127)
		if n == 126 {
			var ext [2]byte
			_, _ = io.ReadFull(br, ext[:])
			n = int(binary.BigEndian.Uint16(ext[:]))
		}
		data := make([]byte, n)
		if _, err := io.ReadFull(br, data); err != nil {
			t.Fatal(err)
		}
		got = append(got, string(data))
	}
	_, _ = c.Write([]byte{0x88, 0x80, 0, 0, 0, 0}) // close
	return got, res
}

// TestPortsNative: a stateful session's port, by the native API's path
// (an API key of its tenant) and by its host (public by default, or the
// tenant's key when public_traffic is false): HTTP both ways, a streamed
// response, a WebSocket, the app's view of the request, the refusals, and
// a long connection keeping the session alive.
func TestPortsNative(t *testing.T) {
	d := startDev(t, "GANTRY_RUNNER_SLOTS=3")
	d.cli(t, "tenants", "create", "ports-other")
	otherKey := regexp.MustCompile(`gk_\S+`).FindString(d.cli(t, "keys", "create", "ports-other", "ports test"))
	u, _ := url.Parse(d.url)
	_, ingressPort, _ := net.SplitHostPort(u.Host)
	newSession := func(body string) string {
		r := d.call(t, "POST", "/v1/sessions", body)
		var s struct {
			ID            string `json:"id"`
			PublicTraffic bool   `json:"public_traffic"`
		}
		if r.status != 201 || json.Unmarshal(r.body, &s) != nil {
			t.Fatalf("create a session: %d %s", r.status, r.body)
		}
		return s.ID
	}
	sid := newSession(`{"stateful": true}`)
	startApp(t, d, sid, 8000)
	host := "8000-" + sid + ".localhost:" + ingressPort

	t.Run("by path, with an API key", func(t *testing.T) {
		r := d.call(t, "GET", "/v1/sessions/"+sid+"/ports/8000/headers?x=1", "")
		var h map[string]string
		if r.status != 200 || json.Unmarshal(r.body, &h) != nil {
			t.Fatalf("headers: %d %s", r.status, r.body)
		}
		if h["authorization"] != "" || h["x-forwarded-prefix"] != "/v1/sessions/"+sid+"/ports/8000" || h["x-forwarded-for"] == "" {
			t.Errorf("what the app saw: %v", h)
		}
		if csp := r.header.Get("Content-Security-Policy"); !strings.HasPrefix(csp, "sandbox") {
			t.Errorf("an answer of the sandbox's in the API's origin has CSP %q", csp)
		}
		if r := d.call(t, "POST", "/v1/sessions/"+sid+"/ports/8000/echo", `{"a": 1}`); r.status != 200 || string(r.body) != `{"a": 1}` {
			t.Errorf("POST echoed: %d %q", r.status, r.body)
		}
		req, _ := http.NewRequest("GET", d.url+"/v1/sessions/"+sid+"/ports/8000/", nil)
		noKey, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		noKey.Body.Close()
		if noKey.StatusCode != 401 {
			t.Errorf("without a key: %d", noKey.StatusCode)
		}
		req.Header.Set("Authorization", "Bearer "+otherKey)
		other, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(other.Body)
		other.Body.Close()
		if other.StatusCode != 404 || !strings.Contains(string(body), "not_found") {
			t.Errorf("another tenant's key: %d %s", other.StatusCode, body)
		}
		if r := d.call(t, "GET", "/v1/sessions/"+sid+"/ports/8001/", ""); r.status != 502 || !strings.Contains(string(r.body), "upstream_error") {
			t.Errorf("a closed port: %d %s", r.status, r.body)
		}
		if r := d.call(t, "GET", "/v1/sessions/"+sid+"/ports/3128/", ""); r.status != 400 || !strings.Contains(string(r.body), "egress") {
			t.Errorf("the egress relay's port: %d %s", r.status, r.body)
		}
		if r := d.call(t, "GET", "/v1/sessions/"+sid+"/ports/99999/", ""); r.status != 400 {
			t.Errorf("no such port: %d %s", r.status, r.body)
		}
		if r := d.call(t, "GET", "/v1/sessions/ses_01jzzzzzzzzzzzzzzzzzzzzzzz/ports/8000/", ""); r.status != 404 {
			t.Errorf("no such session: %d %s", r.status, r.body)
		}
	})

	t.Run("by host, public", func(t *testing.T) {
		r := hostGet(t, d, host, "/", nil)
		if r.status != 200 || string(r.body) != "hello from the sandbox\n" {
			t.Fatalf("GET /: %d %q", r.status, r.body)
		}
		// Browsers send the host in lower case; the app sees its own Host.
		r = hostGet(t, d, strings.ToUpper(host), "/headers", http.Header{"Authorization": {"Bearer app-token"}})
		var h map[string]string
		_ = json.Unmarshal(r.body, &h)
		if r.status != 200 || h["host"] != strings.ToUpper(host) || h["authorization"] != "Bearer app-token" || h["x-forwarded-host"] == "" {
			t.Errorf("the app's view: %d %v", r.status, h)
		}
		// curl resolves *.localhost itself, as browsers do.
		if out, err := exec.Command("curl", "-sS", "--max-time", "30", "http://"+host+"/").CombinedOutput(); err != nil || string(out) != "hello from the sandbox\n" {
			t.Errorf("curl http://%s/: %v %s", host, err, out)
		}
		// A streamed answer: the first line arrives while the app waits.
		req, _ := http.NewRequest("GET", d.url+"/stream", nil)
		req.Host = host
		res, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(res.Body)
		if line, err := br.ReadString('\n'); err != nil || line != "first\n" {
			t.Fatalf("first line: %q %v", line, err)
		}
		if r := hostGet(t, d, host, "/release", nil); r.status != 200 {
			t.Fatalf("release: %d", r.status)
		}
		rest, _ := io.ReadAll(br)
		res.Body.Close()
		if string(rest) != "second\n" {
			t.Errorf("after the release: %q", rest)
		}
		got, res := wsEcho(t, d, host, "/ws", nil, "ping", strings.Repeat("x", 3000))
		if len(got) != 2 || got[0] != "echo: ping" || got[1] != "echo: "+strings.Repeat("x", 3000) {
			t.Errorf("WebSocket: %d %q", res.StatusCode, got)
		}
	})

	t.Run("refusals in E2B's words", func(t *testing.T) {
		var e struct {
			SandboxID, Message, Port string
		}
		r := hostGet(t, d, "8001-"+sid+".localhost:"+ingressPort, "/", nil)
		_ = json.Unmarshal(r.body, &e)
		if r.status != 502 || e.SandboxID != sid || e.Message != "The sandbox is running but port is not open" || e.Port != "8001" {
			t.Errorf("a closed port: %d %s", r.status, r.body)
		}
		r = hostGet(t, d, "8000-ses_01jzzzzzzzzzzzzzzzzzzzzzzz.localhost:"+ingressPort, "/", nil)
		if _ = json.Unmarshal(r.body, &e); r.status != 404 || e.Message != "The sandbox was not found" {
			t.Errorf("no such sandbox: %d %s", r.status, r.body)
		}
		r = hostGet(t, d, "3128-"+sid+".localhost:"+ingressPort, "/", nil)
		if r.status != 403 || !strings.Contains(string(r.body), "not allowed") {
			t.Errorf("the egress relay's port: %d %s", r.status, r.body)
		}
		for _, bad := range []string{"x-" + sid, "8000", "80000-" + sid, "8000-ses_nope", "8000-" + sid + ".evil"} {
			if r := hostGet(t, d, bad+".localhost:"+ingressPort, "/", nil); r.status != 400 {
				t.Errorf("Host %s: %d %s", bad, r.status, r.body)
			}
		}
		// A browser gets a page, not JSON.
		r = hostGet(t, d, "8001-"+sid+".localhost:"+ingressPort, "/", http.Header{"User-Agent": {"Mozilla/5.0"}})
		if r.status != 502 || !strings.Contains(r.header.Get("Content-Type"), "text/html") || !strings.Contains(string(r.body), "port is not open") {
			t.Errorf("a browser: %d %s", r.status, r.body)
		}
		// The API and the console are not reached by a sandbox's host.
		if r := hostGet(t, d, host, "/v1/sessions", http.Header{"Authorization": {"Bearer " + d.key}}); r.status != 404 || !strings.Contains(string(r.body), "no such page") {
			t.Errorf("the API by a sandbox's host: %d %s", r.status, r.body)
		}
	})

	t.Run("not public", func(t *testing.T) {
		private := newSession(`{"stateful": true, "public_traffic": false}`)
		startApp(t, d, private, 8000)
		ph := "8000-" + private + ".localhost:" + ingressPort
		r := hostGet(t, d, ph, "/", nil)
		if r.status != 403 || !strings.Contains(string(r.body), "e2b-traffic-access-token' is missing") {
			t.Errorf("without a credential: %d %s", r.status, r.body)
		}
		if r := hostGet(t, d, ph, "/", http.Header{"Authorization": {"Bearer " + otherKey}}); r.status != 403 {
			t.Errorf("another tenant's key: %d %s", r.status, r.body)
		}
		if r := hostGet(t, d, ph, "/", http.Header{"E2b-Traffic-Access-Token": {"gst_forged"}}); r.status != 403 || !strings.Contains(string(r.body), "invalid") {
			t.Errorf("a forged token: %d %s", r.status, r.body)
		}
		r = hostGet(t, d, ph, "/headers", http.Header{"Authorization": {"Bearer " + d.key}})
		var h map[string]string
		_ = json.Unmarshal(r.body, &h)
		if r.status != 200 || h["authorization"] != "" || h["host"] != ph {
			t.Errorf("the tenant's key: %d %v", r.status, h)
		}
		if got, res := wsEcho(t, d, ph, "/ws", nil, "x"); res.StatusCode != 403 || got != nil {
			t.Errorf("a WebSocket without a credential: %d", res.StatusCode)
		}
	})

	t.Run("through another ingress", func(t *testing.T) {
		replica := start(t, append(d.env, "GANTRY_ADDR=127.0.0.1:0"), "ingress")
		m := replica.waitOutput(t, regexp.MustCompile(`ingress listening.*addr=(\S+)`), 30*time.Second)
		_, replicaPort, _ := net.SplitHostPort(m[1])
		other := &dev{url: "http://" + m[1], key: d.key}
		rh := "8000-" + sid + ".localhost:" + replicaPort
		if r := hostGet(t, other, rh, "/", nil); r.status != 200 || string(r.body) != "hello from the sandbox\n" {
			t.Errorf("GET / through the replica: %d %q", r.status, r.body)
		}
		if got, res := wsEcho(t, other, rh, "/ws", nil, "across"); len(got) != 1 || got[0] != "echo: across" {
			t.Errorf("a WebSocket through the replica: %d %q", res.StatusCode, got)
		}
		if r := other.call(t, "GET", "/v1/sessions/"+sid+"/ports/8000/", ""); r.status != 200 {
			t.Errorf("the path form through the replica: %d %s", r.status, r.body)
		}
	})

	t.Run("paused", func(t *testing.T) {
		// A durable session paused: traffic to its port resumes it, its app
		// and all, as its next call would.
		needsGVisor(t)
		durable := newSession(`{"stateful": true, "durable": true}`)
		startApp(t, d, durable, 8000)
		dh := "8000-" + durable + ".localhost:" + ingressPort
		if r := d.call(t, "POST", "/v1/sessions/"+durable+"/pause", ""); r.status != 200 {
			t.Fatalf("pause: %d %s", r.status, r.body)
		}
		if r := hostGet(t, d, dh, "/", nil); r.status != 200 || string(r.body) != "hello from the sandbox\n" {
			t.Errorf("GET / of a paused session: %d %q", r.status, r.body)
		}
		var s struct{ State string }
		if r := d.call(t, "GET", "/v1/sessions/"+durable, ""); json.Unmarshal(r.body, &s) != nil || s.State != "running" {
			t.Errorf("after traffic: %s", r.body)
		}
		// An E2B sandbox resumes on traffic only with lifecycle.autoResume:
		// without, E2B's 409.
		r := d.call(t, "POST", "/compat/e2b/v2/sandboxes", `{"templateID": "base", "timeout": 300, "metadata": {"gantry.durable": "true"}}`)
		var sbx struct{ SandboxID string }
		if r.status != 201 || json.Unmarshal(r.body, &sbx) != nil {
			t.Fatalf("an E2B sandbox: %d %s", r.status, r.body)
		}
		if r := d.call(t, "POST", "/v1/sessions/"+sbx.SandboxID+"/pause", ""); r.status != 200 {
			t.Fatalf("pause the E2B sandbox: %d %s", r.status, r.body)
		}
		r = hostGet(t, d, "8000-"+sbx.SandboxID+".localhost:"+ingressPort, "/", nil)
		var e struct {
			Message       string
			CanAutoResume *bool
		}
		if _ = json.Unmarshal(r.body, &e); r.status != 409 || e.Message != "The sandbox is paused" || e.CanAutoResume == nil || *e.CanAutoResume {
			t.Errorf("a paused E2B sandbox: %d %s", r.status, r.body)
		}
	})

	t.Run("a long connection keeps the session", func(t *testing.T) {
		short := newSession(`{"stateful": true, "ttl_seconds": 10}`)
		startApp(t, d, short, 8000)
		sh := "8000-" + short + ".localhost:" + ingressPort
		req, _ := http.NewRequest("GET", d.url+"/stream", nil)
		req.Host = sh
		res, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(res.Body)
		if line, err := br.ReadString('\n'); err != nil || line != "first\n" {
			t.Fatalf("first line: %q %v", line, err)
		}
		// Well past its 10 s timeout, the open stream has kept it.
		time.Sleep(25 * time.Second)
		if r := d.call(t, "GET", "/v1/sessions/"+short, ""); r.status != 200 {
			t.Errorf("the session after 25 s of a connection: %d %s", r.status, r.body)
		}
		_ = hostGet(t, d, sh, "/release", nil)
		rest, _ := io.ReadAll(br)
		res.Body.Close()
		if string(rest) != "second\n" {
			t.Errorf("the stream's end: %q", rest)
		}
	})
}

// TestPortsE2B drives E2B's own SDK (npm e2b, unmodified): a sandbox's
// getHost(port) is a working host, over HTTP and a WebSocket; a closed
// port answers 502 in E2B's words; a sandbox made with allowPublicTraffic
// false answers 403 without its traffic token and serves with it; another
// tenant's token and key are refused.
func TestPortsE2B(t *testing.T) {
	e2bClients(t)
	d := startDev(t, "GANTRY_RUNNER_SLOTS=3")
	d.cli(t, "tenants", "create", "e2b-ports-other")
	otherKey := regexp.MustCompile(`gk_\S+`).FindString(d.cli(t, "keys", "create", "e2b-ports-other", "e2b ports test"))
	u, _ := url.Parse(d.url)
	_, ingressPort, _ := net.SplitHostPort(u.Host)
	type got struct {
		Status int             `json:"status"`
		Body   string          `json:"body"`
		JSON   json.RawMessage `json:"json"`
	}
	type ws struct {
		Status  int      `json:"status"`
		Replies []string `json:"replies"`
	}
	var out struct {
		SandboxID         string    `json:"sandboxId"`
		Host              string    `json:"host"`
		Get               got       `json:"get"`
		Post              got       `json:"post"`
		WS                ws        `json:"ws"`
		Closed            got       `json:"closed"`
		PrivateHasToken   bool      `json:"privateHasToken"`
		PrivateWithToken  got       `json:"privateWithToken"`
		PrivateNoToken    got       `json:"privateNoToken"`
		PrivateWrongToken got       `json:"privateWrongToken"`
		PrivateWS         ws        `json:"privateWs"`
		PrivateWSNoToken  ws        `json:"privateWsNoToken"`
		PrivateInfo       *string   `json:"privateInfo"`
		TheirToken        got       `json:"theirToken"`
		TheirKey          got       `json:"theirKey"`
		TheirConnect      e2bThrown `json:"theirConnect"`
		AfterKill         got       `json:"afterKill"`
	}
	driveE2B(t, d, otherKey, []string{"PORTS_APP=" + portsApp}, "ports", &out)
	domain := "localhost:" + ingressPort
	if out.Host != "8000-"+out.SandboxID+"."+domain {
		t.Errorf("getHost(8000) = %q, want 8000-%s.%s", out.Host, out.SandboxID, domain)
	}
	if out.Get.Status != 200 || out.Get.Body != "hello from the sandbox\n" {
		t.Errorf("GET getHost(8000): %+v", out.Get)
	}
	if out.Post.Status != 200 || out.Post.Body != "posted" {
		t.Errorf("POST: %+v", out.Post)
	}
	if out.WS.Status != 101 || len(out.WS.Replies) != 2 || out.WS.Replies[0] != "echo: hello" || out.WS.Replies[1] != "echo: "+strings.Repeat("x", 1000) {
		t.Errorf("a WebSocket echo: %+v", out.WS)
	}
	var closed struct {
		SandboxID, Message, Port string
	}
	if _ = json.Unmarshal(out.Closed.JSON, &closed); out.Closed.Status != 502 || closed.SandboxID != out.SandboxID ||
		closed.Message != "The sandbox is running but port is not open" || closed.Port != "8001" {
		t.Errorf("a closed port: %+v", out.Closed)
	}
	if !out.PrivateHasToken || out.PrivateWithToken.Status != 200 || out.PrivateWithToken.Body != "hello from the sandbox\n" {
		t.Errorf("with the traffic token: %v %+v", out.PrivateHasToken, out.PrivateWithToken)
	}
	if out.PrivateNoToken.Status != 403 || !strings.Contains(out.PrivateNoToken.Body, "Token header 'e2b-traffic-access-token' is missing") {
		t.Errorf("without the token: %+v", out.PrivateNoToken)
	}
	if out.PrivateWrongToken.Status != 403 || !strings.Contains(out.PrivateWrongToken.Body, "Provided token is invalid") {
		t.Errorf("a wrong token: %+v", out.PrivateWrongToken)
	}
	if out.PrivateWS.Status != 101 || len(out.PrivateWS.Replies) != 1 || out.PrivateWS.Replies[0] != "echo: hi" || out.PrivateWSNoToken.Status != 403 {
		t.Errorf("a WebSocket with and without the token: %+v %+v", out.PrivateWS, out.PrivateWSNoToken)
	}
	if out.PrivateInfo == nil || *out.PrivateInfo != domain {
		t.Errorf("getInfo's domain: %v", out.PrivateInfo)
	}
	if out.TheirToken.Status != 403 || out.TheirKey.Status != 403 || out.TheirConnect.Error != "SandboxNotFoundError" {
		t.Errorf("another tenant: token %+v, key %+v, connect %+v", out.TheirToken, out.TheirKey, out.TheirConnect)
	}
	var gone struct{ Message string }
	if _ = json.Unmarshal(out.AfterKill.JSON, &gone); out.AfterKill.Status != 404 || gone.Message != "The sandbox was not found" {
		t.Errorf("a killed sandbox: %+v", out.AfterKill)
	}
}
