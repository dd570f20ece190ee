package mcpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/gantryhq/gantry/ingress/httpapi"
	"github.com/gantryhq/gantry/ingress/openapi"
	"github.com/gantryhq/gantry/ingress/service"
	"github.com/gantryhq/gantry/jobs"
)

const sessionBehaviour = "A session is a workspace (/workspace) whose files persist from call to call, on whichever machine runs it; " +
	"its calls run one at a time, in order. Only /workspace persists, unless stateful: then Python calls share one interpreter " +
	"(variables, imports, loaded data) and /tmp and background processes persist too, until the live state is lost (a call says so in live_state). " +
	"A call that times out or is cancelled leaves /workspace as it was. An idle session expires after ttl_seconds and its files are deleted."

// The MCP session tools' arguments and answers.
type (
	// sessionArgs name a session.
	sessionArgs struct {
		SessionID string `json:"session_id"`
	}
	// createSessionArgs are create_session's.
	createSessionArgs struct {
		Language    string `json:"language,omitempty"`
		TTLSeconds  int    `json:"ttl_seconds,omitempty"`
		Environment string `json:"environment,omitempty"`
		Stateful    bool   `json:"stateful,omitempty"`
		Snapshot    string `json:"snapshot,omitempty"`
	}
	// sessionCreated is create_session's answer.
	sessionCreated struct {
		SessionID  string    `json:"session_id"`
		Language   string    `json:"language"`
		TTLSeconds int       `json:"ttl_seconds"`
		ExpiresAt  time.Time `json:"expires_at"`
		Stateful   bool      `json:"stateful"`
	}
	executeBashArgs struct {
		sessionArgs
		Command   string `json:"command"`
		TimeoutMS int    `json:"timeout_ms,omitempty"`
	}
	readFileArgs struct {
		sessionArgs
		Path      string `json:"path"`
		Offset    int    `json:"offset,omitempty"`
		LineCount int    `json:"line_count,omitempty"`
	}
	// filePage is read_file's answer: a page of lines.
	filePage struct {
		Path       string `json:"path"`
		Content    string `json:"content"`
		Offset     int    `json:"offset"`
		LineCount  int    `json:"line_count"`
		TotalLines int    `json:"total_lines"`
		NextOffset *int   `json:"next_offset"`
	}
	writeFileArgs struct {
		sessionArgs
		Path    string `json:"path"`
		Content string `json:"content"`
	}
	listFilesArgs struct {
		sessionArgs
		Path string `json:"path,omitempty"`
	}
	readDocstringArgs struct {
		sessionArgs
		Path     string `json:"path"`
		Function string `json:"function"`
	}
	// docstring is read_docstring's answer.
	docstring struct {
		Function  string  `json:"function"`
		Signature string  `json:"signature"`
		Docstring *string `json:"docstring"`
		Line      int     `json:"line"`
	}
	// sessionClosed is close_session's answer.
	sessionClosed struct {
		SessionID string `json:"session_id"`
		Closed    bool   `json:"closed"`
	}
)

