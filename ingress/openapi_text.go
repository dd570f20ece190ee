package ingress

// The prose of the OpenAPI document: what Go types cannot say. The
// structure (properties, types, required, nullability) is reflected from
// the types (openapi_schema.go); a note on a property a type does not have
// fails the generator, so the prose follows the types.

var schemaNotes = map[string]schemaNote{
	"JobStatus": {
		desc: "Where a job is in its life: queued → running → succeeded | failed | timed_out | cancelled | error. The last five are terminal: a finished job never changes again. `failed` means the program exited non-zero or was killed for a limit; `error` means gantry could not run it (Job.error says why).",
	},
	"Limits": {
		desc: "Resources the job may use. An absent field, or 0, means the default; any other value must lie within the server's policy, or the request is refused with 400 naming the field (`limits.cpus`, ...). The maxima below are the defaults; the operator sets them with GANTRY_MAX_CPUS (default: the number of CPUs of the ingress's machine), GANTRY_MAX_MEMORY_MB, GANTRY_MAX_DISK_MB and GANTRY_MAX_OUTPUT_BYTES.",
		props: map[string]js{
			"memory_mb":    {"minimum": 32, "maximum": 8192, "default": 512, "description": "Memory limit in MiB (no swap)."},
			"cpus":         {"minimum": 0.1, "maximum": 8, "default": 1, "description": "CPU limit, in CPUs (fractions allowed). The maximum is the operator's GANTRY_MAX_CPUS, by default the number of CPUs of the ingress's machine: Docker refuses more CPUs than a host has."},
			"pids":         {"minimum": 16, "maximum": 4096, "default": 128, "description": "Maximum number of processes and threads."},
			"disk_mb":      {"minimum": 1, "maximum": 8192, "default": 512, "description": "Size in MiB of the tmpfs holding /workspace. It is held in memory and counts against memory_mb, so it must be at most memory_mb (by default the smaller of 512 and memory_mb). In a session, the session's disk_mb applies instead."},
			"output_bytes": {"minimum": 1024, "maximum": 16777216, "default": 1048576, "description": "Cap on each of stdout and stderr, in bytes; output beyond it is dropped and the stream marked truncated."},
			"tool_calls":   {"minimum": 1, "maximum": 10000, "default": 100, "description": "Code mode: how many upstream MCP tool calls the job's code may make. Every call that names a server and a tool counts, including ones that fail; calls past the budget fail with budget_exceeded (and are recorded in the job's tool_calls)."},
		},
	},
	"InputFile": {
		desc: "A file placed in /workspace before the program runs.",
		props: map[string]js{
			"path":     {"minLength": 1, "maxLength": 1024, "description": `Path relative to /workspace, cleaned ("./a//b" → "a/b"). Absolute paths, paths that leave the workspace, NUL bytes, invalid UTF-8, segments longer than 255 bytes and a path given twice are refused. At most 1024 bytes.`, "examples": []any{"data.csv"}},
			"content":  {"default": "", "description": "The file's content, as text or base64 according to `encoding`. All files together may hold at most 8388608 bytes once decoded."},
			"encoding": {"enum": []any{"utf8", "base64"}, "default": "utf8", "description": "How `content` is encoded: `utf8` (text, the default) or `base64` (standard alphabet, padded). The server also accepts `utf-8` as a spelling of `utf8`."},
		},
		optional: []string{"content"},
	},
	"JobRequest": {
		desc: "A job to run. Give `code` (the program) or `command` (an argv), not both. Unknown fields, wrong types and trailing data after the object are refused with 400 and the offending field named. A body that is not valid UTF-8 is refused with 400 naming the field that holds the bad bytes.",
		props: map[string]js{
			"language":        {"enum": languageEnum(), "description": "The language to run in (GET /v1/languages lists them)."},
			"code":            {"maxLength": 1048576, "description": "The program. It is written to /tmp/gantry/<file> (main.py, main.sh or main.js) and run with the language's command, in /workspace. Required unless `command` is given; must not be blank. At most 1048576 bytes.", "examples": []any{"print(6*7)"}},
			"command":         {"maxItems": 256, "description": `An argv to run in /workspace instead of a program, e.g. ["python3", "main.py"]. At most 256 arguments; the first must not be empty; no NUL bytes.`, "examples": []any{[]any{"python3", "main.py"}}},
			"files":           {"maxItems": 1000, "description": "Input files, at most 1000, at most 8388608 bytes in all once decoded."},
			"stdin":           {"default": "", "description": "Standard input for the program, at most 1048576 bytes once decoded. As text (the default) it must not contain NUL bytes (400 naming `stdin`); send binary input base64-encoded with `stdin_encoding: base64`."},
			"stdin_encoding":  {"enum": []any{"utf8", "base64"}, "default": "utf8", "description": "How `stdin` is encoded: `utf8` (text, the default) or `base64` (standard alphabet, padded) for binary input; the program reads the decoded bytes. `utf-8` is accepted as a spelling of `utf8`."},
			"env":             {"maxProperties": 128, "propertyNames": js{"pattern": "^[A-Za-z_][A-Za-z0-9_]*$"}, "description": "Environment variables: at most 128, names of letters, digits and _ not starting with a digit, values without NUL bytes, names and values at most 65536 bytes in all. The values are sealed at rest with AES-256-GCM under the operator's GANTRY_SECRET_KEY (stored as they are only on a server without one) and are never shown again: jobs show the names only (spec.env_names with ?include=spec).", "examples": []any{js{"SEED": "1"}}},
			"timeout_ms":      {"minimum": 1, "maximum": 900000, "default": 30000, "description": "Wall-clock limit in milliseconds; the sandbox is killed when it passes. Absent or 0 means the default. The maximum is the operator's GANTRY_MAX_TIMEOUT_MS (default 900000)."},
			"artifacts":       {"items": js{"minLength": 1, "maxLength": 1024}, "maxItems": 32, "default": []any{"out/**"}, "description": "Glob patterns, relative to /workspace, of files to collect after the run. Segments are path.Match patterns and a segment `**` matches any number of directories. No leading /, no `..`. At most 32; absent or empty means [\"out/**\"]."},
			"session_id":      {"default": nil, "description": "Run the job in this session (an id from POST /v1/sessions). The jobs of a session run one at a time, in submission order, in the session's /workspace: it starts with the files the earlier jobs of the session left there (and those written with PUT /v1/sessions/{id}/files/{path}), and `files` are written on top. What the job leaves in /workspace is kept for the next job only if the program ended by itself (succeeded or failed); after a timeout, a cancel or an error the workspace stays as it was before the job. The size of /workspace is the session's disk_mb (limits.disk_mb is validated but not used). Submitting a job extends the session's life by its ttl_seconds. A session that does not exist, has expired or was closed (or a string that is not a session id) answers 404 not_found with field session_id. Absent or null: the job runs alone in a fresh sandbox."},
			"idempotency_key": {"pattern": "^[!-~]{1,255}$", "description": "Client-chosen key, 1-255 printable ASCII characters without spaces (or send the Idempotency-Key header; if both are given they must be equal). The same key with the same request returns the existing job; with a different request, 409 conflict."},
			"metadata":        {"maxProperties": 32, "propertyNames": js{"minLength": 1, "maxLength": 64}, "additionalProperties": js{"type": "string", "maxLength": 512}, "description": "Free-form string labels returned with the job: at most 32 keys of 1-64 bytes, values at most 512 bytes, no NUL bytes in keys or values (400 naming `metadata` or `metadata.<key>`).", "examples": []any{js{"agent": "demo"}}},
			"webhook_url":     {"maxLength": 2048, "format": "uri", "examples": []any{"https://hooks.example.com/gantry"}, "description": "An http or https URL called when the job finishes (see the jobFinished webhook), instead of the tenant's default (settings.webhook_url). No credentials in the URL, no #fragment; unless the operator allows private addresses (GANTRY_WEBHOOK_ALLOW_PRIVATE) it must reach a public address, checked again on the address dialled. Needs GANTRY_SECRET_KEY on the server (400 otherwise)."},
		},
	},
	"JobSpec": {
		desc: "What a job ran, with every default filled in (present on a job only with ?include=spec): its code or command, the names and sizes of its input files, its stdin, the names of its environment variables (never their values), its timeout, limits and artifact patterns.",
		props: map[string]js{
			"code":           {"description": "The program (absent for a command)."},
			"command":        {"description": "The argv that ran (absent for code)."},
			"stdin":          {"description": "The program's standard input; base64 when stdin_encoding is base64."},
			"stdin_encoding": {"enum": []any{"utf8", "base64"}, "description": "base64 when the input was binary (not UTF-8, or with NUL bytes)."},
			"env_names":      {"description": "The names of the job's environment variables, sorted. Their values are never shown.", "examples": []any{[]any{"API_TOKEN", "SEED"}}},
			"artifacts":      {"description": "The globs under /workspace whose files were collected."},
		},
	},
	"JobSpecFile": {
		desc: "An input file of a job: its path under /workspace and size; never its content.",
		props: map[string]js{
			"path": {"examples": []any{"data.csv"}},
			"size": {"minimum": 0, "description": "Size in bytes."},
		},
	},
	"ErrorInfo": {
		desc: "Why a job did not succeed: a limit it hit, or why gantry could not run it.",
		props: map[string]js{
			"code": {"enum": []any{"timed_out", "oom_killed", "output_limit", "cancelled", "infrastructure"}},
		},
	},
	"Artifact": {
		desc: "A file the job produced and gantry stored.",
		props: map[string]js{
			"path":         {"description": "Path relative to /workspace.", "examples": []any{"out/plot.png"}},
			"size":         {"format": "int64", "minimum": 0, "description": "Size in bytes."},
			"sha256":       {"pattern": "^[0-9a-f]{64}$", "description": "SHA-256 of the content, hex."},
			"content_type": {"description": "Content type sniffed from the first bytes.", "examples": []any{"image/png"}},
			"url":          {"description": "API path that redirects to a download URL: /v1/jobs/{id}/artifacts/{path}, each path segment percent-encoded.", "examples": []any{"/v1/jobs/job_01jzq3v6k8m2n4p5r7s9t0w1x2/artifacts/out/plot.png"}},
		},
	},
	"Job": {
		desc: "A job as the API shows it. Every field is always present, but spec (only with ?include=spec) and artifacts_omitted (only when files were left out).",
		props: map[string]js{
			"id":                {"pattern": "^job_[0-9a-hjkmnp-tv-z]{26}$", "examples": []any{"job_01jzq3v6k8m2n4p5r7s9t0w1x2"}, "description": `"job_" and 26 lower-case Crockford base32 characters; ids sort by creation time.`},
			"language":          {"examples": []any{"python"}},
			"session_id":        {"description": "The session the job ran in, or null."},
			"attempt":           {"minimum": 0, "description": "How many times a runner has started the job (it is retried if its runner is lost)."},
			"created_at":        {"format": "date-time"},
			"started_at":        {"format": "date-time"},
			"finished_at":       {"format": "date-time"},
			"exit_code":         {"description": "The program's exit code, once it has exited."},
			"duration_ms":       {"format": "int64", "description": "How long the program ran, in milliseconds, once finished."},
			"stdout":            {"description": "Captured standard output, filled in when the job finishes (stream it live with GET /v1/jobs/{id}/logs)."},
			"stderr":            {"description": "Captured standard error, filled in when the job finishes."},
			"stdout_truncated":  {"description": "stdout passed limits.output_bytes and was cut."},
			"stderr_truncated":  {"description": "stderr passed limits.output_bytes and was cut."},
			"spec":              {"description": "What the job ran: only with ?include=spec on GET /v1/jobs or GET /v1/jobs/{id}. Never the env values."},
			"artifacts_omitted": {"description": "Files that matched the artifact patterns but were left out because they broke the runner's caps (by default 100 files, 100 MB each, 256 MB in all; kept in path order while they fit). Absent when none was."},
			"tool_calls":        {"description": "Code mode: the upstream MCP tool calls the job's code made, in the order they started. Filled in when the job finishes; empty before, and for jobs that called no tools."},
			"batch_id":          {"pattern": "^bat_[0-9a-hjkmnp-tv-z]{26}$", "description": "The batch the job was submitted in (POST /v1/jobs/batch), or null."},
			"webhook_url":       {"description": "The webhook URL the request named, or null (the tenant's default, if any, is called)."},
			"webhook":           {"description": "The webhook call made when the job finished, with every attempt; null when the job has not finished or has no webhook."},
		},
	},
	"JobList": {
		props: map[string]js{
			"jobs":        {"description": "Newest first."},
			"next_cursor": {"description": "Pass as ?cursor= to get the next (older) page; null on the last page."},
		},
	},
	"ArtifactManifest": {
		props: map[string]js{
			"job_id": {"pattern": "^job_[0-9a-hjkmnp-tv-z]{26}$"},
		},
	},
	"PresignedURL": {
		props: map[string]js{
			"url":        {"format": "uri", "description": "Presigned object-store URL; works without credentials until it expires."},
			"expires_at": {"format": "date-time", "description": "When the URL stops working (UTC, whole seconds)."},
		},
	},
	"Language": {
		props: map[string]js{
			"name":        {"examples": []any{"python"}},
			"file":        {"description": "Name the program is written to, under /tmp/gantry.", "examples": []any{"main.py"}},
			"command":     {"description": "argv that runs the program; the program's path is appended.", "examples": []any{[]any{"python3"}}},
			"description": {"description": "What the sandbox offers for the language."},
		},
	},
	"LanguageList": {},
	"Health": {
		props: map[string]js{
			"status": {"const": "ok"},
		},
	},
	"Readiness": {
		props: map[string]js{
			"checks": {"description": `One entry per dependency (postgres, nats, s3; docker when the process also runs jobs): "ok" or "error: <reason>".`, "examples": []any{js{"postgres": "ok", "nats": "ok", "s3": "error: connection refused"}}},
		},
	},
	"Error": {
		desc: "The body of every failed API request.",
		more: js{"examples": []any{js{"error": js{"code": "invalid_argument", "message": "timeout_ms must be between 1 and 900000", "field": "timeout_ms"}}}},
	},
	"ErrorDetail": {
		desc: "What went wrong: a stable code, a message for people and, when there is one, the field at fault.",
		props: map[string]js{
			"code":  {"enum": errorCodes(), "description": "invalid_argument (400), unauthenticated (401), not_found (404), conflict (409), payload_too_large (413), request_timeout (408: the request body did not arrive within the server's body timeout, GANTRY_BODY_TIMEOUT, 60 s by default; the connection is closed), rate_limited (429), unavailable (503), upstream_error (502, or 504 when an upstream timed out: an upstream MCP server failed), internal (500)."},
			"field": {"description": "The request field at fault, when there is one (omitted otherwise).", "examples": []any{"timeout_ms", "files[0].path", "limits.cpus"}},
			"type":  {"enum": []any{"invalid_request_error", "server_error"}, "description": "OpenAI's error type, on /v1/agent/chat/completions only, so that OpenAI SDKs read gantry's errors."},
		},
	},
	"LogChunk": {
		desc: "Data of a `stdout` or `stderr` event: the next piece of that stream as text. Chunks never split a UTF-8 sequence; invalid bytes appear as U+FFFD.",
	},
	"LogStatusEvent": {
		desc: "Data of the closing `status` event: the finished job without its (already streamed) output.",
		props: map[string]js{
			"id":          {"pattern": "^job_[0-9a-hjkmnp-tv-z]{26}$"},
			"duration_ms": {"format": "int64"},
		},
	},
	"Session": {
		desc: "A session: a workspace that persists between the jobs run in it. Every field is always present. Only active sessions are shown: one that has expired or was closed answers 404.",
		props: map[string]js{
			"id":              {"pattern": "^ses_[0-9a-hjkmnp-tv-z]{26}$", "examples": []any{"ses_01jzq3v6k8m2n4p5r7s9t0w1x2"}, "description": `"ses_" and 26 lower-case Crockford base32 characters; ids sort by creation time.`},
			"status":          {"enum": []any{"active"}, "description": "Always `active`: sessions that are closing or have expired are not shown."},
			"language":        {"examples": []any{"python"}, "description": "The language given when the session was created. Each job still names its own language."},
			"ttl_seconds":     {"minimum": 10, "maximum": 604800, "description": "How long the session lives after its last use."},
			"disk_mb":         {"minimum": 1, "maximum": 4096, "description": "Size in MiB of the session's /workspace."},
			"created_at":      {"format": "date-time"},
			"last_used_at":    {"format": "date-time", "description": "When a job was last submitted to the session, a job of it finished, or its files were last written or deleted through the API. Reading does not count."},
			"expires_at":      {"format": "date-time", "description": "last_used_at + ttl_seconds. An expired session is closed (its queued jobs cancelled, its running job stopped, its files deleted) within seconds."},
			"last_job_id":     {"description": "The session's job that finished last, or null."},
			"version":         {"format": "int64", "minimum": 0, "description": "Version of the workspace: 0 while it is empty, one more each time a job (that ended by itself) or a files API edit saves it."},
			"workspace_bytes": {"format": "int64", "minimum": 0, "description": "Size in bytes of the stored workspace snapshot (a tar stream, so a little more than its files)."},
			"queued_jobs":     {"minimum": 0, "description": "The session's jobs not yet started (counted from the jobs, so exact: cancelled jobs are not counted)."},
		},
	},
	"SessionRequest": {
		desc: "A session to create; every field is optional, but the body must be a JSON object (send {} for the defaults). Unknown fields, wrong types and trailing data are refused with 400 and the offending field named.",
		props: map[string]js{
			"language":    {"enum": languageEnum(), "default": "python", "description": "The session's language (GET /v1/languages lists them). Absent or empty means python."},
			"ttl_seconds": {"minimum": 10, "maximum": 604800, "default": 3600, "description": "How long the session lives after its last use, in seconds (at most 7 days). Absent or 0 means the default."},
			"disk_mb":     {"minimum": 1, "maximum": 4096, "default": 512, "description": "Size in MiB of the session's /workspace, for jobs and for files written through the API. Absent or 0 means the default. At most 4096, the operator's GANTRY_MAX_DISK_MB and GANTRY_MAX_MEMORY_MB: the workspace is held in memory and counts against its jobs' memory, so a job of the session that does not set limits.memory_mb gets at least disk_mb of memory, and one that sets less is refused (400 naming limits.memory_mb)."},
			"metadata":    {"additionalProperties": js{"type": "string", "maxLength": 512}, "maxProperties": 32, "propertyNames": js{"minLength": 1, "maxLength": 64}, "description": "Free-form string labels returned with the session: at most 32 keys of 1-64 bytes, values at most 512 bytes, no NUL bytes in keys or values (400 naming `metadata` or `metadata.<key>`).", "examples": []any{js{"agent": "demo"}}},
		},
		optional: []string{"language"},
	},
	"SessionList": {
		props: map[string]js{
			"sessions":    {"description": "Active sessions, newest first."},
			"next_cursor": {"description": "Pass as ?cursor= to get the next (older) page; null on the last page."},
		},
	},
	"FileInfo": {
		desc: "An entry of a session's workspace.",
		props: map[string]js{
			"path":        {"description": "Path relative to /workspace, cleaned, without a trailing slash.", "examples": []any{"out/plot.png"}},
			"type":        {"enum": []any{"file", "dir", "symlink"}, "description": "A regular file, a directory or a symbolic link. Other kinds of entries (devices, pipes, hard links) are not shown."},
			"size":        {"format": "int64", "minimum": 0, "description": "Size in bytes of a file; 0 for a directory or a symlink."},
			"modified_at": {"format": "date-time", "description": "Modification time (UTC, as stored in the workspace snapshot: whole seconds)."},
			"target":      {"description": "What a symlink points to, as written (gantry never follows it). Present only for symlinks."},
		},
	},
	"FileList": {
		props: map[string]js{
			"files": {"description": "The entries, sorted by path; at most 10000."},
		},
	},
	"SkillFile": {
		desc: "A file that comes with a skill, mounted at /skills/<name>/<path> in every job. Text travels as it is; content that is not UTF-8 text (or holds NUL bytes) travels as base64 with encoding base64, in answers as in requests.",
		props: map[string]js{
			"path":     {"maxLength": 512, "description": `Path relative to the skill's folder; it is cleaned ("./a//b" → "a/b"). An empty or absolute path, one that leaves the folder, NUL or backslash characters, a segment starting with a dot, SKILL.md itself, or a path given twice is 400 (field files[i].path).`, "examples": []any{"helpers.py", "scripts/extract.py", "assets/logo.png"}},
			"content":  {"description": "The file's bytes: at most 1 MiB (1048576 bytes) per file once decoded (400, field files[i].content)."},
			"encoding": {"enum": []any{"utf8", "base64"}, "description": "base64 when content is base64 of the bytes; absent or utf8 for text. Not valid base64 is 400 (field files[i].content)."},
		},
	},
	"SkillSummary": {
		desc: "A skill in a list: its current version, without body or files (GET /v1/skills/{name} has them).",
		props: map[string]js{
			"name":        {"pattern": "^([a-z0-9]+(-[a-z0-9]+)*|[a-z][a-z0-9_]{0,63})$", "examples": []any{"plotting"}, "maxLength": 64},
			"description": {"maxLength": 1024, "description": "What the skill does and when to use it; may span lines."},
			"version":     {"minimum": 1, "description": "The current version."},
			"tags":        {"description": "Lowercase tags."},
			"language":    {"enum": []any{"python", "bash", "node"}},
			"builtin":     {"description": "True for a skill that ships with gantry (visible to every tenant, not changeable through the API)."},
			"score":       {"description": "Relevance to q (higher is better). Present only when searching."},
		},
	},
	"SkillList": {
		props: map[string]js{
			"skills": {"description": "Without q: every skill the tenant sees, its own first, then the built-ins, each group by name. With q: the matches, best first, at most limit."},
		},
	},
	"Skill": {
		desc: "One version of a skill, in full, in the Agent Skills format (agentskills.io). Every field is always present except the optional standard fields license, compatibility, metadata and allowed_tools.",
		props: map[string]js{
			"name":          {"pattern": "^([a-z0-9]+(-[a-z0-9]+)*|[a-z][a-z0-9_]{0,63})$", "examples": []any{"plotting"}, "maxLength": 64},
			"description":   {"maxLength": 1024, "description": "What the skill does and when to use it; may span lines."},
			"license":       {"maxLength": 500, "description": "The Agent Skills license field: a license name or the name of a bundled license file. Absent when not set."},
			"compatibility": {"maxLength": 500, "description": "What the skill needs to run (product, packages, network). Absent when not set."},
			"metadata":      {"additionalProperties": js{"type": "string", "maxLength": 1024}, "maxProperties": 64, "description": "Free string properties (author, version, ...): the standard's metadata map. Absent when empty."},
			"allowed_tools": {"maxLength": 1024, "description": "The standard's allowed-tools: tool names separated by spaces, as written (a YAML list is joined with spaces). Absent when not set."},
			"version":       {"minimum": 1, "description": "This version's number: 1 for the first save, one more for each save after."},
			"tags":          {"description": "Lowercase tags."},
			"language":      {"enum": []any{"python", "bash", "node"}, "description": "The language of the skill's examples and code."},
			"requires":      {"description": "Packages the skill's code needs. Informational: gantry installs nothing (jobs have no network)."},
			"body":          {"description": "SKILL.md's markdown body, after the front matter."},
			"files":         {"description": "The skill's files (scripts/, references/, assets/ or beside SKILL.md), sorted by path; binary files are base64 with encoding base64."},
			"builtin":       {"description": "True for a skill that ships with gantry (visible to every tenant, not changeable through the API)."},
			"created_at":    {"format": "date-time", "description": "When this version was saved."},
			"skill_md":      {"description": "The version's SKILL.md as mounted in jobs: front matter (the standard's fields in its order, then gantry's tags, language and requires where they are not their defaults; the version is not written), a blank line, then the body."},
		},
	},
	"SkillPut": {
		desc: "The JSON form of PUT /v1/skills/{name}: either skill_md (a whole SKILL.md, whose front matter gives the other fields, which are then ignored), or the fields description and body (required) and optionally license, compatibility, metadata, allowed_tools, tags, language, requires and version. files goes with either. Unknown fields, wrong types and trailing data are refused with 400.",
		more: js{"examples": []any{js{"description": "Plot a time series from a CSV file to a PNG with matplotlib.", "body": "# When to use\nA CSV with a date column...\n\n```python\nfrom skills.csv_plot import helpers\nhelpers.plot('data.csv', 'out/plot.png')\n```\n", "tags": []any{"plotting", "csv"}, "language": "python", "requires": []any{"matplotlib"}, "files": []any{js{"path": "helpers.py", "content": "def plot(src, dst):\n    ...\n"}}}}},
		props: map[string]js{
			"skill_md":      {"maxLength": 65536, "description": "A whole SKILL.md, as with Content-Type text/markdown (at most 64 KiB). When present and not empty, the other fields but files are ignored."},
			"description":   {"minLength": 1, "maxLength": 1024, "description": "Required without skill_md: what the skill does and when to use it, at most 1024 characters; may span lines."},
			"license":       {"maxLength": 500, "description": "The Agent Skills license field: a license name or the name of a bundled license file. Absent when not set."},
			"compatibility": {"maxLength": 500, "description": "What the skill needs to run (product, packages, network). Absent when not set."},
			"metadata":      {"additionalProperties": js{"type": "string", "maxLength": 1024}, "maxProperties": 64, "description": "Free string properties (author, version, ...): the standard's metadata map. Absent when empty."},
			"allowed_tools": {"maxLength": 1024, "description": "The standard's allowed-tools: tool names separated by spaces, as written (a YAML list is joined with spaces). Absent when not set."},
			"body":          {"minLength": 1, "description": "Required without skill_md: markdown saying when to use the skill, the steps and an example that runs; not blank."},
			"tags":          {"items": js{"pattern": "^[a-z0-9][a-z0-9+.-]{0,31}$"}, "maxItems": 20, "description": "At most 20 short words; each is trimmed and lowercased, then must match the pattern."},
			"language":      {"enum": []any{"python", "bash", "node"}, "default": "python", "description": "Absent or empty means python."},
			"requires":      {"items": js{"pattern": "^[A-Za-z0-9][A-Za-z0-9+._-]{0,63}$"}, "description": "Package names the skill's code needs (informational)."},
			"version":       {"minimum": 1, "description": "Optional optimistic concurrency: the version this save must become, i.e. the current version + 1 (1 for a new skill); otherwise 409. Absent or 0: the next version."},
			"files":         {"maxItems": 100, "description": "The new version's files: at most 100, at most 1 MiB each, and body plus files at most 4 MiB (and a tenant's current skills at most 32 MiB in all). Files are not carried over from the previous version: omit them and the new version has none."},
		},
	},
	"SkillVersions": {
		props: map[string]js{
			"name":     {"pattern": "^([a-z0-9]+(-[a-z0-9]+)*|[a-z][a-z0-9_]{0,63})$", "maxLength": 64},
			"versions": {"minItems": 1, "description": "Every stored version, newest first: of the tenant's own skill of that name if it has one, else of the built-in."},
		},
	},
	"McpServerRegistration": {
		desc: "Registers an upstream MCP server: url (streamable HTTP, with headers) or command (stdio, with env), exactly one of them. gantry connects at once and lists the server's tools, so a wrong URL or credential fails now (502), not in a job. headers and env are credentials and write-only: stored sealed, never shown again (the server's responses list their names only). Unknown fields, wrong types and trailing data are refused with 400 and the field named.",
		more: js{"examples": []any{js{"name": "crm", "description": "Customers and orders", "url": "https://crm.example.com/mcp", "headers": js{"Authorization": "Bearer <token>"}, "deny_tools": []any{"archive_*"}}, js{"name": "billing", "description": "Invoices", "command": []any{"/usr/local/bin/billing-mcp"}, "env": js{"BILLING_TOKEN": "<token>"}}}},
		props: map[string]js{
			"name":        {"pattern": "^[a-z][a-z0-9_]{0,39}$", "examples": []any{"crm"}, "description": "1-40 lowercase letters, digits and _, starting with a letter. Also the module the job's code imports: servers.<name> (Python), servers/<name> (Node)."},
			"description": {"maxLength": 1000, "description": "What the server is for (trimmed; at most 1000 bytes). Shown to agents choosing a server."},
			"url":         {"maxLength": 2048, "description": "A streamable HTTP MCP endpoint: an http:// or https:// URL, at most 2048 bytes, without user:password@ (put credentials in headers). The whole URL is stored sealed; the API shows it without query string and fragment. Unless the operator allows private addresses (GANTRY_MCP_ALLOW_PRIVATE), only public addresses are dialled. Exclusive with command.", "examples": []any{"https://crm.example.com/mcp"}},
			"command":     {"items": js{"maxLength": 4096}, "maxItems": 64, "description": "A stdio MCP server: exactly one of the commands the operator allows (GANTRY_MCP_COMMANDS; none by default), every argument included. At most 64 arguments of at most 4096 bytes, without NUL. gantry runs it on a runner, in a hardened container of its own (uid 1000 without capabilities, a read-only root, no network unless the operator gives the servers one), with only gantry's PATH and HOME and env. Exclusive with url."},
			"headers":     {"additionalProperties": js{"type": "string", "maxLength": 8192}, "maxProperties": 32, "propertyNames": js{"pattern": "^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$"}, "writeOnly": true, "description": `Credentials for an HTTP server (url only), e.g. {"Authorization": "Bearer ..."}, sent with every request to it. Write-only: stored sealed with GANTRY_SECRET_KEY, never returned (responses list the header names only) and never placed in a sandbox. At most 32; values at most 8192 bytes without line breaks or NUL. Host, Content-Length, Content-Type, Connection, Transfer-Encoding, Accept, Mcp-Session-Id and Mcp-Protocol-Version are set by gantry and refused.`},
			"env":         {"additionalProperties": js{"type": "string", "maxLength": 8192}, "maxProperties": 32, "propertyNames": js{"pattern": "^[A-Za-z_][A-Za-z0-9_]{0,127}$"}, "writeOnly": true, "description": "Environment for a stdio server (command only), e.g. an API token. Only names the operator allows (GANTRY_MCP_ENV; none by default), and never one that changes what the server loads or runs or where its traffic goes (LD_*, NODE_OPTIONS and NODE_*, PYTHON*, PATH, HOME, BASH_ENV, *_PROXY, SSL_* and the like), whatever the operator allows: such a name is a 400 naming env. Write-only: stored sealed with GANTRY_SECRET_KEY, never returned (responses list the variable names only) and never placed in a job's sandbox. At most 32; values at most 8192 bytes without line breaks or NUL."},
			"allow_tools": {"items": js{"minLength": 1, "maxLength": 200}, "maxItems": 100, "description": "Glob patterns (path.Match, e.g. `get_*`) of the tools code may call; absent or empty allows every tool. At most 100 patterns of at most 200 characters."},
			"deny_tools":  {"items": js{"minLength": 1, "maxLength": 200}, "maxItems": 100, "description": "Glob patterns of tools code may never call; a deny match wins over allow_tools. Denied tools are not listed or found either."},
			"timeout_ms":  {"minimum": 100, "maximum": 300000, "default": 30000, "description": "How long one call to the server may take, in milliseconds. Absent or 0 means the default."},
		},
	},
	"McpServerUpdate": {
		desc: "Changes some of a server's settings: absent fields stay as they are; the name cannot change. The result is checked like a registration. When url, command, headers or env are given, gantry connects again and lists the tools (502 if that fails, and nothing changes); otherwise the cached tool list stays and only which tools are allowed is recomputed. Unknown fields are refused with 400.",
		more: js{"examples": []any{js{"headers": js{"Authorization": "Bearer <new token>"}}, js{"deny_tools": []any{"archive_*", "delete_*"}, "timeout_ms": 10000}}},
		props: map[string]js{
			"description": {"maxLength": 1000, "description": "Replaces the description."},
			"url":         {"maxLength": 2048, "description": "A new streamable HTTP URL, with the rules of registration; a non-empty url makes the server an HTTP server and drops command. Stored sealed; shown afterwards without query string and fragment.", "examples": []any{"https://crm.example.com/mcp"}},
			"command":     {"items": js{"maxLength": 4096}, "maxItems": 64, "description": "A new stdio command, with the rules of registration; a non-empty command makes the server a stdio server and drops url."},
			"headers":     {"additionalProperties": js{"type": "string", "maxLength": 8192}, "maxProperties": 32, "propertyNames": js{"pattern": "^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$"}, "writeOnly": true, "description": `Replaces every stored header whole ({} removes them all); absent keeps them. Write-only, as at registration: responses list the header names only. Switching an HTTP server to command needs "headers": {} too.`},
			"env":         {"additionalProperties": js{"type": "string", "maxLength": 8192}, "maxProperties": 32, "propertyNames": js{"pattern": "^[A-Za-z_][A-Za-z0-9_]{0,127}$"}, "writeOnly": true, "description": `Replaces the stored environment whole ({} removes it); absent keeps it. Write-only, as at registration: responses list the variable names only. Switching a stdio server to url needs "env": {} too.`},
			"allow_tools": {"items": js{"minLength": 1, "maxLength": 200}, "maxItems": 100, "description": "Replaces the allow list ([] allows every tool)."},
			"deny_tools":  {"items": js{"minLength": 1, "maxLength": 200}, "maxItems": 100, "description": "Replaces the deny list."},
			"timeout_ms":  {"minimum": 100, "maximum": 300000, "description": "Replaces the per-call timeout in milliseconds (0 means the default, 30000)."},
		},
	},
	"McpServer": {
		desc: "A registered upstream MCP server as the API shows it. Credentials are write-only: headers and env list the NAMES of the stored headers and environment variables, never their values, and url is shown without its query string and fragment. url is present for HTTP servers and command for stdio ones; tools_error only after a failed refresh; every other field is always present.",
		props: map[string]js{
			"name":               {"pattern": "^[a-z][a-z0-9_]{0,39}$", "examples": []any{"crm"}, "description": "The server's name; the job's code imports its tools from servers.<name>."},
			"transport":          {"enum": []any{"http", "stdio"}, "description": "http (streamable HTTP, url) or stdio (command)."},
			"url":                {"description": "HTTP servers only: the URL without query string and fragment (which may hold credentials and are kept sealed).", "examples": []any{"https://crm.example.com/mcp"}},
			"command":            {"description": "stdio servers only: the argv gantry runs."},
			"headers":            {"description": "The NAMES of the stored headers, sorted; their values are write-only and never shown.", "examples": []any{[]any{"Authorization"}}},
			"env":                {"description": "The NAMES of the stored environment variables, sorted; their values are write-only and never shown."},
			"allow_tools":        {"description": "Glob patterns of the tools code may call; empty allows every tool."},
			"deny_tools":         {"description": "Glob patterns of tools code may never call."},
			"timeout_ms":         {"minimum": 100, "maximum": 300000, "description": "How long one call may take, in milliseconds."},
			"tools":              {"minimum": 0, "description": "How many of the server's tools code may call (those its allow and deny lists let through)."},
			"tools_refreshed_at": {"format": "date-time", "description": "When gantry last tried to fetch the tool list (it refreshes lists older than GANTRY_MCP_TOOLS_TTL, 10 minutes by default, in the background), or null."},
			"tools_error":        {"description": "Why the last refresh failed; the previous tool list stays in use. Absent after a successful one."},
			"created_at":         {"format": "date-time"},
			"updated_at":         {"format": "date-time"},
		},
	},
	"McpServerList": {
		props: map[string]js{
			"servers": {"description": "Every server the tenant registered, by name."},
		},
	},
	"McpServerDetail": {
		desc: "A server with the tools code may call, at the requested detail.",
		props: map[string]js{
			"tool_list": {"description": "The server's allowed tools, by name."},
		},
	},
	"ToolInfo": {
		desc: "An upstream tool at a detail level: at `name`, server and name only; at `description`, also the first paragraph of its description, cut at 300 bytes; at `full`, the whole description and its schemas. Fields are omitted when empty. Code calls it as servers.<server>.<name>.",
		props: map[string]js{
			"server":        {"pattern": "^[a-z][a-z0-9_]{0,39}$", "examples": []any{"crm"}, "description": "The MCP server that offers the tool."},
			"name":          {"maxLength": 128, "examples": []any{"list_orders"}},
			"description":   {"description": "The tool's description (not at detail name)."},
			"input_schema":  {"type": "object", "description": `detail full only: the JSON Schema of the tool's arguments, as the server declares it ({"type": "object"} when it declares none gantry can keep).`},
			"output_schema": {"type": []any{"object", "null"}, "description": "detail full only, and only when the server declares one: the JSON Schema of the tool's structured result."},
		},
	},
	"ToolList": {
		more: js{"examples": []any{js{"tools": []any{js{"server": "crm", "name": "list_orders", "description": "List a customer's orders."}}}}},
		props: map[string]js{
			"tools": {"description": "Without q: the tenant's allowed tools by server and name, at most limit. With q: the matches, best first, at most limit."},
		},
	},
	"ToolCall": {
		desc: "One upstream tool call made by a job's code (code mode): what was called, how it went and how many bytes went each way. Arguments and results are not recorded.",
		props: map[string]js{
			"server":      {"examples": []any{"crm"}},
			"tool":        {"examples": []any{"list_orders"}},
			"started_at":  {"format": "date-time"},
			"duration_ms": {"format": "int64", "minimum": 0},
			"status":      {"enum": []any{"ok", "error", "denied", "budget_exceeded", "unknown_server", "unknown_tool", "timeout", "upstream_error", "too_large", "bad_request", "unavailable"}, "description": "ok; error (the tool ran and reported an error); denied (the server's allow/deny lists); budget_exceeded (limits.tool_calls used up); unknown_server; unknown_tool; timeout (the server's timeout_ms passed, or the job ended); upstream_error (gantry could not reach or use the server); too_large (the result was over gantry's limit and was not passed on); bad_request (the code's call was malformed); unavailable (gantry could not make the call)."},
			"bytes_in":    {"minimum": 0, "description": "Size of the arguments sent upstream, in bytes."},
			"bytes_out":   {"minimum": 0, "description": "Size of the result, in bytes (0 when there was none)."},
			"error":       {"description": "What went wrong, when status is not ok (absent otherwise). With privacy tokens on, personal data in it is replaced by tokens."},
		},
	},
	"Settings": {
		desc: "The tenant's own switches. Responses always carry every field; in a PATCH body every field is optional, and an absent one stays as it is. Unknown fields are refused with 400.",
		more: js{"examples": []any{js{"pii_tokens": true}, js{"webhook_url": "https://hooks.example.com/gantry"}}},
		props: map[string]js{
			"pii_tokens":  {"default": false, "description": "Privacy tokens. When on, personal data (e-mail addresses, phone numbers, card numbers, IBANs, US social security numbers) in what the tenant's jobs return (their output, and the errors of their tool calls) is replaced by stable per-tenant tokens such as [EMAIL_3], and tokens in what is sent in (a job's code, command, files, stdin and env, and the arguments of its tool calls) are turned back into the values before the sandbox or an upstream sees them. The values are kept sealed with GANTRY_SECRET_KEY; turning this on without it is 503. Live output is not streamed for such jobs: it arrives with the result."},
			"webhook_url": {"maxLength": 2048, "description": `The default webhook: called when a job that names none finishes. In a PATCH body a URL sets it and "" removes it; the same checks as a job's webhook_url apply. Jobs that finish after a change use the new value.`},
		},
	},
	"WebhookAttempt": {
		desc: "One try at delivering a webhook.",
		props: map[string]js{
			"at":          {"format": "date-time"},
			"status_code": {"description": "The receiver's HTTP status; 0 when it did not answer (refused, timed out, not a public address)."},
			"error":       {"description": "Why the attempt failed (absent when it succeeded): the status and the start of the receiver's answer, or the connection error."},
			"duration_ms": {"format": "int64"},
		},
	},
	"WebhookDelivery": {
		desc: "The call gantry makes to a job's webhook when the job finishes. It is written with the job's result, so it is made at least once even across restarts, and retried with exponential backoff (5 s, doubling up to an hour, by default) until the receiver answers 2xx or a day has passed (GANTRY_WEBHOOK_RETRY_FOR). Redirects are not followed.",
		props: map[string]js{
			"id":              {"pattern": "^msg_[0-9a-hjkmnp-tv-z]{26}$", "description": "The message id sent as webhook-id, the same on every attempt: receivers drop duplicates by it."},
			"status":          {"enum": []any{"pending", "delivered", "failed"}, "description": "pending: to be attempted (again) at next_attempt_at; delivered: a 2xx answer; failed: given up."},
			"next_attempt_at": {"format": "date-time"},
			"created_at":      {"format": "date-time"},
			"finished_at":     {"format": "date-time", "description": "When it was delivered or given up."},
		},
	},
	"WebhookEvent": {
		desc: "The body of a webhook call (Standard Webhooks payload).",
		props: map[string]js{
			"type":      {"const": "job.finished"},
			"timestamp": {"format": "date-time", "description": "When the job finished."},
			"data":      {"description": "The finished job as GET /v1/jobs/{id} shows it, except that stdout and stderr hold at most their first 65536 bytes each (GET the job for all of it) and webhook is null."},
		},
	},
	"WebhookSecret": {
		desc: "The tenant's webhook signing secret.",
		props: map[string]js{
			"secret":              {"pattern": "^whsec_[A-Za-z0-9+/=]+$", "description": "whsec_ and the base64 of the HMAC-SHA256 key, as Standard Webhooks libraries take it."},
			"previous_expires_at": {"format": "date-time", "description": "After a rotation, the replaced secret also signs (a second signature in webhook-signature) until this time; null when it does not."},
		},
	},
	"BatchRequest": {
		desc: "Jobs to queue together.",
		props: map[string]js{
			"jobs": {"minItems": 1, "maxItems": 100, "description": "1 to GANTRY_BATCH_MAX (default 100) job requests, each as POST /v1/jobs takes it (with its own idempotency_key if it should be retried safely)."},
		},
	},
	"BatchItem": {
		desc: "The outcome of one job of a batch: status 202 and the queued job, or the status and error body the job alone would have had.",
		props: map[string]js{
			"status": {"examples": []any{202, 400}},
		},
	},
	"BatchResponse": {
		props: map[string]js{
			"batch_id": {"pattern": "^bat_[0-9a-hjkmnp-tv-z]{26}$", "description": "List the batch's jobs with GET /v1/jobs?batch_id=."},
			"jobs":     {"description": "One outcome per job, in the order of the request."},
		},
	},
	"ChatMessage": {
		desc:     "One message of the conversation. Other fields a client sends (OpenAI's refusal, audio, ...) are accepted and ignored.",
		more:     js{"additionalProperties": true},
		optional: []string{"content"},
		props: map[string]js{
			"role":         {"enum": []any{"system", "developer", "user", "assistant"}, "description": "Who speaks. `developer` is read as `system`; `tool` messages are refused (gantry runs its own tools)."},
			"content":      {"description": "The text: a string, null, or an array of text parts ({\"type\": \"text\", \"text\": \"...\"}). Answers always carry a string."},
			"tool_calls":   {"maxItems": 0, "description": "Not accepted: an assistant message with tool calls is refused, as gantry runs its own tools (the answer's `gantry` field reports them)."},
			"tool_call_id": {"description": "Ignored: `tool` messages are refused."},
		},
	},
	"ChatToolCall": {
		desc: "A tool call, as OpenAI's wire format has it: gantry's model asks for them; clients do not send them.",
	},
	"ChatCompletionRequest": {
		desc: "An OpenAI chat-completions request; other fields are accepted and ignored.",
		more: js{"additionalProperties": true},
		props: map[string]js{
			"model":                 {"description": "Ignored: the operator's model answers."},
			"messages":              {"minItems": 1, "maxItems": 500, "description": "The conversation so far, oldest first: at least 1 message, at most 500."},
			"stream":                {"default": false, "description": "Answer as server-sent events of chat.completion.chunk objects."},
			"stream_options":        {"description": "include_usage: send a last chunk with the usage of all model calls."},
			"temperature":           {"description": "Passed to the model."},
			"max_tokens":            {"description": "Passed to the model, per model call."},
			"max_completion_tokens": {"description": "Same as max_tokens (max_tokens wins when both are given)."},
			"n":                     {"enum": []any{1, nil}, "description": "Only 1 answer: any other value is refused."},
			"tools":                 {"description": "Refused unless absent, null or empty: gantry brings its own tools (execute_code, search_skills, get_skill, search_tools, list_files, read_file)."},
			"max_steps":             {"minimum": 0, "description": "gantry's own: at most this many model calls (never more than GANTRY_LLM_MAX_STEPS, which absent or 0 means)."},
		},
	},
	"AgentEvent": {
		desc: "A step of the agent loop: a tool call about to run, or its result.",
		props: map[string]js{
			"type":      {"enum": []any{"tool_call", "tool_result"}},
			"step":      {"minimum": 1, "description": "The model call (from 1) that asked for the tool."},
			"id":        {"description": "The tool call's id."},
			"name":      {"examples": []any{"execute_code", "search_skills", "get_skill", "search_tools", "list_files", "read_file"}, "description": "The tool (a name the model made up is reported as it wrote it, and fails)."},
			"arguments": {"description": "The call's arguments as the model wrote them (JSON, or a string when they were not JSON)."},
			"ok":        {"description": "tool_result: whether the call worked."},
			"result":    {"description": "tool_result: what the model reads back."},
			"job_id":    {"description": "tool_result of execute_code: the job it ran."},
			"status":    {"description": "tool_result of execute_code: the job's status when the tool returned."},
			"artifacts": {"description": "tool_result of execute_code: the files the job wrote."},
		},
	},
	"AgentTrace": {
		desc: "gantry's account of the loop, in a whole answer.",
		props: map[string]js{
			"steps":      {"minimum": 1, "description": "Model calls made."},
			"tool_calls": {"description": "The tool calls run, with their results (type tool_result)."},
		},
	},
	"ChatChoice": {
		props: map[string]js{
			"index":         {"const": 0},
			"finish_reason": {"enum": []any{"stop", "length"}, "description": "length: the step budget ran out."},
		},
	},
	"ChatCompletion": {
		desc: "The agent's answer, with gantry's account of the loop.",
		props: map[string]js{
			"object":  {"const": "chat.completion"},
			"created": {"description": "When the request began, in seconds since the Unix epoch."},
			"model":   {"description": "The operator's model (GANTRY_LLM_MODEL)."},
			"gantry":  {"description": "gantry's own: the loop's steps and tool calls (OpenAI clients ignore it)."},
		},
	},
	"ChatUsage": {
		desc: "Tokens over all the model calls, as the model server reported them.",
	},
	"ChatDelta": {
		desc: "What a chunk adds to the answer: the role in the first chunk, then text; empty in progress chunks and the last one.",
		props: map[string]js{
			"role": {"const": "assistant"},
		},
	},
	"ChatChunkChoice": {
		props: map[string]js{
			"index":         {"const": 0},
			"finish_reason": {"enum": []any{"stop", "length", nil}, "description": "null until the last chunk of the answer; length: the step budget ran out."},
		},
	},
	"ChatCompletionChunk": {
		desc: "A piece of a streamed answer; `gantry` is set on progress chunks (empty delta). With stream_options.include_usage the last chunk has no choices and carries usage.",
		props: map[string]js{
			"object": {"const": "chat.completion.chunk"},
			"gantry": {"description": "gantry's own: the loop's progress (a tool call starting, or its result)."},
		},
	},
}

