package ingress_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

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
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if c.sid != "" {
		req.Header.Set("Mcp-Session-Id", c.sid)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
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
	if err := json.Unmarshal(raw, &msg); err != nil || msg.Error != nil {
		return nil, string(raw)
	}
	return msg.Result, ""
}

func startTask(t *testing.T, h *harness, code string) (*rawMCP, string) {
	c := &rawMCP{t: t, h: h}
	c.call("initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{"tasks": map[string]any{}},
		"clientInfo": map[string]any{"name": "raw", "version": "1"}})
	var created struct {
		Task struct {
			TaskID string `json:"taskId"`
			Status string `json:"status"`
		} `json:"task"`
	}
	_ = json.Unmarshal(c.call("tools/call", map[string]any{"name": "execute_code",
		"arguments": map[string]any{"language": "python", "code": code}, "task": map[string]any{}}), &created)
	if created.Task.TaskID == "" || created.Task.Status != "working" {
		t.Fatalf("task-augmented call did not create a task: %+v", created)
	}
	return c, created.Task.TaskID
}

func waitTask(t *testing.T, c *rawMCP, id string) string {
	deadline := time.Now().Add(15 * time.Second)
	for {
		var task struct{ Status string }
		_ = json.Unmarshal(c.call("tasks/get", map[string]any{"taskId": id}), &task)
		if task.Status != "working" {
			return task.Status
		}
		if time.Now().After(deadline) {
			t.Fatal("task still working")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestMCPTaskAugmentedExecute(t *testing.T) {
	h := newHarness(t)
	h.fakeRunner(t)
	c, id := startTask(t, h, "print('hello')")
	if st := waitTask(t, c, id); st != "completed" {
		t.Fatalf("task status %s", st)
	}
	var res struct {
		IsError           bool   `json:"isError"`
		StructuredContent mcpJob `json:"structuredContent"`
	}
	_ = json.Unmarshal(c.call("tasks/result", map[string]any{"taskId": id}), &res)
	if res.IsError || res.StructuredContent.Status != jobs.StatusSucceeded || res.StructuredContent.Stdout != "hello\nworld\n" {
		t.Fatalf("task result %+v", res)
	}
}

func TestMCPTaskCancelCancelsJob(t *testing.T) {
	h := newHarness(t) // no runner: the job waits in the queue
	c, id := startTask(t, h, "print(1)")
	var list struct{ Jobs []jobs.Job }
	deadline := time.Now().Add(10 * time.Second)
	for len(list.Jobs) == 0 && time.Now().Before(deadline) {
		h.do(t, h.keyA, "GET", "/v1/jobs", "").json(t, &list)
	}
	if len(list.Jobs) != 1 {
		t.Fatal("no job")
	}
	c.call("tasks/cancel", map[string]any{"taskId": id})
	for {
		j := h.do(t, h.keyA, "GET", "/v1/jobs/"+list.Jobs[0].ID, "").job(t)
		if j.Status == jobs.StatusCancelled {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job after tasks/cancel: %s", j.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
