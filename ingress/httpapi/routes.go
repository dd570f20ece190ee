package httpapi

import (
	"net/http"
	"reflect"

	"github.com/gantryhq/gantry/chat"
	"github.com/gantryhq/gantry/codemode"
	"github.com/gantryhq/gantry/ingress/openapi"
	"github.com/gantryhq/gantry/ingress/service"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/snapshot"
	"github.com/gantryhq/gantry/webhook"
)

// route is one operation of the HTTP API: what the mux serves (routes)
// and what the OpenAPI document says of it (OpenAPI, which reflects the
// bodies' schemas from their Go types). routeTable is the one list of the
// API's routes.
type route struct {
	Method, Path string // the mux pattern's; {name...} takes the rest of the path
	ID           string // operationId, unique
	Summary      string
	Tags         []string
	// Public routes are served without an API key (serve); the others
	// authenticate the key first (handle), and may answer 401, 429, 500
	// and 503 besides what Responses and Errors list.
	Public bool
	serve  http.Handler
	handle apiHandler
	Params []openapi.Param
	Body   *openapi.Body
	// Errors are shared error answers the route gives (400, 404, 409,
	// 413, 502: components.responses, see sharedErrors). A route with a
	// body may also answer 408 (its body too slow).
	Errors    []int
	Responses []openapi.Response
}

// operation is what the document says of the route (its description is
// in openapi.yaml, under its id).
func (rt route) operation() openapi.Operation {
	return openapi.Operation{Method: rt.Method, Path: rt.Path, ID: rt.ID, Summary: rt.Summary,
		Tags: rt.Tags, Public: rt.Public, Params: rt.Params, Body: rt.Body, Errors: rt.Errors, Responses: rt.Responses}
}

// js is a JSON object of the document (a schema, an operation, ...).
type js = openapi.JS

// typ is the reflect.Type of T, for the table's schemas.
func typ[T any]() reflect.Type { return reflect.TypeFor[T]() }

// jobRequestExamples are the examples of a job's request (POST /v1/jobs,
// POST /v1/execute).
var jobRequestExamples = js{"code": js{"value": js{"language": "python", "code": "print(6*7)"}}, "full": js{"value": js{"language": "python", "code": "import pandas as pd\nprint(pd.read_csv('data.csv'))", "files": []any{js{"path": "data.csv", "content": "a,b\n1,2\n", "encoding": "utf8"}}, "env": js{"SEED": "1"}, "timeout_ms": 30000, "limits": js{"memory_mb": 512, "cpus": 1, "pids": 128, "disk_mb": 512, "output_bytes": 1048576}, "artifacts": []any{"out/**"}, "idempotency_key": "client-chosen", "metadata": js{"agent": "demo"}}}}

