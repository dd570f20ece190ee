package ingress_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gantryhq/gantry/ingress"
	"github.com/gantryhq/gantry/ingress/service"
	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
	"github.com/gantryhq/gantry/queue/queuetest"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/store/storetest"
)

// TestUntrustedStrings: bytes Postgres cannot store (NUL) and bodies that
// are not UTF-8 are refused with a 400 naming the field, never a 500; binary
// stdin goes in base64-encoded and reaches the runner's claim exactly.
func TestUntrustedStrings(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	cases := []struct {
		name, method, path, body string
		field                    string
	}{
		{"NUL in stdin", "POST", "/v1/jobs", `{"language":"python","code":"x","stdin":"a\u0000b"}`, "stdin"},
		{"NUL in a metadata key", "POST", "/v1/jobs", `{"language":"python","code":"x","metadata":{"k\u0000":"v"}}`, "metadata"},
		{"NUL in a metadata value", "POST", "/v1/execute", `{"language":"python","code":"x","metadata":{"agent":"v\u0000"}}`, "metadata.agent"},
		{"NUL in session metadata", "POST", "/v1/sessions", `{"language":"python","metadata":{"who":"\u0000"}}`, "metadata.who"},
		{"NUL in a session metadata key", "POST", "/v1/sessions", `{"metadata":{"\u0000":"x"}}`, "metadata"},
		{"invalid UTF-8 in code", "POST", "/v1/jobs", "{\"language\":\"python\",\"code\":\"print('\xff\xfe')\"}", "code"},
		{"invalid UTF-8 in metadata", "POST", "/v1/jobs", "{\"language\":\"python\",\"code\":\"x\",\"metadata\":{\"a\":\"\xc3\"}}", "metadata.a"},
		{"invalid UTF-8 in a session", "POST", "/v1/sessions", "{\"language\":\"py\xe9\"}", "language"},
		{"bad stdin encoding", "POST", "/v1/jobs", `{"language":"python","code":"x","stdin":"x","stdin_encoding":"rot13"}`, "stdin_encoding"},
		{"NUL in a session filter", "GET", "/v1/jobs?session_id=%00", "", "session_id"},
		{"NUL in a skill search", "GET", "/v1/skills?q=a%00", "", "q"},
		{"invalid UTF-8 in a skill search", "GET", "/v1/skills?q=%ff", "", "q"},
		{"NUL in a skill", "PUT", "/v1/skills/probe", `{"description":"d\u0000","body":"b"}`, "description"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := h.do(t, h.keyA, c.method, c.path, c.body)
			var body struct{ Error service.Error }
			r.json(t, &body)
			if r.status != 400 || body.Error.Code != "invalid_argument" || body.Error.Field != c.field {
				t.Errorf("got %d %s, want 400 naming %q", r.status, r.body, c.field)
			}
		})
	}

	raw := "\x00\x01\xff binary \x00\n"
	r := h.do(t, h.keyA, "POST", "/v1/jobs", `{"language":"python","code":"import sys; sys.stdin.buffer.read()","stdin":"`+
		base64.StdEncoding.EncodeToString([]byte(raw))+`","stdin_encoding":"base64"}`)
	if r.status != 202 {
		t.Fatalf("binary stdin: %d %s", r.status, r.body)
	}
	c, ok, err := storetest.Claim(h.st, r.job(t).ID, "fake")
	if err != nil || !ok || c.Spec.Stdin != raw {
		t.Fatalf("the runner would get stdin %q (%v %v), want %q", c.Spec.Stdin, ok, err, raw)
	}
	if !strings.Contains(string(r.body), `"status":"queued"`) {
		t.Errorf("job: %s", r.body)
	}
}

