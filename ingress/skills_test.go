package ingress_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/gantryhq/gantry/skills"
	"github.com/gantryhq/gantry/skills/skillstest"
)

func TestSkillsAPI(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	md := "---\nname: tidy-logs\ndescription: Summarise web server logs\ntags: [logs, nginx]\n---\n# Tidy logs\n\nUse awk.\n"
	r := h.do(t, h.keyA, "PUT", "/v1/skills/tidy-logs", md, "Content-Type", "text/markdown")
	if r.status != 201 || !strings.Contains(string(r.body), `"version":1`) {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	r = h.do(t, h.keyA, "PUT", "/v1/skills/tidy-logs", `{"description":"Summarise web server logs","body":"Use awk, then sort.","files":[{"path":"helpers.py","content":"X = 1\n"}]}`)
	if r.status != 200 || !strings.Contains(string(r.body), `"version":2`) {
		t.Fatalf("new version: %d %s", r.status, r.body)
	}
	if r := h.do(t, h.keyA, "GET", "/v1/skills/tidy-logs?version=1", ""); !strings.Contains(string(r.body), "Use awk.") {
		t.Errorf("old version: %s", r.body)
	}
	if r := h.do(t, h.keyA, "GET", "/v1/skills/tidy-logs", ""); !strings.Contains(string(r.body), "then sort") || !strings.Contains(string(r.body), `"helpers.py"`) {
		t.Errorf("current version: %s", r.body)
	}
	if r := h.do(t, h.keyA, "GET", "/v1/skills/tidy-logs/versions", ""); !strings.Contains(string(r.body), `"version":2`) || !strings.Contains(string(r.body), `"version":1`) {
		t.Errorf("versions: %s", r.body)
	}
	if r := h.do(t, h.keyA, "GET", "/v1/skills?q=plot+a+histogram", ""); !strings.HasPrefix(string(r.body), `{"skills":[{"name":"plotting"`) {
		t.Errorf("search: %s", r.body)
	}
	if r := h.do(t, h.keyA, "GET", "/v1/skills", ""); !strings.Contains(string(r.body), `"tidy-logs"`) || !strings.Contains(string(r.body), `"builtin":true`) {
		t.Errorf("list: %s", r.body)
	}

	big := strings.Repeat("x", skills.MaxFileBytes+1)
	for _, c := range []struct {
		key, method, path, body, ctype string
		status                         int
		want                           string
	}{
		{h.keyB, "GET", "/v1/skills/tidy-logs", "", "", 404, "not_found"},                  // another tenant's skill
		{h.keyB, "DELETE", "/v1/skills/tidy-logs", "", "", 404, "not_found"},               // nor delete it
		{h.keyA, "GET", "/v1/skills/..%2Fetc", "", "", 400, `"field":"name"`},              // path characters
		{h.keyA, "PUT", "/v1/skills/Bad-Name", md, "text/markdown", 400, `"field":"name"`}, // bad name
		{h.keyA, "PUT", "/v1/skills/tidy_logs", md, "text/markdown", 400, `use hyphens, not underscores`},
		{h.keyA, "PUT", "/v1/skills/other", md, "text/markdown", 400, `"field":"name"`},      // name mismatch
		{h.keyA, "PUT", "/v1/skills/x", "no front matter", "text/markdown", 400, "SKILL.md"}, // malformed
		{h.keyA, "PUT", "/v1/skills/x", "---\nname: x\ndescription: d\ncolour: red\n---\nb", "text/markdown", 400, `"field":"colour"`},
		{h.keyA, "PUT", "/v1/skills/plotting", "---\nname: plotting\ndescription: mine\n---\nb", "text/markdown", 409, "built-in"},
		{h.keyA, "DELETE", "/v1/skills/plotting", "", "", 409, "built-in"},
		{h.keyA, "PUT", "/v1/skills/x", `{"description":"d","body":"b","files":[{"path":"../x.py","content":""}]}`, "", 400, "files[0].path"},
		{h.keyA, "PUT", "/v1/skills/x", `{"description":"d","body":"b","files":[{"path":"a.py","content":"` + big + `"}]}`, "", 400, "files[0].content"},
		{h.keyA, "PUT", "/v1/skills/x", `{"description":"d","body":"b","version":5}`, "", 409, "version"},
		{h.keyA, "PUT", "/v1/skills/x", "---\nname: x\ndescription: d\nallowed-tools:\n  Bash: yes\n---\nb", "text/markdown", 400, `"field":"allowed-tools"`},
		{h.keyA, "PUT", "/v1/skills/x", `{"description":"d","body":"b","files":[{"path":"a.bin","content":"!!","encoding":"base64"}]}`, "", 400, "files[0].content"},
		{h.keyA, "PUT", "/v1/skills/x", "PK\x03\x04garbage", "application/zip", 400, `"field":"archive"`},
		{h.keyA, "GET", "/v1/skills/tidy-logs?format=rar", "", "", 400, `"field":"format"`},
		{h.keyA, "GET", "/v1/skills/tidy-logs?version=9", "", "", 404, "not_found"},
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
	if r := h.do(t, h.keyA, "DELETE", "/v1/skills/tidy-logs", ""); r.status != 204 {
		t.Errorf("delete: %d", r.status)
	}
	if r := h.do(t, h.keyA, "GET", "/v1/skills/tidy-logs", ""); r.status != 404 {
		t.Errorf("after delete: %d", r.status)
	}
}

func TestSkillsOverMCP(t *testing.T) {
	t.Parallel()
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
	res = call(t, c, "save_skill", map[string]any{"name": "my-charts", "description": "House-style charts", "body": "Use helpers.style().",
		"files": []any{map[string]any{"path": "helpers.py", "content": "def style():\n    return 'house'\n"}}})
	if res.IsError || !strings.Contains(text(res), "version 1") {
		t.Fatalf("save_skill: %s", text(res))
	}
	logo := skillstest.Files(t, skillstest.PDF)["assets/logo.png"]
	res = call(t, c, "save_skill", map[string]any{"name": "branded-report", "description": "Reports with the logo.\nUse for any report.", "body": "Put assets/logo.png on top.",
		"license": "MIT", "compatibility": "Python 3", "metadata": map[string]any{"version": "1.0"}, "allowed_tools": "Read",
		"files": []any{map[string]any{"path": "assets/logo.png", "content": base64.StdEncoding.EncodeToString(logo), "encoding": "base64"}}})
	if res.IsError {
		t.Fatalf("save_skill with a binary file: %s", text(res))
	}
	res = call(t, c, "get_skill", map[string]any{"name": "branded-report"})
	var got struct {
		License  string            `json:"license"`
		Metadata map[string]string `json:"metadata"`
		Files    []skills.File     `json:"files"`
	}
	structured(t, res, &got)
	if len(got.Files) != 1 || got.Files[0].Decode() != nil || got.Files[0].Content != string(logo) || got.License != "MIT" || got.Metadata["version"] != "1.0" ||
		!strings.Contains(text(res), "--- assets/logo.png (binary, 89 bytes") {
		t.Errorf("get_skill of a skill with a binary asset: %+v\n%s", got, text(res))
	}
	for _, bad := range []map[string]any{
		{"name": "../x", "description": "d", "body": "b"},
		{"name": "my_charts", "description": "d", "body": "b"},
		{"name": "ok", "description": strings.Repeat("d", 1025), "body": "b"},
		{"name": "ok", "description": "d"},
	} {
		if res := call(t, c, "save_skill", bad); !res.IsError {
			t.Errorf("save_skill %v accepted", bad)
		}
	}
	rr := mcp.ReadResourceRequest{}
	rr.Params.URI = "skill://my-charts"
	if read, err := c.ReadResource(context.Background(), rr); err != nil || !strings.Contains(read.Contents[0].(mcp.TextResourceContents).Text, "House-style") {
		t.Errorf("skill resource: %v", err)
	}
	b := h.mcpClient(t, h.keyB, mcp.LATEST_PROTOCOL_VERSION)
	if res := call(t, b, "get_skill", map[string]any{"name": "my-charts"}); !res.IsError {
		t.Error("tenant b read a's skill")
	}
	if _, err := b.ReadResource(context.Background(), rr); err == nil {
		t.Error("tenant b read a's skill resource")
	}
}

// TestSkillsPromptBudget: however many skills a tenant has, the prompt lists
// them in one line each within the budget and points to search_skills.
func TestSkillsPromptBudget(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for i := range 200 {
		_, err := h.st.SaveSkill(context.Background(), h.tenantA, skills.Skill{Name: fmt.Sprintf("skill-%03d", i),
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
	if !strings.Contains(section, "more: search_skills finds them") || !strings.Contains(section, "- skill-000: Does task number 0") {
		t.Errorf("skills section:\n%s", section)
	}
	if len(body) > 8000 {
		t.Errorf("whole prompt is %d characters", len(body))
	}
	t.Logf("prompt: %d characters with 200 skills (skills section %d)", len(body), len(section))
}

// TestAgentSkillsAPI: a public skill's folder goes in as a zip or tar and
// comes out the same way, binary asset and every front matter field
// intact; skills saved under the old identifier names stay reachable.
func TestAgentSkillsAPI(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	pdf := skillstest.Skill(t, skillstest.PDF)
	zipped := skillstest.Zip(t, skillstest.Folder(t, skillstest.PDF, skillstest.PDF))
	r := h.do(t, h.keyA, "PUT", "/v1/skills/pdf-processing", string(zipped), "Content-Type", "application/zip")
	if r.status != 201 {
		t.Fatalf("zip upload: %d %s", r.status, r.body)
	}
	var got struct {
		skills.Skill
		SkillMD string `json:"skill_md"`
	}
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	if err := got.Validate(); err != nil { // decodes base64 files
		t.Fatal(err)
	}
	got.Version = 0
	if !reflect.DeepEqual(got.Skill, pdf) {
		t.Errorf("uploaded skill:\n got %+v\nwant %+v", got.Skill, pdf)
	}
	if !strings.Contains(string(r.body), `"path":"assets/logo.png","content":"iVBORw0K`) || !strings.Contains(string(r.body), `"encoding":"base64"`) {
		t.Errorf("the binary asset is not base64 in JSON: %s", r.body)
	}

	tarred := skillstest.Tar(t, skillstest.Folder(t, skillstest.EveryField, skillstest.EveryField))
	if r := h.do(t, h.keyA, "PUT", "/v1/skills/release-notes", string(tarred), "Content-Type", "application/x-tar"); r.status != 201 ||
		!strings.Contains(string(r.body), `"allowed_tools":"Bash(git log:*) Bash(git tag:*) Read"`) || !strings.Contains(string(r.body), `"metadata":{"author":"example-org","category":"docs","version":"2.1"}`) {
		t.Errorf("tar upload: %d %s", r.status, r.body)
	}
	if r := h.do(t, h.keyA, "PUT", "/v1/skills/release-notes", string(zipped), "Content-Type", "application/zip"); r.status != 400 || !strings.Contains(string(r.body), `"field":"name"`) {
		t.Errorf("a zip of another skill: %d %s", r.status, r.body)
	}

	// Download, by Accept or by ?format=, as the folder the standard expects.
	for _, c := range []struct{ query, accept, format, ctype string }{
		{"", "application/zip", skills.FormatZip, "application/zip"},
		{"?format=zip", "", skills.FormatZip, "application/zip"},
		{"?format=tar&version=1", "", skills.FormatTar, "application/x-tar"},
		{"", "application/x-tar, application/json;q=0.5", skills.FormatTar, "application/x-tar"},
	} {
		hdr := []string{}
		if c.accept != "" {
			hdr = []string{"Accept", c.accept}
		}
		r := h.do(t, h.keyA, "GET", "/v1/skills/pdf-processing"+c.query, "", hdr...)
		if r.status != 200 || r.header.Get("Content-Type") != c.ctype || !strings.Contains(r.header.Get("Content-Disposition"), `filename=pdf-processing.`+c.format) {
			t.Errorf("download %s %s: %d %v", c.query, c.accept, r.status, r.header)
			continue
		}
		back, err := skills.ReadArchive(c.format, r.body)
		if err != nil || !reflect.DeepEqual(back, pdf) {
			t.Errorf("download %s %s does not read back as the skill: %v", c.query, c.accept, err)
		}
		if c.format == skills.FormatZip {
			zr, _ := zip.NewReader(bytes.NewReader(r.body), int64(len(r.body)))
			for _, f := range zr.File {
				if !strings.HasPrefix(f.Name, "pdf-processing/") {
					t.Errorf("zip entry %s is not in the skill's folder", f.Name)
				}
			}
		}
	}
	if r := h.do(t, h.keyA, "GET", "/v1/skills/pdf-processing", "", "Accept", "application/json"); r.header.Get("Content-Type") != "application/json" {
		t.Errorf("JSON by default: %v", r.header)
	}
	if r := h.do(t, h.keyB, "GET", "/v1/skills/pdf-processing?format=zip", ""); r.status != 404 {
		t.Errorf("another tenant downloaded the skill: %d", r.status)
	}

	// The store refuses a name that is not the standard's, as the API does.
	bad := skills.Skill{Name: "tidy_logs", Description: "d", Body: "b", Tags: []string{}, Requires: []string{}, Language: "python", Files: []skills.File{}}
	if _, err := h.st.SaveSkill(context.Background(), h.tenantA, bad); err == nil {
		t.Fatal("the store saved a non-standard name")
	}
}