var sharedParameters = js{"JobID": js{"name": "id", "in": "path", "required": true, "description": "The job's id (job_ and 26 Crockford base32 characters). Anything else, and another tenant's job, answers 404.", "schema": js{"type": "string"}, "examples": js{"job": js{"value": "job_01jzq3v6k8m2n4p5r7s9t0w1x2"}}}, "IdempotencyKey": js{"name": "Idempotency-Key", "in": "header", "required": false, "description": "Same as the body's idempotency_key (1-255 printable ASCII characters without spaces). If the body also has one, they must be equal (400 otherwise). A retry with the same key and the same request returns the existing job instead of creating one; with a different request it is 409.", "schema": js{"type": "string", "pattern": "^[!-~]{1,255}$"}}, "SessionID": js{"name": "id", "in": "path", "required": true, "description": "The session's id (ses_ and 26 Crockford base32 characters). Anything else, another tenant's session, and a session that has expired or was closed answer 404.", "schema": js{"type": "string"}, "examples": js{"session": js{"value": "ses_01jzq3v6k8m2n4p5r7s9t0w1x2"}}}, "FilePath": js{"name": "path", "in": "path", "required": true, "description": `The file's path relative to /workspace, e.g. out/plot.png. Unlike ordinary path parameters it may contain slashes: everything after /files/ is the path (the server route is /v1/sessions/{id}/files/{path...}). Send the slashes as they are and percent-encode within segments. The path is cleaned ("./a//b" → "a/b"); an empty or absolute path, one that leaves the workspace, NUL bytes, invalid UTF-8, more than 1024 bytes or a segment longer than 255 bytes is 400 (field path).`, "schema": js{"type": "string"}, "examples": js{"nested": js{"value": "out/plot.png"}}}, "SkillName": js{"name": "name", "in": "path", "required": true, "description": "The skill's name, as the Agent Skills standard has it: 1 to 64 lowercase letters, digits and hyphens, no hyphen at either end or twice in a row; it is also the skill's folder under /skills, and Python imports it with hyphens as underscores (data-analysis: skills.data_analysis). Skills saved before gantry followed the standard may have identifier names (a lowercase letter, then letters, digits or _): they can still be read and deleted, but not saved again. A string that is neither answers 400 (field name); a name the tenant does not see (including another tenant's skill) answers 404.", "schema": js{"type": "string", "maxLength": 64, "pattern": "^([a-z0-9]+(-[a-z0-9]+)*|[a-z][a-z0-9_]{0,63})$"}, "examples": js{"builtin": js{"value": "data-analysis"}}}, "McpServerName": js{"name": "name", "in": "path", "required": true, "description": "The MCP server's name, as registered: a lowercase letter, then lowercase letters, digits or _ (at most 40 characters). A name the tenant has not registered (including another tenant's server, and any string that is not a server name) answers 404.", "schema": js{"type": "string", "pattern": "^[a-z][a-z0-9_]{0,39}$"}, "examples": js{"crm": js{"value": "crm"}}}, "ToolDetail": js{"name": "detail", "in": "query", "required": false, "description": "How much to say about each tool: `name` (server and name only), `description` (also the description's first paragraph, cut at 300 bytes; the default), or `full` (the whole description and the input and output schemas). Anything else is 400 (field detail).", "schema": js{"type": "string", "enum": []any{"name", "description", "full"}, "default": "description"}}}