// TestReadyzFollowsTheJobStream: /readyz is 503 whenever the job stream
// cannot take a publish (it is gone), and 200 again once it can.
func TestReadyzFollowsTheJobStream(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ready := func() response { return h.do(t, "", "GET", "/readyz", "") }
	if r := ready(); r.status != 200 {
		t.Fatalf("readyz: %d %s", r.status, r.body)
	}
	ctx := context.Background()
	if err := h.js.DeleteStream(ctx, queue.StreamName); err != nil {
		t.Fatal(err)
	}
	if r := ready(); r.status != 503 || !strings.Contains(string(r.body), `"nats":"error: job stream GANTRY_JOBS`) {
		t.Errorf("readyz without the job stream: %d %s", r.status, r.body)
	}
	if err := queue.Ensure(ctx, h.js, queue.Config{}); err != nil {
		t.Fatal(err)
	}
	if r := ready(); r.status != 200 {
		t.Errorf("readyz with the stream back: %d %s", r.status, r.body)
	}
}

// natsCluster starts n clustered JetStream servers in this process and
// waits for the cluster to elect a meta leader.
func natsCluster(t *testing.T, n int) []*server.Server {
	t.Helper()
	ports := make([]int, n)
	var routes []*url.URL
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		l.Close()
		routes = append(routes, &url.URL{Scheme: "nats-route", Host: l.Addr().String()})
	}
	servers := make([]*server.Server, n)
	for i := range servers {
		ns, err := server.NewServer(&server.Options{
			ServerName: fmt.Sprintf("n%d", i), Host: "127.0.0.1", Port: server.RANDOM_PORT,
			JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
			Cluster: server.ClusterOpts{Name: "gantry-test", Host: "127.0.0.1", Port: ports[i]},
			Routes:  routes,
		})
		if err != nil {
			t.Fatal(err)
		}
		go ns.Start()
		t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
		if !ns.ReadyForConnections(10 * time.Second) {
			t.Fatalf("nats server %d did not start", i)
		}
		servers[i] = ns
	}
	eventually.True(t, 30*time.Second, "the NATS cluster to elect a JetStream leader", func() bool {
		return servers[0].JetStreamIsCurrent() && (!servers[0].JetStreamIsClustered() || hasMetaLeader(servers))
	})
	return servers
}

func hasMetaLeader(servers []*server.Server) bool {
	for _, s := range servers {
		if s.JetStreamIsLeader() {
			return true
		}
	}
	return false
}

// TestReadyzWithoutQuorum runs the ingress on a 3-node JetStream cluster
// with a replicated job stream: when two nodes are gone the stream has no
// leader, every submission would fail, and /readyz says so.
func TestReadyzWithoutQuorum(t *testing.T) {
	t.Parallel()
	var cluster []*server.Server
	h := newHarness(t, func(h *harness, c *ingress.Config) {
		cluster = natsCluster(t, 3)
		h.nc = queuetest.Connect(t, cluster[0])
		h.js, _ = jetstream.New(h.nc)
		c.Queue.Replicas = 3
	})
	ready := func() response { return h.do(t, "", "GET", "/readyz", "") }
	if r := ready(); r.status != 200 {
		t.Fatalf("readyz on a healthy cluster: %d %s", r.status, r.body)
	}
	if r := h.do(t, h.keyA, "POST", "/v1/jobs", pyJob); r.status != 202 {
		t.Fatalf("submit on a healthy cluster: %d %s", r.status, r.body)
	}
	cluster[1].Shutdown()
	cluster[2].Shutdown()
	var r response
	if !eventually.Within(30*time.Second, func() bool {
		r = ready()
		return r.status == 503 && strings.Contains(string(r.body), `"nats":"error`)
	}) {
		t.Fatalf("readyz with 1 of 3 nodes left: %d %s", r.status, r.body)
	}
	if r := h.do(t, h.keyA, "POST", "/v1/jobs", pyJob); r.status != 503 {
		t.Errorf("submit without quorum: %d %s (readyz was right to say not ready)", r.status, r.body)
	}
}

