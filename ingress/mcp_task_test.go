package ingress_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gantryhq/gantry/ingress"
	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
)

// rawMCP speaks JSON-RPC over streamable HTTP by hand, for the parts of the
// protocol the client library does not drive (task-augmented calls).
type rawMCP struct {
	t   *testing.T
	h   *harness
	sid string
	id  int
	// path is the MCP URL's path and query ("/mcp" when empty); hdr is
	// added to every request.
	path string
	hdr  map[string]string
	// modern speaks the sessionless 2026-07-28 protocol: every request
	// carries its version and capabilities in _meta and the standard
	// headers. tasksExt declares the tasks extension there.
	modern, tasksExt bool
	// status is the HTTP status of the last answer.
	status int
}

func (c *rawMCP) call(method string, params any) json.RawMessage {
	c.t.Helper()
	res, errMsg := c.send(method, params)
	if errMsg != "" {
		c.t.Fatalf("%s: %s", method, errMsg)
	}
	return res
}

// callError sends a request that must fail, and returns its error.
func (c *rawMCP) callError(method string, params any) string {
	c.t.Helper()
	_, errMsg := c.send(method, params)
	if errMsg == "" {
		c.t.Fatalf("%s succeeded", method)
	}
	return errMsg
}

func (c *rawMCP) send(method string, params any) (json.RawMessage, string) {
	c.t.Helper()
	c.id++
	version := "2025-11-25"
	if c.modern {
		version = modernVersion
		p, _ := params.(map[string]any)
		if p == nil {
			p = map[string]any{}
		}
		caps := map[string]any{}
		if c.tasksExt {
			caps["extensions"] = map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}
		}
		p["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": version, "io.modelcontextprotocol/clientCapabilities": caps,
			"io.modelcontextprotocol/clientInfo": map[string]any{"name": "raw", "version": "1"}}
		params = p
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.id, "method": method, "params": params})
	path := c.path
	if path == "" {
		path = "/mcp"
	}
	req, _ := http.NewRequest("POST", c.h.url+path, strings.NewReader(string(body)))
	for k, v := range c.hdr {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+c.h.keyA)
	req.Header.Set("Mcp-Protocol-Version", version)
	if c.modern {
		req.Header.Set("Mcp-Method", method)
		p, _ := params.(map[string]any)
		switch {
		case method == "tools/call":
			req.Header.Set("Mcp-Name", fmt.Sprint(p["name"]))
		case strings.HasPrefix(method, "tasks/"):
			req.Header.Set("Mcp-Name", fmt.Sprint(p["taskId"]))
		}
	}
	if c.sid != "" {
		req.Header.Set("Mcp-Session-Id", c.sid)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	c.status = resp.StatusCode
	if v := resp.Header.Get("Mcp-Session-Id"); v != "" {
		c.sid = v
	}
	raw, _ := io.ReadAll(resp.Body)
	// The answer is JSON or an event stream whose last data line is the answer.
	for _, line := range strings.Split(string(raw), "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			raw = []byte(d)
		}
	}
	var msg struct {
		ID     int             `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(raw, &msg); err == nil && msg.ID != c.id {
		return nil, fmt.Sprintf("answer to request %d, not %d: %s", msg.ID, c.id, raw)
	}
	if err := json.Unmarshal(raw, &msg); err != nil || msg.Error != nil {
		return nil, string(raw)
	}
	return msg.Result, ""
}

const modernVersion = "2026-07-28"

// legacyClient is a 2025-11-25 client that initialized on h (its session
// id is sent along, wherever it goes).
func legacyClient(t *testing.T, h *harness) *rawMCP {
	c := &rawMCP{t: t, h: h}
	c.call("initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{"tasks": map[string]any{}},
		"clientInfo": map[string]any{"name": "raw", "version": "1"}})
	return c
}

// on is the same client talking to another replica.
func (c *rawMCP) on(h *harness) *rawMCP {
	d := *c
	d.h = h
	return &d
}

func startTask(t *testing.T, c *rawMCP, code string) string {
	t.Helper()
	var created struct {
		Task struct {
			TaskID       string `json:"taskId"`
			Status       string `json:"status"`
			PollInterval int    `json:"pollInterval"`
		} `json:"task"`
	}
	_ = json.Unmarshal(c.call("tools/call", map[string]any{"name": "execute_code",
		"arguments": map[string]any{"language": "python", "code": code}, "task": map[string]any{}}), &created)
	if !jobs.ValidID("job", created.Task.TaskID) || created.Task.Status != "working" || created.Task.PollInterval != 1000 {
		t.Fatalf("task-augmented call did not create a task that is a job: %+v", created)
	}
	return created.Task.TaskID
}

type taskView struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage"`
	ResultType    string `json:"resultType"`
	CreatedAt     string `json:"createdAt"`
	TTL           *int64 `json:"ttl"`
	TTLMs         *int64 `json:"ttlMs"`
	Result        *struct {
		IsError           bool   `json:"isError"`
		StructuredContent mcpJob `json:"structuredContent"`
	} `json:"result"`
}

