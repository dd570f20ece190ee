package test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gantryhq/gantry/internal/eventually"
)

// The E2B tests here speak E2B's HTTP API as its SDKs do (test/e2b_test.go
// drives the SDKs themselves), to hold what the SDKs cannot show: streams
// no one reads, and the exact end of a stream.

// e2bSandbox is a sandbox made through E2B's control plane.
type e2bSandbox struct {
	d          *dev
	id, token  string
	apiKey     string
	sandboxURL string
}

// newE2BSandbox creates a sandbox with the API key, its timeout in
// seconds, and waits for nothing more (create answers once it runs).
func newE2BSandbox(t *testing.T, d *dev, key string, timeout int) *e2bSandbox {
	t.Helper()
	req, _ := http.NewRequest("POST", d.url+"/compat/e2b/v2/sandboxes", strings.NewReader(fmt.Sprintf(`{"templateID": "base", "timeout": %d}`, timeout)))
	req.Header.Set("X-API-Key", key)
	r, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	body, _ := io.ReadAll(r.Body)
	var sb struct {
		SandboxID       string `json:"sandboxID"`
		EnvdAccessToken string `json:"envdAccessToken"`
	}
	if r.StatusCode != 201 || json.Unmarshal(body, &sb) != nil || sb.EnvdAccessToken == "" {
		t.Fatalf("create a sandbox: %d %s", r.StatusCode, body)
	}
	return &e2bSandbox{d: d, id: sb.SandboxID, token: sb.EnvdAccessToken, apiKey: key, sandboxURL: d.url + "/compat/e2b/sandbox"}
}

// control calls the control plane with the sandbox's API key.
func (s *e2bSandbox) control(t *testing.T, method, path, body string) int {
	t.Helper()
	req, _ := http.NewRequest(method, s.d.url+"/compat/e2b"+path, strings.NewReader(body))
	req.Header.Set("X-API-Key", s.apiKey)
	r, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	return r.StatusCode
}

// inside is a request inside the sandbox, to port (envd's or the code
// interpreter's), carrying its token.
func (s *e2bSandbox) inside(ctx context.Context, port, path, contentType string, body []byte) *http.Request {
	req, _ := http.NewRequestWithContext(ctx, "POST", s.sandboxURL+path, bytes.NewReader(body))
	req.Header.Set("E2b-Sandbox-Id", s.id)
	req.Header.Set("E2b-Sandbox-Port", port)
	req.Header.Set("X-Access-Token", s.token)
	req.Header.Set("Content-Type", contentType)
	return req
}

// runCode runs a cell as the code interpreter's /execute does, and returns
// the status and what the interpreter answered.
func (s *e2bSandbox) runCode(t *testing.T, code string) (int, string) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"code": code})
	r, err := httpClient.Do(s.inside(context.Background(), "49999", "/execute", "application/json", body))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	out, _ := io.ReadAll(r.Body)
	return r.StatusCode, string(out)
}

// connectEnvelope frames a Connect streaming request's message.
func connectEnvelope(msg string) []byte {
	b := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	return append(b, msg...)
}

// processStream is a server stream of envd's process service.
type processStream struct {
	resp *http.Response
	r    *bufio.Reader
	Pid  int
}

// startProcess calls process.Process/Start (or Connect to pid, when cmd
// is "") and reads the stream's first message, the process's start.
func (s *e2bSandbox) startProcess(ctx context.Context, client *http.Client, cmd string, pid int) (*processStream, error) {
	path, msg := "/process.Process/Start", fmt.Sprintf(`{"process": {"cmd": "/bin/bash", "args": ["-c", %q]}, "stdin": false}`, cmd)
	if cmd == "" {
		path, msg = "/process.Process/Connect", fmt.Sprintf(`{"process": {"pid": %d}}`, pid)
	}
	req := s.inside(ctx, "49983", path, "application/connect+json", connectEnvelope(msg))
	req.Header.Set("Keepalive-Ping-Interval", "1") // keep-alives must not keep a stream of a lost sandbox open
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	ps := &processStream{resp: resp, r: bufio.NewReader(resp.Body)}
	if resp.StatusCode != 200 {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, fmt.Errorf("%s: %d %s", path, resp.StatusCode, body)
	}
	flags, data, err := ps.next()
	var start struct {
		Event struct {
			Start *struct {
				Pid int `json:"pid"`
			} `json:"start"`
		} `json:"event"`
	}
	if err != nil || flags != 0 || json.Unmarshal(data, &start) != nil || start.Event.Start == nil {
		resp.Body.Close()
		return nil, fmt.Errorf("%s: the first message %q (flags %d): %v", path, data, flags, err)
	}
	ps.Pid = start.Event.Start.Pid
	return ps, nil
}

