package ingress

import (
	"net/http"
	"reflect"

	"github.com/gantryhq/gantry/chat"
	"github.com/gantryhq/gantry/codemode"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/snapshot"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/webhook"
)

// apiHandler serves an authenticated request of the tenant p. An error it
// returns becomes the API's error body (toAPIError).
type apiHandler func(w http.ResponseWriter, r *http.Request, p store.Principal) error

// route is one operation of the HTTP API: what the mux serves and what the
// OpenAPI document says of it. routeTable is the one list of the API's
// routes: routes() registers it on the mux and OpenAPI() writes the
// document from it, reflecting the bodies' schemas from their Go types.
type route struct {
	method, path string // the mux pattern's; {name...} takes the rest of the path
	id           string // operationId, unique
	summary      string
	desc         string
	tags         []string
	// public routes are served without an API key (serve); the others
	// authenticate the key first (handle), and may answer 401, 429, 500 and
	// 503 besides what resps and errs list.
	public bool
	serve  http.Handler
	handle apiHandler
	params []param
	body   *requestBody
	// errs are shared error answers the route gives (400, 404, 409, 413,
	// 502: components.responses, see sharedErrorNames). A route with a body
	// may also answer 408 (its body too slow).
	errs  []int
	resps []resp
}

// param is a parameter of an operation: a shared one (ref, a name of
// components.parameters) or its own.
type param struct {
	ref      string
	in, name string // query, header or path
	desc     string
	required bool
	of       reflect.Type // the value's Go type, whose schema is reflected
	schema   js           // or the schema as is; neither: a string
	examples js
	more     js // other keywords of the parameter object
}

// requestBody is what an operation takes, by media type.
type requestBody struct {
	desc     string
	required bool
	content  []media
}

// media is one media type of a body: its schema reflected from a Go type,
// or given as is (raw) when the body is not JSON.
type media struct {
	typ    string
	schema reflect.Type
	raw    js
	// events are the data of each event of a text/event-stream, by event
	// name (written as x-sse-events).
	events map[string]reflect.Type
	more   js // other keywords of the media type object (examples)
}

// resp is one answer of an operation: a shared one (ref, a name of
// components.responses) or its own.
type resp struct {
	status  string // "200", "2XX", "default"
	ref     string
	desc    string
	headers js
	content []media
}

// typ is the reflect.Type of T, for the table's schemas.
func typ[T any]() reflect.Type { return reflect.TypeFor[T]() }

// routes builds the mux from the route table.
func (s *Server) routes() {
	m := http.NewServeMux()
	for _, rt := range s.routeTable() {
		pattern := rt.method + " " + rt.path
		if rt.public {
			m.Handle(pattern, rt.serve)
			continue
		}
		m.Handle(pattern, s.instrument(pattern, s.authenticated(rt.handle)))
	}
	m.Handle("/mcp", s.instrument("/mcp", s.newMCP()))
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, notFound("route "+r.Method+" "+r.URL.Path))
	})
	s.mux = m
}

