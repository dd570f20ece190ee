package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/gantryhq/gantry/blob/blobtest"
	"github.com/gantryhq/gantry/history"
	"github.com/gantryhq/gantry/ingress/contracttest"
	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue/queuetest"
	"github.com/gantryhq/gantry/runner"
	"github.com/gantryhq/gantry/store/storetest"
	"github.com/gantryhq/gantry/tracing"
)

// traceHarness is an ingress and a runner wired as gantry wires them
// (newIngress, newRunner), on real Postgres, NATS, S3 and Docker, whose
// spans go to an in-memory recorder.
type traceHarness struct {
	url    string
	key    string
	tenant string
	cfg    config
	d      *deps
	rec    *tracetest.SpanRecorder
	logs   *syncBuffer
	sb     *runner.Sandbox // the runner's, once started
}

func newTraceHarness(t *testing.T) *traceHarness {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Docker, Postgres, NATS and S3")
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	t.Setenv("GANTRY_RUNNER_ID", "traces-"+hex.EncodeToString(b))
	t.Setenv("GANTRY_RUNNER_SLOTS", "2")
	t.Setenv("GANTRY_POOL_MIN", "0")
	t.Setenv("GANTRY_ACK_WAIT", "2s")
	t.Setenv("GANTRY_DRAIN_TIMEOUT", "2s")
	t.Setenv("GANTRY_LANGUAGES", "all")
	cfg, err := loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	h := &traceHarness{cfg: cfg, rec: tracetest.NewSpanRecorder(), logs: &syncBuffer{}}
	var logTo io.Writer = h.logs
	if os.Getenv("GANTRY_TEST_LOG") != "" {
		logTo = io.MultiWriter(h.logs, os.Stderr)
	}
	h.d = newDeps(slog.New(slog.NewTextHandler(logTo, nil)))
	h.d.store = storetest.New(t)
	h.d.blobs = blobtest.New(t)
	h.d.history = history.NewRetention(h.d.store, h.d.blobs, history.Config{})
	h.d.nc = queuetest.Connect(t, queuetest.Server(t))
	h.d.tracer = tracing.With(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(h.rec)))
	h.tenant, h.key = storetest.Tenant(t, h.d.store, "traces")
	srv, err := newIngress(context.Background(), cfg, h.d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	// The answers, trace_id included, are checked against the document.
	ts := httptest.NewServer(contracttest.Handler(t, srv.Handler()))
	t.Cleanup(ts.Close)
	h.url = ts.URL
	return h
}