// next reads one envelope.
func (ps *processStream) next() (flags byte, data []byte, err error) {
	var head [5]byte
	if _, err := io.ReadFull(ps.r, head[:]); err != nil {
		return 0, nil, err
	}
	data = make([]byte, binary.BigEndian.Uint32(head[1:]))
	_, err = io.ReadFull(ps.r, data)
	return head[0], data, err
}

// connectError is a stream's end: Connect's code and message ("" for a
// stream that ended well).
type connectError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// end reads the stream to its end-of-stream message and returns its
// error, skipping output and keep-alives; err when the connection ends
// first (or ctx does).
func (ps *processStream) end() (connectError, error) {
	defer ps.resp.Body.Close()
	for {
		flags, data, err := ps.next()
		if err != nil {
			return connectError{}, err
		}
		if flags&0x02 == 0 {
			continue
		}
		var e struct {
			Error *connectError `json:"error"`
		}
		if err := json.Unmarshal(data, &e); err != nil {
			return connectError{}, err
		}
		if e.Error == nil {
			return connectError{}, nil
		}
		return *e.Error, nil
	}
}

// TestE2BAccessTokenRevokedOrTimedOut: a sandbox's token stops with the
// key that made the sandbox (gantry keys revoke), and at the sandbox's
// timeout even while its cells keep running (each extending the session).
func TestE2BAccessTokenRevokedOrTimedOut(t *testing.T) {
	d := startDev(t)
	key, msg := d.cliOut(t, "keys", "create", "default", "e2b-token-test")
	keyID := regexp.MustCompile(`key_\S+`).FindString(msg)

	sb := newE2BSandbox(t, d, key, 300)
	if status, out := sb.runCode(t, "x = 6 * 7\nx"); status != 200 || !strings.Contains(out, "42") {
		t.Fatalf("a cell with the token: %d %s", status, out)
	}
	d.cli(t, "keys", "revoke", keyID)
	status, out := sb.runCode(t, "x")
	if status != 401 {
		t.Fatalf("a cell after the key that made the sandbox was revoked: %d %s", status, out)
	}

	// A sandbox of 10 s (set once it runs: making it may take longer on a
	// busy machine), kept busy: each cell is a job of its session, which
	// extends the session; the token must stop all the same.
	sb = newE2BSandbox(t, d, d.key, 300)
	if got := sb.control(t, "POST", "/sandboxes/"+sb.id+"/timeout", `{"timeout": 10}`); got != 204 {
		t.Fatalf("setTimeout: %d", got)
	}
	created := time.Now()
	cells := 0
	eventually.True(t, 2*time.Minute, "the token to stop at its sandbox's timeout", func() bool {
		status, out = sb.runCode(t, "1 + 1")
		if status == 200 {
			cells++
		}
		return status != 200
	})
	if status != 502 || time.Since(created) < 10*time.Second || cells == 0 {
		t.Fatalf("after %d cells, %s after its creation: %d %s", cells, time.Since(created).Round(time.Second), status, out)
	}
	// With the API key, setTimeout opens it again for the same token.
	if got := sb.control(t, "POST", "/sandboxes/"+sb.id+"/timeout", `{"timeout": 120}`); got != 204 {
		t.Fatalf("setTimeout: %d", got)
	}
	if status, out := sb.runCode(t, "2 + 2"); status != 200 || !strings.Contains(out, "4") {
		t.Errorf("a cell after setTimeout: %d %s", status, out)
	}
	sb.control(t, "DELETE", "/sandboxes/"+sb.id, "")
}

