package ingress_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gantryhq/gantry/blob"
	"github.com/gantryhq/gantry/blob/blobtest"
	"github.com/gantryhq/gantry/history"
	"github.com/gantryhq/gantry/ingress"
	"github.com/gantryhq/gantry/ingress/contracttest"
	"github.com/gantryhq/gantry/ingress/service"
	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
	"github.com/gantryhq/gantry/queue/queuetest"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/store/storetest"
)

// harness is an ingress on real Postgres, NATS and S3. No runner runs:
// tests play the runner's part through the store and NATS.
type harness struct {
	url     string
	handler http.Handler // the ingress's own, unwrapped
	st      *store.Store
	ns      *server.Server // the NATS server (nil on a cluster)
	nc      *nats.Conn
	js      jetstream.JetStream
	blobs   *blob.Store
	// serviceBlobs, if set, is the object store the ingress is given
	// (blobs behind a test's wrapper); blobs otherwise.
	serviceBlobs  service.Blobs
	tenantA, keyA string
	tenantB, keyB string
	cfg           ingress.Config
	// maint is the maintenance's own configuration (Interval); the rest
	// is taken from cfg as cmd/gantry does.
	maint service.MaintenanceConfig
	// history is the ingress's retention, as cmd/gantry wires it.
	history history.Config
}

// newHarness starts an ingress (server and maintenance) on fresh engines;
// opts may change its configuration first.
func newHarness(t *testing.T, opts ...func(*harness, *ingress.Config)) *harness {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Postgres, NATS and S3")
	}
	h := &harness{st: storetest.New(t), blobs: blobtest.New(t)}
	h.st.KeepOutput(history.NewOutput(h.blobs, slog.New(slog.NewTextHandler(io.Discard, nil))), history.DefaultInlineMax)
	h.ns = queuetest.Server(t)
	h.nc = queuetest.Connect(t, h.ns)
	h.js, _ = jetstream.New(h.nc)
	h.tenantA, h.keyA = storetest.Tenant(t, h.st, "a")
	h.tenantB, h.keyB = storetest.Tenant(t, h.st, "b")
	policy := jobs.DefaultPolicy()
	policy.MaxCodeBytes = 32 << 10
	cfg := ingress.Config{Config: service.Config{Policy: policy, MaxExecuteWait: 10 * time.Second}, MaxBodyBytes: 64 << 10, MaxWait: 10 * time.Second}
	for _, o := range opts {
		o(h, &cfg)
	}
	h.cfg = cfg
	h.url = h.serve(t)
	return h
}