func (s *Server) addSessionTools(ms *server.MCPServer, tools *toolCatalog) {
	tools.add(ms, toolsetSessions, mcp.NewTool("create_session",
		mcp.WithDescription("Create a session for multi-step work; pass its session_id to execute_code and the file tools. "+sessionBehaviour+" Close it with close_session."),
		mcp.WithTitleAnnotation("Create session"),
		mcp.WithDestructiveHintAnnotation(false),
		mcp.WithOpenWorldHintAnnotation(false),
		inputOf[createSessionArgs](toolNote{props: map[string]js{
			"language":    {"enum": openapi.Enum(jobs.LanguageNames())},
			"ttl_seconds": {"minimum": jobs.MinSessionTTL, "maximum": jobs.MaxSessionTTL, "description": fmt.Sprintf("idle time before it expires (default %d)", jobs.DefaultSessionTTL)},
			"environment": {"description": "a sandbox image with more packages, for every job of the session; absent: the default"},
			"stateful":    {"description": "keep variables, imports, /tmp and background processes between calls (like notebook cells); each Python call then also returns its last expression's value"},
			"snapshot":    {"pattern": "^snp_", "description": "start from a snapshot (snapshot_session): its live state and files; stateful"},
		}}),
		outputOf[sessionCreated](toolNote{}),
	), s.toolCreateSession)

	tools.add(ms, toolsetSessions, mcp.NewTool("execute_bash",
		mcp.WithDescription("Run a bash command in a session's workspace and wait for it; answers like get_job."),
		mcp.WithTitleAnnotation("Run bash in session"),
		mcp.WithDestructiveHintAnnotation(false),
		mcp.WithOpenWorldHintAnnotation(false),
		inputOf[executeBashArgs](toolNote{props: map[string]js{
			"command":    {"minLength": 1},
			"timeout_ms": {"minimum": 1, "maximum": s.svc.Policy().MaxTimeoutMS},
		}}),
	), s.toolExecuteBash)

	tools.add(ms, toolsetSessions, mcp.NewTool("read_file",
		mcp.WithDescription("Read a page of lines of a text file in a session's workspace: offset is the first line (from 0), line_count how many (default 200); next_offset is where the next page starts (null at the end)."),
		mcp.WithTitleAnnotation("Read file"),
		mcp.WithReadOnlyHintAnnotation(true),
		mcp.WithOpenWorldHintAnnotation(false),
		inputOf[readFileArgs](toolNote{props: map[string]js{"offset": {"minimum": 0}, "line_count": {"minimum": 1, "maximum": 5000}}}),
		outputOf[filePage](toolNote{}),
	), s.toolReadFile)

	tools.add(ms, toolsetSessions, mcp.NewTool("write_file",
		mcp.WithDescription("Write a text file into a session's workspace (directories are created, a file replaced), after any call running in the session."),
		mcp.WithTitleAnnotation("Write file"),
		mcp.WithIdempotentHintAnnotation(true),
		mcp.WithOpenWorldHintAnnotation(false),
		inputOf[writeFileArgs](toolNote{}),
		outputOf[service.FileInfo](fileNote("")),
	), s.toolWriteFile)

	tools.add(ms, toolsetSessions, mcp.NewTool("list_files",
		mcp.WithDescription("List a session's files (recursively) with sizes and times; path limits it to a directory."),
		mcp.WithTitleAnnotation("List files"),
		mcp.WithReadOnlyHintAnnotation(true),
		mcp.WithOpenWorldHintAnnotation(false),
		inputOf[listFilesArgs](toolNote{}),
		outputOf[httpapi.FileList](fileNote("files.")),
	), s.toolListFiles)

	tools.add(ms, toolsetSessions, mcp.NewTool("read_docstring",
		mcp.WithDescription("A Python function's (or class's, or Class.method's) signature and docstring from a .py file in a session's workspace, found by parsing the file (it is not run)."),
		mcp.WithTitleAnnotation("Read docstring"),
		mcp.WithReadOnlyHintAnnotation(true),
		mcp.WithOpenWorldHintAnnotation(false),
		inputOf[readDocstringArgs](toolNote{props: map[string]js{
			"function": {"pattern": `^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`, "description": "name, or Class.method"},
		}}),
		outputOf[docstring](toolNote{}),
	), s.toolReadDocstring)

	tools.add(ms, toolsetSessions, mcp.NewTool("close_session",
		mcp.WithDescription("Close a session: stops its running call, drops queued ones, deletes its files."),
		mcp.WithTitleAnnotation("Close session"),
		mcp.WithOpenWorldHintAnnotation(false),
		inputOf[sessionArgs](toolNote{}),
		outputOf[sessionClosed](toolNote{}),
	), s.toolCloseSession)
}

// fileNote is what a FileInfo's type cannot say, at prefix.
func fileNote(prefix string) toolNote {
	return toolNote{props: map[string]js{prefix + "type": {"enum": []any{"file", "dir", "symlink"}}}}
}