func getTask(t *testing.T, c *rawMCP, id string) taskView {
	t.Helper()
	var v taskView
	if err := json.Unmarshal(c.call("tasks/get", map[string]any{"taskId": id}), &v); err != nil {
		t.Fatal(err)
	}
	if v.TaskID != id {
		t.Fatalf("tasks/get %s answered task %q", id, v.TaskID)
	}
	return v
}

func waitTask(t *testing.T, c *rawMCP, id string) taskView {
	t.Helper()
	var v taskView
	eventually.True(t, 15*time.Second, "the task to stop working", func() bool {
		v = getTask(t, c, id)
		return v.Status != "working"
	})
	return v
}

// A task is its job: created on one replica, it is polled, read and listed
// on another, as behind a load balancer without sticky routing.
func TestMCPTaskAcrossReplicas(t *testing.T) {
	t.Parallel()
	a := newHarness(t)
	b := a.replica(t)
	a.fakeRunner(t)
	ca := legacyClient(t, a)
	id := startTask(t, ca, "print('hello')")
	cb := ca.on(b)
	if v := waitTask(t, cb, id); v.Status != "completed" || v.TTL != nil {
		t.Fatalf("task on the other replica: %+v", v)
	}
	var res struct {
		IsError           bool   `json:"isError"`
		StructuredContent mcpJob `json:"structuredContent"`
		Meta              map[string]struct {
			TaskID string `json:"taskId"`
		} `json:"_meta"`
	}
	_ = json.Unmarshal(cb.call("tasks/result", map[string]any{"taskId": id}), &res)
	if res.IsError || res.StructuredContent.Status != jobs.StatusSucceeded || res.StructuredContent.Stdout != "hello\nworld\n" ||
		res.StructuredContent.JobID != id || res.Meta["io.modelcontextprotocol/related-task"].TaskID != id {
		t.Fatalf("tasks/result on the other replica: %+v", res)
	}
	var list struct {
		Tasks []struct{ TaskID, Status string } `json:"tasks"`
	}
	_ = json.Unmarshal(cb.call("tasks/list", map[string]any{}), &list)
	if len(list.Tasks) != 1 || list.Tasks[0].TaskID != id || list.Tasks[0].Status != "completed" {
		t.Errorf("tasks/list on the other replica: %+v", list)
	}
	// Another tenant's task is unknown, and so is a made-up one.
	other := &rawMCP{t: t, h: &harness{url: b.url, keyA: b.keyB}}
	for _, tid := range []string{id, "job_nope"} {
		if msg := other.callError("tasks/get", map[string]any{"taskId": tid}); !strings.Contains(msg, "-32602") || !strings.Contains(msg, "not found") {
			t.Errorf("tasks/get of %s by another tenant: %s", tid, msg)
		}
	}
}

func TestMCPTaskCancelAcrossReplicas(t *testing.T) {
	t.Parallel()
	a := newHarness(t) // no runner: the job waits in the queue
	b := a.replica(t)
	ca := legacyClient(t, a)
	id := startTask(t, ca, "print(1)")
	a.waitStatus(t, id, jobs.StatusQueued)
	var cancelled taskView
	_ = json.Unmarshal(ca.on(b).call("tasks/cancel", map[string]any{"taskId": id}), &cancelled)
	if cancelled.Status != "cancelled" {
		t.Errorf("tasks/cancel answered %+v", cancelled)
	}
	a.waitStatus(t, id, jobs.StatusCancelled)
	if v := getTask(t, ca, id); v.Status != "cancelled" {
		t.Errorf("task after tasks/cancel on the other replica: %+v", v)
	}
	// 2025-11-25: a task that ended cannot be cancelled.
	if msg := ca.callError("tasks/cancel", map[string]any{"taskId": id}); !strings.Contains(msg, "-32602") || !strings.Contains(msg, "already ended") {
		t.Errorf("second tasks/cancel: %s", msg)
	}
}

