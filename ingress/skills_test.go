package ingress_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/gantryhq/gantry/skills"
)

func TestSkillsAPI(t *testing.T) {
	h := newHarness(t)
	md := "---\nname: tidy_logs\ndescription: Summarise web server logs\ntags: [logs, nginx]\n---\n# Tidy logs\n\nUse awk.\n"
	r := h.do(t, h.keyA, "PUT", "/v1/skills/tidy_logs", md, "Content-Type", "text/markdown")
	if r.status != 201 || !strings.Contains(string(r.body), `"version":1`) {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	r = h.do(t, h.keyA, "PUT", "/v1/skills/tidy_logs", `{"description":"Summarise web server logs","body":"Use awk, then sort.","files":[{"path":"helpers.py","content":"X = 1\n"}]}`)
	if r.status != 200 || !strings.Contains(string(r.body), `"version":2`) {
		t.Fatalf("new version: %d %s", r.status, r.body)
	}
	if r := h.do(t, h.keyA, "GET", "/v1/skills/tidy_logs?version=1", ""); !strings.Contains(string(r.body), "Use awk.") {
		t.Errorf("old version: %s", r.body)
	}
	if r := h.do(t, h.keyA, "GET", "/v1/skills/tidy_logs", ""); !strings.Contains(string(r.body), "then sort") || !strings.Contains(string(r.body), `"helpers.py"`) {
		t.Errorf("current version: %s", r.body)
	}
	if r := h.do(t, h.keyA, "GET", "/v1/skills/tidy_logs/versions", ""); !strings.Contains(string(r.body), `"version":2`) || !strings.Contains(string(r.body), `"version":1`) {
		t.Errorf("versions: %s", r.body)
	}
	if r := h.do(t, h.keyA, "GET", "/v1/skills?q=plot+a+histogram", ""); !strings.HasPrefix(string(r.body), `{"skills":[{"name":"plotting"`) {
		t.Errorf("search: %s", r.body)
	}
	if r := h.do(t, h.keyA, "GET", "/v1/skills", ""); !strings.Contains(string(r.body), `"tidy_logs"`) || !strings.Contains(string(r.body), `"builtin":true`) {
		t.Errorf("list: %s", r.body)
	}

	big := strings.Repeat("x", skills.MaxFileBytes+1)
	for _, c := range []struct {
		key, method, path, body, ctype string
		status                         int
		want                           string
	}{
		{h.keyB, "GET", "/v1/skills/tidy_logs", "", "", 404, "not_found"},                    // another tenant's skill
		{h.keyB, "DELETE", "/v1/skills/tidy_logs", "", "", 404, "not_found"},                 // nor delete it
		{h.keyA, "GET", "/v1/skills/..%2Fetc", "", "", 400, `"field":"name"`},                // path characters
		{h.keyA, "PUT", "/v1/skills/Bad-Name", md, "text/markdown", 400, `"field":"name"`},   // bad name
		{h.keyA, "PUT", "/v1/skills/other", md, "text/markdown", 400, `"field":"name"`},      // name mismatch
		{h.keyA, "PUT", "/v1/skills/x", "no front matter", "text/markdown", 400, "SKILL.md"}, // malformed
		{h.keyA, "PUT", "/v1/skills/x", "---\nname: x\ndescription: d\ncolour: red\n---\nb", "text/markdown", 400, `"field":"colour"`},
		{h.keyA, "PUT", "/v1/skills/plotting", "---\nname: plotting\ndescription: mine\n---\nb", "text/markdown", 409, "built-in"},
		{h.keyA, "DELETE", "/v1/skills/plotting", "", "", 409, "built-in"},
		{h.keyA, "PUT", "/v1/skills/x", `{"description":"d","body":"b","files":[{"path":"../x.py","content":""}]}`, "", 400, "files[0].path"},
		{h.keyA, "PUT", "/v1/skills/x", `{"description":"d","body":"b","files":[{"path":"a.py","content":"` + big + `"}]}`, "", 400, "files[0].content"},
		{h.keyA, "PUT", "/v1/skills/x", `{"description":"d","body":"b","version":5}`, "", 409, "version"},
		{h.keyA, "GET", "/v1/skills/tidy_logs?version=9", "", "", 404, "not_found"},
	} {
		hdr := []string{}
		if c.ctype != "" {
			hdr = []string{"Content-Type", c.ctype}
		}
		r := h.do(t, c.key, c.method, c.path, c.body, hdr...)
		if r.status != c.status || !strings.Contains(string(r.body), c.want) {
			t.Errorf("%s %s: %d %s", c.method, c.path, r.status, r.body)
		}
	}
	if r := h.do(t, h.keyA, "DELETE", "/v1/skills/tidy_logs", ""); r.status != 204 {
		t.Errorf("delete: %d", r.status)
	}
	if r := h.do(t, h.keyA, "GET", "/v1/skills/tidy_logs", ""); r.status != 404 {
		t.Errorf("after delete: %d", r.status)
	}
}

func TestSkillsOverMCP(t *testing.T) {
	h := newHarness(t)
	c := h.mcpClient(t, h.keyA, mcp.LATEST_PROTOCOL_VERSION)
	res := call(t, c, "search_skills", map[string]any{"query": "chart"})
	if res.IsError || !strings.HasPrefix(text(res), "- plotting") {
		t.Fatalf("search_skills chart: %s", text(res))
	}
	res = call(t, c, "get_skill", map[string]any{"name": "plotting"})
	if res.IsError || !strings.Contains(text(res), "from skills.plotting import helpers") || !strings.Contains(text(res), "def histogram") {
		t.Fatalf("get_skill: %s", text(res))
	}
	res = call(t, c, "save_skill", map[string]any{"name": "plotting", "description": "mine", "body": "x"})
	if !res.IsError || !strings.Contains(text(res), "built-in") {
		t.Errorf("save over a built-in: %s", text(res))
	}
	res = call(t, c, "save_skill", map[string]any{"name": "my_charts", "description": "House-style charts", "body": "Use helpers.style().",
		"files": []any{map[string]any{"path": "helpers.py", "content": "def style():\n    return 'house'\n"}}})
	if res.IsError || !strings.Contains(text(res), "version 1") {
		t.Fatalf("save_skill: %s", text(res))
	}
	for _, bad := range []map[string]any{
		{"name": "../x", "description": "d", "body": "b"},
		{"name": "ok", "description": strings.Repeat("d", 400), "body": "b"},
		{"name": "ok", "description": "d"},
	} {
		if res := call(t, c, "save_skill", bad); !res.IsError {
			t.Errorf("save_skill %v accepted", bad)
		}
	}
	rr := mcp.ReadResourceRequest{}
	rr.Params.URI = "skill://my_charts"
	if read, err := c.ReadResource(context.Background(), rr); err != nil || !strings.Contains(read.Contents[0].(mcp.TextResourceContents).Text, "House-style") {
		t.Errorf("skill resource: %v", err)
	}
	b := h.mcpClient(t, h.keyB, mcp.LATEST_PROTOCOL_VERSION)
	if res := call(t, b, "get_skill", map[string]any{"name": "my_charts"}); !res.IsError {
		t.Error("tenant b read a's skill")
	}
	if _, err := b.ReadResource(context.Background(), rr); err == nil {
		t.Error("tenant b read a's skill resource")
	}
}

// TestSkillsPromptBudget: however many skills a tenant has, the prompt lists
// them in one line each within the budget and points to search_skills.
func TestSkillsPromptBudget(t *testing.T) {
	h := newHarness(t)
	for i := range 200 {
		_, err := h.st.SaveSkill(context.Background(), h.tenantA, skills.Skill{Name: fmt.Sprintf("skill_%03d", i),
			Description: fmt.Sprintf("Does task number %d with a fairly long description to fill the line up nicely", i), Body: "body"})
		if err != nil {
			t.Fatal(err)
		}
	}
	c := h.mcpClient(t, h.keyA, mcp.LATEST_PROTOCOL_VERSION)
	pr := mcp.GetPromptRequest{}
	pr.Params.Name = "agent_system_prompt"
	prompt, err := c.GetPrompt(context.Background(), pr)
	if err != nil {
		t.Fatal(err)
	}
	body := prompt.Messages[0].Content.(mcp.TextContent).Text
	_, section, ok := strings.Cut(body, "\nSkills (")
	if !ok {
		t.Fatalf("no skills section:\n%s", body)
	}
	if len(section) > 4000 {
		t.Errorf("skills section is %d characters; the budget is 4000", len(section))
	}
	if !strings.Contains(section, "more: search_skills finds them") || !strings.Contains(section, "- skill_000: Does task number 0") {
		t.Errorf("skills section:\n%s", section)
	}
	if len(body) > 8000 {
		t.Errorf("whole prompt is %d characters", len(body))
	}
	t.Logf("prompt: %d characters with 200 skills (skills section %d)", len(body), len(section))
}
