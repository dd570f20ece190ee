package ingress_test

import (
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
)

// listTools lists the tools an MCP client sees at path with the headers.
func listTools(t *testing.T, h *harness, path string, hdr map[string]string) ([]string, int) {
	t.Helper()
	c := &rawMCP{t: t, h: h, path: path, hdr: hdr}
	c.call("initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "raw", "version": "1"}})
	raw := c.call("tools/list", map[string]any{})
	var res struct {
		Tools []struct{ Name string } `json:"tools"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	sort.Strings(names)
	return names, len(raw)
}

// TestMCPToolsets: the X-MCP-Toolsets header and ?toolsets= select groups
// of tools, as the GitHub MCP server's convention has it; a tool outside
// them can be neither listed nor called; a typo is refused, naming the
// header or parameter.
func TestMCPToolsets(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	all, allBytes := listTools(t, h, "/mcp", nil)
	if len(all) != 20 {
		t.Errorf("default: %d tools %v; want all 20", len(all), all)
	}
	for _, c := range []struct {
		path string
		hdr  map[string]string
		want string
	}{
		{"/mcp?toolsets=code", nil, "execute_code get_artifact_url search_tools"},
		{"/mcp", map[string]string{"X-MCP-Toolsets": "code"}, "execute_code get_artifact_url search_tools"},
		{"/mcp?toolsets=jobs", nil, "cancel_job get_job list_jobs submit_job"},
		{"/mcp?toolsets=skills,registry", nil, "add_mcp_server get_skill list_mcp_servers remove_mcp_server save_skill search_skills"},
		{"/mcp?toolsets=code", map[string]string{"X-MCP-Toolsets": " Skills "}, "execute_code get_artifact_url get_skill save_skill search_skills search_tools"},
		{"/mcp?toolsets=sessions", nil, "close_session create_session execute_bash list_files read_docstring read_file write_file"},
		{"/mcp?toolsets=code,all", nil, strings.Join(all, " ")},
	} {
		got, size := listTools(t, h, c.path, c.hdr)
		if strings.Join(got, " ") != c.want {
			t.Errorf("%s %v: %v, want %s", c.path, c.hdr, got, c.want)
		}
		if c.path == "/mcp?toolsets=code" && c.hdr == nil {
			t.Logf("tools/list: all %d bytes, code %d bytes", allBytes, size)
		}
	}

	// A tool outside the selection cannot be called either.
	c := &rawMCP{t: t, h: h, path: "/mcp?toolsets=code"}
	c.call("initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "raw", "version": "1"}})
	if msg := c.callError("tools/call", map[string]any{"name": "list_jobs", "arguments": map[string]any{}}); !strings.Contains(msg, "not found") {
		t.Errorf("calling a tool outside the toolsets: %s", msg)
	}
	// The prompt speaks only of the tools the client has.
	prompt := string(c.call("prompts/get", map[string]any{"name": "agent_system_prompt"}))
	if !strings.Contains(prompt, "execute_code") || strings.Contains(prompt, "create_session") || strings.Contains(prompt, "submit_job") || strings.Contains(prompt, "get_skill") {
		t.Errorf("prompt with toolsets=code: %s", prompt)
	}

	for _, c := range []struct{ path, header, field string }{
		{"/mcp?toolsets=cod", "", `"field":"toolsets"`},
		{"/mcp", "code,sesions", `"field":"X-MCP-Toolsets"`},
	} {
		req, _ := http.NewRequest("POST", h.url+c.path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Authorization", "Bearer "+h.keyA)
		req.Header.Set("Content-Type", "application/json")
		if c.header != "" {
			req.Header.Set("X-MCP-Toolsets", c.header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body strings.Builder
		_, _ = io.Copy(&body, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(body.String(), c.field) || !strings.Contains(body.String(), "code, jobs, sessions, skills, registry") {
			t.Errorf("%s %q: %d %s", c.path, c.header, resp.StatusCode, body.String())
		}
	}
}