// TestE2BStreamEndsWithItsSandbox: a stream of a process (commands.run,
// handle.wait) ends with Connect's unavailable within seconds once its
// sandbox is lost, however it is lost: the sandbox killed, its container
// killed, its runner killed. Keep-alives (every second here) must not keep
// it open.
func TestE2BStreamEndsWithItsSandbox(t *testing.T) {
	d := startDev(t, "GANTRY_DEV_RUNNER=false")
	runnerID := "e2e-e2b-" + uniqueSuffix()
	runner := start(t, append(d.env, "GANTRY_RUNNER_ID="+runnerID, "GANTRY_RUNNER_SLOTS=2"), "runner")
	runner.waitOutput(t, regexp.MustCompile(`runner started`), 30*time.Second)

	// follow starts a long command in a new sandbox and returns the
	// sandbox and the command's stream.
	follow := func(t *testing.T) (*e2bSandbox, *processStream, context.CancelFunc) {
		t.Helper()
		made := time.Now()
		sb := newE2BSandbox(t, d, d.key, 600)
		t.Logf("sandbox made in %s", time.Since(made).Round(time.Millisecond))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		ps, err := sb.startProcess(ctx, httpClient, "echo started; sleep 1000", 0)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		return sb, ps, cancel
	}
	ends := func(t *testing.T, ps *processStream) {
		t.Helper()
		lost := time.Now()
		e, err := ps.end()
		if err != nil {
			t.Fatalf("the stream did not end with an end-of-stream message: %v", err)
		}
		if e.Code != "unavailable" {
			t.Fatalf("the stream's end: %+v, want unavailable", e)
		}
		t.Logf("ended %s after the loss: %s", time.Since(lost).Round(time.Millisecond), e.Message)
	}

	t.Run("the sandbox killed", func(t *testing.T) {
		sb, ps, cancel := follow(t)
		defer cancel()
		if got := sb.control(t, "DELETE", "/sandboxes/"+sb.id, ""); got != 204 {
			t.Fatalf("kill: %d", got)
		}
		ends(t, ps)
	})
	t.Run("its container killed", func(t *testing.T) {
		sb, ps, cancel := follow(t)
		defer cancel()
		// The sandbox's container is one of its tenant's (a sandbox takes
		// one as a job does): the one running its command.
		var ids []string
		eventually.NoError(t, 10*time.Second, "one container running the sandbox's command", func() error {
			if ids = containersRunning(t, runnerID, "sleep 1000"); len(ids) != 1 {
				return fmt.Errorf("the containers running it: %v", ids)
			}
			return nil
		})
		if out, err := exec.Command("docker", "kill", ids[0]).CombinedOutput(); err != nil {
			t.Fatalf("docker kill: %v %s", err, out)
		}
		ends(t, ps)
		sb.control(t, "DELETE", "/sandboxes/"+sb.id, "")
	})
	t.Run("its runner killed", func(t *testing.T) {
		sb, ps, cancel := follow(t)
		defer cancel()
		runner.kill()
		ends(t, ps)
		sb.control(t, "DELETE", "/sandboxes/"+sb.id, "")
	})
}

// metrics scrapes the named metrics' values (summed over labels) from
// the dev process.
func (d *dev) metrics(t *testing.T, names ...string) map[string]float64 {
	t.Helper()
	r := d.call(t, "GET", "/metrics", "")
	out := map[string]float64{}
	for _, line := range strings.Split(string(r.body), "\n") {
		for _, name := range names {
			rest, ok := strings.CutPrefix(line, name)
			if !ok || rest == "" || rest[0] != ' ' && rest[0] != '{' {
				continue
			}
			f := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
			if len(f) == 0 {
				continue
			}
			if v, err := strconv.ParseFloat(f[0], 64); err == nil {
				out[name] += v
			}
		}
	}
	return out
}