func (s *Server) toolCreateSession(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args createSessionArgs
	p, res, err := begin(ctx, req, &args)
	if res != nil || err != nil {
		return res, err
	}
	sess, err := s.svc.CreateSession(ctx, p, jobs.SessionRequest{Language: args.Language, TTLSeconds: args.TTLSeconds, Environment: args.Environment,
		Stateful: args.Stateful, Snapshot: args.Snapshot})
	if err != nil {
		return toolError(err), nil
	}
	out := sessionCreated{SessionID: sess.ID, Language: sess.Language, TTLSeconds: sess.TTLSeconds, ExpiresAt: sess.ExpiresAt, Stateful: sess.Stateful}
	kind := ""
	if sess.Stateful {
		kind = "stateful "
	}
	return mcp.NewToolResultStructured(out, fmt.Sprintf("%ssession %s created (%s); it expires after %d s idle", kind, sess.ID, sess.Language, sess.TTLSeconds)), nil
}

func (s *Server) toolExecuteBash(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args executeBashArgs
	if _, res, err := begin(ctx, req, &args); res != nil || err != nil {
		return res, err
	}
	return s.runAndWait(ctx, req, jobs.Request{Language: "bash", Code: args.Command, TimeoutMS: args.TimeoutMS,
		SessionID: &args.SessionID, Metadata: map[string]string{"via": "mcp", "tool": "execute_bash"}})
}

// maxReadFile caps the file read_file pages through.
const maxReadFile = 16 << 20