var sharedHeaders = js{"RetryAfter": js{"description": "Seconds to wait before retrying.", "schema": js{"type": "integer"}}, "WWWAuthenticate": js{"description": "Always `Bearer realm=\"gantry\"`.", "schema": js{"type": "string"}}, "JobLocation": js{"description": "The job's URL, /v1/jobs/{id}.", "schema": js{"type": "string"}}, "SessionLocation": js{"description": "The session's URL, /v1/sessions/{id}.", "schema": js{"type": "string"}}, "SkillLocation": js{"description": "The saved version's URL, /v1/skills/{name}?version={version}.", "schema": js{"type": "string"}}, "McpServerLocation": js{"description": "The server's URL, /v1/mcp-servers/{name}.", "schema": js{"type": "string"}}}

var sharedResponses = js{
	"RequestTimeout": js{"description": "request_timeout: the request's body did not arrive within the server's body timeout (GANTRY_BODY_TIMEOUT, 60 s by default); the connection is closed.", "content": js{"application/json": js{"schema": js{"$ref": "#/components/schemas/Error"}}}}, "BadRequest": js{"description": "invalid_argument: the request is malformed or breaks a limit; `field` names the field at fault when there is one.", "content": js{"application/json": js{"schema": js{"$ref": "#/components/schemas/Error"}}}}, "Unauthenticated": js{"description": "unauthenticated: the Authorization header is missing, or the key is invalid or revoked.", "content": js{"application/json": js{"schema": js{"$ref": "#/components/schemas/Error"}}}, "headers": js{"WWW-Authenticate": js{"$ref": "#/components/headers/WWWAuthenticate"}}}, "NotFound": js{"description": "not_found: no such object for this tenant (another tenant's ids, and strings that are not ids, answer the same).", "content": js{"application/json": js{"schema": js{"$ref": "#/components/schemas/Error"}}}}, "Conflict": js{"description": "conflict: the idempotency key was already used for a different request.", "content": js{"application/json": js{"schema": js{"$ref": "#/components/schemas/Error"}}}}, "PayloadTooLarge": js{"description": "payload_too_large: the request body is larger than the server's limit (10 MiB by default).", "content": js{"application/json": js{"schema": js{"$ref": "#/components/schemas/Error"}}}}, "Unavailable": js{"description": "unavailable: a dependency (the database, or the job queue) is unavailable, or the job queue is full; the request was not carried out (a submission was not accepted). Retry after Retry-After seconds.", "content": js{"application/json": js{"schema": js{"$ref": "#/components/schemas/Error"}}}, "headers": js{"Retry-After": js{"$ref": "#/components/headers/RetryAfter"}}}, "Internal": js{"description": "internal: an unexpected failure; the message does not say more (see the server log).", "content": js{"application/json": js{"schema": js{"$ref": "#/components/schemas/Error"}}}}, "FileConflict": js{"description": "conflict: the edit conflicts with the workspace (field path: the path is a directory or a symlink, or one of its parents is not a directory), or the session stayed busy for 30 seconds: an edit waits until the session's jobs (running and queued) are done, then answers this with Retry-After: 5 (no field) if they are not.", "content": js{"application/json": js{"schema": js{"$ref": "#/components/schemas/Error"}}}, "headers": js{"Retry-After": js{"$ref": "#/components/headers/RetryAfter"}}}, "CodeModeUnavailable": js{"description": "unavailable: code mode is not configured on this gantry, or (to register, change or refresh a server) the operator has not set GANTRY_SECRET_KEY, which seals upstream credentials; or a dependency (the database) is unavailable, with Retry-After.", "content": js{"application/json": js{"schema": js{"$ref": "#/components/schemas/Error"}}}, "headers": js{"Retry-After": js{"$ref": "#/components/headers/RetryAfter"}}}, "UpstreamError": js{"description": "upstream_error: gantry could not reach the upstream MCP server or list its tools (connection refused, an address that is not public while the operator does not allow private ones, the server's own error such as a wrong credential, a response too large, more tools than gantry keeps). The message names the server and says why, without quoting credentials. A failed registration or change stores nothing; a failed refresh is recorded in the server's tools_error.", "content": js{"application/json": js{"schema": js{"$ref": "#/components/schemas/Error"}}}}, "RateLimited": js{"description": "rate_limited: the tenant went past one of its quotas: its API requests per second (on this ingress; every authenticated request counts), or, for a submission, its queued jobs. Retry after Retry-After seconds.", "content": js{"application/json": js{"schema": js{"$ref": "#/components/schemas/Error"}}}, "headers": js{"Retry-After": js{"$ref": "#/components/headers/RetryAfter"}}}}

