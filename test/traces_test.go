package test

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
)

// collector is an OTLP/HTTP trace receiver, as an OpenTelemetry
// Collector's otlp receiver answers at /v1/traces: it decodes each
// ExportTraceServiceRequest and keeps its spans with their resources'
// service names.
type collector struct {
	*httptest.Server
	mu    sync.Mutex
	spans []recvSpan
	bad   []string // what it could not read
}

type recvSpan struct {
	*tracepb.Span
	service string
}

func newCollector(t *testing.T) *collector {
	c := &collector{}
	c.Server = httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(c.Close)
	return c
}

func (c *collector) serve(w http.ResponseWriter, r *http.Request) {
	body := io.Reader(r.Body)
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	var req coltracepb.ExportTraceServiceRequest
	if err == nil && (r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf") {
		err = fmt.Errorf("%s %s as %s", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
	}
	if err == nil {
		err = proto.Unmarshal(raw, &req)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.bad = append(c.bad, err.Error())
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				c.spans = append(c.spans, recvSpan{s, service})
			}
		}
	}
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// trace is what arrived of one trace.
func (c *collector) trace(traceID string) recvTrace {
	c.mu.Lock()
	defer c.mu.Unlock()
	var tr recvTrace
	for _, s := range c.spans {
		if hex.EncodeToString(s.GetTraceId()) == traceID {
			tr = append(tr, s)
		}
	}
	return tr
}

// linkedTo is what arrived of spans linked to a trace.
func (c *collector) linkedTo(traceID string) []recvSpan {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []recvSpan
	for _, s := range c.spans {
		for _, l := range s.GetLinks() {
			if hex.EncodeToString(l.GetTraceId()) == traceID {
				out = append(out, s)
			}
		}
	}
	return out
}

type recvTrace []recvSpan

func (tr recvTrace) named(name string) []recvSpan {
	var out []recvSpan
	for _, s := range tr {
		if s.GetName() == name {
			out = append(out, s)
		}
	}
	return out
}

func (tr recvTrace) has(names ...string) bool {
	for _, n := range names {
		if len(tr.named(n)) == 0 {
			return false
		}
	}
	return true
}

func (tr recvTrace) String() string {
	var b strings.Builder
	for _, s := range tr {
		fmt.Fprintf(&b, "  %s %x parent %x\n", s.GetName(), s.GetSpanId(), s.GetParentSpanId())
	}
	return b.String()
}

func spanAttr(s recvSpan, key string) string {
	for _, kv := range s.GetAttributes() {
		if kv.GetKey() == key {
			v := kv.GetValue()
			if v.GetStringValue() != "" {
				return v.GetStringValue()
			}
			return fmt.Sprint(v.GetIntValue())
		}
	}
	return ""
}

// TestTracesReachACollector: with OTEL_EXPORTER_OTLP_ENDPOINT set, one
// job's spans — from the request that submitted it through its publish,
// the runner's claim, the container, the sandbox's start, the program's
// run and the upload of its file to its recorded result — arrive at an
// OTLP collector as one trace, each under its parent; the job and the log
// lines about it name the trace, and its webhook's delivery links to it.
func TestTracesReachACollector(t *testing.T) {
	col := newCollector(t)
	var hookTraceparent string
	var hookMu sync.Mutex
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hookMu.Lock()
		hookTraceparent = r.Header.Get("traceparent")
		hookMu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(hook.Close)
	d := startDev(t, "OTEL_EXPORTER_OTLP_ENDPOINT="+col.URL, "OTEL_BSP_SCHEDULE_DELAY=100", "OTEL_SERVICE_NAME=gantry-e2e")

	j := d.submit(t, map[string]any{"language": "python", "code": "open('out/result.txt', 'w').write('42')\nprint('done')",
		"env": map[string]string{"API_TOKEN": "tok-never-in-a-span"}, "webhook_url": hook.URL + "/h"})
	if len(j.TraceID) != 32 {
		t.Fatalf("the queued job's trace_id is %q", j.TraceID)
	}
	j = d.await(t, j.ID, 2*time.Minute, terminal)
	if j.Status != jobs.StatusSucceeded || len(j.Artifacts) != 1 {
		t.Fatalf("job = %+v", j)
	}

	stages := []string{"job.claim", "job.acquire", "job.start", "job.run", "job.collect", "job.record"}
	want := append([]string{"POST /v1/jobs", "job.submit", "job.enqueue", "job.process"}, stages...)
	var tr recvTrace
	if !eventually.Within(time.Minute, func() bool { tr = col.trace(j.TraceID); return tr.has(want...) }) {
		col.mu.Lock()
		bad := col.bad
		col.mu.Unlock()
		t.Fatalf("the collector has of trace %s:\n%s(want %v; unreadable exports: %v)", j.TraceID, tr, want, bad)
	}
	one := func(name string) recvSpan {
		got := tr.named(name)
		if len(got) != 1 {
			t.Fatalf("%d spans named %s:\n%s", len(got), name, tr)
		}
		return got[0]
	}
	under := func(parent recvSpan, names ...string) {
		for _, n := range names {
			if s := one(n); string(s.GetParentSpanId()) != string(parent.GetSpanId()) {
				t.Errorf("%s's parent is %x, want %s %x:\n%s", n, s.GetParentSpanId(), parent.GetName(), parent.GetSpanId(), tr)
			}
		}
	}
	root := one("POST /v1/jobs")
	if len(root.GetParentSpanId()) != 0 || root.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("the request's span: parent %x, kind %v", root.GetParentSpanId(), root.GetKind())
	}
	under(root, "job.submit")
	under(one("job.submit"), "job.enqueue")
	under(one("job.enqueue"), "job.process")
	under(one("job.process"), stages...)
	process := one("job.process")
	if spanAttr(process, "gantry.job.id") != j.ID || spanAttr(process, "gantry.job.status") != "succeeded" ||
		spanAttr(process, "gantry.job.attempt") != "1" || process.service != "gantry-e2e" {
		t.Errorf("job.process: service %q, attributes %v", process.service, process.GetAttributes())
	}
	for _, s := range tr {
		if strings.Contains(s.String(), "tok-never-in-a-span") || strings.Contains(s.String(), d.key) {
			t.Errorf("span %s tells a secret: %v", s.GetName(), s)
		}
	}

	// The webhook's delivery is a trace of its own, linked to the job's,
	// and its receiver was sent the delivery's traceparent.
	var deliveries []recvSpan
	if !eventually.Within(time.Minute, func() bool { deliveries = col.linkedTo(j.TraceID); return len(deliveries) > 0 }) {
		t.Fatalf("no span linked to the job's trace arrived (the webhook's delivery)")
	}
	hookMu.Lock()
	tp := hookTraceparent
	hookMu.Unlock()
	if deliveries[0].GetName() != "webhook.deliver" || !strings.Contains(tp, hex.EncodeToString(deliveries[0].GetTraceId())) {
		t.Errorf("linked span %s in trace %x; the receiver got traceparent %q", deliveries[0].GetName(), deliveries[0].GetTraceId(), tp)
	}

	// The log lines about the job name its trace.
	for _, msg := range []string{"job started", "job finished"} {
		re := regexp.MustCompile(`msg="` + msg + `".*job_id=` + j.ID + `.*trace_id=` + j.TraceID)
		if !re.MatchString(d.output()) {
			t.Errorf("no %q log line with the job's trace id", msg)
		}
	}
}
