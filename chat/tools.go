package chat

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/localapi"
)

// The tools the loop offers the model. Each is carried out through the API
// as the request's tenant, so it sees only that tenant's jobs, sessions,
// skills and upstream tools, under its quotas.

// Caps on what a tool hands back to the model: the point of running code
// is that only a small result enters its context.
const (
	maxStdout   = 8 << 10
	maxStderr   = 4 << 10
	maxFileRead = 32 << 10
	maxSkillMD  = 16 << 10
)

var toolSpecs = []Tool{
	fn("execute_code", "Run a program in a fresh, locked-down sandbox (no network) and wait for it. Returns status, exit code, stdout, stderr and the files it wrote under out/ (artifacts). Matplotlib figures left open are saved to out/ automatically. Print only what you need: long output is cut.",
		`{"type":"object","properties":{"language":{"type":"string","enum":["python","bash","node","typescript"],"description":"the program's language"},"code":{"type":"string","description":"the program"},"session_id":{"type":"string","description":"run in this session's persistent workspace (optional)"},"timeout_ms":{"type":"integer","description":"wall-clock limit (optional)"}},"required":["language","code"],"additionalProperties":false}`),
	fn("search_skills", "Search the skills (reusable know-how with code, mounted read-only at /skills/<name>/ in every sandbox) by text; returns names and one-line descriptions.",
		`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"],"additionalProperties":false}`),
	fn("get_skill", "Read a skill's SKILL.md (instructions and examples) and the list of its files.",
		`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":false}`),
	fn("search_tools", "Search the tools of the upstream MCP servers that code can call (Python: from servers.<server> import <tool>). Returns one line per tool.",
		`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"],"additionalProperties":false}`),
	fn("list_files", "List the files of a session's workspace.",
		`{"type":"object","properties":{"session_id":{"type":"string"},"path":{"type":"string","description":"a directory (optional)"}},"required":["session_id"],"additionalProperties":false}`),
	fn("read_file", "Read a text file of a session's workspace (the first 32 KiB).",
		`{"type":"object","properties":{"session_id":{"type":"string"},"path":{"type":"string"}},"required":["session_id","path"],"additionalProperties":false}`),
}

func fn(name, desc, schema string) Tool {
	return Tool{Type: "function", Function: FunctionSpec{Name: name, Description: desc, Parameters: json.RawMessage(schema)}}
}

// ToolResult is what a tool call did, for the model (Content) and for
// people watching (the rest).
type ToolResult struct {
	// Content is the text the model reads.
	Content string
	// OK is false when the call failed (bad arguments, an API error).
	OK bool
	// JobID, Status and Artifacts describe the job execute_code ran.
	JobID     string
	Status    jobs.Status
	Artifacts []jobs.Artifact
}