var sharedSecuritySchemes = js{"bearerAuth": js{"type": "http", "scheme": "bearer", "description": "An API key: Authorization: Bearer <key>."}}

var infoText = js{"title": "gantry", "version": "1", "description": "gantry runs untrusted code in hardened, network-less sandboxes. A client submits a job (a python, bash, node or typescript program or a command, with input files, environment, a timeout and resource limits); gantry queues it, a runner executes it in a fresh container, and the client polls, long-polls, waits (POST /v1/execute) or streams the output as server-sent events, then downloads the files the job produced through short-lived presigned URLs. For state that outlives one job, a client creates a session (POST /v1/sessions): the jobs submitted with its session_id run one at a time, in submission order, in the session's /workspace, which keeps the files each job leaves for the next, and which the client can list, read, write and delete under /v1/sessions/{id}/files. Every /v1 request carries an API key as a bearer token; the key's tenant scopes every object, and another tenant's ids answer 404. Failed requests answer {\"error\": {\"code\", \"message\", \"field\"}}. Skills are reusable know-how shared by a tenant's jobs: each is a SKILL.md (YAML front matter and a markdown body saying when to use it, the steps and an example) with optional code files. gantry ships built-in skills visible to every tenant, and a tenant saves its own under /v1/skills; every save makes a new version. Each job sees the current version of every skill its tenant sees, mounted read-only at /skills/<name>/ (SKILL.md and the files), and Python imports a skill's code with `from skills.<name> import helpers`. Code mode lets a job's code call the tools of MCP servers the tenant registers under /v1/mcp-servers (a streamable HTTP URL, or a stdio command the operator allows): Python imports a server's tools with `from servers.<name> import <tool>`, Node with `require('servers/<name>')`; the calls go through gantry, which holds the credentials (write-only: the API never shows them again and no sandbox sees them), applies the server's allow and deny lists, the job's limits.tool_calls budget and the server's timeout, and records each call in the job's tool_calls. GET /v1/tools searches the tools. /v1/settings holds the tenant's own switches (pii_tokens: privacy tokens). Code mode and privacy tokens need the operator's GANTRY_SECRET_KEY."}

