package test

import (
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
)

// TestSkillsAgentFlow is the skills issue's "done" scenario over MCP: find
// the plotting skill by searching "chart", read it, run its example in a
// session, save an improved skill and see the new version in the next job.
func TestSkillsAgentFlow(t *testing.T) {
	d := startDev(t, "GANTRY_RUNNER_SLOTS=2")
	c, err := client.NewStreamableHttpClient(d.url+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + d.key}))
	if err != nil {
		t.Fatal(err)
	}
	initialize(t, c)

	out, _ := mcpCall(t, c, "search_skills", map[string]any{"query": "chart"})
	if first := out["skills"].([]any)[0].(map[string]any)["name"]; first != "plotting" {
		t.Fatalf("search_skills chart found %v first", first)
	}
	skill, _ := mcpCall(t, c, "get_skill", map[string]any{"name": "plotting"})
	md := skill["skill_md"].(string)
	_, example, _ := strings.Cut(md, "```python\n")
	example, _, _ = strings.Cut(example, "```")
	if !strings.Contains(example, "from skills.plotting import helpers") {
		t.Fatalf("no example in the skill:\n%s", md)
	}

	sess, _ := mcpCall(t, c, "create_session", map[string]any{})
	sid := sess["session_id"].(string)
	res, text := mcpCall(t, c, "execute_code", map[string]any{"session_id": sid, "language": "python", "code": example})
	if res["status"] != "succeeded" || len(res["artifacts"].([]any)) != 2 {
		t.Fatalf("the plotting example in a session: %s", text)
	}

	save := func(body string) {
		mcpCall(t, c, "save_skill", map[string]any{"name": "team-charts", "description": "Charts in the team's style", "body": body,
			"tags": []any{"chart"}, "files": []any{map[string]any{"path": "helpers.py", "content": "VERSION = '" + body + "'\n" +
				"from skills.plotting import helpers as base\n\ndef bar(labels, values, path):\n    return base.bar_chart(labels, values, VERSION, path)\n"}}})
	}
	save("v1")
	run := "from skills.team_charts import helpers\nprint(helpers.VERSION, helpers.bar(['a', 'b'], [1, 2], 'out/bar.png'))"
	if res, text := mcpCall(t, c, "execute_code", map[string]any{"session_id": sid, "language": "python", "code": run}); res["stdout"] != "v1 out/bar.png\n" {
		t.Fatalf("first version: %s", text)
	}
	save("v2")
	if res, text := mcpCall(t, c, "execute_code", map[string]any{"session_id": sid, "language": "python", "code": run}); res["stdout"] != "v2 out/bar.png\n" {
		t.Fatalf("the next job does not see the new version: %s", text)
	}
	if out, _ := mcpCall(t, c, "search_skills", map[string]any{"query": "team style chart"}); out["skills"].([]any)[0].(map[string]any)["version"] != float64(2) {
		t.Errorf("search does not show version 2: %v", out)
	}
}