// routeTable is the HTTP API. Adding a query parameter is one line in its
// route's params; a new route is one entry (and its handler).
func (s *Server) routeTable() []route {
	return []route{
		{
			method: "GET", path: "/healthz", id: "getHealth",
			public: true, serve: http.HandlerFunc(serveHealth),
			tags:    []string{"service"},
			summary: "Liveness check: answers while the process is up.",
			resps: []resp{
				{status: "200", desc: "The process is alive.", content: []media{{typ: "application/json", schema: typ[health]()}}},
			},
		},
		{
			method: "GET", path: "/readyz", id: "getReadiness",
			public: true, serve: http.HandlerFunc(s.handleReady),
			tags:    []string{"service"},
			summary: "Readiness check of the dependencies (Postgres, NATS, S3, Docker if local).",
			desc:    "Runs each check with a 3 second budget. `nats` passes only when the job stream answers (with a leader, when it is replicated): while NATS is unreachable, the stream is missing or a cluster is electing its leader, submissions would fail with 503, and so does this check.",
			resps: []resp{
				{status: "200", desc: "Every check passed.", content: []media{{typ: "application/json", schema: typ[readiness]()}}},
				{status: "503", desc: "At least one check failed; `ready` is false.", content: []media{{typ: "application/json", schema: typ[readiness]()}}},
			},
		},
		{
			method: "GET", path: "/metrics", id: "getMetrics",
			public: true, serve: s.metricsHandler,
			tags:    []string{"service"},
			summary: "Prometheus metrics in the text exposition format.",
			resps: []resp{
				{status: "200", desc: "Metrics, e.g. gantry_http_request_seconds and gantry_jobs_submitted_total.", content: []media{{typ: "text/plain", raw: js{"type": "string", "description": "The Prometheus text exposition format (version 0.0.4)."}}}},
			},
		},
		{
			method: "GET", path: "/openapi.json", id: "getOpenAPI",
			public: true, serve: http.HandlerFunc(serveOpenAPI),
			tags:    []string{"service"},
			summary: "This OpenAPI document.",
			resps: []resp{
				{status: "200", desc: "The OpenAPI 3.1 description of the HTTP API.", content: []media{{typ: "application/json", raw: js{"type": "object"}}}},
			},
		},
		{
			method: "GET", path: "/v1/languages", id: "listLanguages",
			handle:  s.handleLanguages,
			tags:    []string{"jobs"},
			summary: "List the languages jobs can be written in.",
			resps: []resp{
				{status: "200", desc: "The languages.", content: []media{{typ: "application/json", schema: typ[languageList]()}}},
			},
		},
		{
			method: "POST", path: "/v1/jobs", id: "submitJob",
			handle:  s.handleSubmit,
			tags:    []string{"jobs"},
			summary: "Submit a job; answers at once with the queued job.",
			desc:    "Validates the request, records the job and queues it. An idempotent retry (same key, same request) answers 202 with the job the first request created, whatever its status.",
			params: []param{
				{ref: "IdempotencyKey"},
			},
			body: &requestBody{required: true, content: []media{{typ: "application/json", schema: typ[jobs.Request](), more: js{"examples": js{"code": js{"value": js{"language": "python", "code": "print(6*7)"}}, "full": js{"value": js{"language": "python", "code": "import pandas as pd\nprint(pd.read_csv('data.csv'))", "files": []any{js{"path": "data.csv", "content": "a,b\n1,2\n", "encoding": "utf8"}}, "env": js{"SEED": "1"}, "timeout_ms": 30000, "limits": js{"memory_mb": 512, "cpus": 1, "pids": 128, "disk_mb": 512, "output_bytes": 1048576}, "artifacts": []any{"out/**"}, "idempotency_key": "client-chosen", "metadata": js{"agent": "demo"}}}}}}}},
			errs: []int{400, 404, 409, 413},
			resps: []resp{
				{status: "202", desc: "Accepted: the job (status queued, or the existing job for a repeated idempotency key).", headers: js{"Location": js{"$ref": "#/components/headers/JobLocation"}}, content: []media{{typ: "application/json", schema: typ[jobs.Job]()}}},
			},
		},
		{
			method: "GET", path: "/v1/jobs", id: "listJobs",
			handle:  s.handleList,
			tags:    []string{"jobs"},
			summary: "List and search the tenant's jobs, newest first, cursor paginated.",
			desc:    "Every filter given must hold. Filters that take several values (status, language) take them repeated (status=failed&status=error) or comma-separated (status=failed,error): any of them matches. Metadata filters are parameters named metadata.KEY (metadata.agent=demo&metadata.run=7): every pair must be in the job's metadata. Filters combine with the cursor: pass the same filters with each page's next_cursor. An unknown query parameter, a single-valued one given twice, and a malformed value are refused with 400 naming the parameter in error.field.",
			params:  listJobsParams,
			errs:    []int{400},
			resps: []resp{
				{status: "200", desc: "A page of jobs.", content: []media{{typ: "application/json", schema: typ[jobList]()}}},
			},
		},
		{
			method: "GET", path: "/v1/jobs/{id}", id: "getJob",
			handle:  s.handleGet,
			tags:    []string{"jobs"},
			summary: "Get a job, optionally long-polling until it finishes.",
			params:  append([]param{{ref: "JobID"}}, getJobParams...),
			errs:    []int{400, 404},
			resps: []resp{
				{status: "200", desc: "The job (finished, or as it was when the wait ran out).", content: []media{{typ: "application/json", schema: typ[jobs.Job]()}}},
			},
		},
		{
			method: "POST", path: "/v1/jobs/{id}/cancel", id: "cancelJob",
			handle:  s.handleCancel,
			tags:    []string{"jobs"},
			summary: "Cancel a job: drop it if queued, kill it if running; idempotent.",
			desc:    "A queued job becomes cancelled at once. For a running job the runner is told to kill it and the answer waits up to 5 seconds for the final state, so it may still show `running`. A finished job is returned unchanged.",
			params: []param{
				{ref: "JobID"},
			},
			errs: []int{404},
			resps: []resp{
				{status: "200", desc: "The job after the cancel.", content: []media{{typ: "application/json", schema: typ[jobs.Job]()}}},
			},
		},
		{
			method: "GET", path: "/v1/jobs/{id}/logs", id: "streamJobLogs",
			handle:  s.handleLogs,
			tags:    []string{"jobs"},
			summary: "Stream a job's output as server-sent events.",
			desc:    "A text/event-stream. `stdout` and `stderr` events carry JSON data {\"data\": \"...\"} (schema LogChunk): while the job runs, first the output so far, then live chunks; for a finished job, its stored output. Each byte of a stream is sent once, in order. The stream ends with one `status` event whose data is the finished job without its output (schema LogStatusEvent), and then the server closes it. A `: keep-alive` comment is sent every 15 seconds. Errors found before the stream starts (401, 404, ...) are ordinary JSON error answers.",
			params: []param{
				{ref: "JobID"},
			},
			errs: []int{404},
			resps: []resp{
				{status: "200", desc: "The event stream.", headers: js{"Cache-Control": js{"description": "no-cache", "schema": js{"type": "string"}}}, content: []media{{typ: "text/event-stream", raw: js{"type": "string", "description": "Server-sent events: `event: stdout|stderr|status` lines each followed by one `data:` line of JSON."}, events: map[string]reflect.Type{"stdout": typ[logChunk](), "stderr": typ[logChunk](), "status": typ[logStatus]()}, more: js{"example": "event: stdout\ndata: {\"data\":\"42\\n\"}\n\nevent: status\ndata: {\"attempt\":1,\"duration_ms\":120,\"error\":null,\"exit_code\":0,\"id\":\"job_01jzq3v6k8m2n4p5r7s9t0w1x2\",\"status\":\"succeeded\",\"stderr_truncated\":false,\"stdout_truncated\":false}\n\n"}}}},
			},
		},
		{
			method: "GET", path: "/v1/jobs/{id}/artifacts", id: "listJobArtifacts",
			handle:  s.handleArtifacts,
			tags:    []string{"artifacts"},
			summary: "Get the manifest of a job's artifacts.",
			params: []param{
				{ref: "JobID"},
			},
			errs: []int{404},
			resps: []resp{
				{status: "200", desc: "The manifest (empty until the job finishes).", content: []media{{typ: "application/json", schema: typ[artifactManifest]()}}},
			},
		},
		{
			method: "GET", path: "/v1/jobs/{id}/artifacts/{path...}", id: "downloadJobArtifact",
			handle:  s.handleArtifact,
			tags:    []string{"artifacts"},
			summary: "Redirect to a presigned download URL for one artifact.",
			desc:    "The URL works with a plain HTTP GET and no credentials, and stops working when it expires (15 minutes by default, configurable).",
			params: []param{
				{ref: "JobID"},
				{in: "path", name: "path", schema: js{"type": "string"}, examples: js{"nested": js{"value": "out/plot.png"}}, desc: `The artifact's path as in the manifest, e.g. out/plot.png. Unlike ordinary path parameters it may contain slashes: everything after /artifacts/ is the path (the server route is /v1/jobs/{id}/artifacts/{path...}). Send the slashes as they are and percent-encode within segments, as Artifact.url does. The path is cleaned ("./a//b" → "a/b") before the lookup.`},
				{in: "query", name: "redirect", schema: js{"type": "string", "examples": []any{"false"}}, desc: "`false` answers 200 with {url, expires_at} instead of redirecting; any other value redirects."},
			},
			errs: []int{400, 404},
			resps: []resp{
				{status: "200", desc: "With ?redirect=false: the presigned URL and when it expires.", content: []media{{typ: "application/json", schema: typ[presignedURL]()}}},
				{status: "302", desc: "Found: redirect to the presigned object-store URL.", headers: js{"Location": js{"description": "The presigned URL.", "schema": js{"type": "string", "format": "uri"}}}},
			},
		},
		{
			method: "POST", path: "/v1/execute", id: "executeJob",
			handle:  s.handleExecute,
			tags:    []string{"jobs"},
			summary: "Submit a job and wait for it to finish.",
			desc:    "Same body and validation as POST /v1/jobs, then waits until the job finishes, the wait runs out or the client goes away.",
			params: []param{
				{ref: "IdempotencyKey"},
				{in: "query", name: "wait", schema: js{"type": "string"}, examples: js{"seconds": js{"value": "30s"}, "millis": js{"value": "500ms"}, "plain": js{"value": "120"}}, desc: `How long to wait for the job to finish: a Go duration such as "30s", "500ms" or "1m30s", or a plain number of seconds such as "2" or "0.5". At most 15m30s (the server's MaxExecuteWait, configurable); more, or a negative or unparsable value, is 400 (checked before the job is submitted). Absent or 0 waits up to the maximum.`},
			},
			body: &requestBody{required: true, content: []media{{typ: "application/json", schema: typ[jobs.Request](), more: js{"examples": js{"code": js{"value": js{"language": "python", "code": "print(6*7)"}}, "full": js{"value": js{"language": "python", "code": "import pandas as pd\nprint(pd.read_csv('data.csv'))", "files": []any{js{"path": "data.csv", "content": "a,b\n1,2\n", "encoding": "utf8"}}, "env": js{"SEED": "1"}, "timeout_ms": 30000, "limits": js{"memory_mb": 512, "cpus": 1, "pids": 128, "disk_mb": 512, "output_bytes": 1048576}, "artifacts": []any{"out/**"}, "idempotency_key": "client-chosen", "metadata": js{"agent": "demo"}}}}}}}},
			errs: []int{400, 404, 409, 413},
			resps: []resp{
				{status: "200", desc: "The finished job.", headers: js{"Location": js{"$ref": "#/components/headers/JobLocation"}}, content: []media{{typ: "application/json", schema: typ[jobs.Job]()}}},
				{status: "202", desc: "The wait ran out: the job as it is (queued or running); poll GET /v1/jobs/{id}.", headers: js{"Location": js{"$ref": "#/components/headers/JobLocation"}}, content: []media{{typ: "application/json", schema: typ[jobs.Job]()}}},
			},
		},
		{
			method: "POST", path: "/v1/sessions", id: "createSession",
			handle:  s.handleCreateSession,
			tags:    []string{"sessions"},
			summary: "Create a session: a workspace that persists between the jobs run in it.",
			desc:    "The session starts with an empty /workspace. Submit jobs to it with session_id (POST /v1/jobs or POST /v1/execute); they run one at a time, in submission order, each seeing the files the previous ones left. A stateful session also keeps its sandbox alive between jobs: one Python interpreter for its Python jobs (like notebook cells), /tmp and background processes. The session lives until DELETE /v1/sessions/{id}, or until ttl_seconds pass without use. The body is at most 65536 bytes.",
			body:    &requestBody{required: true, content: []media{{typ: "application/json", schema: typ[jobs.SessionRequest](), more: js{"examples": js{"defaults": js{"value": js{}}, "full": js{"value": js{"language": "python", "ttl_seconds": 7200, "disk_mb": 1024, "metadata": js{"agent": "demo"}}}, "stateful": js{"value": js{"language": "python", "stateful": true}}}}}}},
			errs:    []int{400},
			resps: []resp{
				{status: "201", desc: "Created: the session.", headers: js{"Location": js{"$ref": "#/components/headers/SessionLocation"}}, content: []media{{typ: "application/json", schema: typ[jobs.Session]()}}},
				{status: "413", desc: "payload_too_large: the request body is larger than 65536 bytes.", content: []media{{typ: "application/json", schema: typ[errorBody]()}}},
			},
		},
		{
			method: "GET", path: "/v1/sessions", id: "listSessions",
			handle:  s.handleListSessions,
			tags:    []string{"sessions"},
			summary: "List the tenant's active sessions, newest first, cursor paginated.",
			params: []param{
				{in: "query", name: "limit", schema: js{"type": "integer", "minimum": 1, "maximum": 100, "default": 20}, desc: "Page size."},
				{in: "query", name: "cursor", schema: js{"type": "string"}, desc: "The next_cursor of the previous page (opaque)."},
			},
			errs: []int{400},
			resps: []resp{
				{status: "200", desc: "A page of sessions.", content: []media{{typ: "application/json", schema: typ[sessionList]()}}},
			},
		},
		{
			method: "GET", path: "/v1/sessions/{id}", id: "getSession",
			handle:  s.handleGetSession,
			tags:    []string{"sessions"},
			summary: "Get a session.",
			desc:    "Reading a session does not extend its life.",
			params: []param{
				{ref: "SessionID"},
			},
			errs: []int{404},
			resps: []resp{
				{status: "200", desc: "The session.", content: []media{{typ: "application/json", schema: typ[jobs.Session]()}}},
			},
		},
		{
			method: "DELETE", path: "/v1/sessions/{id}", id: "deleteSession",
			handle:  s.handleDeleteSession,
			tags:    []string{"sessions"},
			summary: "Close a session: stop its jobs and delete its files.",
			desc:    "The session stops accepting jobs and file edits at once: its queued jobs become cancelled, its running job is killed (and ends cancelled), and its workspace is deleted. From then on the session answers 404, and so does a second DELETE.",
			params: []param{
				{ref: "SessionID"},
			},
			errs: []int{404},
			resps: []resp{
				{status: "204", desc: "Closed."},
			},
		},
		{
			method: "GET", path: "/v1/sessions/{id}/files", id: "listSessionFiles",
			handle:  s.handleListFiles,
			tags:    []string{"files"},
			summary: "List the files of a session's workspace, recursively.",
			desc:    "Lists the workspace as the last job (or files API edit) left it; a running job's changes show once it has finished. At most 10000 entries are listed.",
			params: []param{
				{ref: "SessionID"},
				{in: "query", name: "path", schema: js{"type": "string"}, examples: js{"dir": js{"value": "out"}}, desc: "List only what lies below this directory (relative to /workspace, cleaned; the directory itself is not listed). Absent or empty lists the whole workspace. A path that is not a directory of the workspace gives an empty list; an invalid path (absolute, leaving the workspace, ...) is 400."},
			},
			errs: []int{400, 404},
			resps: []resp{
				{status: "200", desc: "The entries, sorted by path; an empty workspace gives an empty list.", content: []media{{typ: "application/json", schema: typ[fileList]()}}},
			},
		},
		{
			method: "GET", path: "/v1/sessions/{id}/files/{path...}", id: "readSessionFile",
			handle:  s.handleGetFile,
			tags:    []string{"files"},
			summary: "Download a file of a session's workspace.",
			desc:    "Answers the file's bytes as they were when the last job (or files API edit) saved the workspace.",
			params: []param{
				{ref: "SessionID"},
				{ref: "FilePath"},
			},
			resps: []resp{
				{status: "200", desc: "The file's content.", headers: js{"Content-Length": js{"description": "The file's size in bytes.", "schema": js{"type": "integer"}}, "Last-Modified": js{"description": "The file's modification time (HTTP date).", "schema": js{"type": "string"}}}, content: []media{{typ: "application/octet-stream", raw: js{"type": "string", "contentMediaType": "application/octet-stream"}}}},
				{status: "400", desc: "invalid_argument (field path): the path is invalid, or names a directory (list it with GET /v1/sessions/{id}/files?path=) or a symlink (never followed).", content: []media{{typ: "application/json", schema: typ[errorBody]()}}},
				{status: "404", desc: "not_found: no such session, or no file at the path.", content: []media{{typ: "application/json", schema: typ[errorBody]()}}},
			},
		},
		{
			method: "PUT", path: "/v1/sessions/{id}/files/{path...}", id: "writeSessionFile",
			handle:  s.handlePutFile,
			tags:    []string{"files"},
			summary: "Create or replace a file in a session's workspace.",
			desc:    "The request body is the file's content, as raw bytes (the Content-Type is not looked at); at most 10 MiB by default (the server's body limit, and never more than 32 MiB). A file already at the path is replaced; parent directories need not exist (until a job of the session has run, they have no entry of their own, so listings do not show them and DELETE of such a directory answers 404). The edit waits until no job of the session runs (see 409) and makes a new workspace version; jobs submitted meanwhile run after it. It extends the session's life.",
			params: []param{
				{ref: "SessionID"},
				{ref: "FilePath"},
			},
			body: &requestBody{required: true, content: []media{{typ: "application/octet-stream", raw: js{"type": "string", "contentMediaType": "application/octet-stream"}}}},
			errs: []int{400},
			resps: []resp{
				{status: "200", desc: "Written: the new file's entry. Its `path` echoes the URL's path as sent, and `modified_at` is the time of the answer (a later listing shows the stored time, in whole seconds).", content: []media{{typ: "application/json", schema: typ[snapshot.Entry]()}}},
				{status: "404", desc: "not_found: no such session (it may have expired or been closed).", content: []media{{typ: "application/json", schema: typ[errorBody]()}}},
				{status: "409", ref: "FileConflict"},
				{status: "413", desc: "payload_too_large: the body is larger than the limit (10 MiB by default, at most 32 MiB), or the workspace would exceed the session's disk_mb.", content: []media{{typ: "application/json", schema: typ[errorBody]()}}},
			},
		},
		{
			method: "DELETE", path: "/v1/sessions/{id}/files/{path...}", id: "deleteSessionFile",
			handle:  s.handleDeleteFile,
			tags:    []string{"files"},
			summary: "Delete a file, symlink or directory (recursively) from a session's workspace.",
			desc:    "A directory is removed with everything below it; a symlink is removed, not followed. Like PUT, the edit waits until no job of the session runs (see 409), makes a new workspace version and extends the session's life.",
			params: []param{
				{ref: "SessionID"},
				{ref: "FilePath"},
			},
			errs: []int{400},
			resps: []resp{
				{status: "204", desc: "Deleted."},
				{status: "404", desc: "not_found: no such session, or no entry at the path (a directory that only exists implicitly, as the parent of files written with PUT before any job ran, counts as none).", content: []media{{typ: "application/json", schema: typ[errorBody]()}}},
				{status: "409", desc: "conflict: the session stayed busy running jobs for 30 seconds; retry after Retry-After seconds.", headers: js{"Retry-After": js{"$ref": "#/components/headers/RetryAfter"}}, content: []media{{typ: "application/json", schema: typ[errorBody]()}}},
			},
		},
		{
			method: "GET", path: "/v1/skills", id: "listSkills",
			handle:  s.handleListSkills,
			tags:    []string{"skills"},
			summary: "List the skills the tenant sees, or search them.",
			desc:    "Without q (or with only spaces), every skill the tenant sees, at its current version: the tenant's own first, then the built-ins, each group by name; limit is checked but does not cut this list. With q, a full-text search (any of q's words may match; name and description weigh most, then tags, then the body): at most limit matches, best first, each with a score. A tenant's skill hides a built-in of the same name.",
			params: []param{
				{in: "query", name: "q", schema: js{"type": "string", "maxLength": 500}, examples: js{"search": js{"value": "plot a chart"}}, desc: "Search words, at most 500 bytes (400, field q, otherwise)."},
				{in: "query", name: "limit", schema: js{"type": "integer", "minimum": 1, "maximum": 100, "default": 20}, desc: "Most skills to return: default 20 when searching, 100 when listing; not a whole number from 1 to 100 is 400 (field limit)."},
			},
			errs: []int{400},
			resps: []resp{
				{status: "200", desc: "The skills (summaries).", content: []media{{typ: "application/json", schema: typ[skillList]()}}},
			},
		},
		{
			method: "GET", path: "/v1/skills/{name}", id: "getSkill",
			handle:  s.handleGetSkill,
			tags:    []string{"skills"},
			summary: "Get a skill in full: as JSON (its SKILL.md, fields and files), or its folder as a zip or tar archive.",
			desc:    "The current version, or the one given by ?version=. A tenant's skill hides a built-in of the same name. The answer is JSON unless ?format=zip or ?format=tar asks for an archive, or (without format) Accept names application/zip or application/x-tar before application/json. The archive holds one folder named after the skill with SKILL.md and the files, as the standard lays a skill out; PUT takes it back.",
			params: []param{
				{ref: "SkillName"},
				{in: "query", name: "version", schema: js{"type": "integer", "minimum": 1}, desc: "A stored version (GET /v1/skills/{name}/versions lists them); absent means the current one. Not a positive whole number is 400 (field version); a version that does not exist is 404."},
				{in: "query", name: "format", schema: js{"type": "string", "enum": []any{"json", "zip", "tar"}}, desc: "json (default), zip or tar; anything else is 400 (field format)."},
			},
			errs: []int{400},
			resps: []resp{
				{status: "200", desc: "The skill.", content: []media{{typ: "application/json", schema: typ[skillView]()}, {typ: "application/zip", raw: js{"type": "string", "contentMediaType": "application/zip", "description": "<name>/SKILL.md and <name>/<files>; Content-Disposition names <name>.zip."}}, {typ: "application/x-tar", raw: js{"type": "string", "contentMediaType": "application/x-tar", "description": "<name>/SKILL.md and <name>/<files>; Content-Disposition names <name>.tar."}}}},
				{status: "404", desc: "not_found: the tenant sees no skill of that name, or it has no such version (another tenant's skills answer the same).", content: []media{{typ: "application/json", schema: typ[errorBody]()}}},
			},
		},
		{
			method: "PUT", path: "/v1/skills/{name}", id: "saveSkill",
			handle:  s.handlePutSkill,
			tags:    []string{"skills"},
			summary: "Save a new version of one of the tenant's skills (creating it if new).",
			desc:    "The body is a whole SKILL.md (Content-Type text/markdown; text/plain and text/x-markdown are read the same), a whole skill folder as a zip (application/zip or application/x-zip-compressed) or tar archive (application/x-tar, or gzipped: application/gzip, application/x-gzip, application/x-gtar), or JSON (any other or no Content-Type; see SkillPut). A SKILL.md follows the Agent Skills standard (agentskills.io): YAML front matter between --- lines with name (required, equal to the URL's name), description (required, at most 1024 characters, may span lines), and optionally license, compatibility (at most 500 characters), metadata (a map of names to text) and allowed-tools (text or a list); gantry also reads version (a positive whole number), tags (at most 20), language (python, bash or node; default python) and requires. Unknown fields are refused, naming the field. The markdown body after it is required; a SKILL.md is at most 64 KiB. An archive holds SKILL.md at its root or in one top-level folder named as the skill, and the folder's other files (scripts/, references/, assets/, binary allowed): at most 100 files, 1 MiB each, 4 MiB in all; symbolic links, devices, absolute paths, paths leaving the folder and hidden files are refused (400, field archive or files[i].path); __MACOSX/ and .DS_Store are skipped. Each save stores a complete new version (old versions stay readable): fields and files not given are not carried over. If a version is given (front matter or JSON), it must be the next one (current + 1, or 1 for a new skill), else 409: a guard against overwriting a concurrent save. The name of a built-in skill cannot be used (409): save an improved copy under another name. A tenant's current skills hold at most 32 MiB in all (400, field files). Validation failures are 400 with the field at fault (e.g. description, metadata.version, allowed-tools, files[0].path). The next job of the tenant sees the new version at /skills/<name>/.",
			params: []param{
				{ref: "SkillName"},
			},
			body: &requestBody{required: true, content: []media{{typ: "text/markdown", raw: js{"type": "string", "maxLength": 65536, "description": "A whole SKILL.md."}, more: js{"examples": js{"skill_md": js{"value": "---\nname: csv-plot\ndescription: Plot a time series from a CSV file to a PNG with matplotlib. Use when a CSV has a date column and the user wants a chart.\nlicense: MIT\nmetadata:\n  author: example-org\n  version: \"1.0\"\n---\n\n# When to use\nA CSV with a date column...\n"}}}}, {typ: "application/json", schema: typ[skillPut]()}, {typ: "application/zip", raw: js{"type": "string", "contentMediaType": "application/zip", "description": "A skill folder: SKILL.md at the root or in one folder named as the skill, with its files (at most 5,308,416 bytes)."}}, {typ: "application/x-tar", raw: js{"type": "string", "contentMediaType": "application/x-tar", "description": "A skill folder: SKILL.md at the root or in one folder named as the skill, with its files (at most 5,308,416 bytes)."}}}},
			errs: []int{400},
			resps: []resp{
				{status: "200", desc: "Saved a new version (2 or more) of an existing skill: the version as stored.", headers: js{"Location": js{"$ref": "#/components/headers/SkillLocation"}}, content: []media{{typ: "application/json", schema: typ[skillView]()}}},
				{status: "201", desc: "Created: version 1 of a new skill (or of one deleted before), as stored.", headers: js{"Location": js{"$ref": "#/components/headers/SkillLocation"}}, content: []media{{typ: "application/json", schema: typ[skillView]()}}},
				{status: "409", desc: "conflict: the name is a built-in skill's, or the version given is not the next one (someone saved meanwhile; read the current version and retry).", content: []media{{typ: "application/json", schema: typ[errorBody]()}}},
				{status: "413", desc: "payload_too_large: the request body is larger than its cap: 5,308,416 bytes for an archive (4 MiB of files, 64 KiB of SKILL.md, 1 MiB of headers), 5,789,012 bytes for JSON or a SKILL.md (the files in base64, plus room).", content: []media{{typ: "application/json", schema: typ[errorBody]()}}},
			},
		},
		{
			method: "DELETE", path: "/v1/skills/{name}", id: "deleteSkill",
			handle:  s.handleDeleteSkill,
			tags:    []string{"skills"},
			summary: "Delete one of the tenant's skills, with every version.",
			desc:    "Jobs submitted afterwards no longer see it. Saving the name again starts at version 1. If the tenant's skill hid a built-in of the same name, the built-in is seen again.",
			params: []param{
				{ref: "SkillName"},
			},
			errs: []int{400},
			resps: []resp{
				{status: "204", desc: "Deleted."},
				{status: "404", desc: "not_found: the tenant has no skill of that name (another tenant's skills answer the same).", content: []media{{typ: "application/json", schema: typ[errorBody]()}}},
				{status: "409", desc: "conflict: the name is a built-in skill's, which cannot be deleted.", content: []media{{typ: "application/json", schema: typ[errorBody]()}}},
			},
		},
		{
			method: "GET", path: "/v1/skills/{name}/versions", id: "listSkillVersions",
			handle:  s.handleSkillVersions,
			tags:    []string{"skills"},
			summary: "List a skill's versions, newest first.",
			desc:    "Read one with GET /v1/skills/{name}?version=N.",
			params: []param{
				{ref: "SkillName"},
			},
			errs: []int{400},
			resps: []resp{
				{status: "200", desc: "The versions.", content: []media{{typ: "application/json", schema: typ[skillVersions]()}}},
				{status: "404", desc: "not_found: the tenant sees no skill of that name (another tenant's skills answer the same).", content: []media{{typ: "application/json", schema: typ[errorBody]()}}},
			},
		},
		{
			method: "POST", path: "/v1/mcp-servers", id: "createMcpServer",
			handle:  s.handleCreateMCPServer,
			tags:    []string{"code mode"},
			summary: "Register an upstream MCP server for code mode.",
			desc:    "gantry connects to the server at once and lists its tools (it must answer within timeout_ms plus 5 seconds); only then is the server stored, so a failed registration leaves nothing behind. headers and env are write-only credentials: stored sealed with GANTRY_SECRET_KEY, never returned (the response lists their names only) and never placed in a sandbox. From then on the tenant's jobs can call the server's allowed tools (Python: `from servers.<name> import <tool>`; Node: `require('servers/<name>')`). The body is at most 1048576 bytes.",
			body:    &requestBody{required: true, content: []media{{typ: "application/json", schema: typ[codemode.Registration](), more: js{"examples": js{"http": js{"value": js{"name": "crm", "description": "Customers and orders", "url": "https://crm.example.com/mcp", "headers": js{"Authorization": "Bearer <token>"}, "deny_tools": []any{"archive_*"}}}, "stdio": js{"value": js{"name": "billing", "description": "Invoices", "command": []any{"/usr/local/bin/billing-mcp"}, "env": js{"BILLING_TOKEN": "<token>"}}}}}}}},
			errs:    []int{400, 502},
			resps: []resp{
				{status: "201", desc: "Registered: the server (credentials by name only).", headers: js{"Location": js{"$ref": "#/components/headers/McpServerLocation"}}, content: []media{{typ: "application/json", schema: typ[codemode.Server]()}}},
				{status: "409", desc: "conflict: the tenant already has an MCP server of that name (change it with PATCH, or DELETE it first).", content: []media{{typ: "application/json", schema: typ[errorBody]()}}},
				{status: "413", desc: "payload_too_large: the request body is larger than 1048576 bytes.", content: []media{{typ: "application/json", schema: typ[errorBody]()}}},
				{status: "503", ref: "CodeModeUnavailable"},
			},
		},
		{
			method: "GET", path: "/v1/mcp-servers", id: "listMcpServers",
			handle:  s.handleListMCPServers,
			tags:    []string{"code mode"},
			summary: "List the tenant's upstream MCP servers.",
			desc:    "Every server the tenant registered, by name; credentials by name only. Not paginated.",
			resps: []resp{
				{status: "200", desc: "The servers.", content: []media{{typ: "application/json", schema: typ[mcpServerList]()}}},
				{status: "503", ref: "CodeModeUnavailable"},
			},
		},
		{
			method: "GET", path: "/v1/mcp-servers/{name}", id: "getMcpServer",
			handle:  s.handleGetMCPServer,
			tags:    []string{"code mode"},
			summary: "Get an upstream MCP server and the tools code may call.",
			desc:    "The server (credentials by name only) plus tool_list: its allowed tools from the cached list, by name, at the requested detail.",
			params: []param{
				{ref: "McpServerName"},
				{ref: "ToolDetail"},
			},
			errs: []int{400},
			resps: []resp{
				{status: "200", desc: "The server and its tools.", content: []media{{typ: "application/json", schema: typ[mcpServerDetail]()}}},
				{status: "404", desc: "not_found: the tenant has no MCP server of that name (another tenant's servers answer the same).", content: []media{{typ: "application/json", schema: typ[errorBody]()}}},
				{status: "503", ref: "CodeModeUnavailable"},
			},
		},
		{
			method: "PATCH", path: "/v1/mcp-servers/{name}", id: "updateMcpServer",
			handle:  s.handleUpdateMCPServer,
			tags:    []string{"code mode"},
			summary: "Change an upstream MCP server's settings.",
			desc:    "Absent fields stay as they are; headers and env, when given, replace the stored ones whole and stay write-only. When url, command, headers or env change, gantry connects again and lists the tools first (502 if that fails, leaving the server as it was). A concurrent change of the same server is 409. The body is at most 1048576 bytes.",
			params: []param{
				{ref: "McpServerName"},
			},
			body: &requestBody{required: true, content: []media{{typ: "application/json", schema: typ[codemode.Update](), more: js{"examples": js{"rotate": js{"value": js{"headers": js{"Authorization": "Bearer <new token>"}}}, "lists": js{"value": js{"deny_tools": []any{"archive_*", "delete_*"}, "timeout_ms": 10000}}}}}}},
			errs: []int{400, 502},
			resps: []resp{
				{status: "200", desc: "The server as changed (credentials by name only).", content: []media{{typ: "application/json", schema: typ[codemode.Server]()}}},
				{status: "404", desc: "not_found: the tenant has no MCP server of that name (another tenant's servers answer the same).", content: []media{{typ: "application/json", schema: typ[errorBody]()}}},
				{status: "409", desc: "conflict: the server was changed concurrently; read it again and retry.", content: []media{{typ: "application/json", schema: typ[errorBody]()}}},
				{status: "413", desc: "payload_too_large: the request body is larger than 1048576 bytes.", content: []media{{typ: "application/json", schema: typ[errorBody]()}}},
				{status: "503", ref: "CodeModeUnavailable"},
			},
		},
		{
			method: "DELETE", path: "/v1/mcp-servers/{name}", id: "deleteMcpServer",
			handle:  s.handleDeleteMCPServer,
			tags:    []string{"code mode"},
			summary: "Remove an upstream MCP server with its stored credentials and tools.",
			desc:    "Calls made afterwards, by running jobs too, fail with unknown_server. Registering the name again starts afresh.",
			params: []param{
				{ref: "McpServerName"},
			},
			resps: []resp{
				{status: "204", desc: "Removed."},
				{status: "404", desc: "not_found: the tenant has no MCP server of that name (another tenant's servers answer the same).", content: []media{{typ: "application/json", schema: typ[errorBody]()}}},
				{status: "503", ref: "CodeModeUnavailable"},
			},
		},
		{
			method: "POST", path: "/v1/mcp-servers/{name}/refresh", id: "refreshMcpServer",
			handle:  s.handleRefreshMCPServer,
			tags:    []string{"code mode"},
			summary: "Fetch an upstream MCP server's tool list again, now.",
			desc:    "gantry also refreshes tool lists older than GANTRY_MCP_TOOLS_TTL (10 minutes by default) in the background. No body. A failure is recorded on the server (tools_error, tools_refreshed_at) and answered 502; the previous tool list stays in use.",
			params: []param{
				{ref: "McpServerName"},
			},
			errs: []int{502},
			resps: []resp{
				{status: "200", desc: "The server after the refresh.", content: []media{{typ: "application/json", schema: typ[codemode.Server]()}}},
				{status: "404", desc: "not_found: the tenant has no MCP server of that name (another tenant's servers answer the same).", content: []media{{typ: "application/json", schema: typ[errorBody]()}}},
				{status: "503", ref: "CodeModeUnavailable"},
			},
		},
		{
			method: "GET", path: "/v1/tools", id: "searchTools",
			handle:  s.handleSearchTools,
			tags:    []string{"code mode"},
			summary: "Search the tools of the tenant's upstream MCP servers.",
			desc:    "Only tools code may call are listed (the servers' allow and deny lists apply), from the cached tool lists. Without q (or with only spaces): the tools by server and name, at most limit. With q: a full-text search (any of q's words may match; the tool's name weighs most, then its description and server; a q equal to a tool's name or server.name ranks it first), best first, at most limit. Start with detail name or description; ask for full (the schemas) only for the tools you will call.",
			params: []param{
				{in: "query", name: "q", schema: js{"type": "string", "maxLength": 500}, examples: js{"search": js{"value": "orders of a customer"}, "exact": js{"value": "crm.list_orders"}}, desc: "What you want to do, or a tool's name; at most 500 bytes after trimming (400, field q, otherwise)."},
				{ref: "ToolDetail"},
				{in: "query", name: "limit", schema: js{"type": "integer", "minimum": 1, "maximum": 100, "default": 10}, desc: "Most tools to return; not a whole number from 1 to 100 is 400 (field limit)."},
			},
			errs: []int{400},
			resps: []resp{
				{status: "200", desc: "The tools.", content: []media{{typ: "application/json", schema: typ[toolList]()}}},
				{status: "503", ref: "CodeModeUnavailable"},
			},
		},
		{
			method: "GET", path: "/v1/settings", id: "getSettings",
			handle:  s.handleGetSettings,
			tags:    []string{"settings"},
			summary: "Get the tenant's settings.",
			resps: []resp{
				{status: "200", desc: "The settings.", content: []media{{typ: "application/json", schema: typ[settings]()}}},
			},
		},
		{
			method: "PATCH", path: "/v1/settings", id: "updateSettings",
			handle:  s.handlePatchSettings,
			tags:    []string{"settings"},
			summary: "Change the tenant's settings.",
			desc:    "Fields given are set; absent ones stay as they are. The body is at most 1048576 bytes.",
			body:    &requestBody{required: true, content: []media{{typ: "application/json", schema: typ[settings](), more: js{"examples": js{"on": js{"value": js{"pii_tokens": true}}}}}}},
			errs:    []int{400},
			resps: []resp{
				{status: "200", desc: "The settings as changed.", content: []media{{typ: "application/json", schema: typ[settings]()}}},
				{status: "413", desc: "payload_too_large: the request body is larger than 1048576 bytes.", content: []media{{typ: "application/json", schema: typ[errorBody]()}}},
				{status: "503", desc: "unavailable: pii_tokens true, but the operator has not set GANTRY_SECRET_KEY, which privacy tokens need (turning them off always works); or a dependency (the database) is unavailable, with Retry-After.", headers: js{"Retry-After": js{"$ref": "#/components/headers/RetryAfter"}}, content: []media{{typ: "application/json", schema: typ[errorBody]()}}},
			},
		},
		{
			method: "POST", path: "/v1/jobs/batch", id: "submitBatch",
			handle:  s.handleBatch,
			tags:    []string{"jobs"},
			summary: "Queue several jobs at once, each with its own result.",
			desc:    "Each job is decoded, validated and queued on its own, in order, as POST /v1/jobs would: a bad job fails alone (its item carries the error body), the others are queued. The accepted jobs share a batch_id. There is no batch-wide idempotency: give each job its own idempotency_key (an Idempotency-Key header is refused). The body is at most GANTRY_MAX_BODY_BYTES.",
			body:    &requestBody{required: true, content: []media{{typ: "application/json", schema: typ[batchRequest](), more: js{"examples": js{"two": js{"value": js{"jobs": []any{js{"language": "python", "code": "print(1)", "idempotency_key": "run-1"}, js{"language": "bash", "code": "echo 2"}}}}}}}}},
			errs:    []int{413},
			resps: []resp{
				{status: "200", desc: "The batch was read: one outcome per job (look at each item's status).", content: []media{{typ: "application/json", schema: typ[batchResponse]()}}},
				{status: "400", desc: "invalid_argument: the batch itself is malformed (not an object, jobs missing, empty or longer than GANTRY_BATCH_MAX, an unknown field, an Idempotency-Key header).", content: []media{{typ: "application/json", schema: typ[errorBody]()}}},
			},
		},
		{
			method: "GET", path: "/v1/settings/webhook-secret", id: "getWebhookSecret",
			handle:  s.handleWebhookSecret,
			tags:    []string{"settings"},
			summary: "Get the secret that signs the tenant's webhooks (made on first use).",
			desc:    `Verify each webhook call with it as Standard Webhooks describes: HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<body>" under the base64-decoded part after whsec_, compared with each space-separated v1,<base64> entry of webhook-signature, and a timestamp within 5 minutes of now. The SDKs' verify_webhook / verifyWebhook do it.`,
			resps: []resp{
				{status: "200", desc: "The secret.", content: []media{{typ: "application/json", schema: typ[webhook.Secrets]()}}},
				{status: "503", desc: "unavailable: webhooks are off because the operator has not set GANTRY_SECRET_KEY; or a dependency (the database) is unavailable, with Retry-After.", headers: js{"Retry-After": js{"$ref": "#/components/headers/RetryAfter"}}, content: []media{{typ: "application/json", schema: typ[errorBody]()}}},
			},
		},
		{
			method: "POST", path: "/v1/settings/webhook-secret/rotate", id: "rotateWebhookSecret",
			handle:  s.handleRotateWebhookSecret,
			tags:    []string{"settings"},
			summary: "Replace the webhook secret; the old one goes on signing for a day.",
			desc:    "Calls made in the next 24 hours carry two signatures, one under each secret, so receivers can switch to the new secret without losing a call.",
			resps: []resp{
				{status: "200", desc: "The new secret.", content: []media{{typ: "application/json", schema: typ[webhook.Secrets]()}}},
				{status: "503", desc: "unavailable: webhooks are off because the operator has not set GANTRY_SECRET_KEY; or a dependency (the database) is unavailable, with Retry-After.", headers: js{"Retry-After": js{"$ref": "#/components/headers/RetryAfter"}}, content: []media{{typ: "application/json", schema: typ[errorBody]()}}},
			},
		},
		{
			method: "POST", path: "/v1/agent/chat/completions", id: "createAgentChatCompletion",
			handle:  s.handleChatCompletions,
			tags:    []string{"agent"},
			summary: "Talk to an agent that runs code in gantry (OpenAI chat completions).",
			desc:    "OpenAI-compatible: point any OpenAI SDK at `<gantry>/v1/agent` with a gantry API key as its key. The server runs the loop: it asks the operator's model (GANTRY_LLM_URL, GANTRY_LLM_MODEL) for the next message, carries out the tools it asks for as the calling tenant (execute_code runs a job, search_skills, get_skill, search_tools, list_files, read_file), and repeats until the model answers without a tool or the step budget (max_steps, at most GANTRY_LLM_MAX_STEPS model calls) is spent; then finish_reason is `length` and the last tool calls asked for are not run. Each tool call is an API request of the tenant, under its quotas. Send the conversation's text (system, developer, user and assistant messages); `tools` and `tool` messages are refused, as gantry brings its own tools. Other OpenAI fields (top_p, user, ...) are accepted and ignored; `model` is ignored (the answer names the configured model). With `stream: true` the answer is server-sent events of `chat.completion.chunk` objects ending with `data: [DONE]`; chunks whose `gantry` field is set carry the loop's progress (a tool call starting, or its result with the job id and artifacts) with an empty delta. A failure after the stream started is one `data: {\"error\": {...}}` event before `[DONE]`. The body is at most 4194304 bytes.",
			body:    &requestBody{required: true, content: []media{{typ: "application/json", schema: typ[chat.Request](), more: js{"examples": js{"plot": js{"value": js{"model": "gantry", "messages": []any{js{"role": "user", "content": "Plot sin(x) from 0 to 2π"}}, "stream": true}}}}}}},
			errs:    []int{400},
			resps: []resp{
				{status: "200", desc: "The answer: a chat.completion object, or (stream: true) an event stream of chat.completion.chunk objects.", content: []media{
					{typ: "application/json", schema: typ[chat.Completion]()},
					{typ: "text/event-stream", raw: js{"type": "string", "description": "`data:` lines each holding a ChatCompletionChunk (or, on a failure mid-stream, {\"error\": ErrorDetail}), then `data: [DONE]`."}, events: map[string]reflect.Type{"message": typ[chat.Chunk]()}, more: js{"x-sse-end": "[DONE]", "example": "data: {\"id\":\"chatcmpl-X\",\"object\":\"chat.completion.chunk\",\"created\":1767225600,\"model\":\"qwen3\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"},\"finish_reason\":null}]}\n\ndata: {\"id\":\"chatcmpl-X\",\"object\":\"chat.completion.chunk\",\"created\":1767225600,\"model\":\"qwen3\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"42\"},\"finish_reason\":null}]}\n\ndata: [DONE]\n\n"}},
				}},
				{status: "413", desc: "payload_too_large: the request body is larger than 4194304 bytes.", content: []media{{typ: "application/json", schema: typ[errorBody]()}}},
				{status: "503", desc: "unavailable: no model is configured on this gantry (GANTRY_LLM_URL), or the model server failed or could not be reached (the message says which); or a dependency (the database) is unavailable, with Retry-After.", headers: js{"Retry-After": js{"$ref": "#/components/headers/RetryAfter"}}, content: []media{{typ: "application/json", schema: typ[errorBody]()}}},
			},
		},
	}
}