var tagsText = []any{js{"name": "jobs", "description": "Submitting, watching and cancelling jobs."}, js{"name": "artifacts", "description": "Files jobs produced."}, js{"name": "sessions", "description": "Stateful workspaces that persist between the jobs run in them."}, js{"name": "files", "description": "The files of a session's workspace."}, js{"name": "skills", "description": "Reusable know-how in the Agent Skills format (a folder with SKILL.md and files) mounted read-only at /skills/<name>/ in every job: built-in and the tenant's own, versioned, searchable, uploaded and downloaded as JSON, SKILL.md, zip or tar."}, js{"name": "code mode", "description": "Upstream MCP servers whose tools a job's code can call (their credentials write-only), and search across their tools."}, js{"name": "settings", "description": "The tenant's own switches."}, js{"name": "agent", "description": "An OpenAI-compatible agent that answers by running code in gantry as the calling tenant, with a model the operator configures (GANTRY_LLM_URL, GANTRY_LLM_MODEL)."}, js{"name": "service", "description": "Health, readiness, metrics and this document; no authentication."}}

var webhooksText = js{"jobFinished": js{"post": js{"operationId": "jobFinished", "summary": "A job finished (called on the job's webhook_url, else the tenant's default).", "description": "Sent by gantry to the receiver, following the Standard Webhooks specification (standardwebhooks.com). Answer 2xx quickly to acknowledge; anything else, no answer within GANTRY_WEBHOOK_TIMEOUT (10 s) or a redirect is retried. A call can arrive more than once: drop duplicates by webhook-id.", "parameters": []any{js{"name": "webhook-id", "in": "header", "required": true, "description": "The message id, the same on every attempt (the delivery's id on the job).", "schema": js{"type": "string"}, "examples": js{"example": js{"value": "msg_01jzq3v6k8m2n4p5r7s9t0w1x2"}}}, js{"name": "webhook-timestamp", "in": "header", "required": true, "description": "When this attempt was signed, in seconds since the Unix epoch; refuse it when more than 5 minutes from your clock.", "schema": js{"type": "string"}, "examples": js{"example": js{"value": "1767225600"}}}, js{"name": "webhook-signature", "in": "header", "required": true, "description": `Space-separated signatures v1,<base64 HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<body>"> under the tenant's secret (two after a rotation).`, "schema": js{"type": "string"}, "examples": js{"example": js{"value": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}}}}, "requestBody": js{"required": true, "content": js{"application/json": js{"schema": js{"$ref": "#/components/schemas/WebhookEvent"}}}}, "responses": js{"2XX": js{"description": "Received; not sent again."}, "default": js{"description": "Not received: sent again later."}}}}}
