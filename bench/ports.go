package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// The ports' row (issue 36): what gantry's path to a sandbox's port adds to
// a request — the ingress, the tunnel over NATS, the runner and the agent —
// measured as the same keep-alive GET of a small app in a stateful
// session, sent by the host form (PORT-ID.DOMAIN, here the dev ingress's
// localhost domain) and from inside the sandbox itself.

// portApp answers every GET with "ok" on 127.0.0.1:8000.
const portApp = `from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def do_GET(self):
        # Headers and body in one write: two small writes meet the
        # client's delayed ACK (40 ms) on both paths alike.
        self.send_response(200)
        self.send_header("Content-Length", "3")
        self._headers_buffer.append(b"\r\nok\n")
        self.flush_headers()
ThreadingHTTPServer(("127.0.0.1", 8000), H).serve_forever()
`

// portInside times n GETs of the app from inside the sandbox (one
// keep-alive connection) and prints the median and p99 in milliseconds.
const portInside = `import http.client, time
c = http.client.HTTPConnection("127.0.0.1", 8000)
ds = []
for _ in range(%d):
    t = time.perf_counter()
    c.request("GET", "/")
    c.getresponse().read()
    ds.append((time.perf_counter() - t) * 1000)
ds.sort()
print(ds[len(ds) // 2], ds[int((len(ds) - 1) * 0.99)])
`

func portRows(c *client, n int) ([]row, error) {
	fmt.Fprintln(os.Stderr, "bench: a sandbox port's requests through the ingress")
	b, status, err := c.do("POST", "/v1/sessions", `{"language": "python", "stateful": true}`)
	var s struct{ ID string }
	if err != nil || status != 201 || json.Unmarshal(b, &s) != nil {
		return nil, fmt.Errorf("create a session: %d %s %v", status, b, err)
	}
	defer func() { _, _, _ = c.do("DELETE", "/v1/sessions/"+s.ID, "") }()
	start := "cat > /tmp/app.py <<'EOF'\n" + portApp + "EOF\nnohup python3 /tmp/app.py >/tmp/app.log 2>&1 &\nsleep 0.5\n"
	if b, status, err := c.do("POST", "/v1/execute", string(mustJSON(map[string]any{"language": "bash", "code": start, "session_id": s.ID}))); err != nil || status != 200 {
		return nil, fmt.Errorf("start the app: %d %s %v", status, b, err)
	}
	u, _ := url.Parse(c.url)
	host := "8000-" + s.ID + ".localhost:" + u.Port()
	get := func() (time.Duration, error) {
		req, _ := http.NewRequest("GET", c.url+"/", nil)
		req.Host = host
		t := time.Now()
		res, err := c.http.Do(req)
		if err != nil {
			return 0, err
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != 200 || string(body) != "ok\n" {
			return 0, fmt.Errorf("GET %s: %d %q %v", host, res.StatusCode, body, err)
		}
		return time.Since(t), nil
	}
	// The app may take a moment to listen; the first request opens the
	// connection the rest reuse.
	var err2 error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if _, err2 = get(); err2 == nil {
			break
		}
	}
	if err2 != nil {
		return nil, err2
	}
	var through []time.Duration
	for range n {
		d, err := get()
		if err != nil {
			return nil, err
		}
		through = append(through, d)
	}
	b, status, err = c.do("POST", "/v1/execute", string(mustJSON(map[string]any{"language": "python", "code": fmt.Sprintf(portInside, n), "session_id": s.ID})))
	var j struct{ Status, Stdout string }
	if err != nil || status != 200 || json.Unmarshal(b, &j) != nil || j.Status != "succeeded" {
		return nil, fmt.Errorf("time the app inside the sandbox: %d %s %v", status, b, err)
	}
	f := strings.Fields(j.Stdout)
	if len(f) != 2 {
		return nil, fmt.Errorf("inside the sandbox: %q", j.Stdout)
	}
	in50, _ := strconv.ParseFloat(f[0], 64)
	in99, _ := strconv.ParseFloat(f[1], 64)
	p50, p99 := pct(through, 50), pct(through, 99)
	return []row{
		{Name: fmt.Sprintf("a sandbox port's GET through the ingress (Host PORT-ID.DOMAIN, keep-alive), p50 of %d vs the same GET inside the sandbox", n),
			Gantry: ms(p50), Baseline: fmt.Sprintf("%.1f ms", in50), Value: msf(p50)},
		{Name: "a sandbox port's GET: what gantry's path adds (ingress, tunnel over NATS, runner, agent), p50; p99",
			Gantry: fmt.Sprintf("%.1f ms; %.1f ms", msf(p50)-in50, msf(p99)-in99), Value: msf(p50) - in50},
	}, nil
}