// routeTable is the HTTP API. Adding a query parameter is one line in its
// route's params; a new route is one entry (and its handler).
func (s *Server) routeTable() []route {
	return []route{
		{
			Method: "GET", Path: "/healthz", ID: "getHealth",
			Public: true, serve: http.HandlerFunc(serveHealth),
			Tags:    []string{"service"},
			Summary: "Liveness check: answers while the process is up.",
			Responses: []openapi.Response{
				{Status: "200", Description: "The process is alive.", Content: []openapi.Media{{Type: "application/json", Schema: typ[health]()}}},
			},
		},
		{
			Method: "GET", Path: "/readyz", ID: "getReadiness",
			Public: true, serve: http.HandlerFunc(s.handleReady),
			Tags:    []string{"service"},
			Summary: "Readiness check of the dependencies (Postgres, NATS, S3, Docker if local).",
			Responses: []openapi.Response{
				{Status: "200", Description: "Every check passed.", Content: []openapi.Media{{Type: "application/json", Schema: typ[readiness]()}}},
				{Status: "503", Description: "At least one check failed; `ready` is false.", Content: []openapi.Media{{Type: "application/json", Schema: typ[readiness]()}}},
			},
		},
		{
			Method: "GET", Path: "/metrics", ID: "getMetrics",
			Public: true, serve: s.metricsHandler,
			Tags:    []string{"service"},
			Summary: "Prometheus metrics in the text exposition format.",
			Responses: []openapi.Response{
				{Status: "200", Description: "Metrics, e.g. gantry_http_request_seconds and gantry_jobs_submitted_total.", Content: []openapi.Media{{Type: "text/plain", Raw: js{"type": "string", "description": "The Prometheus text exposition format (version 0.0.4)."}}}},
			},
		},
		{
			Method: "GET", Path: "/openapi.json", ID: "getOpenAPI",
			Public: true, serve: http.HandlerFunc(s.serveDocument),
			Tags:    []string{"service"},
			Summary: "This OpenAPI document.",
			Responses: []openapi.Response{
				{Status: "200", Description: "The OpenAPI 3.1 description of the HTTP API.", Content: []openapi.Media{{Type: "application/json", Raw: js{"type": "object"}}}},
			},
		},
		{
			Method: "GET", Path: "/v1/languages", ID: "listLanguages",
			handle:  s.handleLanguages,
			Tags:    []string{"jobs"},
			Summary: "List the languages jobs can be written in.",
			Responses: []openapi.Response{
				{Status: "200", Description: "The languages.", Content: []openapi.Media{{Type: "application/json", Schema: typ[languageList]()}}},
			},
		},
		{
			Method: "GET", Path: "/v1/environments", ID: "listEnvironments",
			handle:  s.handleEnvironments,
			Tags:    []string{"jobs"},
			Summary: "List the environments (sandbox images) this tenant's jobs and sessions may run in.",
			Responses: []openapi.Response{
				{Status: "200", Description: "The environments, the default first.", Content: []openapi.Media{{Type: "application/json", Schema: typ[environmentList]()}}},
			},
		},
		{
			Method: "GET", Path: "/v1/usage", ID: "getUsage",
			handle:  s.handleUsage,
			Tags:    []string{"jobs"},
			Summary: "What this tenant ran, per day or hour: jobs by status, run times, files kept, sessions used.",
			Params:  usageParams,
			Responses: []openapi.Response{
				{Status: "200", Description: "The usage, by bucket and in all.", Content: []openapi.Media{{Type: "application/json", Schema: typ[jobs.Usage]()}}},
				{Status: "400", Ref: "BadRequest"},
			},
		},
		{
			Method: "POST", Path: "/v1/jobs", ID: "submitJob",
			handle:  s.handleSubmit,
			Tags:    []string{"jobs"},
			Summary: "Submit a job; answers at once with the queued job.",
			Params: []openapi.Param{
				{Ref: "IdempotencyKey"},
			},
			Body:   &openapi.Body{Required: true, Content: []openapi.Media{{Type: "application/json", Schema: typ[jobs.Request](), More: js{"examples": jobRequestExamples}}}},
			Errors: []int{400, 404, 409, 413},
			Responses: []openapi.Response{
				{Status: "202", Description: "Accepted: the job (status queued, or the existing job for a repeated idempotency key).", Headers: js{"Location": js{"$ref": "#/components/headers/JobLocation"}}, Content: []openapi.Media{{Type: "application/json", Schema: typ[jobs.Job]()}}},
			},
		},
		{
			Method: "GET", Path: "/v1/jobs", ID: "listJobs",
			handle:  s.handleList,
			Tags:    []string{"jobs"},
			Summary: "List and search the tenant's jobs, newest first, cursor paginated.",
			Params:  listJobsParams,
			Errors:  []int{400, 413},
			Responses: []openapi.Response{
				{Status: "200", Description: "A page of jobs.", Content: []openapi.Media{{Type: "application/json", Schema: typ[jobList]()}}},
			},
		},
		{
			Method: "GET", Path: "/v1/jobs/{id}", ID: "getJob",
			handle:  s.handleGet,
			Tags:    []string{"jobs"},
			Summary: "Get a job, optionally long-polling until it finishes.",
			Params:  append([]openapi.Param{{Ref: "JobID"}}, getJobParams...),
			Errors:  []int{400, 404, 413},
			Responses: []openapi.Response{
				{Status: "200", Description: "The job (finished, or as it was when the wait ran out).", Content: []openapi.Media{{Type: "application/json", Schema: typ[jobs.Job]()}}},
			},
		},
		{
			Method: "POST", Path: "/v1/jobs/{id}/cancel", ID: "cancelJob",
			handle:  s.handleCancel,
			Tags:    []string{"jobs"},
			Summary: "Cancel a job: drop it if queued, kill it if running; idempotent.",
			Params: []openapi.Param{
				{Ref: "JobID"},
			},
			Errors: []int{404, 413},
			Responses: []openapi.Response{
				{Status: "200", Description: "The job after the cancel.", Content: []openapi.Media{{Type: "application/json", Schema: typ[jobs.Job]()}}},
			},
		},
		{
			Method: "GET", Path: "/v1/jobs/{id}/logs", ID: "streamJobLogs",
			handle:  s.handleLogs,
			Tags:    []string{"jobs"},
			Summary: "Stream a job's output as server-sent events.",
			Params: []openapi.Param{
				{Ref: "JobID"},
			},
			Errors: []int{404, 413},
			Responses: []openapi.Response{
				{Status: "200", Description: "The event stream.", Headers: js{"Cache-Control": js{"description": "no-cache", "schema": js{"type": "string"}}}, Content: []openapi.Media{{Type: "text/event-stream", Raw: js{"type": "string", "description": "Server-sent events: `event: stdout|stderr|status` lines each followed by one `data:` line of JSON."}, Events: map[string]reflect.Type{"stdout": typ[logChunk](), "stderr": typ[logChunk](), "status": typ[logStatus]()}, More: js{"example": "event: stdout\ndata: {\"data\":\"42\\n\"}\n\nevent: status\ndata: {\"attempt\":1,\"duration_ms\":120,\"error\":null,\"exit_code\":0,\"id\":\"job_01jzq3v6k8m2n4p5r7s9t0w1x2\",\"status\":\"succeeded\",\"stderr_truncated\":false,\"stdout_truncated\":false}\n\n"}}}},
			},
		},
		{
			Method: "GET", Path: "/v1/jobs/{id}/artifacts", ID: "listJobArtifacts",
			handle:  s.handleArtifacts,
			Tags:    []string{"artifacts"},
			Summary: "Get the manifest of a job's artifacts.",
			Params: []openapi.Param{
				{Ref: "JobID"},
			},
			Errors: []int{404},
			Responses: []openapi.Response{
				{Status: "200", Description: "The manifest (empty until the job finishes).", Content: []openapi.Media{{Type: "application/json", Schema: typ[artifactManifest]()}}},
			},
		},
		{
			Method: "GET", Path: "/v1/jobs/{id}/artifacts/{path...}", ID: "downloadJobArtifact",
			handle:  s.handleArtifact,
			Tags:    []string{"artifacts"},
			Summary: "Redirect to a presigned download URL for one artifact.",
			Params: []openapi.Param{
				{Ref: "JobID"},
				{In: "path", Name: "path", Schema: js{"type": "string"}, Examples: js{"nested": js{"value": "out/plot.png"}}, Description: `The artifact's path as in the manifest, e.g. out/plot.png. Unlike ordinary path parameters it may contain slashes: everything after /artifacts/ is the path (the server route is /v1/jobs/{id}/artifacts/{path...}). Send the slashes as they are and percent-encode within segments, as Artifact.url does. The path is cleaned ("./a//b" → "a/b") before the lookup.`},
				{In: "query", Name: "redirect", Schema: js{"type": "string", "examples": []any{"false"}}, Description: "`false` answers 200 with {url, expires_at} instead of redirecting; any other value redirects."},
			},
			Errors: []int{400, 404},
			Responses: []openapi.Response{
				{Status: "200", Description: "With ?redirect=false: the presigned URL and when it expires.", Content: []openapi.Media{{Type: "application/json", Schema: typ[service.PresignedURL]()}}},
				{Status: "302", Description: "Found: redirect to the presigned object-store URL.", Headers: js{"Location": js{"description": "The presigned URL.", "schema": js{"type": "string", "format": "uri"}}}},
			},
		},
		{
			Method: "POST", Path: "/v1/execute", ID: "executeJob",
			handle:  s.handleExecute,
			Tags:    []string{"jobs"},
			Summary: "Submit a job and wait for it to finish.",
			Params: []openapi.Param{
				{Ref: "IdempotencyKey"},
				{In: "query", Name: "wait", Schema: js{"type": "string"}, Examples: js{"seconds": js{"value": "30s"}, "millis": js{"value": "500ms"}, "plain": js{"value": "120"}}, Description: `How long to wait for the job to finish: a Go duration such as "30s", "500ms" or "1m30s", or a plain number of seconds such as "2" or "0.5". At most 15m30s (the server's MaxExecuteWait, configurable); more, or a negative or unparsable value, is 400 (checked before the job is submitted). Absent or 0 waits up to the maximum.`},
			},
			Body:   &openapi.Body{Required: true, Content: []openapi.Media{{Type: "application/json", Schema: typ[jobs.Request](), More: js{"examples": jobRequestExamples}}}},
			Errors: []int{400, 404, 409, 413},
			Responses: []openapi.Response{
				{Status: "200", Description: "The finished job.", Headers: js{"Location": js{"$ref": "#/components/headers/JobLocation"}}, Content: []openapi.Media{{Type: "application/json", Schema: typ[jobs.Job]()}}},
				{Status: "202", Description: "The wait ran out: the job as it is (queued or running); poll GET /v1/jobs/{id}.", Headers: js{"Location": js{"$ref": "#/components/headers/JobLocation"}}, Content: []openapi.Media{{Type: "application/json", Schema: typ[jobs.Job]()}}},
			},
		},
		{
			Method: "POST", Path: "/v1/sessions", ID: "createSession",
			handle:  s.handleCreateSession,
			Tags:    []string{"sessions"},
			Summary: "Create a session: a workspace that persists between the jobs run in it.",
			Body:    &openapi.Body{Required: true, Content: []openapi.Media{{Type: "application/json", Schema: typ[jobs.SessionRequest](), More: js{"examples": js{"defaults": js{"value": js{}}, "full": js{"value": js{"language": "python", "ttl_seconds": 7200, "disk_mb": 1024, "metadata": js{"agent": "demo"}}}, "stateful": js{"value": js{"language": "python", "stateful": true}}}}}}},
			Errors:  []int{400, 404},
			Responses: []openapi.Response{
				{Status: "201", Description: "Created: the session.", Headers: js{"Location": js{"$ref": "#/components/headers/SessionLocation"}}, Content: []openapi.Media{{Type: "application/json", Schema: typ[jobs.Session]()}}},
				{Status: "413", Description: "payload_too_large: the request body is larger than 65536 bytes.", Content: []openapi.Media{{Type: "application/json", Schema: typ[errorBody]()}}},
			},
		},
		{
			Method: "GET", Path: "/v1/sessions", ID: "listSessions",
			handle:  s.handleListSessions,
			Tags:    []string{"sessions"},
			Summary: "List the tenant's active sessions, newest first, cursor paginated.",
			Params: []openapi.Param{
				{In: "query", Name: "limit", Schema: js{"type": "integer", "minimum": 1, "maximum": 100, "default": 20}, Description: "Page size."},
				{In: "query", Name: "cursor", Schema: js{"type": "string"}, Description: "The next_cursor of the previous page (opaque)."},
			},
			Errors: []int{400},
			Responses: []openapi.Response{
				{Status: "200", Description: "A page of sessions.", Content: []openapi.Media{{Type: "application/json", Schema: typ[sessionList]()}}},
			},
		},
		{
			Method: "GET", Path: "/v1/sessions/{id}", ID: "getSession",
			handle:  s.handleGetSession,
			Tags:    []string{"sessions"},
			Summary: "Get a session.",
			Params: []openapi.Param{
				{Ref: "SessionID"},
			},
			Errors: []int{404},
			Responses: []openapi.Response{
				{Status: "200", Description: "The session.", Content: []openapi.Media{{Type: "application/json", Schema: typ[jobs.Session]()}}},
			},
		},
		{
			Method: "DELETE", Path: "/v1/sessions/{id}", ID: "deleteSession",
			handle:  s.handleDeleteSession,
			Tags:    []string{"sessions"},
			Summary: "Close a session: stop its jobs and delete its files.",
			Params: []openapi.Param{
				{Ref: "SessionID"},
			},
			Errors: []int{404},
			Responses: []openapi.Response{
				{Status: "204", Description: "Closed."},
			},
		},
		{
			Method: "POST", Path: "/v1/sessions/{id}/pause", ID: "pauseSession",
			handle:  s.handlePauseSession,
			Tags:    []string{"sessions"},
			Summary: "Pause a stateful session: its live state (memory, processes, /tmp, workspace) is saved and its sandbox freed; its next job, file call, command or resume restores it, on any runner.",
			Params:  []openapi.Param{{Ref: "SessionID"}},
			Errors:  []int{400, 404, 409},
			Responses: []openapi.Response{
				{Status: "200", Description: "The session, paused (pausing a paused session does nothing).", Content: []openapi.Media{{Type: "application/json", Schema: typ[jobs.Session]()}}},
				{Status: "501", Description: "unavailable: the runner holding the session keeps live state in memory only (no gVisor that can checkpoint).", Content: []openapi.Media{{Type: "application/json", Schema: typ[errorBody]()}}},
			},
		},
		{
			Method: "POST", Path: "/v1/sessions/{id}/resume", ID: "resumeSession",
			handle:  s.handleResumeSession,
			Tags:    []string{"sessions"},
			Summary: "Resume a paused session: its live state is restored before this answers (a running session is answered as it is).",
			Params:  []openapi.Param{{Ref: "SessionID"}},
			Errors:  []int{400, 404},
			Responses: []openapi.Response{
				{Status: "200", Description: "The session, running.", Content: []openapi.Media{{Type: "application/json", Schema: typ[jobs.Session]()}}},
			},
		},
		{
			Method: "POST", Path: "/v1/sessions/{id}/snapshots", ID: "snapshotSession",
			handle:  s.handleSnapshotSession,
			Tags:    []string{"sessions"},
			Summary: "Snapshot a stateful session's live state and workspace; the session goes on. New sessions are made from it with POST /v1/sessions {\"snapshot\": id}.",
			Params:  []openapi.Param{{Ref: "SessionID"}},
			Body:    &openapi.Body{Content: []openapi.Media{{Type: "application/json", Schema: typ[jobs.SnapshotRequest]()}}},
			Errors:  []int{400, 404, 409},
			Responses: []openapi.Response{
				{Status: "201", Description: "The snapshot.", Content: []openapi.Media{{Type: "application/json", Schema: typ[jobs.Snapshot]()}}},
			},
		},
		{
			Method: "POST", Path: "/v1/sessions/{id}/fork", ID: "forkSession",
			handle:  s.handleForkSession,
			Tags:    []string{"sessions"},
			Summary: "Fork a stateful session into count new sessions, each with its live state and workspace at this moment, apart from each other and from it.",
			Params:  []openapi.Param{{Ref: "SessionID"}},
			Body:    &openapi.Body{Content: []openapi.Media{{Type: "application/json", Schema: typ[jobs.ForkRequest]()}}},
			Errors:  []int{400, 404, 409},
			Responses: []openapi.Response{
				{Status: "201", Description: "The new sessions, in order.", Content: []openapi.Media{{Type: "application/json", Schema: typ[jobs.Fork]()}}},
			},
		},
		{
			Method: "GET", Path: "/v1/snapshots", ID: "listSnapshots",
			handle:  s.handleListSnapshots,
			Tags:    []string{"sessions"},
			Summary: "List the tenant's snapshots, newest first, cursor paginated.",
			Params: []openapi.Param{
				{In: "query", Name: "limit", Schema: js{"type": "integer", "minimum": 1, "maximum": 100, "default": 20}, Description: "Page size."},
				{In: "query", Name: "cursor", Schema: js{"type": "string"}, Description: "The next_cursor of the previous page (opaque)."},
			},
			Errors: []int{400},
			Responses: []openapi.Response{
				{Status: "200", Description: "A page of snapshots.", Content: []openapi.Media{{Type: "application/json", Schema: typ[snapshotList]()}}},
			},
		},
		{
			Method: "GET", Path: "/v1/snapshots/{id}", ID: "getSnapshot",
			handle:  s.handleGetSnapshot,
			Tags:    []string{"sessions"},
			Summary: "Get a snapshot.",
			Params:  []openapi.Param{{Ref: "SnapshotID"}},
			Errors:  []int{404},
			Responses: []openapi.Response{
				{Status: "200", Description: "The snapshot.", Content: []openapi.Media{{Type: "application/json", Schema: typ[jobs.Snapshot]()}}},
			},
		},
		{
			Method: "DELETE", Path: "/v1/snapshots/{id}", ID: "deleteSnapshot",
			handle:  s.handleDeleteSnapshot,
			Tags:    []string{"sessions"},
			Summary: "Delete a snapshot; sessions made from it go on.",
			Params:  []openapi.Param{{Ref: "SnapshotID"}},
			Errors:  []int{404},
			Responses: []openapi.Response{
				{Status: "204", Description: "Deleted."},
			},
		},
		{
			Method: "PUT", Path: "/v1/sessions/{id}/network", ID: "setSessionNetwork",
			handle:  s.handlePutSessionNetwork,
			Tags:    []string{"sessions"},
			Summary: "Replace a session's network: its egress narrowing and the headers its requests get at the egress proxy.",
			Params: []openapi.Param{
				{Ref: "SessionID"},
			},
			Body:   &openapi.Body{Required: true, Content: []openapi.Media{{Type: "application/json", Schema: typ[jobs.Network](), More: js{"examples": js{"only-one-api": js{"value": js{"allow_out": []any{"api.example.com"}, "deny_out": []any{jobs.AllTraffic}, "rules": js{"api.example.com": []any{js{"headers": js{"Authorization": "Bearer ${secrets.EXAMPLE_API_KEY}"}}}}}}, "none": js{"value": js{}}}}}}},
			Errors: []int{400, 404},
			Responses: []openapi.Response{
				{Status: "200", Description: "The session, with its new network.", Content: []openapi.Media{{Type: "application/json", Schema: typ[jobs.Session]()}}},
				{Status: "503", Description: "unavailable: rules need GANTRY_SECRET_KEY, which the operator has not set; or a dependency (the database) is unavailable, with Retry-After.", Headers: js{"Retry-After": js{"$ref": "#/components/headers/RetryAfter"}}, Content: []openapi.Media{{Type: "application/json", Schema: typ[errorBody]()}}},
			},
		},
		{
			Method: "GET", Path: "/v1/sessions/{id}/files", ID: "listSessionFiles",
			handle:  s.handleListFiles,
			Tags:    []string{"files"},
			Summary: "List the files of a session's workspace, recursively.",
			Params: []openapi.Param{
				{Ref: "SessionID"},
				{In: "query", Name: "path", Schema: js{"type": "string"}, Examples: js{"dir": js{"value": "out"}}, Description: "List only what lies below this directory (relative to /workspace, cleaned; the directory itself is not listed). Absent or empty lists the whole workspace. A path that is not a directory of the workspace gives an empty list; an invalid path (absolute, leaving the workspace, ...) is 400."},
			},
			Errors: []int{400, 404},
			Responses: []openapi.Response{
				{Status: "200", Description: "The entries, sorted by path; an empty workspace gives an empty list.", Content: []openapi.Media{{Type: "application/json", Schema: typ[FileList]()}}},
			},
		},
		{
			Method: "GET", Path: "/v1/sessions/{id}/files/{path...}", ID: "readSessionFile",
			handle:  s.handleGetFile,
			Tags:    []string{"files"},
			Summary: "Download a file of a session's workspace.",
			Params: []openapi.Param{
				{Ref: "SessionID"},
				{Ref: "FilePath"},
			},
			Responses: []openapi.Response{
				{Status: "200", Description: "The file's content.", Headers: js{"Content-Length": js{"description": "The file's size in bytes.", "schema": js{"type": "integer"}}, "Last-Modified": js{"description": "The file's modification time (HTTP date).", "schema": js{"type": "string"}}}, Content: []openapi.Media{{Type: "application/octet-stream", Raw: js{"type": "string", "contentMediaType": "application/octet-stream"}}}},
				{Status: "400", Description: "invalid_argument (field path): the path is invalid, or names a directory (list it with GET /v1/sessions/{id}/files?path=) or a symlink (never followed).", Content: []openapi.Media{{Type: "application/json", Schema: typ[errorBody]()}}},
				{Status: "404", Description: "not_found: no such session, or no file at the path.", Content: []openapi.Media{{Type: "application/json", Schema: typ[errorBody]()}}},
			},
		},
		{
			Method: "PUT", Path: "/v1/sessions/{id}/files/{path...}", ID: "writeSessionFile",
			handle:  s.handlePutFile,
			Tags:    []string{"files"},
			Summary: "Create or replace a file in a session's workspace.",
			Params: []openapi.Param{
				{Ref: "SessionID"},
				{Ref: "FilePath"},
			},
			Body:   &openapi.Body{Required: true, Content: []openapi.Media{{Type: "application/octet-stream", Raw: js{"type": "string", "contentMediaType": "application/octet-stream"}}}},
			Errors: []int{400},
			Responses: []openapi.Response{
				{Status: "200", Description: "Written: the new file's entry. Its `path` echoes the URL's path as sent, and `modified_at` is the time of the answer (a later listing shows the stored time, in whole seconds).", Content: []openapi.Media{{Type: "application/json", Schema: typ[snapshot.Entry]()}}},
				{Status: "404", Description: "not_found: no such session (it may have expired or been closed).", Content: []openapi.Media{{Type: "application/json", Schema: typ[errorBody]()}}},
				{Status: "409", Ref: "FileConflict"},
				{Status: "413", Description: "payload_too_large: the body is larger than the limit (10 MiB by default, at most 32 MiB), or the workspace would exceed the session's disk_mb.", Content: []openapi.Media{{Type: "application/json", Schema: typ[errorBody]()}}},
			},
		},
		{
			Method: "DELETE", Path: "/v1/sessions/{id}/files/{path...}", ID: "deleteSessionFile",
			handle:  s.handleDeleteFile,
			Tags:    []string{"files"},
			Summary: "Delete a file, symlink or directory (recursively) from a session's workspace.",
			Params: []openapi.Param{
				{Ref: "SessionID"},
				{Ref: "FilePath"},
			},
			Errors: []int{400},
			Responses: []openapi.Response{
				{Status: "204", Description: "Deleted."},
				{Status: "404", Description: "not_found: no such session, or no entry at the path (a directory that only exists implicitly, as the parent of files written with PUT before any job ran, counts as none).", Content: []openapi.Media{{Type: "application/json", Schema: typ[errorBody]()}}},
				{Status: "409", Description: "conflict: the session stayed busy running jobs for 30 seconds; retry after Retry-After seconds.", Headers: js{"Retry-After": js{"$ref": "#/components/headers/RetryAfter"}}, Content: []openapi.Media{{Type: "application/json", Schema: typ[errorBody]()}}},
			},
		},
		{
			Method: "GET", Path: "/v1/skills", ID: "listSkills",
			handle:  s.handleListSkills,
			Tags:    []string{"skills"},
			Summary: "List the skills the tenant sees, or search them.",
			Params: []openapi.Param{
				{In: "query", Name: "q", Schema: js{"type": "string", "maxLength": 500}, Examples: js{"search": js{"value": "plot a chart"}}, Description: "Search words, at most 500 bytes (400, field q, otherwise)."},
				{In: "query", Name: "limit", Schema: js{"type": "integer", "minimum": 1, "maximum": 100, "default": 20}, Description: "Most skills to return: default 20 when searching, 100 when listing; not a whole number from 1 to 100 is 400 (field limit)."},
			},
			Errors: []int{400},
			Responses: []openapi.Response{
				{Status: "200", Description: "The skills (summaries).", Content: []openapi.Media{{Type: "application/json", Schema: typ[SkillList]()}}},
			},
		},
		{
			Method: "GET", Path: "/v1/skills/{name}", ID: "getSkill",
			handle:  s.handleGetSkill,
			Tags:    []string{"skills"},
			Summary: "Get a skill in full: as JSON (its SKILL.md, fields and files), or its folder as a zip or tar archive.",
			Params: []openapi.Param{
				{Ref: "SkillName"},
				{In: "query", Name: "version", Schema: js{"type": "integer", "minimum": 1}, Description: "A stored version (GET /v1/skills/{name}/versions lists them); absent means the current one. Not a positive whole number is 400 (field version); a version that does not exist is 404."},
				{In: "query", Name: "format", Schema: js{"type": "string", "enum": []any{"json", "zip", "tar"}}, Description: "json (default), zip or tar; anything else is 400 (field format)."},
			},
			Errors: []int{400},
			Responses: []openapi.Response{
				{Status: "200", Description: "The skill.", Content: []openapi.Media{{Type: "application/json", Schema: typ[service.SkillView]()}, {Type: "application/zip", Raw: js{"type": "string", "contentMediaType": "application/zip", "description": "<name>/SKILL.md and <name>/<files>; Content-Disposition names <name>.zip."}}, {Type: "application/x-tar", Raw: js{"type": "string", "contentMediaType": "application/x-tar", "description": "<name>/SKILL.md and <name>/<files>; Content-Disposition names <name>.tar."}}}},
				{Status: "404", Description: "not_found: the tenant sees no skill of that name, or it has no such version (another tenant's skills answer the same).", Content: []openapi.Media{{Type: "application/json", Schema: typ[errorBody]()}}},
			},
		},
		{
			Method: "PUT", Path: "/v1/skills/{name}", ID: "saveSkill",
			handle:  s.handlePutSkill,
			Tags:    []string{"skills"},
			Summary: "Save a new version of one of the tenant's skills (creating it if new).",
			Params: []openapi.Param{
				{Ref: "SkillName"},
			},
			Body:   &openapi.Body{Required: true, Content: []openapi.Media{{Type: "text/markdown", Raw: js{"type": "string", "maxLength": 65536, "description": "A whole SKILL.md."}, More: js{"examples": js{"skill_md": js{"value": "---\nname: csv-plot\ndescription: Plot a time series from a CSV file to a PNG with matplotlib. Use when a CSV has a date column and the user wants a chart.\nlicense: MIT\nmetadata:\n  author: example-org\n  version: \"1.0\"\n---\n\n# When to use\nA CSV with a date column...\n"}}}}, {Type: "application/json", Schema: typ[skillPut]()}, {Type: "application/zip", Raw: js{"type": "string", "contentMediaType": "application/zip", "description": "A skill folder: SKILL.md at the root or in one folder named as the skill, with its files (at most 5,308,416 bytes)."}}, {Type: "application/x-tar", Raw: js{"type": "string", "contentMediaType": "application/x-tar", "description": "A skill folder: SKILL.md at the root or in one folder named as the skill, with its files (at most 5,308,416 bytes)."}}}},
			Errors: []int{400},
			Responses: []openapi.Response{
				{Status: "200", Description: "Saved a new version (2 or more) of an existing skill: the version as stored.", Headers: js{"Location": js{"$ref": "#/components/headers/SkillLocation"}}, Content: []openapi.Media{{Type: "application/json", Schema: typ[service.SkillView]()}}},
				{Status: "201", Description: "Created: version 1 of a new skill (or of one deleted before), as stored.", Headers: js{"Location": js{"$ref": "#/components/headers/SkillLocation"}}, Content: []openapi.Media{{Type: "application/json", Schema: typ[service.SkillView]()}}},
				{Status: "409", Description: "conflict: the name is a built-in skill's, or the version given is not the next one (someone saved meanwhile; read the current version and retry).", Content: []openapi.Media{{Type: "application/json", Schema: typ[errorBody]()}}},
				{Status: "413", Description: "payload_too_large: the request body is larger than its cap: 5,308,416 bytes for an archive (4 MiB of files, 64 KiB of SKILL.md, 1 MiB of headers), 5,789,012 bytes for JSON or a SKILL.md (the files in base64, plus room).", Content: []openapi.Media{{Type: "application/json", Schema: typ[errorBody]()}}},
			},
		},
		{
			Method: "DELETE", Path: "/v1/skills/{name}", ID: "deleteSkill",
			handle:  s.handleDeleteSkill,
			Tags:    []string{"skills"},
			Summary: "Delete one of the tenant's skills, with every version.",
			Params: []openapi.Param{
				{Ref: "SkillName"},
			},
			Errors: []int{400},
			Responses: []openapi.Response{
				{Status: "204", Description: "Deleted."},
				{Status: "404", Description: "not_found: the tenant has no skill of that name (another tenant's skills answer the same).", Content: []openapi.Media{{Type: "application/json", Schema: typ[errorBody]()}}},
				{Status: "409", Description: "conflict: the name is a built-in skill's, which cannot be deleted.", Content: []openapi.Media{{Type: "application/json", Schema: typ[errorBody]()}}},
			},
		},
		{
			Method: "GET", Path: "/v1/skills/{name}/versions", ID: "listSkillVersions",
			handle:  s.handleSkillVersions,
			Tags:    []string{"skills"},
			Summary: "List a skill's versions, newest first.",
			Params: []openapi.Param{
				{Ref: "SkillName"},
			},
			Errors: []int{400},
			Responses: []openapi.Response{
				{Status: "200", Description: "The versions.", Content: []openapi.Media{{Type: "application/json", Schema: typ[skillVersions]()}}},
				{Status: "404", Description: "not_found: the tenant sees no skill of that name (another tenant's skills answer the same).", Content: []openapi.Media{{Type: "application/json", Schema: typ[errorBody]()}}},
			},
		},
		{
			Method: "POST", Path: "/v1/mcp-servers", ID: "createMcpServer",
			handle:  s.handleCreateMCPServer,
			Tags:    []string{"code mode"},
			Summary: "Register an upstream MCP server for code mode.",
			Body:    &openapi.Body{Required: true, Content: []openapi.Media{{Type: "application/json", Schema: typ[codemode.Registration](), More: js{"examples": js{"http": js{"value": js{"name": "crm", "description": "Customers and orders", "url": "https://crm.example.com/mcp", "headers": js{"Authorization": "Bearer <token>"}, "deny_tools": []any{"archive_*"}}}, "stdio": js{"value": js{"name": "billing", "description": "Invoices", "command": []any{"/usr/local/bin/billing-mcp"}, "env": js{"BILLING_TOKEN": "<token>"}}}}}}}},
			Errors:  []int{400, 502},
			Responses: []openapi.Response{
				{Status: "201", Description: "Registered: the server (credentials by name only).", Headers: js{"Location": js{"$ref": "#/components/headers/McpServerLocation"}}, Content: []openapi.Media{{Type: "application/json", Schema: typ[codemode.Server]()}}},
				{Status: "409", Description: "conflict: the tenant already has an MCP server of that name (change it with PATCH, or DELETE it first).", Content: []openapi.Media{{Type: "application/json", Schema: typ[errorBody]()}}},
				{Status: "413", Description: "payload_too_large: the request body is larger than 1048576 bytes.", Content: []openapi.Media{{Type: "application/json", Schema: typ[errorBody]()}}},
				{Status: "503", Ref: "CodeModeUnavailable"},
			},
		},
		{
			Method: "GET", Path: "/v1/mcp-servers", ID: "listMcpServers",
			handle:  s.handleListMCPServers,
			Tags:    []string{"code mode"},
			Summary: "List the tenant's upstream MCP servers.",
			Responses: []openapi.Response{
				{Status: "200", Description: "The servers.", Content: []openapi.Media{{Type: "application/json", Schema: typ[MCPServerList]()}}},
				{Status: "503", Ref: "CodeModeUnavailable"},
			},
		},
		{
			Method: "GET", Path: "/v1/mcp-servers/{name}", ID: "getMcpServer",
			handle:  s.handleGetMCPServer,
			Tags:    []string{"code mode"},
			Summary: "Get an upstream MCP server and the tools code may call.",
			Params: []openapi.Param{
				{Ref: "McpServerName"},
				{Ref: "ToolDetail"},
			},
			Errors: []int{400},
			Responses: []openapi.Response{
				{Status: "200", Description: "The server and its tools.", Content: []openapi.Media{{Type: "application/json", Schema: typ[service.MCPServerDetail]()}}},
				{Status: "404", Description: "not_found: the tenant has no MCP server of that name (another tenant's servers answer the same).", Content: []openapi.Media{{Type: "application/json", Schema: typ[errorBody]()}}},
				{Status: "503", Ref: "CodeModeUnavailable"},
			},
		},
		{
			Method: "PATCH", Path: "/v1/mcp-servers/{name}", ID: "updateMcpServer",
			handle:  s.handleUpdateMCPServer,
			Tags:    []string{"code mode"},
			Summary: "Change an upstream MCP server's settings.",
			Params: []openapi.Param{
				{Ref: "McpServerName"},
			},
			Body:   &openapi.Body{Required: true, Content: []openapi.Media{{Type: "application/json", Schema: typ[codemode.Update](), More: js{"examples": js{"rotate": js{"value": js{"headers": js{"Authorization": "Bearer <new token>"}}}, "lists": js{"value": js{"deny_tools": []any{"archive_*", "delete_*"}, "timeout_ms": 10000}}}}}}},
			Errors: []int{400, 502},
			Responses: []openapi.Response{
				{Status: "200", Description: "The server as changed (credentials by name only).", Content: []openapi.Media{{Type: "application/json", Schema: typ[codemode.Server]()}}},
				{Status: "404", Description: "not_found: the tenant has no MCP server of that name (another tenant's servers answer the same).", Content: []openapi.Media{{Type: "application/json", Schema: typ[errorBody]()}}},
				{Status: "409", Description: "conflict: the server was changed concurrently; read it again and retry.", Content: []openapi.Media{{Type: "application/json", Schema: typ[errorBody]()}}},
				{Status: "413", Description: "payload_too_large: the request body is larger than 1048576 bytes.", Content: []openapi.Media{{Type: "application/json", Schema: typ[errorBody]()}}},
				{Status: "503", Ref: "CodeModeUnavailable"},
			},
		},
		{
			Method: "DELETE", Path: "/v1/mcp-servers/{name}", ID: "deleteMcpServer",
			handle:  s.handleDeleteMCPServer,
			Tags:    []string{"code mode"},
			Summary: "Remove an upstream MCP server with its stored credentials and tools.",
			Params: []openapi.Param{
				{Ref: "McpServerName"},
			},
			Responses: []openapi.Response{
				{Status: "204", Description: "Removed."},
				{Status: "404", Description: "not_found: the tenant has no MCP server of that name (another tenant's servers answer the same).", Content: []openapi.Media{{Type: "application/json", Schema: typ[errorBody]()}}},
				{Status: "503", Ref: "CodeModeUnavailable"},
			},
		},
		{
			Method: "POST", Path: "/v1/mcp-servers/{name}/refresh", ID: "refreshMcpServer",
			handle:  s.handleRefreshMCPServer,
			Tags:    []string{"code mode"},
			Summary: "Fetch an upstream MCP server's tool list again, now.",
			Params: []openapi.Param{
				{Ref: "McpServerName"},
			},
			Errors: []int{502},
			Responses: []openapi.Response{
				{Status: "200", Description: "The server after the refresh.", Content: []openapi.Media{{Type: "application/json", Schema: typ[codemode.Server]()}}},
				{Status: "404", Description: "not_found: the tenant has no MCP server of that name (another tenant's servers answer the same).", Content: []openapi.Media{{Type: "application/json", Schema: typ[errorBody]()}}},
				{Status: "503", Ref: "CodeModeUnavailable"},
			},
		},
		{
			Method: "GET", Path: "/v1/tools", ID: "searchTools",
			handle:  s.handleSearchTools,
			Tags:    []string{"code mode"},
			Summary: "Search the tools of the tenant's upstream MCP servers.",
			Params: []openapi.Param{
				{In: "query", Name: "q", Schema: js{"type": "string", "maxLength": 500}, Examples: js{"search": js{"value": "orders of a customer"}, "exact": js{"value": "crm.list_orders"}}, Description: "What you want to do, or a tool's name; at most 500 bytes after trimming (400, field q, otherwise)."},
				{Ref: "ToolDetail"},
				{In: "query", Name: "limit", Schema: js{"type": "integer", "minimum": 1, "maximum": 100, "default": 10}, Description: "Most tools to return; not a whole number from 1 to 100 is 400 (field limit)."},
			},
			Errors: []int{400},
			Responses: []openapi.Response{
				{Status: "200", Description: "The tools.", Content: []openapi.Media{{Type: "application/json", Schema: typ[toolList]()}}},
				{Status: "503", Ref: "CodeModeUnavailable"},
			},
		},
		{
			Method: "GET", Path: "/v1/settings", ID: "getSettings",
			handle:  s.handleGetSettings,
			Tags:    []string{"settings"},
			Summary: "Get the tenant's settings.",
			Responses: []openapi.Response{
				{Status: "200", Description: "The settings.", Content: []openapi.Media{{Type: "application/json", Schema: typ[settings]()}}},
			},
		},
		{
			Method: "PATCH", Path: "/v1/settings", ID: "updateSettings",
			handle:  s.handlePatchSettings,
			Tags:    []string{"settings"},
			Summary: "Change the tenant's settings.",
			Body:    &openapi.Body{Required: true, Content: []openapi.Media{{Type: "application/json", Schema: typ[settings](), More: js{"examples": js{"on": js{"value": js{"pii_tokens": true}}}}}}},
			Errors:  []int{400},
			Responses: []openapi.Response{
				{Status: "200", Description: "The settings as changed.", Content: []openapi.Media{{Type: "application/json", Schema: typ[settings]()}}},
				{Status: "413", Description: "payload_too_large: the request body is larger than 1048576 bytes.", Content: []openapi.Media{{Type: "application/json", Schema: typ[errorBody]()}}},
				{Status: "503", Description: "unavailable: pii_tokens true, but the operator has not set GANTRY_SECRET_KEY, which privacy tokens need (turning them off always works); or a dependency (the database) is unavailable, with Retry-After.", Headers: js{"Retry-After": js{"$ref": "#/components/headers/RetryAfter"}}, Content: []openapi.Media{{Type: "application/json", Schema: typ[errorBody]()}}},
			},
		},
		{
			Method: "GET", Path: "/v1/secrets", ID: "listSecrets",
			handle:  s.handleListSecrets,
			Tags:    []string{"secrets"},
			Summary: "List the tenant's secrets (names and dates, never values).",
			Responses: []openapi.Response{
				{Status: "200", Description: "The secrets, by name.", Content: []openapi.Media{{Type: "application/json", Schema: typ[secretList]()}}},
			},
		},
		{
			Method: "GET", Path: "/v1/secrets/{name}", ID: "getSecret",
			handle:  s.handleGetSecret,
			Tags:    []string{"secrets"},
			Summary: "Get a secret's name and dates (never its value).",
			Params:  []openapi.Param{{Ref: "SecretName"}},
			Errors:  []int{404},
			Responses: []openapi.Response{
				{Status: "200", Description: "The secret.", Content: []openapi.Media{{Type: "application/json", Schema: typ[jobs.Secret]()}}},
			},
		},
		{
			Method: "PUT", Path: "/v1/secrets/{name}", ID: "putSecret",
			handle:  s.handlePutSecret,
			Tags:    []string{"secrets"},
			Summary: "Set a secret that egress rules put into requests at the proxy; its value is never shown again.",
			Params:  []openapi.Param{{Ref: "SecretName"}},
			Body:    &openapi.Body{Required: true, Content: []openapi.Media{{Type: "application/json", Schema: typ[jobs.SecretRequest](), More: js{"examples": js{"key": js{"value": js{"value": "sk-live-0123456789"}}}}}}},
			Errors:  []int{400},
			Responses: []openapi.Response{
				{Status: "200", Description: "Replaced: the secret (its new value is used from now on).", Content: []openapi.Media{{Type: "application/json", Schema: typ[jobs.Secret]()}}},
				{Status: "201", Description: "Created: the secret.", Headers: js{"Location": js{"$ref": "#/components/headers/SecretLocation"}}, Content: []openapi.Media{{Type: "application/json", Schema: typ[jobs.Secret]()}}},
				{Status: "413", Description: "payload_too_large: the request body is larger than 65536 bytes.", Content: []openapi.Media{{Type: "application/json", Schema: typ[errorBody]()}}},
				{Status: "503", Description: "unavailable: secrets need GANTRY_SECRET_KEY, which the operator has not set; or a dependency (the database) is unavailable, with Retry-After.", Headers: js{"Retry-After": js{"$ref": "#/components/headers/RetryAfter"}}, Content: []openapi.Media{{Type: "application/json", Schema: typ[errorBody]()}}},
			},
		},
		{
			Method: "DELETE", Path: "/v1/secrets/{name}", ID: "deleteSecret",
			handle:  s.handleDeleteSecret,
			Tags:    []string{"secrets"},
			Summary: "Delete a secret.",
			Params:  []openapi.Param{{Ref: "SecretName"}},
			Errors:  []int{404},
			Responses: []openapi.Response{
				{Status: "204", Description: "Deleted."},
			},
		},
		{
			Method: "POST", Path: "/v1/jobs/batch", ID: "submitBatch",
			handle:  s.handleBatch,
			Tags:    []string{"jobs"},
			Summary: "Queue several jobs at once, each with its own result.",
			Body:    &openapi.Body{Required: true, Content: []openapi.Media{{Type: "application/json", Schema: typ[batchRequest](), More: js{"examples": js{"two": js{"value": js{"jobs": []any{js{"language": "python", "code": "print(1)", "idempotency_key": "run-1"}, js{"language": "bash", "code": "echo 2"}}}}}}}}},
			Errors:  []int{413},
			Responses: []openapi.Response{
				{Status: "200", Description: "The batch was read: one outcome per job (look at each item's status).", Content: []openapi.Media{{Type: "application/json", Schema: typ[batchResponse]()}}},
				{Status: "400", Description: "invalid_argument: the batch itself is malformed (not an object, jobs missing, empty or longer than GANTRY_BATCH_MAX, an unknown field, an Idempotency-Key header).", Content: []openapi.Media{{Type: "application/json", Schema: typ[errorBody]()}}},
			},
		},
		{
			Method: "GET", Path: "/v1/settings/webhook-secret", ID: "getWebhookSecret",
			handle:  s.handleWebhookSecret,
			Tags:    []string{"settings"},
			Summary: "Get the secret that signs the tenant's webhooks (made on first use).",
			Responses: []openapi.Response{
				{Status: "200", Description: "The secret.", Content: []openapi.Media{{Type: "application/json", Schema: typ[webhook.Secrets]()}}},
				{Status: "503", Description: "unavailable: webhooks are off because the operator has not set GANTRY_SECRET_KEY; or a dependency (the database) is unavailable, with Retry-After.", Headers: js{"Retry-After": js{"$ref": "#/components/headers/RetryAfter"}}, Content: []openapi.Media{{Type: "application/json", Schema: typ[errorBody]()}}},
			},
		},
		{
			Method: "POST", Path: "/v1/settings/webhook-secret/rotate", ID: "rotateWebhookSecret",
			handle:  s.handleRotateWebhookSecret,
			Tags:    []string{"settings"},
			Summary: "Replace the webhook secret; the old one goes on signing for a day.",
			Responses: []openapi.Response{
				{Status: "200", Description: "The new secret.", Content: []openapi.Media{{Type: "application/json", Schema: typ[webhook.Secrets]()}}},
				{Status: "503", Description: "unavailable: webhooks are off because the operator has not set GANTRY_SECRET_KEY; or a dependency (the database) is unavailable, with Retry-After.", Headers: js{"Retry-After": js{"$ref": "#/components/headers/RetryAfter"}}, Content: []openapi.Media{{Type: "application/json", Schema: typ[errorBody]()}}},
			},
		},
		{
			Method: "POST", Path: "/v1/agent/chat/completions", ID: "createAgentChatCompletion",
			handle:  s.handleChatCompletions,
			Tags:    []string{"agent"},
			Summary: "Talk to an agent that runs code in gantry (OpenAI chat completions).",
			Body:    &openapi.Body{Required: true, Content: []openapi.Media{{Type: "application/json", Schema: typ[chat.Request](), More: js{"examples": js{"plot": js{"value": js{"model": "gantry", "messages": []any{js{"role": "user", "content": "Plot sin(x) from 0 to 2π"}}, "stream": true}}}}}}},
			Errors:  []int{400},
			Responses: []openapi.Response{
				{Status: "200", Description: "The answer: a chat.completion object, or (stream: true) an event stream of chat.completion.chunk objects.", Content: []openapi.Media{
					{Type: "application/json", Schema: typ[chat.Completion]()},
					{Type: "text/event-stream", Raw: js{"type": "string", "description": "`data:` lines each holding a ChatCompletionChunk (or, on a failure mid-stream, {\"error\": ErrorDetail}), then `data: [DONE]`."}, Events: map[string]reflect.Type{"message": typ[chat.Chunk]()}, More: js{"x-sse-end": "[DONE]", "example": "data: {\"id\":\"chatcmpl-X\",\"object\":\"chat.completion.chunk\",\"created\":1767225600,\"model\":\"qwen3\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"},\"finish_reason\":null}]}\n\ndata: {\"id\":\"chatcmpl-X\",\"object\":\"chat.completion.chunk\",\"created\":1767225600,\"model\":\"qwen3\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"42\"},\"finish_reason\":null}]}\n\ndata: [DONE]\n\n"}},
				}},
				{Status: "413", Description: "payload_too_large: the request body is larger than 4194304 bytes.", Content: []openapi.Media{{Type: "application/json", Schema: typ[errorBody]()}}},
				{Status: "503", Description: "unavailable: no model is configured on this gantry (GANTRY_LLM_URL), or the model server failed or could not be reached (the message says which); or a dependency (the database) is unavailable, with Retry-After.", Headers: js{"Retry-After": js{"$ref": "#/components/headers/RetryAfter"}}, Content: []openapi.Media{{Type: "application/json", Schema: typ[errorBody]()}}},
			},
		},
	}
}
