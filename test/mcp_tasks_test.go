package test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
)

// rpc is an MCP client speaking JSON-RPC over streamable HTTP by hand (the
// client library drives no tasks), pointed at one ingress at a time.
type rpc struct {
	t        *testing.T
	url, key string
	sid      string
	id       int
	// modern speaks 2026-07-28 and declares the tasks extension.
	modern bool
}

func (c *rpc) on(url string) *rpc {
	d := *c
	d.url = url
	return &d
}

// call sends a request and returns its result, or its error as text.
func (c *rpc) call(method string, params map[string]any) (json.RawMessage, string) {
	c.t.Helper()
	c.id++
	version := "2025-11-25"
	if c.modern {
		version = "2026-07-28"
		params["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": version,
			"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "e2e", "version": "1"},
			"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}}
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.id, "method": method, "params": params})
	req, _ := http.NewRequest("POST", c.url+"/mcp", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Mcp-Protocol-Version", version)
	if c.modern {
		req.Header.Set("Mcp-Method", method)
		if n, ok := params["name"]; ok {
			req.Header.Set("Mcp-Name", fmt.Sprint(n))
		} else if id, ok := params["taskId"]; ok {
			req.Header.Set("Mcp-Name", fmt.Sprint(id))
		}
	}
	if c.sid != "" {
		req.Header.Set("Mcp-Session-Id", c.sid)
	}
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer r.Body.Close()
	if v := r.Header.Get("Mcp-Session-Id"); v != "" {
		c.sid = v
	}
	raw, _ := io.ReadAll(r.Body)
	for _, line := range strings.Split(string(raw), "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			raw = []byte(d)
		}
	}
	var msg struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(raw, &msg); err != nil || msg.Error != nil || msg.Result == nil {
		return nil, fmt.Sprintf("%d %s", r.StatusCode, raw)
	}
	return msg.Result, ""
}

func (c *rpc) must(method string, params map[string]any, v any) {
	c.t.Helper()
	res, errMsg := c.call(method, params)
	if errMsg != "" {
		c.t.Fatalf("%s: %s", method, errMsg)
	}
	if err := json.Unmarshal(res, v); err != nil {
		c.t.Fatalf("%s: %v: %s", method, err, res)
	}
}

// task is what tasks/get answers, in either protocol.
type task struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage"`
	Result        *struct {
		StructuredContent toolJob `json:"structuredContent"`
	} `json:"result"`
}

// pollTask polls tasks/get until cond holds.
func (c *rpc) pollTask(id string, within time.Duration, cond func(task) bool) task {
	c.t.Helper()
	var tk task
	if !eventually.Within(within, func() bool {
		tk = task{}
		c.must("tasks/get", map[string]any{"taskId": id}, &tk)
		return cond(tk)
	}) {
		c.t.Fatalf("task %s: %+v after %s", id, tk, within)
	}
	return tk
}

// TestMCPTasksAcrossReplicas: behind a load balancer without sticky
// routing, a task created on one ingress is polled, read and cancelled on
// another. `gantry dev` is one ingress (with the runner); a second
// `gantry ingress` joins the same engines.
func TestMCPTasksAcrossReplicas(t *testing.T) {
	d := startDev(t, "GANTRY_RUNNER_SLOTS=2")
	replica := start(t, append(d.env, "GANTRY_ADDR=127.0.0.1:0"), "ingress")
	b := "http://" + replica.waitOutput(t, regexp.MustCompile(`ingress listening.*addr=(\S+)`), time.Minute)[1]

	// 2025-11-25: the client initializes on A and asks for a task there.
	a := &rpc{t: t, url: d.url, key: d.key}
	var init map[string]any
	a.must("initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{"tasks": map[string]any{}},
		"clientInfo": map[string]any{"name": "e2e", "version": "1"}}, &init)
	start := func(c *rpc, code string) string {
		t.Helper()
		var created struct{ Task task }
		c.must("tools/call", map[string]any{"name": "execute_code", "task": map[string]any{},
			"arguments": map[string]any{"language": "python", "code": code}}, &created)
		if created.Task.Status != "working" || !jobs.ValidID("job", created.Task.TaskID) {
			t.Fatalf("no task: %+v", created)
		}
		return created.Task.TaskID
	}
	id := start(a, "print('from a task')")
	onB := a.on(b)
	if tk := onB.pollTask(id, 2*time.Minute, func(tk task) bool { return tk.Status != "working" }); tk.Status != "completed" {
		t.Fatalf("task polled on B: %+v", tk)
	}
	var res struct {
		StructuredContent toolJob `json:"structuredContent"`
	}
	onB.must("tasks/result", map[string]any{"taskId": id}, &res)
	if res.StructuredContent.Status != jobs.StatusSucceeded || res.StructuredContent.Stdout != "from a task\n" {
		t.Fatalf("tasks/result on B: %+v", res)
	}

	// A long task created on A is cancelled on B: the job stops.
	id = start(a, "import os\nprint('started', flush=True)\nos.system('sleep 301')")
	onB.pollTask(id, time.Minute, func(tk task) bool { return tk.StatusMessage == "running" })
	ctr := d.containerRunning(t, "sleep 301")
	var cancelled task
	onB.must("tasks/cancel", map[string]any{"taskId": id}, &cancelled)
	if cancelled.Status != "cancelled" {
		t.Errorf("tasks/cancel on B answered %+v", cancelled)
	}
	if j := d.await(t, id, 30*time.Second, terminal); j.Status != jobs.StatusCancelled {
		t.Errorf("job after tasks/cancel on B: %+v", j)
	}
	waitGone(t, ctr)

	// 2026-07-28 with the tasks extension: no session at all. A job that
	// outlives the server's inline wait becomes a task; B took the call,
	// A polls and cancels it.
	m := &rpc{t: t, url: b, key: d.key, modern: true}
	var created task
	m.must("tools/call", map[string]any{"name": "execute_code",
		"arguments": map[string]any{"language": "bash", "code": "echo started; sleep 300"}}, &created)
	if created.Status != "working" || !jobs.ValidID("job", created.TaskID) {
		t.Fatalf("a long job under the tasks extension: %+v", created)
	}
	onA := m.on(d.url)
	onA.pollTask(created.TaskID, time.Minute, func(tk task) bool { return tk.StatusMessage == "running" })
	var ack map[string]any
	onA.must("tasks/cancel", map[string]any{"taskId": created.TaskID}, &ack)
	if tk := m.pollTask(created.TaskID, 30*time.Second, func(tk task) bool { return tk.Status != "working" }); tk.Status != "cancelled" {
		t.Errorf("task after tasks/cancel on A, polled on B: %+v", tk)
	}
	// A quick job is answered inline, and its result is the job's.
	var inline struct {
		ResultType        string  `json:"resultType"`
		StructuredContent toolJob `json:"structuredContent"`
	}
	onA.must("tools/call", map[string]any{"name": "execute_code",
		"arguments": map[string]any{"language": "python", "code": "print(6*7)"}}, &inline)
	if inline.ResultType != "complete" || inline.StructuredContent.Stdout != "42\n" {
		t.Errorf("a quick job under the tasks extension: %+v", inline)
	}
}
