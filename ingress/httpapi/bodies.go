package httpapi

import (
	"github.com/gantryhq/gantry/codemode"
	"github.com/gantryhq/gantry/ingress/service"
	"github.com/gantryhq/gantry/jobs"
)

// The bodies of the API's answers that are not a domain type of their own.
// Handlers write these types and the OpenAPI document is reflected from
// them (openapi.go), so that the two cannot drift. The exported ones are
// MCP's answers too.

// jobList is a page of GET /v1/jobs.
type jobList struct {
	Jobs       []jobs.Job `json:"jobs"`
	NextCursor *string    `json:"next_cursor"`
}

// sessionList is a page of GET /v1/sessions.
type sessionList struct {
	Sessions   []jobs.Session `json:"sessions"`
	NextCursor *string        `json:"next_cursor"`
}

// snapshotList is a page of GET /v1/snapshots.
type snapshotList struct {
	Snapshots  []jobs.Snapshot `json:"snapshots"`
	NextCursor *string         `json:"next_cursor"`
}

// artifactManifest is GET /v1/jobs/{id}/artifacts.
type artifactManifest struct {
	JobID     string          `json:"job_id"`
	Status    jobs.Status     `json:"status"`
	Artifacts []jobs.Artifact `json:"artifacts"`
}

// languageList is GET /v1/languages.
type languageList struct {
	Languages []jobs.Language `json:"languages"`
}

// environmentList is GET /v1/environments.
type environmentList struct {
	Environments []jobs.Environment `json:"environments"`
}

// health is GET /healthz.
type health struct {
	Status string `json:"status"`
}

// readiness is GET /readyz: each check's outcome, "ok" or "error: ...".
type readiness struct {
	Ready  bool              `json:"ready"`
	Checks map[string]string `json:"checks"`
}

// errorBody is the body of every failed request.
type errorBody struct {
	Error service.Error `json:"error"`
}

// logChunk is the data of a stdout or stderr event of a log stream.
type logChunk struct {
	Data string `json:"data"`
}

// logStatus is the closing event of a log stream: the job without its
// (already streamed) output.
type logStatus struct {
	ID              string          `json:"id"`
	Status          jobs.Status     `json:"status"`
	ExitCode        *int            `json:"exit_code"`
	DurationMS      *int64          `json:"duration_ms"`
	StdoutTruncated bool            `json:"stdout_truncated"`
	StderrTruncated bool            `json:"stderr_truncated"`
	Error           *jobs.ErrorInfo `json:"error"`
	Attempt         int             `json:"attempt"`
}

// FileList is GET /v1/sessions/{id}/files.
type FileList struct {
	Files []service.FileInfo `json:"files"`
}

// SkillList is GET /v1/skills.
type SkillList struct {
	Skills []service.SkillSummary `json:"skills"`
}

// skillVersions is GET /v1/skills/{name}/versions.
type skillVersions struct {
	Name     string                 `json:"name"`
	Versions []service.SkillVersion `json:"versions"`
}

// MCPServerList is GET /v1/mcp-servers.
type MCPServerList struct {
	Servers []codemode.Server `json:"servers"`
}

// toolList is GET /v1/tools.
type toolList struct {
	Tools []codemode.ToolInfo `json:"tools"`
}

// batchResponse is the answer to POST /v1/jobs/batch.
type batchResponse struct {
	BatchID string      `json:"batch_id"`
	Jobs    []batchItem `json:"jobs"`
}
