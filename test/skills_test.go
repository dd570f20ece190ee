package test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/gantryhq/gantry/skills"
	"github.com/gantryhq/gantry/skills/skillstest"
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

// TestAgentSkillFolder: a public-style skill folder uploaded as a zip is
// mounted in jobs as /skills/pdf-processing/ with its binary asset intact,
// Python imports its scripts as skills.pdf_processing, and the folder
// downloads again as a zip the standard's tools can read.
func TestAgentSkillFolder(t *testing.T) {
	d := startDev(t, "GANTRY_RUNNER_SLOTS=2")
	zipped := skillstest.Zip(t, skillstest.Folder(t, skillstest.PDF, skillstest.PDF))
	req, _ := http.NewRequest("PUT", d.url+"/v1/skills/pdf-processing", bytes.NewReader(zipped))
	req.Header.Set("Authorization", "Bearer "+d.key)
	req.Header.Set("Content-Type", "application/zip")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("upload: %d %s", resp.StatusCode, body)
	}

	logo := skillstest.Files(t, skillstest.PDF)["assets/logo.png"]
	sum := sha256.Sum256(logo)
	r := d.call(t, "POST", "/v1/execute", mustJSON(map[string]any{"language": "python", "code": `
import hashlib
from skills.pdf_processing.scripts import pdf_tools
print(pdf_tools.page_count(pdf_tools.SAMPLE))
print(hashlib.sha256(open("/skills/pdf-processing/assets/logo.png", "rb").read()).hexdigest())
print(open("/skills/pdf-processing/SKILL.md").read().splitlines()[1])
`}))
	var j struct{ Status, Stdout, Stderr string }
	_ = json.Unmarshal(r.body, &j)
	if want := "2\n" + hex.EncodeToString(sum[:]) + "\nname: pdf-processing\n"; j.Status != "succeeded" || j.Stdout != want {
		t.Fatalf("job: %s\n%s\n%s", j.Status, j.Stdout, j.Stderr)
	}

	r = d.call(t, "GET", "/v1/skills/pdf-processing?format=zip", "")
	back, err := skills.ReadArchive(skills.FormatZip, r.body)
	if r.status != 200 || err != nil || !reflect.DeepEqual(back, skillstest.Skill(t, skillstest.PDF)) {
		t.Errorf("download: %d %v", r.status, err)
	}
}
