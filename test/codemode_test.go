package test

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/gantryhq/gantry/codemode/codemodetest"
)

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestCodeModeAgentFlow is the code-mode issue's "done" scenario: a tenant
// registers two upstream MCP servers (streamable HTTP with a bearer token,
// and a stdio command), then an agent over MCP finds a tool with
// search_tools and runs a program that calls two upstream tools and prints
// a one-line answer; the upstream results never reach the agent.
func TestCodeModeAgentFlow(t *testing.T) {
	d := startDev(t, "GANTRY_RUNNER_SLOTS=2", "GANTRY_MCP_COMMANDS="+mcpCommands(), "GANTRY_MCP_ENV=CRM_TOKEN")
	crmURL := codemodetest.ServeHTTP(t, codemodetest.CRM(codemodetest.CredentialOK))

	// Registration over HTTP, with its errors.
	bad := []struct {
		body   string
		status int
		code   string
	}{
		{`{"name":"crm"}`, 400, "invalid_argument"},
		{`{"name":"crm","url":"` + crmURL + `","token":"x"}`, 400, "invalid_argument"},
		{`{"name":"crm","url":"` + crmURL + `","headers":{"Authorization":"Bearer wrong"}}`, 502, "upstream_error"},
		{`{"name":"sh","command":["/bin/sh"]}`, 400, "invalid_argument"},
	}
	bad = append(bad, stdioAttacks()...)
	for _, c := range bad {
		r := d.call(t, "POST", "/v1/mcp-servers", c.body)
		if r.status != c.status || !strings.Contains(string(r.body), `"code":"`+c.code+`"`) {
			t.Errorf("POST %s: %d %s", c.body, r.status, r.body)
		}
	}
	r := d.call(t, "POST", "/v1/mcp-servers", mustJSON(map[string]any{"name": "crm", "description": "Customers and orders",
		"url": crmURL, "headers": map[string]string{"Authorization": "Bearer " + codemodetest.Token}, "deny_tools": []string{"archive_*"}}))
	if r.status != 201 || strings.Contains(string(r.body), codemodetest.Token) || !strings.Contains(string(r.body), `"headers":["Authorization"]`) {
		t.Fatalf("register crm: %d %s", r.status, r.body)
	}
	if r := d.call(t, "POST", "/v1/mcp-servers", mustJSON(map[string]any{"name": "crm", "url": crmURL})); r.status != 409 {
		t.Errorf("duplicate: %d %s", r.status, r.body)
	}
	r = d.call(t, "POST", "/v1/mcp-servers", mustJSON(map[string]any{"name": "billing", "description": "Invoices",
		"command": codemodetest.StdioCommand()}))
	if r.status != 201 {
		t.Fatalf("register billing (stdio): %d %s", r.status, r.body)
	}
	r = d.call(t, "GET", "/v1/tools?q=orders+of+a+customer&detail=name&limit=3", "")
	if r.status != 200 || !strings.HasPrefix(string(r.body), `{"tools":[{"server":"crm","name":"list_orders"}`) {
		t.Fatalf("GET /v1/tools: %d %s", r.status, r.body)
	}
	r = d.call(t, "GET", "/v1/mcp-servers", "")
	if r.status != 200 || strings.Contains(string(r.body), codemodetest.Token) || !strings.Contains(string(r.body), `"name":"billing"`) {
		t.Fatalf("list: %d %s", r.status, r.body)
	}

	// The agent, over MCP.
	c, err := client.NewStreamableHttpClient(d.url+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + d.key}))
	if err != nil {
		t.Fatal(err)
	}
	initialize(t, c)
	out, text := mcpCall(t, c, "search_tools", map[string]any{"query": "orders of a customer", "detail": "name"})
	if first := out["tools"].([]any)[0].(map[string]any); first["name"] != "list_orders" || !strings.HasPrefix(text, "- crm.list_orders\n") {
		t.Fatalf("search_tools: %v\n%s", out, text)
	}
	out, _ = mcpCall(t, c, "search_tools", map[string]any{"query": "crm.list_orders", "detail": "full", "limit": 1})
	if tool := out["tools"].([]any)[0].(map[string]any); tool["input_schema"] == nil {
		t.Fatalf("full detail has no schema: %v", out)
	}
	if out, _ := mcpCall(t, c, "search_tools", map[string]any{"query": "archive a lead"}); strings.Contains(mustJSON(out), "archive_") {
		t.Errorf("a denied tool is offered: %v", out)
	}
	code := `from servers.crm import find_customer, list_orders
from servers.billing import invoice_total
c = find_customer(email="ada@example.com")
late = [o for o in list_orders(customer_id=c["id"])["orders"] if o["status"] == "late"]
owed = invoice_total(customer_id=c["id"])["open_eur"]
print(f"{c['name']}: {len(late)} late orders worth {sum(o['total'] for o in late):.2f} EUR, {owed:.2f} EUR open")
`
	res, text := mcpCall(t, c, "execute_code", map[string]any{"language": "python", "code": code})
	const answer = "Ada Lovelace: 2 late orders worth 162.75 EUR, 100.50 EUR open\n"
	if res["status"] != "succeeded" || res["stdout"] != answer {
		t.Fatalf("execute_code: %s", text)
	}
	// What the model sees holds the answer and none of the data behind it.
	for _, leaked := range []string{"ada@example.com", "+44 20", "shipped", "customer_id", "gold"} {
		if strings.Contains(text, leaked) || strings.Contains(mustJSON(res), leaked) {
			t.Errorf("upstream data %q reached the model:\n%s", leaked, text)
		}
	}
	// The job's history records the three calls.
	r = d.call(t, "GET", "/v1/jobs/"+res["job_id"].(string), "")
	var job struct {
		ToolCalls []struct {
			Server, Tool, Status string
			BytesOut             int `json:"bytes_out"`
		} `json:"tool_calls"`
	}
	_ = json.Unmarshal(r.body, &job)
	if len(job.ToolCalls) != 3 || job.ToolCalls[0].Tool != "find_customer" || job.ToolCalls[2].Server != "billing" || job.ToolCalls[1].Status != "ok" {
		t.Fatalf("tool calls in the job: %s", r.body)
	}

	// The agent prompt explains code mode for this tenant.
	prompt := agentPrompt(t, c)
	if !strings.Contains(prompt, "Code mode") || !strings.Contains(prompt, "- crm (") || !strings.Contains(prompt, "from servers.") {
		t.Errorf("agent_system_prompt has no code-mode section:\n%s", prompt)
	}

	// Remove a server: code that imports it fails clearly.
	if r := d.call(t, "DELETE", "/v1/mcp-servers/billing", ""); r.status != 204 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	res, text = mcpCall(t, c, "execute_code", map[string]any{"language": "python", "code": "import gantry\ntry:\n    gantry.call('billing', 'invoice_total', {'customer_id': 1})\nexcept gantry.ToolError as e:\n    print(e.code)"})
	if res["stdout"] != "unknown_server\n" {
		t.Fatalf("after delete: %s", text)
	}
}

