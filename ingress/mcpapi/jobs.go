package mcpapi

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/gantryhq/gantry/ingress/openapi"
	"github.com/gantryhq/gantry/ingress/service"
	"github.com/gantryhq/gantry/jobs"
)

// codeArgs are the arguments of execute_code.
type codeArgs struct {
	Language      string      `json:"language"`
	Code          string      `json:"code"`
	Files         []jobs.File `json:"files,omitempty"`
	Stdin         string      `json:"stdin,omitempty"`
	StdinEncoding string      `json:"stdin_encoding,omitempty"`
	TimeoutMS     int         `json:"timeout_ms,omitempty"`
	SessionID     *string     `json:"session_id,omitempty"`
	Environment   string      `json:"environment,omitempty"`
}

// submitArgs are the arguments of submit_job: execute_code's, a key
// that makes retries safe, and test cases (not on execute_code, whose
// schema is in the code toolset's context).
type submitArgs struct {
	codeArgs
	IdempotencyKey string       `json:"idempotency_key,omitempty"`
	Tests          []jobs.Test  `json:"tests,omitempty"`
	Compare        jobs.Compare `json:"compare,omitempty"`
	Tolerance      float64      `json:"tolerance,omitempty"`
	StopOnFailure  bool         `json:"stop_on_failure,omitempty"`
}

func (a codeArgs) request() jobs.Request {
	return jobs.Request{Language: a.Language, Code: a.Code, Files: a.Files, Stdin: a.Stdin, StdinEncoding: a.StdinEncoding,
		TimeoutMS: a.TimeoutMS, SessionID: a.SessionID, Environment: a.Environment, Metadata: map[string]string{"via": "mcp"}}
}

func (a submitArgs) request() jobs.Request {
	r := a.codeArgs.request()
	r.IdempotencyKey = a.IdempotencyKey
	r.Tests, r.Compare, r.Tolerance, r.StopOnFailure = a.Tests, a.Compare, a.Tolerance, a.StopOnFailure
	return r
}

// jobArgs name a job (get_job, cancel_job).
type jobArgs struct {
	JobID string `json:"job_id"`
}

// getJobArgs are get_job's arguments.
type getJobArgs struct {
	jobArgs
	WaitMS int `json:"wait_ms,omitempty"`
}

// listJobsArgs are list_jobs's: GET /v1/jobs's filters.
type listJobsArgs struct {
	Status        []jobs.Status     `json:"status,omitempty"`
	Language      []string          `json:"language,omitempty"`
	CreatedAfter  string            `json:"created_after,omitempty"`
	CreatedBefore string            `json:"created_before,omitempty"`
	Metadata      map[string]string `json:"metadata,omitempty"`
	IncludeSpec   bool              `json:"include_spec,omitempty"`
	Limit         int               `json:"limit,omitempty"`
	Cursor        string            `json:"cursor,omitempty"`
}