func (s *Server) toolReadFile(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args readFileArgs
	p, res, err := begin(ctx, req, &args)
	if res != nil || err != nil {
		return res, err
	}
	if args.LineCount == 0 {
		args.LineCount = 200
	}
	var content []byte
	err = s.svc.ReadFile(ctx, p, args.SessionID, args.Path, func(fi service.FileInfo, r io.Reader) error {
		if fi.Size > maxReadFile {
			return service.BadRequest("path", "%s is %d bytes; read_file pages through files up to %d bytes (process bigger ones with a program)", fi.Path, fi.Size, maxReadFile)
		}
		// The bytes, the text made of them, and the page's JSON.
		if _, err := service.Hold(ctx, 3*fi.Size); err != nil {
			return err
		}
		var err error
		content, err = io.ReadAll(io.LimitReader(r, fi.Size))
		return err
	})
	if err != nil {
		return toolError(err), nil
	}
	if !utf8.Valid(content) || bytes.IndexByte(content, 0) >= 0 {
		return mcp.NewToolResultError(fmt.Sprintf("%s is a binary file (%d bytes); inspect it with a program, or download it with GET /v1/sessions/%s/files/%s", args.Path, len(content), args.SessionID, args.Path)), nil
	}
	lines := strings.SplitAfter(string(content), "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	start := min(args.Offset, len(lines))
	end := min(start+args.LineCount, len(lines))
	page := strings.Join(lines[start:end], "")
	var next *int
	if end < len(lines) {
		next = &end
	}
	out := filePage{Path: args.Path, Content: page, Offset: start, LineCount: end - start, TotalLines: len(lines), NextOffset: next}
	text := page
	if next != nil {
		text += fmt.Sprintf("\n[lines %d-%d of %d; continue with offset=%d]", start, end, len(lines), end)
	}
	return mcp.NewToolResultStructured(out, text), nil
}

func (s *Server) toolWriteFile(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args writeFileArgs
	p, res, err := begin(ctx, req, &args)
	if res != nil || err != nil {
		return res, err
	}
	fi, err := s.svc.WriteFile(ctx, p, args.SessionID, args.Path, []byte(args.Content))
	if err != nil {
		return toolError(err), nil
	}
	return mcp.NewToolResultStructured(fi, fmt.Sprintf("wrote %s (%d bytes)", fi.Path, fi.Size)), nil
}

func (s *Server) toolListFiles(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args listFilesArgs
	p, res, err := begin(ctx, req, &args)
	if res != nil || err != nil {
		return res, err
	}
	files, err := s.svc.ListFiles(ctx, p, args.SessionID, args.Path)
	if err != nil {
		return toolError(err), nil
	}
	var b strings.Builder
	for _, f := range files {
		switch f.Type {
		case "dir":
			fmt.Fprintf(&b, "%s/\n", f.Path)
		case "symlink":
			fmt.Fprintf(&b, "%s -> %s\n", f.Path, f.Target)
		default:
			fmt.Fprintf(&b, "%s  %d bytes  %s\n", f.Path, f.Size, f.ModifiedAt.Format(time.RFC3339))
		}
	}
	if len(files) == 0 {
		b.WriteString("(empty)\n")
	}
	return mcp.NewToolResultStructured(httpapi.FileList{Files: files}, b.String()), nil
}

// docstringScript finds a definition with Python's own parser; it never
// imports or runs the file. Its inputs come through the environment, so
// nothing the caller sends becomes code.
const docstringScript = `import ast, json, os, sys
path, name = os.environ["GANTRY_PATH"], os.environ["GANTRY_FUNCTION"]
try:
    tree = ast.parse(open(path, encoding="utf-8").read(), filename=path)
except FileNotFoundError:
    print(json.dumps({"error": path + " does not exist"})); sys.exit(0)
except (SyntaxError, UnicodeDecodeError) as e:
    print(json.dumps({"error": "cannot parse " + path + ": " + str(e)})); sys.exit(0)
node, body = None, tree.body
for part in name.split("."):
    node = next((n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == part), None)
    if node is None:
        print(json.dumps({"error": name + " is not defined in " + path})); sys.exit(0)
    body = node.body
if isinstance(node, ast.ClassDef):
    sig = "class " + node.name + ("(" + ", ".join(ast.unparse(b) for b in node.bases) + ")" if node.bases else "")
else:
    sig = ("async def " if isinstance(node, ast.AsyncFunctionDef) else "def ") + node.name + "(" + ast.unparse(node.args) + ")"
    if node.returns is not None:
        sig += " -> " + ast.unparse(node.returns)
print(json.dumps({"function": name, "signature": sig, "docstring": ast.get_docstring(node), "line": node.lineno}))
`

func (s *Server) toolReadDocstring(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args readDocstringArgs
	if _, res, err := begin(ctx, req, &args); res != nil || err != nil {
		return res, err
	}
	path, err := jobs.CleanPath(args.Path)
	if err != nil {
		return mcp.NewToolResultError("path " + err.Error()), nil
	}
	// It runs as a job of the session, so it sees the workspace in order
	// with the session's other calls.
	req.Params.Meta = nil
	res, err := s.runAndWait(ctx, req, jobs.Request{Language: "python", Code: docstringScript, TimeoutMS: 30_000,
		SessionID: &args.SessionID, Env: map[string]string{"GANTRY_PATH": path, "GANTRY_FUNCTION": args.Function},
		Metadata: map[string]string{"via": "mcp", "tool": "read_docstring"}})
	if err != nil || res.IsError {
		return res, err
	}
	job, _ := res.StructuredContent.(jobResult)
	if job.Status != jobs.StatusSucceeded {
		return mcp.NewToolResultError(fmt.Sprintf("could not read the docstring (job %s %s): %s", job.JobID, job.Status, strings.TrimSpace(job.Stderr))), nil
	}
	var out struct {
		Error string `json:"error,omitempty"`
		docstring
	}
	if err := json.Unmarshal([]byte(job.Stdout), &out); err != nil {
		return mcp.NewToolResultError("could not read the docstring: unexpected output " + truncateText(job.Stdout, 200)), nil
	}
	if out.Error != "" {
		return mcp.NewToolResultError(out.Error), nil
	}
	text := out.Signature + "\n"
	if out.Docstring != nil {
		text += *out.Docstring + "\n"
	} else {
		text += "(no docstring)\n"
	}
	return mcp.NewToolResultStructured(out.docstring, text), nil
}

func (s *Server) toolCloseSession(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args sessionArgs
	p, res, err := begin(ctx, req, &args)
	if res != nil || err != nil {
		return res, err
	}
	if err := s.svc.CloseSession(ctx, p, args.SessionID); err != nil {
		return toolError(err), nil
	}
	return mcp.NewToolResultStructured(sessionClosed{SessionID: args.SessionID, Closed: true}, "session "+args.SessionID+" closed"), nil
}

func truncateText(s string, n int) string {
	if len(s) > n {
		return strings.ToValidUTF8(s[:n], "") + "…"
	}
	return s
}