// slowPost opens a connection and sends a request whose body trickles in a
// byte at a time, as a slow or malicious client would. It returns the
// status line the server answered with ("" if none) and how long the
// connection stayed open.
func slowPost(t *testing.T, base, key, method, path string) (string, time.Duration) {
	t.Helper()
	u, _ := url.Parse(base)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Error(err)
		return "", 0
	}
	defer conn.Close()
	start := time.Now()
	fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", method, path, u.Host, key)
	got := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(conn).ReadString('\n')
		// Read to the end: the server must close the connection.
		_, _ = io.Copy(io.Discard, conn)
		got <- strings.TrimSpace(line)
	}()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case line := <-got:
			return line, time.Since(start)
		case <-tick.C:
			if _, err := conn.Write([]byte(" ")); err != nil {
				return <-got, time.Since(start)
			}
			if time.Since(start) > 20*time.Second {
				return "", time.Since(start)
			}
		}
	}
}

// TestSlowBodies: request bodies that trickle in are cut off after the body
// timeout with 408 and a closed connection, while long responses (long
// polls, execute, MCP calls) outlast it.
func TestSlowBodies(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(_ *harness, c *ingress.Config) { c.BodyTimeout = time.Second })
	sess := h.do(t, h.keyA, "POST", "/v1/sessions", `{}`)
	var s struct{ ID string }
	sess.json(t, &s)

	paths := [][2]string{{"POST", "/v1/jobs"}, {"POST", "/v1/execute"}, {"PUT", "/v1/sessions/" + s.ID + "/files/a.txt"}, {"POST", "/mcp"}}
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := paths[i%len(paths)]
			line, took := slowPost(t, h.url, h.keyA, p[0], p[1])
			if !strings.HasPrefix(line, "HTTP/1.1 408") && !(p[1] == "/mcp" && strings.HasPrefix(line, "HTTP/1.1 4")) {
				t.Errorf("%s %s with a slow body: %q after %s", p[0], p[1], line, took)
			}
			if took < time.Second || took > 5*time.Second {
				t.Errorf("%s %s: the slow connection stayed open %s (body timeout 1s)", p[0], p[1], took)
			}
		}()
	}
	wg.Wait()

	// Responses may take longer than the body timeout.
	sub, err := h.nc.Subscribe(queue.SubjectTenantAll, func(m *nats.Msg) {
		var rm queue.RunMessage
		_ = json.Unmarshal(m.Data, &rm)
		// The job takes 2.5 s, longer than the body timeout.
		time.AfterFunc(2500*time.Millisecond, func() {
			if err := h.play(rm.JobID, succeeded("late\n")); err != nil {
				t.Error(err)
			}
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe() //nolint:errcheck
	start := time.Now()
	r := h.do(t, h.keyA, "POST", "/v1/execute", pyJob)
	if j := r.job(t); r.status != 200 || j.Status != jobs.StatusSucceeded || time.Since(start) < 2*time.Second {
		t.Errorf("execute outlasting the body timeout: %d %s after %s", r.status, r.body, time.Since(start))
	}
	q := h.do(t, h.keyA, "POST", "/v1/jobs", pyJob).job(t)
	start = time.Now()
	if j := h.do(t, h.keyA, "GET", "/v1/jobs/"+q.ID+"?wait=8s", "").job(t); j.Status != jobs.StatusSucceeded || time.Since(start) < 2*time.Second {
		t.Errorf("long poll: %s after %s", j.Status, time.Since(start))
	}
	c := h.mcpClient(t, h.keyA, "2025-06-18")
	start = time.Now()
	var out mcpJob
	structured(t, call(t, c, "execute_code", map[string]any{"language": "python", "code": "print(1)"}), &out)
	if out.Status != jobs.StatusSucceeded || out.Stdout != "late\n" || time.Since(start) < 2*time.Second {
		t.Errorf("MCP execute_code outlasting the body timeout: %+v after %s", out, time.Since(start))
	}
}

// TestReconcilerRepairsStrandedJobs: the maintenance loop finds jobs that
// nobody will ever end (their run message is gone, their runner dead): a
// queued one gets a new message — the only one runners accept from then
// on — and a running one that has used its attempts ends as error saying
// why. A job whose message is still in the stream is left alone. Cancel
// ends a running job whose runner is gone at once.
func TestReconcilerRepairsStrandedJobs(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(h *harness, _ *ingress.Config) { h.maint.Interval = 100 * time.Millisecond })
	ctx := context.Background()
	stream, err := h.js.Stream(ctx, queue.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	submit := func() (jobs.Job, uint64) {
		t.Helper()
		r := h.do(t, h.keyA, "POST", "/v1/jobs", `{"language":"python","code":"print(1)"}`)
		if r.status != 202 {
			t.Fatalf("submit: %d %s", r.status, r.body)
		}
		m, err := stream.GetLastMsgForSubject(ctx, queue.TenantSubject(h.tenantA))
		if err != nil {
			t.Fatal(err)
		}
		return r.job(t), m.Sequence
	}
	lost, lostSeq := submit()
	spent, spentSeq := submit()
	kept, keptSeq := submit()
	orphan, _ := submit()
	for range 3 { // three runners took it and died
		if _, ok, err := storetest.Claim(h.st, spent.ID, "dead"); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	if _, ok, err := storetest.Claim(h.st, orphan.ID, "dead"); !ok || err != nil {
		t.Fatal(ok, err)
	}
	for _, seq := range []uint64{lostSeq, spentSeq} {
		if err := stream.DeleteMsg(ctx, seq); err != nil {
			t.Fatal(err)
		}
	}
	if err := storetest.Exec(h.st, `UPDATE jobs SET created_at = now() - interval '5 minutes', heartbeat_at = now() - interval '5 minutes'`); err != nil {
		t.Fatal(err)
	}

	r := h.do(t, h.keyA, "POST", "/v1/jobs/"+orphan.ID+"/cancel", "")
	if j := r.job(t); r.status != 200 || j.Status != jobs.StatusCancelled || j.Error == nil ||
		!strings.Contains(j.Error.Message, "stopped responding") {
		t.Errorf("cancel of a job whose runner is gone: %d %s", r.status, r.body)
	}

	var (
		newSeq uint64
		got    jobs.Job
		m      *jetstream.RawStreamMsg
	)
	if !eventually.Within(20*time.Second, func() bool {
		got = h.do(t, h.keyA, "GET", "/v1/jobs/"+spent.ID, "").job(t)
		m, err = stream.GetLastMsgForSubject(ctx, queue.TenantSubject(h.tenantA))
		return err == nil && strings.Contains(string(m.Data), lost.ID) && got.Status == jobs.StatusError
	}) {
		t.Fatalf("not repaired: spent job %s, last message %v %v", got.Status, err, m)
	}
	if got.Error.Message != store.GaveUpMessage(3) {
		t.Errorf("given up job: %+v", got.Error)
	}
	newSeq = m.Sequence
	// Runners accept the new message only.
	req := store.ClaimRequest{JobID: lost.ID, MsgSeq: lostSeq, RunnerID: "r", MaxAttempts: 3}
	if _, out, err := h.st.ClaimJob(ctx, req); out != store.ClaimStale || err != nil {
		t.Errorf("claim with the lost message: %v %v", out, err)
	}
	req.MsgSeq = newSeq
	if c, out, err := h.st.ClaimJob(ctx, req); out != store.Claimed || err != nil || c.Attempt != 1 {
		t.Errorf("claim with the new message: %v %v %+v", out, err, c)
	}
	if _, err := stream.GetMsg(ctx, keptSeq); err != nil {
		t.Errorf("the message of a waiting job: %v", err)
	}
	if got := h.do(t, h.keyA, "GET", "/v1/jobs/"+kept.ID, "").job(t); got.Status != jobs.StatusQueued {
		t.Errorf("waiting job: %s", got.Status)
	}
}