// serve starts an ingress on the harness's engines and returns its URL.
func (h *harness) serve(t *testing.T) string {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	hs := history.NewRetention(h.st, h.blobs, h.history)
	cfg := h.cfg
	cfg.History = hs
	reg := prometheus.NewRegistry()
	var blobs service.Blobs = h.blobs
	if h.serviceBlobs != nil {
		blobs = h.serviceBlobs
	}
	srv, err := ingress.New(cfg, log, h.st, blobs, h.nc, reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	h.handler = srv.Handler()
	ts := httptest.NewServer(contracttest.Handler(t, srv.Handler()))
	t.Cleanup(ts.Close)
	mc := h.maint
	mc.Queue, mc.TenantLimits, mc.CodeMode, mc.History, mc.Webhooks, mc.Box = cfg.Queue, cfg.TenantLimits, cfg.CodeMode, hs, srv.Webhooks(), cfg.Box
	maint, err := service.NewMaintenance(mc, log, h.st, h.blobs, h.nc, reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := maint.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(maint.Stop)
	return ts.URL
}

// replica starts a second ingress replica on the same engines: a harness
// like h that talks to it.
func (h *harness) replica(t *testing.T) *harness {
	t.Helper()
	r := *h
	r.url = h.serve(t)
	return &r
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %q: %v", r.body, err)
	}
}

func (r response) job(t *testing.T) jobs.Job {
	var j jobs.Job
	r.json(t, &j)
	return j
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func (h *harness) do(t *testing.T, key, method, path, body string, hdr ...string) response {
	t.Helper()
	r, err := h.request(nil, key, method, path, body, hdr...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// request sends a request and reads its answer; sent, if set, is closed
// once the request is written. It calls no t.Fatal: goroutines use it.
func (h *harness) request(sent chan<- struct{}, key, method, path, body string, hdr ...string) (response, error) {
	req, err := http.NewRequest(method, h.url+path, strings.NewReader(body))
	if err != nil {
		return response{}, err
	}
	if sent != nil {
		var once sync.Once
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			WroteRequest: func(httptrace.WroteRequestInfo) { once.Do(func() { close(sent) }) },
		}))
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return response{resp.StatusCode, resp.Header, b}, err
}

// inFlight sends a request from a goroutine of its own, and returns once
// the request is written; the answer comes on the channel.
func (h *harness) inFlight(t *testing.T, key, method, path, body string) <-chan response {
	t.Helper()
	sent, out := make(chan struct{}), make(chan response, 1)
	go func() {
		r, err := h.request(sent, key, method, path, body)
		if err != nil {
			t.Errorf("%s %s: %v", method, path, err)
		}
		out <- r
	}()
	select {
	case <-sent:
	case r := <-out:
		out <- r // it failed, or answered before its request was out
	}
	return out
}

// finish plays a runner finishing the job.
func (h *harness) finish(t *testing.T, id string, res jobs.Result) {
	t.Helper()
	if err := h.play(id, res); err != nil {
		t.Fatal(err)
	}
}

// play plays a runner running the job: it claims it as attempt 1 (its
// message can be out before its row commits: the claim waits for the
// row), records res and announces the status. It calls no t.Fatal.
func (h *harness) play(id string, res jobs.Result) error {
	var claimErr error
	if !eventually.Within(10*time.Second, func() bool {
		_, ok, err := storetest.Claim(h.st, id, "fake")
		claimErr = err
		return ok
	}) {
		return fmt.Errorf("claim %s: %v", id, claimErr)
	}
	if applied, err := h.st.FinishJob(context.Background(), id, 1, res); err != nil || !applied {
		return fmt.Errorf("finish %s: %v %v", id, applied, err)
	}
	return h.announce(id, res.Status)
}

func (h *harness) status(t *testing.T, id string, s jobs.Status) {
	t.Helper()
	if err := h.announce(id, s); err != nil {
		t.Fatal(err)
	}
}

// announce publishes a job's new status, as a runner does.
func (h *harness) announce(id string, s jobs.Status) error {
	data, _ := json.Marshal(queue.StatusEvent{JobID: id, Status: s})
	return h.nc.Publish(queue.StatusSubject(id), data)
}

// waitStatus waits until the job (of tenant A) has the status.
func (h *harness) waitStatus(t *testing.T, id string, want jobs.Status) {
	t.Helper()
	var j jobs.Job
	if !eventually.Within(10*time.Second, func() bool {
		j = h.do(t, h.keyA, "GET", "/v1/jobs/"+id, "").job(t)
		return j.Status == want
	}) {
		t.Fatalf("job %s is %s, want %s", id, j.Status, want)
	}
}

func succeeded(stdout string) jobs.Result {
	code := 0
	return jobs.Result{Status: jobs.StatusSucceeded, ExitCode: &code, Stdout: []byte(stdout), Duration: 5 * time.Millisecond}
}

const pyJob = `{"language":"python","code":"print(6*7)"}`

func TestAuthAndHealth(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, key := range []string{"", "gk_wrong_key_00000000"} {
		r := h.do(t, key, "GET", "/v1/jobs", "")
		var body struct{ Error service.Error }
		r.json(t, &body)
		if r.status != 401 || body.Error.Code != "unauthenticated" || body.Error.Message == "" || r.header.Get("WWW-Authenticate") == "" {
			t.Errorf("key %q: %d %s", key, r.status, r.body)
		}
	}
	if r := h.do(t, "", "GET", "/healthz", ""); r.status != 200 {
		t.Errorf("healthz %d", r.status)
	}
	if r := h.do(t, "", "GET", "/readyz", ""); r.status != 200 || !strings.Contains(string(r.body), `"postgres":"ok"`) {
		t.Errorf("readyz %d %s", r.status, r.body)
	}
	if r := h.do(t, "", "GET", "/openapi.json", ""); r.status != 200 || !strings.Contains(string(r.body), `"openapi"`) {
		t.Errorf("openapi %d", r.status)
	}
	if r := h.do(t, h.keyA, "GET", "/v1/languages", ""); r.status != 200 || !strings.Contains(string(r.body), `"python"`) {
		t.Errorf("languages %d %s", r.status, r.body)
	}
	if r := h.do(t, "", "GET", "/metrics", ""); r.status != 200 || !strings.Contains(string(r.body), "gantry_http_request_seconds") ||
		!strings.Contains(string(r.body), `gantry_dependency_up{dependency="postgres"} 1`) || !strings.Contains(string(r.body), `gantry_dependency_up{dependency="s3"} 1`) {
		t.Errorf("metrics %d", r.status)
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	foreign := h.do(t, h.keyB, "POST", "/v1/jobs", pyJob).job(t)
	cases := []struct {
		name, method, path, body string
		status                   int
		code, field              string
	}{
		{"malformed json", "POST", "/v1/jobs", `{"language":`, 400, "invalid_argument", ""},
		{"unknown field", "POST", "/v1/jobs", `{"language":"python","code":"x","nope":1}`, 400, "invalid_argument", "nope"},
		{"wrong type", "POST", "/v1/jobs", `{"language":"python","code":5}`, 400, "invalid_argument", "code"},
		{"unknown language", "POST", "/v1/jobs", `{"language":"cobol","code":"x"}`, 400, "invalid_argument", "language"},
		{"empty code", "POST", "/v1/jobs", `{"language":"python","code":""}`, 400, "invalid_argument", "code"},
		{"timeout out of range", "POST", "/v1/jobs", `{"language":"python","code":"x","timeout_ms":99999999}`, 400, "invalid_argument", "timeout_ms"},
		{"memory out of range", "POST", "/v1/execute", `{"language":"python","code":"x","limits":{"memory_mb":999999}}`, 400, "invalid_argument", "limits.memory_mb"},
		{"traversing path", "POST", "/v1/jobs", `{"language":"python","code":"x","files":[{"path":"../x","content":""}]}`, 400, "invalid_argument", "files[0].path"},
		{"absolute path", "POST", "/v1/jobs", `{"language":"python","code":"x","files":[{"path":"/x","content":""}]}`, 400, "invalid_argument", "files[0].path"},
		{"nul in path", "POST", "/v1/jobs", `{"language":"python","code":"x","files":[{"path":"a\u0000","content":""}]}`, 400, "invalid_argument", "files[0].path"},
		{"body too large", "POST", "/v1/jobs", `{"language":"python","code":"` + strings.Repeat("x", 70<<10) + `"}`, 413, "payload_too_large", ""},
		{"unknown session", "POST", "/v1/jobs", `{"language":"python","code":"x","session_id":"ses_x"}`, 404, "not_found", "session_id"},
		{"unknown job", "GET", "/v1/jobs/" + jobs.NewID("job"), "", 404, "not_found", ""},
		{"garbage job id", "GET", "/v1/jobs/..%2F..%2Fetc", "", 404, "not_found", ""},
		{"another tenant's job", "GET", "/v1/jobs/" + foreign.ID, "", 404, "not_found", ""},
		{"another tenant's cancel", "POST", "/v1/jobs/" + foreign.ID + "/cancel", "", 404, "not_found", ""},
		{"another tenant's logs", "GET", "/v1/jobs/" + foreign.ID + "/logs", "", 404, "not_found", ""},
		{"another tenant's artifacts", "GET", "/v1/jobs/" + foreign.ID + "/artifacts", "", 404, "not_found", ""},
		{"bad wait", "GET", "/v1/jobs/" + foreign.ID + "?wait=forever", "", 400, "invalid_argument", "wait"},
		{"bad status filter", "GET", "/v1/jobs?status=done", "", 400, "invalid_argument", "status"},
		{"bad limit", "GET", "/v1/jobs?limit=1000", "", 400, "invalid_argument", "limit"},
		{"bad cursor", "GET", "/v1/jobs?cursor=zzz", "", 400, "invalid_argument", "cursor"},
		{"unknown route", "GET", "/v2/nothing", "", 404, "not_found", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := h.do(t, h.keyA, c.method, c.path, c.body)
			var body struct{ Error service.Error }
			r.json(t, &body)
			if r.status != c.status || string(body.Error.Code) != c.code || body.Error.Field != c.field || body.Error.Message == "" {
				t.Errorf("got %d %s", r.status, r.body)
			}
		})
	}
	// Nothing bad was queued.
	var list struct{ Jobs []jobs.Job }
	h.do(t, h.keyA, "GET", "/v1/jobs", "").json(t, &list)
	if len(list.Jobs) != 0 {
		t.Errorf("%d jobs recorded from bad requests", len(list.Jobs))
	}
}

func TestSubmitPollAndHistory(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := h.do(t, h.keyA, "POST", "/v1/jobs", `{"language":"python","code":"print(6*7)","metadata":{"agent":"t"}}`)
	j := r.job(t)
	if r.status != 202 || r.header.Get("Location") != "/v1/jobs/"+j.ID || j.Status != jobs.StatusQueued || j.Metadata["agent"] != "t" {
		t.Fatalf("submit: %d %s", r.status, r.body)
	}
	// The message is on the stream with the job id as its message id.
	stream, err := h.js.Stream(context.Background(), queue.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	m, err := stream.GetLastMsgForSubject(context.Background(), queue.TenantSubject(h.tenantA))
	if err != nil || m.Header.Get("Nats-Msg-Id") != j.ID {
		t.Fatalf("queued message: %v", err)
	}

	// The job finishes while the long poll waits.
	start := time.Now()
	poll := h.inFlight(t, h.keyA, "GET", "/v1/jobs/"+j.ID+"?wait=8s", "")
	h.finish(t, j.ID, succeeded("42\n"))
	got := (<-poll).job(t)
	if got.Status != jobs.StatusSucceeded || got.Stdout != "42\n" || *got.ExitCode != 0 || got.FinishedAt == nil {
		t.Fatalf("polled %+v", got)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("long poll returned after %s, not when the job finished", d)
	}
	// Long poll on an unfinished job returns at the end of the wait.
	q := h.do(t, h.keyA, "POST", "/v1/jobs", pyJob).job(t)
	start = time.Now()
	if got := h.do(t, h.keyA, "GET", "/v1/jobs/"+q.ID+"?wait=300ms", "").job(t); got.Status != jobs.StatusQueued || time.Since(start) < 300*time.Millisecond {
		t.Errorf("wait ended early: %s %s", got.Status, time.Since(start))
	}

	var page struct {
		Jobs       []jobs.Job
		NextCursor *string `json:"next_cursor"`
	}
	h.do(t, h.keyA, "GET", "/v1/jobs?limit=1", "").json(t, &page)
	if len(page.Jobs) != 1 || page.Jobs[0].ID != q.ID || page.NextCursor == nil {
		t.Fatalf("page 1: %+v", page)
	}
	h.do(t, h.keyA, "GET", "/v1/jobs?limit=1&cursor="+*page.NextCursor, "").json(t, &page)
	if len(page.Jobs) != 1 || page.Jobs[0].ID != j.ID || page.NextCursor != nil {
		t.Fatalf("page 2: %+v", page)
	}
	h.do(t, h.keyA, "GET", "/v1/jobs?status=succeeded", "").json(t, &page)
	if len(page.Jobs) != 1 || page.Jobs[0].ID != j.ID {
		t.Fatalf("status filter: %+v", page)
	}
	h.do(t, h.keyB, "GET", "/v1/jobs", "").json(t, &page)
	if len(page.Jobs) != 0 {
		t.Errorf("tenant b sees %d of a's jobs", len(page.Jobs))
	}
}

func TestExecute(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	// Play a runner that finishes every job it is told about.
	sub, err := h.nc.Subscribe(queue.SubjectTenantAll, func(m *nats.Msg) {
		var rm queue.RunMessage
		_ = json.Unmarshal(m.Data, &rm)
		go func() {
			if err := h.play(rm.JobID, succeeded("done\n")); err != nil {
				t.Error(err)
			}
		}()
	})
	if err != nil {
		t.Fatal(err)
	}
	r := h.do(t, h.keyA, "POST", "/v1/execute", pyJob)
	if j := r.job(t); r.status != 200 || j.Status != jobs.StatusSucceeded || j.Stdout != "done\n" {
		t.Fatalf("execute: %d %s", r.status, r.body)
	}
	_ = sub.Unsubscribe()
	r = h.do(t, h.keyA, "POST", "/v1/execute?wait=200ms", pyJob)
	if j := r.job(t); r.status != 202 || j.Status != jobs.StatusQueued || r.header.Get("Location") == "" {
		t.Fatalf("execute past its wait: %d %s", r.status, r.body)
	}
}

func TestIdempotencyKeys(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a := h.do(t, h.keyA, "POST", "/v1/jobs", `{"language":"python","code":"x","idempotency_key":"k-1"}`).job(t)
	b := h.do(t, h.keyA, "POST", "/v1/jobs", `{"language":"python","code":"x"}`, "Idempotency-Key", "k-1").job(t)
	if a.ID == "" || a.ID != b.ID {
		t.Fatalf("same key, different jobs: %s %s", a.ID, b.ID)
	}
	r := h.do(t, h.keyA, "POST", "/v1/jobs", `{"language":"python","code":"y"}`, "Idempotency-Key", "k-1")
	if r.status != 409 || !strings.Contains(string(r.body), `"conflict"`) {
		t.Errorf("reused key with another body: %d %s", r.status, r.body)
	}
	if c := h.do(t, h.keyB, "POST", "/v1/jobs", `{"language":"python","code":"x"}`, "Idempotency-Key", "k-1").job(t); c.ID == a.ID {
		t.Error("tenant b got tenant a's job through the same key")
	}
}

func TestQueueDownLosesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	if err := h.js.DeleteStream(context.Background(), queue.StreamName); err != nil {
		t.Fatal(err)
	}
	r := h.do(t, h.keyA, "POST", "/v1/jobs", pyJob)
	if r.status != 503 || r.header.Get("Retry-After") == "" || !strings.Contains(string(r.body), `"unavailable"`) {
		t.Fatalf("publish failure: %d %s", r.status, r.body)
	}
	var list struct{ Jobs []jobs.Job }
	h.do(t, h.keyA, "GET", "/v1/jobs", "").json(t, &list)
	if len(list.Jobs) != 0 {
		t.Errorf("a job was left behind after a failed publish: %+v", list.Jobs)
	}
}

func TestCancelQueued(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	j := h.do(t, h.keyA, "POST", "/v1/jobs", pyJob).job(t)
	for i := 0; i < 2; i++ { // idempotent
		r := h.do(t, h.keyA, "POST", "/v1/jobs/"+j.ID+"/cancel", "")
		if c := r.job(t); r.status != 200 || c.Status != jobs.StatusCancelled || c.Error == nil || c.Error.Code != "cancelled" {
			t.Fatalf("cancel %d: %d %s", i, r.status, r.body)
		}
	}
	if _, ok, _ := storetest.Claim(h.st, j.ID, "r"); ok {
		t.Error("a runner could still claim the cancelled job")
	}
}

func TestArtifacts(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	j := h.do(t, h.keyA, "POST", "/v1/jobs", pyJob).job(t)
	content := "a,b\n1,2\n"
	key := blob.ArtifactKey(h.tenantA, j.ID, "out/r.csv")
	if err := h.blobs.Put(context.Background(), key, strings.NewReader(content), int64(len(content)), "text/csv"); err != nil {
		t.Fatal(err)
	}
	res := succeeded("")
	res.Artifacts = []jobs.Artifact{{Path: "out/r.csv", Size: int64(len(content)), SHA256: fmt.Sprintf("%x", sha256.Sum256([]byte(content))), ContentType: "text/csv"}}
	h.finish(t, j.ID, res)

	var manifest struct{ Artifacts []jobs.Artifact }
	h.do(t, h.keyA, "GET", "/v1/jobs/"+j.ID+"/artifacts", "").json(t, &manifest)
	if len(manifest.Artifacts) != 1 || manifest.Artifacts[0].URL != "/v1/jobs/"+j.ID+"/artifacts/out/r.csv" {
		t.Fatalf("manifest %+v", manifest)
	}
	r := h.do(t, h.keyA, "GET", manifest.Artifacts[0].URL, "")
	if r.status != 302 {
		t.Fatalf("download: %d %s", r.status, r.body)
	}
	resp, err := http.Get(r.header.Get("Location")) // no credentials
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != content {
		t.Fatalf("presigned GET: %d %q", resp.StatusCode, body)
	}
	var pre struct {
		URL       string    `json:"url"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	h.do(t, h.keyA, "GET", manifest.Artifacts[0].URL+"?redirect=false", "").json(t, &pre)
	if !strings.HasPrefix(pre.URL, "http") || pre.ExpiresAt.Before(time.Now()) {
		t.Errorf("redirect=false: %+v", pre)
	}
	for _, c := range []struct {
		key, path string
		status    int
	}{
		{h.keyA, "/v1/jobs/" + j.ID + "/artifacts/out/missing.csv", 404},
		{h.keyA, "/v1/jobs/" + j.ID + "/artifacts/out%2F..%2F..%2Fx", 400},
		{h.keyB, "/v1/jobs/" + j.ID + "/artifacts/out/r.csv", 404},
	} {
		if r := h.do(t, c.key, "GET", c.path, ""); r.status != c.status {
			t.Errorf("%s: %d %s", c.path, r.status, r.body)
		}
	}
}

type sseEvent struct{ name, data string }

func readEvents(t *testing.T, body io.Reader, out chan<- sseEvent) {
	sc := bufio.NewScanner(body)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			ev.name = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			ev.data = line[len("data: "):]
		case line == "" && ev.name != "":
			out <- ev
			ev = sseEvent{}
		}
	}
	close(out)
}

func TestLogsStream(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	j := h.do(t, h.keyA, "POST", "/v1/jobs", pyJob).job(t)
	ctx := context.Background()
	if _, ok, err := storetest.Claim(h.st, j.ID, "fake"); err != nil || !ok {
		t.Fatal(err)
	}
	// Play the runner: answer backlog requests with what was printed so far.
	backlog, _ := h.nc.Subscribe(queue.BacklogSubject(j.ID), func(m *nats.Msg) {
		data, _ := json.Marshal(queue.Backlog{Stdout: []byte("early\n")})
		_ = m.Respond(data)
	})
	defer func() { _ = backlog.Unsubscribe() }()

	req, _ := http.NewRequest("GET", h.url+"/v1/jobs/"+j.ID+"/logs", nil)
	req.Header.Set("Authorization", "Bearer "+h.keyA)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	events := make(chan sseEvent, 16)
	go readEvents(t, resp.Body, events)
	next := func() sseEvent {
		select {
		case ev := <-events:
			return ev
		case <-time.After(10 * time.Second):
			t.Fatal("no event")
		}
		return sseEvent{}
	}
	if ev := next(); ev.name != "stdout" || ev.data != `{"data":"early\n"}` {
		t.Fatalf("backlog event %+v", ev)
	}
	chunk := func(stream string, off int, data string) {
		m := nats.NewMsg(queue.LogSubject(j.ID))
		m.Header.Set(queue.HeaderStream, stream)
		m.Header.Set(queue.HeaderOffset, strconv.Itoa(off))
		m.Data = []byte(data)
		_ = h.nc.PublishMsg(m)
	}
	chunk("stdout", 0, "early\n") // already sent in the backlog: skipped
	chunk("stdout", 6, "live\n")
	chunk("stderr", 0, "warn\xe2\x82") // split UTF-8: held back until complete
	chunk("stderr", 6, "\xac\n")
	if ev := next(); ev.name != "stdout" || ev.data != `{"data":"live\n"}` {
		t.Fatalf("live event %+v", ev)
	}
	if ev := next(); ev.name != "stderr" || ev.data != `{"data":"warn"}` {
		t.Fatalf("stderr event %+v", ev)
	}
	if ev := next(); ev.name != "stderr" || ev.data != `{"data":"€\n"}` {
		t.Fatalf("stderr event %+v", ev)
	}
	code := 0
	if _, err := h.st.FinishJob(ctx, j.ID, 1, jobs.Result{Status: jobs.StatusSucceeded, ExitCode: &code,
		Stdout: []byte("early\nlive\nlast\n"), Stderr: []byte("warn€\n")}); err != nil {
		t.Fatal(err)
	}
	h.status(t, j.ID, jobs.StatusSucceeded)
	if ev := next(); ev.name != "stdout" || ev.data != `{"data":"last\n"}` {
		t.Fatalf("tail from the store %+v", ev)
	}
	if ev := next(); ev.name != "status" || !strings.Contains(ev.data, `"status":"succeeded"`) {
		t.Fatalf("status event %+v", ev)
	}
	if _, ok := <-events; ok {
		t.Error("stream did not end after the status event")
	}

	// A finished job replays its stored output.
	r := h.do(t, h.keyA, "GET", "/v1/jobs/"+j.ID+"/logs", "")
	want := fmt.Sprintf("event: stdout\ndata: %s\n\nevent: stderr\ndata: %s\n\n", `{"data":"early\nlive\nlast\n"}`, `{"data":"warn€\n"}`)
	if !strings.HasPrefix(string(r.body), want) || !strings.Contains(string(r.body), "event: status") {
		t.Errorf("stored logs:\n%s", r.body)
	}
}
