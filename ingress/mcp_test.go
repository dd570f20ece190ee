package ingress_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go"

	"github.com/gantryhq/gantry/blob"
	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
	"github.com/gantryhq/gantry/store/storetest"
)

// mcpClient connects an MCP client over streamable HTTP with the key.
func (h *harness) mcpClient(t *testing.T, key, version string) *client.Client {
	t.Helper()
	c, err := client.NewStreamableHttpClient(h.url+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + key}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = version
	init.Params.ClientInfo = mcp.Implementation{Name: "gantry-test", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatalf("initialize (%s): %v", version, err)
	}
	return c
}

func call(t *testing.T, c *client.Client, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(context.Background(), req)
	if err != nil {
		t.Fatalf("%s: protocol error %v", name, err)
	}
	return res
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func structured(t *testing.T, res *mcp.CallToolResult, v any) {
	t.Helper()
	data, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("structured content %s: %v", data, err)
	}
}

type mcpJob struct {
	JobID     string      `json:"job_id"`
	Status    jobs.Status `json:"status"`
	ExitCode  *int        `json:"exit_code"`
	Stdout    string      `json:"stdout"`
	Artifacts []struct {
		Path, URL string
	} `json:"artifacts"`
}

// fakeRunner finishes every queued job: it prints two chunks of output on
// the log subject, stores an artifact and records success.
func (h *harness) fakeRunner(t *testing.T) {
	sub, err := h.nc.Subscribe(queue.SubjectTenantAll, func(m *nats.Msg) {
		var rm queue.RunMessage
		_ = json.Unmarshal(m.Data, &rm)
		go func() {
			ctx := context.Background()
			// The message can arrive before the row commits: retry briefly.
			if !eventually.Within(time.Second, func() bool {
				_, ok, _ := storetest.Claim(h.st, rm.JobID, "fake")
				return ok
			}) {
				return // not a job to run (a session's message, a cancelled job)
			}
			if err := h.announce(rm.JobID, jobs.StatusRunning); err != nil {
				t.Error(err)
				return
			}
			// A call that streams its output follows the job's log subject
			// once it knows the job: give it the chance (one that does not
			// stream costs this wait).
			eventually.Within(500*time.Millisecond, func() bool {
				return h.ns.GlobalAccount().SubscriptionInterest(queue.LogSubject(rm.JobID))
			})
			for i, chunk := range []string{"hello\n", "world\n"} {
				lm := nats.NewMsg(queue.LogSubject(rm.JobID))
				lm.Header.Set(queue.HeaderStream, "stdout")
				lm.Header.Set(queue.HeaderOffset, strconv.Itoa(i*6))
				lm.Data = []byte(chunk)
				_ = h.nc.PublishMsg(lm)
			}
			content := "png-bytes"
			_ = h.blobs.Put(ctx, blob.ArtifactKey(rm.TenantID, rm.JobID, "out/plot.png"), strings.NewReader(content), int64(len(content)), "image/png")
			code := 0
			_, _ = h.st.FinishJob(ctx, rm.JobID, 1, jobs.Result{Status: jobs.StatusSucceeded, ExitCode: &code, Stdout: []byte("hello\nworld\n"),
				Artifacts: []jobs.Artifact{{Path: "out/plot.png", Size: int64(len(content)), SHA256: fmt.Sprintf("%x", sha256.Sum256([]byte(content))), ContentType: "image/png"}}})
			if err := h.announce(rm.JobID, jobs.StatusSucceeded); err != nil {
				t.Error(err)
			}
		}()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
}

func TestMCPUnauthenticated(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, key := range []string{"", "gk_wrong_key_00000000"} {
		req, _ := http.NewRequest("POST", h.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 401 || !strings.Contains(string(body), "unauthenticated") {
			t.Errorf("key %q: %d %s", key, resp.StatusCode, body)
		}
	}
}

func TestMCPMalformedJSONRPC(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	req, _ := http.NewRequest("POST", h.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+h.keyA)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"error"`) || !strings.Contains(string(body), "-32700") {
		t.Errorf("malformed JSON-RPC: %d %s", resp.StatusCode, body)
	}
}

func TestMCP(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.fakeRunner(t)
	for _, version := range []string{mcp.ProtocolVersion20250326, mcp.ProtocolVersion20250618, mcp.ProtocolVersion20251125, mcp.ProtocolVersion20260728} {
		t.Run(version, func(t *testing.T) { testMCP(t, h, version) })
	}
}

func testMCP(t *testing.T, h *harness, version string) {
	c := h.mcpClient(t, h.keyA, version)
	ctx := context.Background()

	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]mcp.Tool{}
	for _, tool := range tools.Tools {
		byName[tool.Name] = tool
	}
	for _, name := range []string{"execute_code", "submit_job", "get_job", "cancel_job", "list_jobs", "get_artifact_url"} {
		tool, ok := byName[name]
		if !ok {
			t.Fatalf("tool %s missing", name)
		}
		if tool.Description == "" || (len(tool.RawInputSchema) == 0 && tool.InputSchema.Type == "") {
			t.Errorf("tool %s lacks a description or schema", name)
		}
	}
	if ro := byName["get_job"].Annotations.ReadOnlyHint; ro == nil || !*ro {
		t.Error("get_job is not marked read-only")
	}
	if d := byName["execute_code"].Annotations.DestructiveHint; d == nil || *d {
		t.Error("execute_code claims to be destructive")
	}

	t.Run("execute_code with progress", func(t *testing.T) {
		var mu sync.Mutex
		var progress []string
		c.OnNotification(func(n mcp.JSONRPCNotification) {
			if n.Method == "notifications/progress" {
				mu.Lock()
				progress = append(progress, n.Params.AdditionalFields["message"].(string))
				mu.Unlock()
			}
		})
		req := mcp.CallToolRequest{}
		req.Params.Name = "execute_code"
		req.Params.Arguments = map[string]any{"language": "python", "code": "print('hello'); print('world')"}
		req.Params.Meta = &mcp.Meta{ProgressToken: "tok-" + version}
		res, err := c.CallTool(ctx, req)
		if err != nil || res.IsError {
			t.Fatalf("execute_code: %v %s", err, text(res))
		}
		var j mcpJob
		structured(t, res, &j)
		if j.Status != jobs.StatusSucceeded || j.Stdout != "hello\nworld\n" || len(j.Artifacts) != 1 {
			t.Fatalf("result %+v", j)
		}
		if !strings.Contains(text(res), "hello\nworld") || !strings.Contains(text(res), j.Artifacts[0].URL) {
			t.Errorf("text content:\n%s", text(res))
		}
		resp, err := http.Get(j.Artifacts[0].URL)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "png-bytes" {
			t.Errorf("artifact download: %d %q", resp.StatusCode, body)
		}
		// All the output, in order, each byte once, however it was cut
		// (a short job's output may come before the call follows it, and
		// then comes from the job's record, in one piece).
		mu.Lock()
		defer mu.Unlock()
		var out strings.Builder
		for _, m := range progress {
			text, ok := strings.CutPrefix(m, "stdout: ")
			if !ok {
				t.Errorf("progress notification %q", m)
			}
			out.WriteString(text)
		}
		if out.String() != "hello\nworld\n" {
			t.Errorf("progress notifications %q", progress)
		}
	})

	t.Run("job tools", func(t *testing.T) {
		res := call(t, c, "submit_job", map[string]any{"language": "bash", "code": "echo hi", "idempotency_key": "k-" + version})
		var j mcpJob
		structured(t, res, &j)
		if res.IsError || j.JobID == "" {
			t.Fatalf("submit_job: %s", text(res))
		}
		res = call(t, c, "get_job", map[string]any{"job_id": j.JobID, "wait_ms": 10000})
		structured(t, res, &j)
		if j.Status != jobs.StatusSucceeded {
			t.Fatalf("get_job: %s", text(res))
		}
		res = call(t, c, "get_artifact_url", map[string]any{"job_id": j.JobID, "path": "out/plot.png"})
		if res.IsError || !strings.HasPrefix(text(res), "http") {
			t.Errorf("get_artifact_url: %s", text(res))
		}
		res = call(t, c, "list_jobs", map[string]any{"limit": 2})
		if res.IsError || !strings.Contains(text(res), j.JobID) {
			t.Errorf("list_jobs: %s", text(res))
		}
		res = call(t, c, "cancel_job", map[string]any{"job_id": j.JobID}) // finished: a no-op
		structured(t, res, &j)
		if res.IsError || j.Status != jobs.StatusSucceeded {
			t.Errorf("cancel_job of a finished job: %s", text(res))
		}
	})

	t.Run("bad arguments are tool errors", func(t *testing.T) {
		for _, c2 := range []struct {
			tool string
			args map[string]any
			want string
		}{
			{"execute_code", map[string]any{"language": "cobol", "code": "x"}, "language"},
			{"execute_code", map[string]any{"language": "python"}, "code"},
			{"execute_code", map[string]any{"language": "python", "code": "x", "timeout_ms": "soon"}, "timeout_ms"},
			{"execute_code", map[string]any{"language": "python", "code": "x", "extra": 1}, "extra"},
			{"execute_code", map[string]any{"language": "python", "code": strings.Repeat("x", 32<<10+1)}, "code"},
			{"execute_code", map[string]any{"language": "python", "code": "x", "files": []any{map[string]any{"path": "../x", "content": ""}}}, "workspace"},
			{"get_job", map[string]any{"job_id": "job_nope"}, "not found"},
			{"get_job", map[string]any{}, "job_id"},
			{"get_artifact_url", map[string]any{"job_id": jobs.NewID("job"), "path": "out/x"}, "not found"},
		} {
			res := call(t, c, c2.tool, c2.args)
			if !res.IsError || !strings.Contains(text(res), c2.want) {
				t.Errorf("%s %v: isError=%v %q", c2.tool, c2.args, res.IsError, text(res))
			}
		}
	})

	t.Run("prompt and resources", func(t *testing.T) {
		pr := mcp.GetPromptRequest{}
		pr.Params.Name = "agent_system_prompt"
		prompt, err := c.GetPrompt(ctx, pr)
		if err != nil || len(prompt.Messages) == 0 {
			t.Fatalf("prompt: %v", err)
		}
		body := prompt.Messages[0].Content.(mcp.TextContent).Text
		for _, want := range []string{"execute_code", "out/", "python", "no network"} {
			if !strings.Contains(body, want) {
				t.Errorf("prompt lacks %q", want)
			}
		}
		list, err := c.ListResources(ctx, mcp.ListResourcesRequest{})
		if err != nil || len(list.Resources) == 0 {
			t.Fatalf("resources: %v %+v", err, list)
		}
		rr := mcp.ReadResourceRequest{}
		for _, r := range list.Resources {
			if strings.HasPrefix(r.URI, "gantry://jobs/") {
				rr.Params.URI = r.URI
				break
			}
		}
		read, err := c.ReadResource(ctx, rr)
		if err != nil || len(read.Contents) != 1 || !strings.Contains(read.Contents[0].(mcp.TextResourceContents).Text, `"status"`) {
			t.Fatalf("read %s: %v", rr.Params.URI, err)
		}
		templates, err := c.ListResourceTemplates(ctx, mcp.ListResourceTemplatesRequest{})
		if err != nil || len(templates.ResourceTemplates) != 2 {
			t.Errorf("templates: %v", err)
		}
	})
}

func TestMCPTenantIsolation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a := h.mcpClient(t, h.keyA, mcp.LATEST_PROTOCOL_VERSION)
	b := h.mcpClient(t, h.keyB, mcp.LATEST_PROTOCOL_VERSION)
	var j mcpJob
	structured(t, call(t, a, "submit_job", map[string]any{"language": "python", "code": "print(1)"}), &j)
	for _, tool := range []string{"get_job", "cancel_job"} {
		if res := call(t, b, tool, map[string]any{"job_id": j.JobID}); !res.IsError || !strings.Contains(text(res), "not found") {
			t.Errorf("tenant b %s on a's job: %s", tool, text(res))
		}
	}
	if res := call(t, b, "list_jobs", map[string]any{}); strings.Contains(text(res), j.JobID) {
		t.Error("tenant b lists a's job")
	}
	rr := mcp.ReadResourceRequest{}
	rr.Params.URI = "gantry://jobs/" + j.JobID
	if _, err := b.ReadResource(context.Background(), rr); err == nil {
		t.Error("tenant b read a's job resource")
	}
	list, _ := b.ListResources(context.Background(), mcp.ListResourcesRequest{})
	for _, r := range list.Resources {
		if strings.Contains(r.URI, j.JobID) {
			t.Error("tenant b lists a's job resource")
		}
	}
}

func TestMCPCancelledCallCancelsJob(t *testing.T) {
	t.Parallel()
	h := newHarness(t) // no runner: the job stays queued until cancelled
	c := h.mcpClient(t, h.keyA, mcp.LATEST_PROTOCOL_VERSION)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		req := mcp.CallToolRequest{}
		req.Params.Name = "execute_code"
		req.Params.Arguments = map[string]any{"language": "python", "code": "print(1)"}
		_, _ = c.CallTool(ctx, req)
	}()
	var id string
	eventually.True(t, 10*time.Second, "execute_code to queue a job", func() bool {
		var list struct{ Jobs []jobs.Job }
		h.do(t, h.keyA, "GET", "/v1/jobs", "").json(t, &list)
		if len(list.Jobs) > 0 {
			id = list.Jobs[0].ID
		}
		return id != ""
	})
	cancel()
	<-done
	h.waitStatus(t, id, jobs.StatusCancelled)
}
