package ingress_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gantryhq/gantry/jobs"

	"github.com/mark3labs/mcp-go/mcp"
)

// TestMCPArgumentErrorsInPlainWords: arguments that break a tool's input
// schema are answered with a tool error a model can act on, naming the
// argument and what it must be, for each kind of schema error, in calls
// and in task-augmented calls alike.
func TestMCPArgumentErrorsInPlainWords(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	c := h.mcpClient(t, h.keyA, mcp.LATEST_PROTOCOL_VERSION)
	code := map[string]any{"language": "python", "code": "print(1)"}
	with := func(extra map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range code {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	for _, c2 := range []struct {
		tool string
		args map[string]any
		want string
	}{
		// enum
		{"execute_code", map[string]any{"language": "ruby", "code": "x"}, `language must be one of python, bash, node, typescript, c, cpp, go, java, rust, not "ruby"`},
		// required
		{"execute_code", map[string]any{"language": "python"}, "code is required"},
		{"execute_code", map[string]any{}, "language and code are required"},
		// type
		{"execute_code", with(map[string]any{"timeout_ms": "soon"}), "timeout_ms must be an integer, not text"},
		{"execute_code", with(map[string]any{"files": "a.csv"}), "files must be a list, not text"},
		// additionalProperties, with the allowed names
		{"execute_code", with(map[string]any{"colour": "red"}), `unknown argument "colour" (allowed: code, environment, files, language, session_id, stdin, stdin_encoding, timeout_ms)`},
		{"execute_code", with(map[string]any{"files": []any{map[string]any{"path": "a", "content": "b", "mode": 7}}}), `unknown argument "mode" in files[0] (allowed: content, encoding, path)`},
		// nested required and enum
		{"execute_code", with(map[string]any{"files": []any{map[string]any{"path": "a"}}}), "files[0].content is required"},
		{"execute_code", with(map[string]any{"files": []any{map[string]any{"path": "a", "content": "b", "encoding": "hex"}}}), `files[0].encoding must be one of utf8, base64, not "hex"`},
		// minLength, maxLength
		{"execute_code", map[string]any{"language": "python", "code": ""}, "code must not be empty"},
		{"save_skill", map[string]any{"name": "x", "description": strings.Repeat("d", 1025), "body": "b"}, "description is 1025 characters long; at most 1024"},
		// minimum, maximum
		{"get_job", map[string]any{"job_id": "job_x", "wait_ms": -1}, "wait_ms must be at least 0, not -1"},
		// bounds the server checks itself, in the same words as the HTTP API
		{"execute_code", with(map[string]any{"timeout_ms": 1_000_000}), "timeout_ms must be between 1 and 900000"},
		{"execute_code", map[string]any{"language": "python", "code": strings.Repeat("x", 32<<10+1)}, "code is 32769 bytes; at most 32768"},
		{"get_job", map[string]any{"job_id": "job_x", "wait_ms": 61_000}, "wait_ms must be at most 60000, not 61000"},
		{"search_skills", map[string]any{"query": "x", "limit": 51}, "limit must be at most 50, not 51"},
		// maxItems
		{"save_skill", map[string]any{"name": "x", "description": "d", "body": "b", "tags": make([]any, 21)}, "tags has 21 items; at most 20"},
		// pattern
		{"save_skill", map[string]any{"name": "Bad_Name", "description": "d", "body": "b"}, `name "Bad_Name" does not have the required form: Lowercase letters, digits and single hyphens, e.g. tidy-logs`},
		// several at once
		{"get_artifact_url", map[string]any{"job_id": 7}, "path is required; job_id must be text, not a number"},
	} {
		res := call(t, c, c2.tool, c2.args)
		got := text(res)
		if !res.IsError || !strings.Contains(got, c2.want) {
			t.Errorf("%s %v:\n got %q\nwant %q", c2.tool, c2.args, got, c2.want)
		}
		for _, leak := range []string{"&{", "Got:", "Want:", "input schema validation failed", "/language"} {
			if strings.Contains(got, leak) {
				t.Errorf("%s: %q shows the validator's internals", c2.tool, got)
			}
		}
	}

	// A task-augmented call is checked the same way (mcp-go checks none):
	// no job is queued, so a 2025-11-25 client gets an invalid-params error
	// in the same words, and a client of the tasks extension the tool error.
	legacy := legacyClient(t, h)
	bad := map[string]any{"name": "execute_code", "arguments": map[string]any{"language": "ruby", "code": "x"}, "task": map[string]any{}}
	if msg := legacy.callError("tools/call", bad); !strings.Contains(msg, "-32602") || !strings.Contains(msg, "language must be one of python, bash, node") {
		t.Errorf("task with bad arguments: %s", msg)
	}
	var res struct {
		IsError bool `json:"isError"`
		Content []struct{ Text string }
	}
	modern := &rawMCP{t: t, h: h, modern: true, tasksExt: true}
	_ = json.Unmarshal(modern.call("tools/call", bad), &res)
	if !res.IsError || len(res.Content) == 0 || !strings.Contains(res.Content[0].Text, "language must be one of python, bash, node, typescript") {
		t.Errorf("task with bad arguments (tasks extension): %+v", res)
	}
	var list struct{ Jobs []jobs.Job }
	h.do(t, h.keyA, "GET", "/v1/jobs", "").json(t, &list)
	if len(list.Jobs) != 0 {
		t.Errorf("calls with bad arguments queued %d jobs", len(list.Jobs))
	}
}