// startRunner starts the runner; it stops when the test ends.
func (h *traceHarness) startRunner(t *testing.T) {
	t.Helper()
	r, sb, up, err := newRunner(h.cfg, h.d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	h.sb = sb
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.Check(ctx); err != nil {
		storetest.Unavailable(t, "%v", err)
	}
	if err := up.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(up.Stop)
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
}

func (h *traceHarness) do(t *testing.T, method, path, body string, hdr ...string) []byte {
	t.Helper()
	req, err := http.NewRequest(method, h.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+h.key)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode >= 300 {
		t.Fatalf("%s %s: %d %s %v", method, path, resp.StatusCode, out, err)
	}
	return out
}

func (h *traceHarness) submit(t *testing.T, body string, hdr ...string) jobs.Job {
	t.Helper()
	var j jobs.Job
	if err := json.Unmarshal(h.do(t, "POST", "/v1/jobs", body, hdr...), &j); err != nil {
		t.Fatal(err)
	}
	return j
}

// finished waits for the job to finish, and returns it.
func (h *traceHarness) finished(t *testing.T, id string) jobs.Job {
	t.Helper()
	var j jobs.Job
	eventually.NoError(t, 2*time.Minute, "job "+id+" to finish", func() error {
		if err := json.Unmarshal(h.do(t, "GET", "/v1/jobs/"+id, ""), &j); err != nil {
			return err
		}
		if !j.Status.Terminal() {
			return fmt.Errorf("%s", j.Status)
		}
		return nil
	})
	return j
}

// spanTree is the ended spans of one trace.
type spanTree []sdktrace.ReadOnlySpan

// trace waits until the trace holds every span named (the job's runner
// spans end after its result is visible), and returns it.
func (h *traceHarness) trace(t *testing.T, traceID string, names ...string) spanTree {
	t.Helper()
	var tree spanTree
	eventually.True(t, time.Minute, fmt.Sprintf("trace %s to hold %v", traceID, names), func() bool {
		tree = nil
		for _, s := range h.rec.Ended() {
			if s.SpanContext().TraceID().String() == traceID {
				tree = append(tree, s)
			}
		}
		for _, n := range names {
			if len(tree.named(n)) == 0 {
				return false
			}
		}
		return true
	})
	return tree
}

func (tr spanTree) named(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range tr {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// one is the trace's only span of that name.
func (tr spanTree) one(t *testing.T, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	got := tr.named(name)
	if len(got) != 1 {
		t.Fatalf("%d spans named %s in the trace, want 1:\n%s", len(got), name, tr)
	}
	return got[0]
}

// childOf checks that each named span is a child of parent.
func (tr spanTree) childOf(t *testing.T, parent sdktrace.ReadOnlySpan, names ...string) {
	t.Helper()
	for _, n := range names {
		found := false
		for _, s := range tr.named(n) {
			if s.Parent().SpanID() == parent.SpanContext().SpanID() {
				found = true
			}
		}
		if !found {
			t.Errorf("no %s span under %s (%s):\n%s", n, parent.Name(), parent.SpanContext().SpanID(), tr)
		}
	}
}

// String lists the spans with their ids and parents, for failures.
func (tr spanTree) String() string {
	var b strings.Builder
	for _, s := range tr {
		fmt.Fprintf(&b, "  %s %s parent %s\n", s.Name(), s.SpanContext().SpanID(), s.Parent().SpanID())
	}
	return b.String()
}

// attr is a span's attribute's value as text ("" when it has none).
func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

// checkClean fails if any span says one of the secrets: attributes,
// events and their attributes, status.
func (tr spanTree) checkClean(t *testing.T, secrets ...string) {
	t.Helper()
	for _, s := range tr {
		var b strings.Builder
		b.WriteString(s.Name() + " " + s.Status().Description)
		for _, kv := range s.Attributes() {
			b.WriteString(" " + string(kv.Key) + "=" + kv.Value.String())
		}
		for _, e := range s.Events() {
			b.WriteString(" " + e.Name)
			for _, kv := range e.Attributes {
				b.WriteString(" " + kv.Value.String())
			}
		}
		for _, secret := range secrets {
			if strings.Contains(b.String(), secret) {
				t.Errorf("span %s tells %q: %s", s.Name(), secret, b.String())
			}
		}
	}
}

// TestTraces: one job is one trace, from the request that submitted it to
// its recorded result, whatever brought it in (HTTP, MCP) and however it
// ran (alone, in a session); the job and the log lines about it name the
// trace; no span tells the job's code or env.
func TestTraces(t *testing.T) {
	h := newTraceHarness(t)
	h.startRunner(t)
	runnerStages := []string{"job.claim", "job.acquire", "job.start", "job.run", "job.collect", "job.record"}

	t.Run("an HTTP job's whole tree", func(t *testing.T) {
		j := h.submit(t, `{"language": "python", "code": "import os\nopen('out/a.txt', 'w').write(os.environ['TOKEN'])\nprint('marker-of-the-code')",
			"env": {"TOKEN": "env-value-never-in-a-span"}}`)
		if len(j.TraceID) != 32 {
			t.Fatalf("the queued job shows trace_id %q", j.TraceID)
		}
		j = h.finished(t, j.ID)
		if j.Status != jobs.StatusSucceeded || len(j.Artifacts) != 1 {
			t.Fatalf("job = %+v", j)
		}
		tree := h.trace(t, j.TraceID, append([]string{"POST /v1/jobs", "job.submit", "job.enqueue", "job.process"}, runnerStages...)...)
		root := tree.one(t, "POST /v1/jobs")
		if root.Parent().IsValid() || root.SpanKind() != trace.SpanKindServer || attr(root, "http.response.status_code") != "202" {
			t.Errorf("root span %s: parent %v kind %v status %s", root.Name(), root.Parent(), root.SpanKind(), attr(root, "http.response.status_code"))
		}
		submit, enqueue, process := tree.one(t, "job.submit"), tree.one(t, "job.enqueue"), tree.one(t, "job.process")
		tree.childOf(t, root, "job.submit")
		tree.childOf(t, submit, "job.enqueue")
		tree.childOf(t, enqueue, "job.process")
		tree.childOf(t, process, runnerStages...)
		if enqueue.SpanKind() != trace.SpanKindProducer || process.SpanKind() != trace.SpanKindConsumer {
			t.Errorf("enqueue kind %v, process kind %v", enqueue.SpanKind(), process.SpanKind())
		}
		for span, want := range map[sdktrace.ReadOnlySpan]map[string]string{
			submit:                   {"gantry.job.id": j.ID, "gantry.tenant.id": h.tenant, "gantry.job.language": "python"},
			process:                  {"gantry.job.id": j.ID, "gantry.job.attempt": "1", "gantry.job.status": "succeeded", "gantry.runner.id": h.cfg.RunnerID},
			tree.one(t, "job.claim"): {"gantry.outcome": "claimed"},
			tree.one(t, "job.run"):   {"process.exit.code": "0"},
		} {
			for k, v := range want {
				if got := attr(span, k); got != v {
					t.Errorf("%s: %s = %q, want %q", span.Name(), k, got, v)
				}
			}
		}
		// The stages follow one another.
		start, run, collect, record := tree.one(t, "job.start"), tree.one(t, "job.run"), tree.one(t, "job.collect"), tree.one(t, "job.record")
		if start.EndTime().After(run.StartTime()) || run.EndTime().After(collect.StartTime()) || collect.EndTime().After(record.StartTime()) ||
			record.EndTime().After(process.EndTime()) || enqueue.EndTime().After(process.StartTime().Add(time.Second)) {
			t.Errorf("stages out of order:\n%s", tree)
		}
		tree.checkClean(t, "marker-of-the-code", "env-value-never-in-a-span", h.key)
		// The log lines about the job name its trace.
		for _, msg := range []string{`msg="job started"`, `msg="job finished"`} {
			if !h.logs.hasLine(msg, "job_id="+j.ID, "trace_id="+j.TraceID) {
				t.Errorf("no log line %s with the job's trace id:\n%s", msg, h.logs)
			}
		}
	})

	t.Run("a caller's traceparent is continued", func(t *testing.T) {
		const callerTrace, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
		j := h.submit(t, `{"language": "bash", "code": "echo hi"}`, "traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
		if j.TraceID != callerTrace {
			t.Fatalf("trace_id = %q, want the caller's %s", j.TraceID, callerTrace)
		}
		h.finished(t, j.ID)
		tree := h.trace(t, callerTrace, "POST /v1/jobs", "job.process", "job.record")
		if got := tree.one(t, "POST /v1/jobs").Parent(); got.SpanID().String() != callerSpan || !got.IsRemote() {
			t.Errorf("the request's span's parent is %v, want the caller's span", got)
		}
	})

	t.Run("an MCP call's job", func(t *testing.T) {
		c, err := client.NewStreamableHttpClient(h.url+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + h.key}))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		init := mcp.InitializeRequest{}
		init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
		init.Params.ClientInfo = mcp.Implementation{Name: "traces-test", Version: "1"}
		if _, err := c.Initialize(ctx, init); err != nil {
			t.Fatal(err)
		}
		req := mcp.CallToolRequest{}
		req.Params.Name = "execute_code"
		req.Params.Arguments = map[string]any{"language": "python", "code": "print(6*7)"}
		res, err := c.CallTool(ctx, req)
		if err != nil || res.IsError {
			t.Fatalf("execute_code: %v %+v", err, res)
		}
		data, _ := json.Marshal(res.StructuredContent)
		var out struct {
			JobID string `json:"job_id"`
		}
		if err := json.Unmarshal(data, &out); err != nil || out.JobID == "" {
			t.Fatalf("execute_code answered %s (%v)", data, err)
		}
		id := out.JobID
		j := h.finished(t, id)
		if j.TraceID == "" {
			t.Fatalf("job %s (%s) has no trace id", id, data)
		}
		tree := h.trace(t, j.TraceID, append([]string{"POST /mcp", "tools/call execute_code", "job.submit", "job.enqueue", "job.process"}, runnerStages...)...)
		call := tree.one(t, "tools/call execute_code")
		tree.childOf(t, tree.one(t, "POST /mcp"), "tools/call execute_code")
		tree.childOf(t, call, "job.submit")
		tree.childOf(t, tree.one(t, "job.enqueue"), "job.process")
	})

	t.Run("a compiled language's build", func(t *testing.T) {
		if !h.sb.Runs("c") {
			storetest.Unavailable(t, "the sandbox image %s has no C compiler: build the compilers image (make image-compilers) and set GANTRY_IMAGE", h.cfg.Image)
		}
		j := h.finished(t, h.submit(t, `{"language": "c", "code": "#include <stdio.h>\nint main(void) { puts(\"built\"); return 3; }"}`).ID)
		if j.Status != jobs.StatusFailed || j.Stdout != "built\n" || j.TraceID == "" {
			t.Fatalf("job = %+v", j)
		}
		tree := h.trace(t, j.TraceID, "job.start", "job.compile", "job.run", "job.record")
		start, compile, run := tree.one(t, "job.start"), tree.one(t, "job.compile"), tree.one(t, "job.run")
		tree.childOf(t, tree.one(t, "job.process"), "job.start", "job.compile", "job.run")
		if attr(compile, "process.exit.code") != "0" || attr(run, "process.exit.code") != "3" ||
			start.EndTime().After(compile.StartTime()) || compile.EndTime().After(run.StartTime()) {
			t.Errorf("compile %v %s–%s, run %v %s–%s", compile.Attributes(), compile.StartTime(), compile.EndTime(),
				run.Attributes(), run.StartTime(), run.EndTime())
		}
	})

	t.Run("a session's job", func(t *testing.T) {
		var sess jobs.Session
		if err := json.Unmarshal(h.do(t, "POST", "/v1/sessions", `{"language": "python"}`), &sess); err != nil {
			t.Fatal(err)
		}
		var jobsOf []jobs.Job
		for i := range 2 {
			j := h.submit(t, fmt.Sprintf(`{"language": "python", "session_id": %q, "code": "open('n', 'a').write('x')\nprint(len(open('n').read()))"}`, sess.ID))
			j = h.finished(t, j.ID)
			if j.Status != jobs.StatusSucceeded || j.Stdout != fmt.Sprintf("%d\n", i+1) || j.TraceID == "" {
				t.Fatalf("job %d = %+v", i, j)
			}
			jobsOf = append(jobsOf, j)
		}
		if jobsOf[0].TraceID == jobsOf[1].TraceID {
			t.Fatalf("two jobs of a session share trace %s", jobsOf[0].TraceID)
		}
		for _, j := range jobsOf {
			// Each job is its own trace, whichever message woke the
			// session's owner.
			tree := h.trace(t, j.TraceID, "job.enqueue", "job.process", "job.restore", "job.start", "job.run", "job.snapshot", "job.record")
			process := tree.one(t, "job.process")
			tree.childOf(t, tree.one(t, "job.enqueue"), "job.process")
			tree.childOf(t, process, "job.restore", "job.start", "job.run", "job.snapshot", "job.record")
			if attr(process, "gantry.session.id") != sess.ID || attr(process, "gantry.job.id") != j.ID {
				t.Errorf("session job's span: %v", process.Attributes())
			}
		}
	})
}

// TestTracesHandedBack: a job's message handed back (another runner still
// held the job) and then taken over is two job.process spans of the job's
// one trace: the hand-back, and the attempt that ran it.
func TestTracesHandedBack(t *testing.T) {
	h := newTraceHarness(t)
	j := h.submit(t, `{"language": "bash", "code": "echo taken over"}`)
	// Another runner has it and beats, until this runner gave it back.
	if _, ok, err := storetest.Claim(h.d.store, j.ID, "elsewhere"); !ok || err != nil {
		t.Fatalf("claim as another runner: %v %v", ok, err)
	}
	ctx, stopBeating := context.WithCancel(context.Background())
	beating := make(chan struct{})
	go func() {
		defer close(beating)
		for eventually.Pause(ctx, 200*time.Millisecond) {
			if _, err := h.d.store.Heartbeat(ctx, j.ID, 1); err != nil && ctx.Err() == nil {
				t.Errorf("heartbeat: %v", err)
			}
		}
	}()
	t.Cleanup(func() { stopBeating(); <-beating })
	h.startRunner(t)
	eventually.True(t, time.Minute, "a hand-back of the busy job", func() bool {
		for _, s := range h.rec.Ended() {
			if s.Name() == "job.process" && slices.ContainsFunc(s.Events(), func(e sdktrace.Event) bool { return e.Name == "handed back" }) {
				return true
			}
		}
		return false
	})
	stopBeating()
	<-beating

	j = h.finished(t, j.ID)
	if j.Status != jobs.StatusSucceeded || j.Attempt != 2 || j.TraceID == "" {
		t.Fatalf("job = %+v", j)
	}
	tree := h.trace(t, j.TraceID, "job.enqueue", "job.run", "job.record")
	enqueue := tree.one(t, "job.enqueue")
	var handedBack, ran int
	for _, p := range tree.named("job.process") {
		if p.Parent().SpanID() != enqueue.SpanContext().SpanID() {
			t.Errorf("an attempt's span is not under job.enqueue:\n%s", tree)
		}
		switch {
		case attr(p, "gantry.job.attempt") == "2" && attr(p, "gantry.job.status") == "succeeded":
			ran++
		case slices.ContainsFunc(p.Events(), func(e sdktrace.Event) bool { return e.Name == "handed back" }):
			handedBack++
		}
	}
	if ran != 1 || handedBack < 1 {
		t.Errorf("%d attempts ran, %d handed back:\n%s", ran, handedBack, tree)
	}
	if got := tree.named("job.claim"); len(got) < 2 || !slices.ContainsFunc(got, func(s sdktrace.ReadOnlySpan) bool { return attr(s, "gantry.outcome") == "busy" }) {
		t.Errorf("claims: %v", tree)
	}
}

// TestTracesOff: without a collector named, nothing is recorded, no job
// has a trace id and no run message carries a traceparent.
func TestTracesOff(t *testing.T) {
	for _, k := range []string{"GANTRY_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		t.Setenv(k, "")
	}
	cfg, err := loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	p, err := tracing.New(context.Background(), cfg.Traces)
	if err != nil {
		t.Fatal(err)
	}
	ctx, span := p.Tracer("t").Start(context.Background(), "job.submit")
	defer span.End()
	if span.IsRecording() || tracing.Traceparent(ctx) != "" {
		t.Errorf("tracing off recorded a span (%v) or made a traceparent (%q)", span.IsRecording(), tracing.Traceparent(ctx))
	}
}

// syncBuffer is a log destination tests read while the parts write.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// hasLine reports whether a line holds every part.
func (b *syncBuffer) hasLine(parts ...string) bool {
	for line := range strings.SplitSeq(b.String(), "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}