// The tasks extension of the 2026-07-28 protocol: the server decides. A job
// that ends quickly is answered inline; a longer one becomes a task that
// any replica polls, and whose result tasks/get carries.
func TestMCPTasksExtension(t *testing.T) {
	t.Parallel()
	ttl := 24 * time.Hour
	a := newHarness(t, func(h *harness, c *ingress.Config) {
		c.TaskInlineWait = 2 * time.Second
		h.history.TTL = ttl
	})
	b := a.replica(t)
	ca := &rawMCP{t: t, h: a, modern: true, tasksExt: true}
	cb := ca.on(b)
	call := func(c *rawMCP, args map[string]any) map[string]any {
		var v map[string]any
		_ = json.Unmarshal(c.call("tools/call", args), &v)
		return v
	}
	exec := map[string]any{"name": "execute_code", "arguments": map[string]any{"language": "python", "code": "print(1)"}}

	// No runner yet: the wait runs out and the answer is a task.
	created := call(ca, exec)
	id, _ := created["taskId"].(string)
	if created["resultType"] != "task" || created["status"] != "working" || !jobs.ValidID("job", id) ||
		created["ttlMs"] != float64(ttl.Milliseconds()) || created["pollIntervalMs"] != float64(1000) {
		t.Fatalf("tools/call without a runner: %v", created)
	}
	if v := getTask(t, cb, id); v.Status != "working" || v.ResultType != "complete" || v.Result != nil {
		t.Errorf("tasks/get of a queued job: %+v", v)
	}
	// tasks/update has nothing to update, and is acknowledged.
	var ack map[string]any
	_ = json.Unmarshal(cb.call("tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{}}), &ack)
	if ack["resultType"] != "complete" {
		t.Errorf("tasks/update: %v", ack)
	}
	// Cancelled on the other replica: an acknowledgement, then the task
	// shows it.
	_ = json.Unmarshal(cb.call("tasks/cancel", map[string]any{"taskId": id}), &ack)
	if ack["resultType"] != "complete" {
		t.Errorf("tasks/cancel: %v", ack)
	}
	if v := getTask(t, ca, id); v.Status != "cancelled" || v.Result != nil {
		t.Errorf("task after tasks/cancel: %+v", v)
	}

	a.fakeRunner(t)
	// A quick job is answered inline, as a plain call.
	var inline struct {
		ResultType        string `json:"resultType"`
		StructuredContent mcpJob `json:"structuredContent"`
	}
	_ = json.Unmarshal(ca.call("tools/call", exec), &inline)
	if inline.ResultType != "complete" || inline.StructuredContent.Status != jobs.StatusSucceeded {
		t.Errorf("quick job: %+v", inline)
	}
	// Asking for a task gets one at once, whose result tasks/get carries
	// when it is done.
	exec["task"] = map[string]any{}
	created = call(ca, exec)
	id, _ = created["taskId"].(string)
	if created["resultType"] != "task" {
		t.Fatalf("tools/call with params.task: %v", created)
	}
	v := waitTask(t, cb, id)
	if v.Status != "completed" || v.Result == nil || v.Result.IsError || v.Result.StructuredContent.Stdout != "hello\nworld\n" {
		t.Errorf("completed task: %+v", v)
	}
	// 2026-07-28 has no tasks/result or tasks/list.
	for _, m := range []string{"tasks/result", "tasks/list"} {
		if msg := cb.callError(m, map[string]any{"taskId": id}); !strings.Contains(msg, "-32601") {
			t.Errorf("%s in 2026-07-28: %s", m, msg)
		}
	}

	// A client that did not declare the extension gets no task.
	plain := &rawMCP{t: t, h: b, modern: true}
	if msg := plain.callError("tasks/get", map[string]any{"taskId": id}); !strings.Contains(msg, "-32021") || plain.status != 400 {
		t.Errorf("tasks/get without the extension: %d %s", plain.status, msg)
	}
	if msg := plain.callError("tools/call", exec); !strings.Contains(msg, "-32021") {
		t.Errorf("params.task without the extension: %s", msg)
	}
	delete(exec, "task")
	if v := call(plain, exec); v["resultType"] != "complete" || v["structuredContent"] == nil {
		t.Errorf("plain call without the extension: %v", v)
	}
}
