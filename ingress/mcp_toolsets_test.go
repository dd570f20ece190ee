package ingress_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/store"
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
	if len(all) != 23 {
		t.Errorf("default: %d tools %v; want all 23", len(all), all)
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
		{"/mcp?toolsets=sessions", nil, "close_session create_session execute_bash fork_session list_files pause_session read_docstring read_file snapshot_session write_file"},
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

// listedArguments lists each tool's arguments as tools/list shows them at
// path, and the environments execute_code's environment may name.
func listedArguments(t *testing.T, h *harness, key, path string) (args map[string][]string, envs []string) {
	t.Helper()
	c := &rawMCP{t: t, h: &harness{url: h.url, keyA: key}, path: path}
	c.call("initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "raw", "version": "1"}})
	var res struct {
		Tools []struct {
			Name        string `json:"name"`
			InputSchema struct {
				Properties map[string]struct {
					Enum []string `json:"enum"`
				} `json:"properties"`
			} `json:"inputSchema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(c.call("tools/list", map[string]any{}), &res); err != nil {
		t.Fatal(err)
	}
	args = map[string][]string{}
	for _, tool := range res.Tools {
		for name, p := range tool.InputSchema.Properties {
			args[tool.Name] = append(args[tool.Name], name)
			if tool.Name == "execute_code" && name == "environment" {
				envs = p.Enum
			}
		}
		sort.Strings(args[tool.Name])
	}
	return args, envs
}

// TestMCPToolArgumentsListed: tools/list shows only the arguments a caller
// can use, for every byte of it is in the model's context. session_id is
// listed with the sessions toolset, which makes sessions; environment when
// the operator registered environments the caller may use, with their
// names. A call may pass either all the same.
func TestMCPToolArgumentsListed(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	code, envs := listedArguments(t, h, h.keyA, "/mcp?toolsets=code")
	if got := strings.Join(code["execute_code"], " "); got != "code files language stdin stdin_encoding timeout_ms" || envs != nil {
		t.Errorf("toolsets=code, no environments: execute_code takes %s (environments %v)", got, envs)
	}
	all, _ := listedArguments(t, h, h.keyA, "/mcp?toolsets=code,sessions")
	if !slices.Contains(all["execute_code"], "session_id") || !slices.Contains(all["create_session"], "language") {
		t.Errorf("toolsets=code,sessions: execute_code takes %v", all["execute_code"])
	}
	if _, err := h.st.PutEnvironment(context.Background(), store.Environment{Name: "datasci", Image: "x:1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.st.PutEnvironment(context.Background(), store.Environment{Name: "b-only", Image: "x:1", Tenants: []string{h.tenantB}}); err != nil {
		t.Fatal(err)
	}
	// The service's copy of the environments is renewed within seconds.
	var got []string
	if !eventually.Within(15*time.Second, func() bool {
		_, got = listedArguments(t, h, h.keyA, "/mcp?toolsets=code")
		return len(got) > 0
	}) || strings.Join(got, " ") != "datasci" {
		t.Errorf("tenant A's environments listed: %v, want datasci", got)
	}
	if _, got = listedArguments(t, h, h.keyB, "/mcp?toolsets=code"); strings.Join(got, " ") != "b-only datasci" {
		t.Errorf("tenant B's environments listed: %v", got)
	}
	// An argument left out of the list is still taken.
	c := &rawMCP{t: t, h: h, path: "/mcp?toolsets=code"}
	c.call("initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "raw", "version": "1"}})
	msg := string(c.call("tools/call", map[string]any{"name": "execute_code", "arguments": map[string]any{
		"language": "python", "code": "print(1)", "session_id": "ses_nope"}}))
	if !strings.Contains(msg, "session") || !strings.Contains(msg, "not found") {
		t.Errorf("execute_code with an unlisted session_id: %s", msg)
	}
}