// jobItem is a job in list_jobs's answer: what tells jobs apart
// (get_job has the output).
type jobItem struct {
	JobID     string            `json:"job_id"`
	Status    jobs.Status       `json:"status"`
	Language  string            `json:"language"`
	CreatedAt time.Time         `json:"created_at"`
	ExitCode  *int              `json:"exit_code"`
	Artifacts int               `json:"artifacts"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	Spec      *jobs.JobSpec     `json:"spec,omitempty"`
}

// jobItems is list_jobs's answer.
type jobItems struct {
	Jobs       []jobItem `json:"jobs"`
	NextCursor *string   `json:"next_cursor"`
}

// artifactArgs name a file a job wrote (get_artifact_url).
type artifactArgs struct {
	JobID string `json:"job_id"`
	Path  string `json:"path"`
}

// jobResult is the structuredContent of the job tools.
type jobResult struct {
	JobID           string          `json:"job_id"`
	Status          jobs.Status     `json:"status"`
	Attempt         int             `json:"attempt"`
	ExitCode        *int            `json:"exit_code"`
	DurationMS      *int64          `json:"duration_ms"`
	Stdout          string          `json:"stdout"`
	Stderr          string          `json:"stderr"`
	StdoutTruncated bool            `json:"stdout_truncated"`
	StderrTruncated bool            `json:"stderr_truncated"`
	Error           *jobs.ErrorInfo `json:"error"`
	Artifacts       []artifactLink  `json:"artifacts"`
	// ArtifactsOmitted are matching files left out over a cap.
	ArtifactsOmitted []jobs.OmittedArtifact `json:"artifacts_omitted,omitempty"`
	// Value, LiveState and LiveStateReason: a stateful session's job (see
	// jobs.Job).
	Value           *jobs.Value    `json:"value,omitempty"`
	LiveState       jobs.LiveState `json:"live_state,omitempty"`
	LiveStateReason string         `json:"live_state_reason,omitempty"`
	// Compile and CompileOutput report a compiled language's compile step.
	Compile       *jobs.Compile `json:"compile,omitempty"`
	CompileOutput string        `json:"compile_output,omitempty"`
	// CPUTimeMS and PeakMemoryKB are what the program used.
	CPUTimeMS    *int64 `json:"cpu_time_ms,omitempty"`
	PeakMemoryKB *int64 `json:"peak_memory_kb,omitempty"`
	// Tests and TestsPassed: a job with tests (see jobs.Job).
	Tests       []jobs.TestResult `json:"tests,omitempty"`
	TestsPassed *int              `json:"tests_passed,omitempty"`
}

// artifactLink is an artifact with a presigned URL that needs no API key.
type artifactLink struct {
	Path        string    `json:"path"`
	Size        int64     `json:"size"`
	SHA256      string    `json:"sha256"`
	ContentType string    `json:"content_type"`
	URL         string    `json:"url"`
	ExpiresAt   time.Time `json:"expires_at"`
}

func (s *Server) addJobTools(ms *server.MCPServer, tools *toolCatalog) {
	tools.add(ms, toolsetCode, mcp.NewTool("execute_code",
		mcp.WithDescription("Run code in a fresh sandbox without network and wait for its exit code, stdout, stderr and links to files it wrote to out/. "+
			"Python has numpy, pandas, scipy, matplotlib, sympy. Print only what you need. "+
			"Code calls your MCP servers' tools: from servers.<server> import <tool>."),
		mcp.WithTitleAnnotation("Run code"),
		mcp.WithTaskSupport(mcp.TaskSupportOptional),
		mcp.WithDestructiveHintAnnotation(false),
		mcp.WithOpenWorldHintAnnotation(false),
		inputOf[codeArgs](s.codeNote()),
	), s.toolExecuteCode)

	tools.add(ms, toolsetJobs, mcp.NewTool("submit_job",
		mcp.WithDescription("Queue code like execute_code; answers at once, like get_job. "+
			"The same idempotency_key returns the same job, so retries are safe. "+
			"With tests, the program is built once and run once per test (its stdin), each in a fresh sandbox; get_job has each test's result."),
		mcp.WithTitleAnnotation("Queue code"),
		mcp.WithDestructiveHintAnnotation(false),
		mcp.WithOpenWorldHintAnnotation(false),
		inputOf[submitArgs](s.submitNote()),
	), s.toolSubmitJob)

	// Five tools answer with a job (jobResult); its schema is listed once,
	// on get_job, and the others say they answer like get_job: every byte
	// of tools/list is in the model's context.
	tools.add(ms, toolsetJobs, mcp.NewTool("get_job",
		mcp.WithDescription("A job's status and, once it finished, its output and file links; waits up to wait_ms for it to finish."),
		mcp.WithTitleAnnotation("Get job"),
		mcp.WithReadOnlyHintAnnotation(true),
		mcp.WithOpenWorldHintAnnotation(false),
		inputOf[getJobArgs](toolNote{props: map[string]js{"wait_ms": {"minimum": 0, "maximum": 60000}}}),
		outputOf[jobResult](toolNote{}),
	), s.toolGetJob)

	tools.add(ms, toolsetJobs, mcp.NewTool("cancel_job",
		mcp.WithDescription("Cancel a job: a queued one never runs, a running one is killed, a finished one stays as it was. Answers like get_job."),
		mcp.WithTitleAnnotation("Cancel job"),
		mcp.WithIdempotentHintAnnotation(true),
		mcp.WithOpenWorldHintAnnotation(false),
		inputOf[jobArgs](toolNote{}),
	), s.toolCancelJob)

	tools.add(ms, toolsetJobs, mcp.NewTool("list_jobs",
		mcp.WithDescription("Your jobs, newest first, with their status (get_job has the output); filter by status, language, "+
			"a time range of creation and metadata; include_spec adds the code each ran."),
		mcp.WithTitleAnnotation("List jobs"),
		mcp.WithReadOnlyHintAnnotation(true),
		mcp.WithOpenWorldHintAnnotation(false),
		inputOf[listJobsArgs](toolNote{props: map[string]js{
			"status":         {"description": "any of these statuses"},
			"language":       {"description": "any of these languages"},
			"created_after":  {"format": "date-time", "description": "RFC 3339: created at or after"},
			"created_before": {"format": "date-time", "description": "RFC 3339: created before"},
			"metadata":       {"description": "every pair must be in the job's metadata"},
			"include_spec":   {"description": "add what each job ran: code or command, file names, env names (never values), limits"},
			"limit":          {"minimum": 1, "maximum": 100},
			"cursor":         {"description": "next_cursor of the last page"},
		}}),
		outputOf[jobItems](toolNote{}),
	), s.toolListJobs)

	tools.add(ms, toolsetCode, mcp.NewTool("get_artifact_url",
		mcp.WithDescription("A new download link (no credentials needed) for a file a job wrote."),
		mcp.WithTitleAnnotation("Artifact link"),
		mcp.WithReadOnlyHintAnnotation(true),
		mcp.WithOpenWorldHintAnnotation(false),
		inputOf[artifactArgs](toolNote{}),
		outputOf[service.PresignedURL](toolNote{}),
	), s.toolArtifactURL)
}

// codeNote is what codeArgs cannot say: the languages this server runs, and
// what a model needs to write the call. The server checks every bound and
// names the argument that breaks one.
func (s *Server) codeNote() toolNote {
	var langs []string
	for _, l := range s.svc.Policy().Offered() {
		langs = append(langs, l.Name)
	}
	return toolNote{props: map[string]js{
		"language":       {"enum": openapi.Enum(langs)},
		"code":           {"minLength": 1},
		"files.encoding": {"enum": openapi.Enum(jobs.Encodings)},
		"stdin_encoding": {"enum": openapi.Enum(jobs.Encodings)},
		"session_id":     {"description": "from create_session"},
		"environment":    {"description": "a sandbox image with more packages; absent: the default"},
	}}
}

// submitNote is codeNote with what the tests need said.
func (s *Server) submitNote() toolNote {
	n := s.codeNote()
	n.props["tests"] = js{"maxItems": jobs.MaxTests}
	n.props["tests.expected_stdout"] = js{"description": "absent: passes when the program exits 0"}
	n.props["compare"] = js{"description": "lines (default: trailing whitespace ignored), exact, or tokens (numbers within tolerance)"}
	n.props["tolerance"] = js{"minimum": 0, "maximum": 1}
	return n
}

func (s *Server) toolExecuteCode(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args codeArgs
	if _, res, err := begin(ctx, req, &args); res != nil || err != nil {
		return res, err
	}
	return s.runAndWait(ctx, req, args.request())
}

// runAndWait submits a job for a tool call and waits for it, with progress
// notifications and cancellation (see followJob). Task-augmented calls
// never get here: tasks.go answers them from the store.
func (s *Server) runAndWait(ctx context.Context, req mcp.CallToolRequest, jr jobs.Request) (*mcp.CallToolResult, error) {
	p, ok := service.PrincipalFrom(ctx)
	if !ok {
		return nil, errNoPrincipal
	}
	var progress mcp.ProgressToken
	if req.Params.Meta != nil {
		progress = req.Params.Meta.ProgressToken
	}
	job, _, err := s.svc.SubmitJob(ctx, p, jr)
	if err != nil {
		return toolError(err), nil
	}
	job, err = s.followJob(ctx, p, job, progress)
	if err != nil {
		return toolError(err), nil
	}
	return s.jobToolResult(ctx, p, job), nil
}

// followJob waits for the job to finish, forwarding its output as progress
// notifications when the client asked for them: all of it, in order, each
// byte once (service.FollowJob: output the job wrote before the
// subscription, as a short job's may, comes from its runner or its
// record). If ctx ends first (the client cancelled the call, or went
// away), the job is cancelled too.
func (s *Server) followJob(ctx context.Context, p service.Principal, job jobs.Job, progressToken mcp.ProgressToken) (jobs.Job, error) {
	until := time.Now().Add(s.svc.MaxWait())
	var err error
	if ms := server.ServerFromContext(ctx); progressToken != nil && ms != nil {
		sent := 0
		job, err = s.svc.FollowJob(ctx, p, job, service.Follow{Until: until, OnText: func(stream, text string) {
			sent += len(text)
			_ = ms.SendNotificationToClient(ctx, "notifications/progress", map[string]any{
				"progressToken": progressToken,
				"progress":      sent,
				"message":       stream + ": " + text,
			})
		}})
	} else {
		job, err = s.svc.WaitJob(ctx, p, job, service.Watch{Until: until})
	}
	if err != nil || ctx.Err() == nil || job.Status.Terminal() {
		return job, err
	}
	// The client cancelled the call (or went away): stop the job.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if cancelled, err := s.svc.CancelJob(cctx, p, job.ID); err == nil {
		job = cancelled
	}
	return job, nil
}

func (s *Server) toolSubmitJob(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args submitArgs
	p, res, err := begin(ctx, req, &args)
	if res != nil || err != nil {
		return res, err
	}
	job, _, err := s.svc.SubmitJob(ctx, p, args.request())
	if err != nil {
		return toolError(err), nil
	}
	return s.jobToolResult(ctx, p, job), nil
}

func (s *Server) toolGetJob(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args getJobArgs
	p, res, err := begin(ctx, req, &args)
	if res != nil || err != nil {
		return res, err
	}
	job, err := s.svc.Job(ctx, p, args.JobID)
	if err != nil {
		return toolError(err), nil
	}
	if wait := time.Duration(min(max(args.WaitMS, 0), 60_000)) * time.Millisecond; wait > 0 && !job.Status.Terminal() {
		if job, err = s.svc.WaitJob(ctx, p, job, service.Watch{Until: time.Now().Add(wait)}); err != nil {
			return toolError(err), nil
		}
	}
	return s.jobToolResult(ctx, p, job), nil
}

func (s *Server) toolCancelJob(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args jobArgs
	p, res, err := begin(ctx, req, &args)
	if res != nil || err != nil {
		return res, err
	}
	job, err := s.svc.CancelJob(ctx, p, args.JobID)
	if err != nil {
		return toolError(err), nil
	}
	return s.jobToolResult(ctx, p, job), nil
}

func (s *Server) toolListJobs(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args listJobsArgs
	p, res, err := begin(ctx, req, &args)
	if res != nil || err != nil {
		return res, err
	}
	// The filters are checked as GET /v1/jobs's are, in the same words.
	statuses := make([]string, len(args.Status))
	for i, st := range args.Status {
		statuses[i] = string(st)
	}
	limit := 0 // the default
	if args.Limit > 0 {
		limit = min(args.Limit, 100)
	}
	page, err := s.svc.ListJobs(ctx, p, service.JobQuery{
		Statuses: statuses, Languages: args.Language, CreatedAfter: args.CreatedAfter, CreatedBefore: args.CreatedBefore,
		Metadata: args.Metadata, Limit: limit, Cursor: args.Cursor, IncludeSpec: args.IncludeSpec,
	})
	if err != nil {
		if e, _ := service.ToError(err); e.Field == "cursor" {
			return mcp.NewToolResultError("cursor is not one list_jobs returned"), nil
		}
		return toolError(err), nil
	}
	list := page.Jobs
	out := jobItems{Jobs: []jobItem{}}
	var text strings.Builder
	for _, j := range list {
		out.Jobs = append(out.Jobs, jobItem{j.ID, j.Status, j.Language, j.CreatedAt, j.ExitCode, len(j.Artifacts), j.Metadata, j.Spec})
		fmt.Fprintf(&text, "%s  %-9s  %-6s  %s\n", j.ID, j.Status, j.Language, j.CreatedAt.Format(time.RFC3339))
		if j.Spec != nil {
			writeSpec(&text, j.Spec)
		}
	}
	if c := page.NextCursor; c != "" {
		out.NextCursor = &c
		fmt.Fprintf(&text, "more: list_jobs cursor=%s\n", c)
	}
	if len(list) == 0 {
		text.WriteString("no jobs\n")
	}
	return mcp.NewToolResultStructured(out, text.String()), nil
}

// writeSpec adds what a job ran to a list_jobs text: its command or the
// first lines of its code, and the names of its files and env.
func writeSpec(b *strings.Builder, v *jobs.JobSpec) {
	if len(v.Command) > 0 {
		fmt.Fprintf(b, "    command: %s\n", strings.Join(v.Command, " "))
	}
	lines := strings.Split(strings.TrimRight(v.Code, "\n"), "\n")
	for i, l := range lines {
		if i == 3 {
			fmt.Fprintf(b, "    | … (%d more lines)\n", len(lines)-3)
			break
		}
		if v.Code != "" {
			fmt.Fprintf(b, "    | %s\n", l)
		}
	}
	if len(v.Files) > 0 {
		names := make([]string, len(v.Files))
		for i, f := range v.Files {
			names[i] = f.Path
		}
		fmt.Fprintf(b, "    files: %s\n", strings.Join(names, ", "))
	}
	if len(v.EnvNames) > 0 {
		fmt.Fprintf(b, "    env: %s\n", strings.Join(v.EnvNames, ", "))
	}
}

func (s *Server) toolArtifactURL(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args artifactArgs
	p, res, err := begin(ctx, req, &args)
	if res != nil || err != nil {
		return res, err
	}
	u, err := s.svc.ArtifactURL(ctx, p, args.JobID, args.Path)
	if err != nil {
		return toolError(err), nil
	}
	return mcp.NewToolResultStructured(u, u.URL), nil
}

// textOutputLimit is how much of each stream the text content carries; the
// structured content and get_job have it all.
const textOutputLimit = 8 << 10

// jobToolResult renders a job as structured content plus a short text for
// clients that read text only.
func (s *Server) jobToolResult(ctx context.Context, p service.Principal, j jobs.Job) *mcp.CallToolResult {
	res := jobResult{
		JobID: j.ID, Status: j.Status, Attempt: j.Attempt, ExitCode: j.ExitCode, DurationMS: j.DurationMS,
		Stdout: j.Stdout, Stderr: j.Stderr, StdoutTruncated: j.StdoutTruncated, StderrTruncated: j.StderrTruncated,
		Error: j.Error, Artifacts: []artifactLink{}, ArtifactsOmitted: j.ArtifactsOmitted,
		Value: j.Value, LiveState: j.LiveState, LiveStateReason: j.LiveStateReason,
		Compile: j.Compile, CompileOutput: j.CompileOutput, CPUTimeMS: j.CPUTimeMS, PeakMemoryKB: j.PeakMemoryKB,
		Tests: j.Tests, TestsPassed: j.TestsPassed,
	}
	for _, a := range j.Artifacts {
		u, err := s.svc.ArtifactURL(ctx, p, j.ID, a.Path)
		if err != nil {
			continue
		}
		res.Artifacts = append(res.Artifacts, artifactLink{a.Path, a.Size, a.SHA256, a.ContentType, u.URL, u.ExpiresAt})
	}

	var b strings.Builder
	fmt.Fprintf(&b, "job %s: %s", j.ID, j.Status)
	if j.ExitCode != nil {
		fmt.Fprintf(&b, " (exit code %d", *j.ExitCode)
		if j.DurationMS != nil {
			fmt.Fprintf(&b, ", %d ms", *j.DurationMS)
		}
		b.WriteString(")")
	}
	b.WriteString("\n")
	if j.Error != nil {
		fmt.Fprintf(&b, "error %s: %s\n", j.Error.Code, j.Error.Message)
	}
	if !j.Status.Terminal() {
		fmt.Fprintf(&b, "not finished yet: call get_job with job_id=%s and wait_ms to wait for it\n", j.ID)
	}
	if j.LiveState == jobs.LiveLost {
		fmt.Fprintf(&b, "the session's live state was lost (%s): this call ran in a fresh interpreter; files in /workspace are as the last call left them\n", j.LiveStateReason)
	}
	writeStream(&b, "compile output", j.CompileOutput, j.Compile != nil && j.Compile.OutputTruncated, j.ID)
	if j.TestsPassed != nil {
		fmt.Fprintf(&b, "tests: %d of %d passed\n", *j.TestsPassed, len(j.Tests))
		shown := 0
		for i, t := range j.Tests {
			if t.Status != jobs.TestPassed && shown < 5 {
				shown++
				fmt.Fprintf(&b, "test %d: %s %s\n", i, t.Status, t.Message)
			}
		}
	}
	writeStream(&b, "stdout", j.Stdout, j.StdoutTruncated, j.ID)
	if j.Value != nil {
		writeStream(&b, "value", j.Value.Text, false, j.ID)
	}
	writeStream(&b, "stderr", j.Stderr, j.StderrTruncated, j.ID)
	if len(res.Artifacts) > 0 {
		b.WriteString("artifacts (download links, no credentials needed):\n")
		for _, a := range res.Artifacts {
			fmt.Fprintf(&b, "- %s (%d bytes, %s): %s\n", a.Path, a.Size, a.ContentType, a.URL)
		}
	}
	for _, o := range j.ArtifactsOmitted {
		fmt.Fprintf(&b, "- %s (%d bytes) not collected: %s\n", o.Path, o.Size, o.Reason)
	}
	// A program that failed is a result, not a tool error: the model reads
	// the status and output and fixes its code.
	out := mcp.NewToolResultStructured(res, b.String())
	if j.Value != nil && j.Value.PNG != "" && len(j.Value.PNG) <= maxInlineImageBytes*4/3 {
		out.Content = append(out.Content, mcp.NewImageContent(j.Value.PNG, "image/png"))
	}
	out.Content = append(out.Content, s.imageContent(ctx, p, j, res.Artifacts)...)
	return out
}

// Inline images: a finished job's small images (plots) come back as image
// content the model can see, the rest as links.
const (
	maxInlineImages     = 4
	maxInlineImageBytes = 512 << 10
	maxInlineTotalBytes = 1 << 20
)

var inlineImageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// imageContent returns the job's image artifacts as MCP content: the first
// few small ones inline (base64, read from the object store), every other
// one as a resource link to its download URL.
func (s *Server) imageContent(ctx context.Context, p service.Principal, j jobs.Job, links []artifactLink) []mcp.Content {
	if !j.Status.Terminal() {
		return nil
	}
	linkOf := make(map[string]artifactLink, len(links))
	for _, l := range links {
		linkOf[l.Path] = l
	}
	var out []mcp.Content
	inlined, total := 0, int64(0)
	for _, a := range j.Artifacts {
		mime := strings.TrimSpace(strings.Split(a.ContentType, ";")[0])
		link, ok := linkOf[a.Path]
		if !inlineImageTypes[mime] || !ok {
			continue
		}
		if inlined < maxInlineImages && a.Size <= maxInlineImageBytes && total+a.Size <= maxInlineTotalBytes && holdImage(ctx, a.Size) {
			if data, err := s.svc.ReadArtifact(ctx, p, j, a.Path, a.Size); err == nil {
				out = append(out, mcp.NewImageContent(base64.StdEncoding.EncodeToString(data), mime))
				inlined++
				total += a.Size
				continue
			}
		}
		out = append(out, mcp.NewResourceLink(link.URL, a.Path, fmt.Sprintf("%d bytes; the link expires at %s", a.Size, link.ExpiresAt.Format(time.RFC3339)), mime))
	}
	return out
}

// holdImage holds the memory an inlined image of size bytes takes besides
// the bytes read (ReadArtifact holds those): its base64 and the JSON of
// it. Past the ingress's budget the image goes as a link instead.
func holdImage(ctx context.Context, size int64) bool {
	_, err := service.Hold(ctx, 2*int64(base64.StdEncoding.EncodedLen(int(size))))
	return err == nil
}

func writeStream(b *strings.Builder, name, out string, truncated bool, jobID string) {
	if out == "" {
		return
	}
	fmt.Fprintf(b, "--- %s ---\n", name)
	if len(out) > textOutputLimit {
		cut := strings.ToValidUTF8(out[:textOutputLimit], "") // drop a split rune
		fmt.Fprintf(b, "%s\n[%s trimmed here: %d more bytes. The full output is in the structured result, and from get_job job_id=%s]\n",
			cut, name, len(out)-len(cut), jobID)
	} else {
		b.WriteString(out)
		if !strings.HasSuffix(out, "\n") {
			b.WriteString("\n")
		}
	}
	if truncated {
		fmt.Fprintf(b, "[%s exceeded the output limit; the rest was dropped. Print less, or write it to a file under out/]\n", name)
	}
}