// TestE2BUnreadStreamsBounded: three sandboxes running `yes`, each with 32
// streams of it that nobody reads, hold no more of the ingress than the
// tenant's bound: the streams furthest behind are cut off, what they held
// is let go, and a client that reads after it learns why in Connect's
// words (resource_exhausted). Before, the ingress's heap grew by the
// output of every stream, without bound.
func TestE2BUnreadStreamsBounded(t *testing.T) {
	// The tenant's bound below one stream's default (8 MiB), so that the
	// sandboxes' streams meet it together.
	const tenantMB, ingressMB = 4, 32
	d := startDev(t, "GANTRY_RUNNER_SLOTS=3", fmt.Sprintf("GANTRY_LIVE_BUFFER_TENANT_MB=%d", tenantMB),
		fmt.Sprintf("GANTRY_LIVE_BUFFER_MB=%d", ingressMB))
	const heldName, cutsName, heapName = "gantry_live_stream_held_bytes", "gantry_live_stream_cutoffs_total", "go_memstats_heap_inuse_bytes"
	base := d.metrics(t, heapName)[heapName]

	// One client connection per stream, none of them read past the start.
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var streams []*processStream
	defer func() {
		for _, ps := range streams {
			ps.resp.Body.Close()
		}
	}()
	const sandboxes, perSandbox = 3, 32
	var first *e2bSandbox
	var firstYes int
	heapLimit := base + 128<<20
	heapWithin := func() {
		t.Helper()
		if h := d.metrics(t, heapName)[heapName]; h > heapLimit {
			t.Fatalf("the ingress's heap grew from %.0f MiB to %.0f MiB", base/(1<<20), h/(1<<20))
		}
	}
	for range sandboxes {
		heapWithin()
		sb := newE2BSandbox(t, d, d.key, 600)
		defer sb.control(t, "DELETE", "/sandboxes/"+sb.id, "")
		yes, err := sb.startProcess(ctx, client, "exec yes", 0)
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first, firstYes = sb, yes.Pid
		}
		streams = append(streams, yes)
		for range perSandbox - 1 {
			ps, err := sb.startProcess(ctx, client, "", yes.Pid)
			if err != nil {
				t.Fatal(err)
			}
			streams = append(streams, ps)
			heapWithin()
		}
	}

	// Every stream falls behind and is cut off; the ingress holds no more
	// than the tenant's bound meanwhile, and its heap stays within reach
	// of it (the red team saw 1,625 MiB).
	var last map[string]float64
	maxHeap := base
	eventually.True(t, 4*time.Minute, "every unread stream to be cut off", func() bool {
		last = d.metrics(t, heldName, cutsName, heapName)
		if last[heldName] > tenantMB<<20 {
			t.Fatalf("the ingress holds %.0f bytes for the tenant's streams, past its bound of %d MiB", last[heldName], tenantMB)
		}
		maxHeap = max(maxHeap, last[heapName])
		if last[heapName] > heapLimit {
			t.Fatalf("the ingress's heap grew from %.0f MiB to %.0f MiB", base/(1<<20), last[heapName]/(1<<20))
		}
		return last[cutsName] >= sandboxes*perSandbox
	})
	t.Logf("heap %.0f MiB at the start, at most %.0f MiB seen, %.0f MiB with every stream cut off; %.0f cutoffs",
		base/(1<<20), maxHeap/(1<<20), last[heapName]/(1<<20), last[cutsName])
	for _, line := range strings.Split(string(d.call(t, "GET", "/metrics", "").body), "\n") {
		if strings.HasPrefix(line, cutsName+"{") {
			t.Log(line)
		}
	}
	eventually.True(t, 2*time.Minute, "what the cut-off streams held to be let go", func() bool {
		return d.metrics(t, heldName)[heldName] == 0
	})

	// A client that reads once its stream is cut off (the stream's
	// handler waits a while for it) is told why, in Connect's words. One
	// more stream of the first sandbox's yes, the only one now:
	for _, ps := range streams {
		ps.resp.Body.Close()
	}
	late, err := first.startProcess(ctx, client, "", firstYes)
	if err != nil {
		t.Fatal(err)
	}
	streams = append(streams, late)
	eventually.True(t, 2*time.Minute, "the new stream to be cut off", func() bool {
		return d.metrics(t, cutsName)[cutsName] > sandboxes*perSandbox
	})
	e, err := late.end()
	if err != nil || e.Code != "resource_exhausted" || !strings.Contains(e.Message, "not read fast enough") || !strings.Contains(e.Message, "connect to it again") {
		t.Fatalf("a stream read after it was cut off ends with %+v (%v)", e, err)
	}
	t.Logf("its end: %s", e.Message)
}

// cliOut runs a gantry command against this dev's engines and returns its
// output and what it wrote to stderr.
func (d *dev) cliOut(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(gantryBin(t), args...)
	cmd.Env = append(cmd.Environ(), d.env...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("gantry %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errOut.String())
	}
	return strings.TrimSpace(out.String()), errOut.String()
}