// runTool carries out one tool call. A failure is a result the model reads
// (it can correct itself), never an error of the loop.
func runTool(ctx context.Context, api *localapi.Client, call ToolCall) ToolResult {
	args := []byte(call.Function.Arguments)
	if len(bytes.TrimSpace(args)) == 0 {
		args = []byte("{}")
	}
	fail := func(format string, a ...any) ToolResult {
		return ToolResult{Content: "error: " + fmt.Sprintf(format, a...)}
	}
	apiFail := func(err error) ToolResult { return fail("%s", localapi.AsError(err).Message) }
	switch call.Function.Name {
	case "execute_code":
		var in struct {
			Language  string `json:"language"`
			Code      string `json:"code"`
			SessionID string `json:"session_id"`
			TimeoutMS int    `json:"timeout_ms"`
		}
		if err := decodeArgs(args, &in); err != nil {
			return fail("%v", err)
		}
		req := map[string]any{"language": in.Language, "code": in.Code, "metadata": map[string]string{"agent": "gantry-chat"}}
		if in.SessionID != "" {
			req["session_id"] = in.SessionID
		}
		if in.TimeoutMS != 0 {
			req["timeout_ms"] = in.TimeoutMS
		}
		var job jobs.Job
		// No ?wait=: the API waits up to its own maximum (the operator's
		// longest job timeout and 30 s), which no fixed wait could know.
		if err := api.JSON(ctx, http.MethodPost, "/v1/execute", req, &job); err != nil {
			return apiFail(err)
		}
		return jobResult(job)
	case "search_skills":
		var in struct {
			Query string `json:"query"`
		}
		if err := decodeArgs(args, &in); err != nil {
			return fail("%v", err)
		}
		var out struct {
			Skills []struct {
				Name        string `json:"name"`
				Description string `json:"description"`
			} `json:"skills"`
		}
		if err := api.JSON(ctx, http.MethodGet, "/v1/skills?limit=8&q="+url.QueryEscape(in.Query), nil, &out); err != nil {
			return apiFail(err)
		}
		if len(out.Skills) == 0 {
			return ToolResult{OK: true, Content: "no skill matches"}
		}
		var b strings.Builder
		for _, s := range out.Skills {
			fmt.Fprintf(&b, "- %s: %s\n", s.Name, oneLine(s.Description, 200))
		}
		return ToolResult{OK: true, Content: b.String()}
	case "get_skill":
		var in struct {
			Name string `json:"name"`
		}
		if err := decodeArgs(args, &in); err != nil {
			return fail("%v", err)
		}
		var sk struct {
			SkillMD string `json:"skill_md"`
			Files   []struct {
				Path string `json:"path"`
			} `json:"files"`
		}
		if err := api.JSON(ctx, http.MethodGet, "/v1/skills/"+url.PathEscape(in.Name), nil, &sk); err != nil {
			return apiFail(err)
		}
		var b strings.Builder
		b.WriteString(truncate(sk.SkillMD, maxSkillMD))
		if len(sk.Files) > 0 {
			fmt.Fprintf(&b, "\n\nFiles (at /skills/%s/):\n", in.Name)
			for _, f := range sk.Files {
				b.WriteString("- " + f.Path + "\n")
			}
		}
		return ToolResult{OK: true, Content: b.String()}
	case "search_tools":
		var in struct {
			Query string `json:"query"`
		}
		if err := decodeArgs(args, &in); err != nil {
			return fail("%v", err)
		}
		var out struct {
			Tools []struct {
				Server      string `json:"server"`
				Name        string `json:"name"`
				Description string `json:"description"`
			} `json:"tools"`
		}
		if err := api.JSON(ctx, http.MethodGet, "/v1/tools?limit=10&detail=description&q="+url.QueryEscape(in.Query), nil, &out); err != nil {
			return apiFail(err)
		}
		if len(out.Tools) == 0 {
			return ToolResult{OK: true, Content: "no upstream tool matches"}
		}
		var b strings.Builder
		for _, t := range out.Tools {
			fmt.Fprintf(&b, "- %s.%s: %s\n", t.Server, t.Name, oneLine(t.Description, 200))
		}
		return ToolResult{OK: true, Content: b.String()}
	case "list_files":
		var in struct {
			SessionID string `json:"session_id"`
			Path      string `json:"path"`
		}
		if err := decodeArgs(args, &in); err != nil {
			return fail("%v", err)
		}
		var out struct {
			Files []struct {
				Path string `json:"path"`
				Type string `json:"type"`
				Size int64  `json:"size"`
			} `json:"files"`
		}
		p := "/v1/sessions/" + url.PathEscape(in.SessionID) + "/files"
		if in.Path != "" {
			p += "?path=" + url.QueryEscape(in.Path)
		}
		if err := api.JSON(ctx, http.MethodGet, p, nil, &out); err != nil {
			return apiFail(err)
		}
		if len(out.Files) == 0 {
			return ToolResult{OK: true, Content: "no files"}
		}
		var b strings.Builder
		for i, f := range out.Files {
			if i == 200 {
				fmt.Fprintf(&b, "... and %d more\n", len(out.Files)-i)
				break
			}
			fmt.Fprintf(&b, "%s\t%s\t%d\n", f.Type, f.Path, f.Size)
		}
		return ToolResult{OK: true, Content: b.String()}
	case "read_file":
		var in struct {
			SessionID string `json:"session_id"`
			Path      string `json:"path"`
		}
		if err := decodeArgs(args, &in); err != nil {
			return fail("%v", err)
		}
		// Only the start of the file is read: a session's file may be
		// gigabytes, and the agent shows maxFileRead bytes of it.
		resp, err := api.DoLimited(ctx, http.MethodGet, "/v1/sessions/"+url.PathEscape(in.SessionID)+"/files/"+localapi.PathEscape(strings.TrimPrefix(in.Path, "/")), nil, "", maxFileRead+utf8.UTFMax)
		if err != nil {
			return fail("%v", err)
		}
		if err := resp.Err(); err != nil {
			return apiFail(err)
		}
		size := resp.Header.Get("Content-Length")
		body := resp.Body
		cut := resp.Cut || len(body) > maxFileRead
		if cut {
			body = body[:min(len(body), maxFileRead)]
			for len(body) > 0 && !utf8.Valid(body) { // do not split a character
				body = body[:len(body)-1]
			}
		}
		if !utf8.Valid(body) || bytes.IndexByte(body, 0) >= 0 {
			return fail("%s is not a text file (%s bytes)", in.Path, size)
		}
		s := string(body)
		if cut {
			s += fmt.Sprintf("\n[... cut: the file has %s bytes]", size)
		}
		return ToolResult{OK: true, Content: s}
	}
	return fail("unknown tool %q (the tools are execute_code, search_skills, get_skill, search_tools, list_files, read_file)", call.Function.Name)
}

// decodeArgs decodes a tool call's arguments strictly: the model learns
// of a misspelt or missing argument at once.
func decodeArgs(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("bad arguments: %v", err)
	}
	if dec.More() {
		return fmt.Errorf("bad arguments: more than one JSON value")
	}
	return nil
}

// jobResult sums a job up for the model.
func jobResult(j jobs.Job) ToolResult {
	r := ToolResult{OK: true, JobID: j.ID, Status: j.Status, Artifacts: j.Artifacts}
	out := map[string]any{"job_id": j.ID, "status": j.Status}
	if !j.Status.Terminal() {
		out["note"] = "the job is still running; its result is not known yet"
	}
	if j.ExitCode != nil {
		out["exit_code"] = *j.ExitCode
	}
	if j.Stdout != "" {
		out["stdout"] = truncate(j.Stdout, maxStdout)
	}
	if j.Stderr != "" {
		out["stderr"] = truncate(j.Stderr, maxStderr)
	}
	if j.Error != nil {
		out["error"] = j.Error.Message
	}
	if len(j.Artifacts) > 0 {
		var files []string
		for _, a := range j.Artifacts {
			files = append(files, a.Path+" ("+strconv.FormatInt(a.Size, 10)+" bytes, "+a.ContentType+")")
		}
		out["artifacts"] = files
	}
	b, _ := json.Marshal(out)
	r.Content = string(b)
	return r
}

// truncate cuts s to at most n bytes on a character boundary, saying so.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n[... cut: %d more bytes]", len(s)-cut)
}

// oneLine is s on one line, at most n bytes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