// agentPrompt reads the agent_system_prompt prompt's text.
func agentPrompt(t *testing.T, c *client.Client) string {
	t.Helper()
	req := mcp.GetPromptRequest{}
	req.Params.Name = "agent_system_prompt"
	res, err := c.GetPrompt(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, m := range res.Messages {
		if tc, ok := m.Content.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// pwnedPath is what the attacks below would write on a host where they
// worked.
const pwnedPath = "/tmp/gantry-e2e-pwned"

// mcpCommands is the operator's GANTRY_MCP_COMMANDS of these tests: the
// Python fixture, and a Node command (never started: it is there so that
// the attacks on a Node server have one to aim at).
func mcpCommands() string {
	return mustJSON([][]string{codemodetest.StdioCommand(), {"node", "/opt/mcp/server.js"}})
}

// stdioAttacks are registrations that would run the tenant's own code on
// gantry's hosts if a stdio server's env or arguments were taken as sent:
// each must be refused before anything starts.
func stdioAttacks() []struct {
	body   string
	status int
	code   string
} {
	node := []string{"node", "/opt/mcp/server.js"}
	write := "require('fs').writeFileSync('" + pwnedPath + "','pwned')"
	var out []struct {
		body   string
		status int
		code   string
	}
	for _, reg := range []map[string]any{
		{"name": "p", "command": node, "env": map[string]string{"NODE_OPTIONS": "--import=data:text/javascript," + write}},
		{"name": "p", "command": codemodetest.StdioCommand(), "env": map[string]string{"LD_PRELOAD": "/tmp/evil.so"}},
		{"name": "p", "command": codemodetest.StdioCommand(), "env": map[string]string{"PYTHONSTARTUP": "/tmp/evil.py"}},
		{"name": "p", "command": codemodetest.StdioCommand(), "env": map[string]string{"PATH": "/tmp"}},
		{"name": "p", "command": codemodetest.StdioCommand(), "env": map[string]string{"BASH_ENV": "/tmp/evil.sh"}},
		{"name": "p", "command": []string{"node", "-e", write}},
		{"name": "p", "command": []string{"python3", "-c", "open('" + pwnedPath + "','w')"}},
	} {
		out = append(out, struct {
			body   string
			status int
			code   string
		}{mustJSON(reg), 400, "invalid_argument"})
	}
	return out
}

// TestStdioServerThroughARunner: the ingress never starts a stdio MCP
// server (it runs no code): registering one asks a runner, which starts it
// in a container of its own; with no runner the registration is refused as
// unavailable. The server runs as uid 1000 without network, and its
// container goes when its runner stops.
func TestStdioServerThroughARunner(t *testing.T) {
	os.Remove(pwnedPath)
	d := startDev(t, "GANTRY_DEV_RUNNER=false", "GANTRY_MCP_COMMANDS="+mcpCommands(), "GANTRY_MCP_ENV=CRM_TOKEN")
	reg := mustJSON(map[string]any{"name": "billing", "command": codemodetest.StdioCommand(), "env": map[string]string{"CRM_TOKEN": codemodetest.Token}})
	if r := d.call(t, "POST", "/v1/mcp-servers", reg); r.status != 503 || !strings.Contains(string(r.body), "no runner") {
		t.Fatalf("no runner: %d %s", r.status, r.body)
	}
	runnerID := "e2e-mcp-" + uniqueSuffix()
	p := start(t, append(d.env, "GANTRY_RUNNER_ID="+runnerID, "GANTRY_RUNNER_SLOTS=1"), "runner")
	p.waitOutput(t, regexp.MustCompile(`runner started`), 30*time.Second)
	for _, c := range stdioAttacks() {
		if r := d.call(t, "POST", "/v1/mcp-servers", c.body); r.status != c.status || !strings.Contains(string(r.body), `"code":"`+c.code+`"`) {
			t.Errorf("POST %s: %d %s", c.body, r.status, r.body)
		}
	}
	if r := d.call(t, "POST", "/v1/mcp-servers", reg); r.status != 201 || !strings.Contains(string(r.body), `"tools":3`) {
		t.Fatalf("register through a runner: %d %s", r.status, r.body)
	}
	j := d.job(t, "POST", "/v1/execute", mustJSON(map[string]any{"language": "python",
		"code": "import json\nfrom servers.billing import facts, whoami\nprint(json.dumps([facts(), whoami()]))"}))
	var got []map[string]any
	if err := json.Unmarshal([]byte(j.Stdout), &got); err != nil || len(got) != 2 {
		t.Fatalf("%s: %s %s", j.Status, j.Stdout, j.Stderr)
	}
	if f := got[0]; f["uid"] != 1000.0 || f["cap_eff"] != "0000000000000000" || mustJSON(f["net"]) != `["lo"]` || f["docker_sock"] != false {
		t.Errorf("the stdio server's sandbox: %v", f)
	}
	if got[1]["authorized"] != true {
		t.Errorf("the credential did not reach the server: %v", got[1])
	}
	if n := len(dockerContainers(t, "dev.gantry.runner="+runnerID, "dev.gantry.mcp")); n != 1 {
		t.Errorf("%d stdio server containers, want 1", n)
	}
	p.stop()
	if n := len(dockerContainers(t, "dev.gantry.runner="+runnerID, "dev.gantry.mcp")); n != 0 {
		t.Errorf("%d stdio server containers outlived their runner", n)
	}
	if _, err := os.Stat(pwnedPath); err == nil {
		t.Fatal("an attack wrote " + pwnedPath + " on this host")
	}
}
