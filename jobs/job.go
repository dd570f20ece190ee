// Package jobs is the contract between the ingress and the runners: the job
// request and result types, their validation, the JetStream stream and
// consumer definitions, and the NATS subjects and headers both sides use.
//
// It is a leaf package: it imports nothing else from gantry, so that the
// ingress and the runners can each depend on it without depending on each
// other.
package jobs

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Status is where a job is in its life. A job moves
// queued → running → one of the terminal statuses, and never changes again
// once it is terminal.
type Status string

// The statuses a job can have.
const (
	StatusQueued    Status = "queued"
	StatusRunning   Status = "running"
	StatusSucceeded Status = "succeeded"
	StatusFailed    Status = "failed"
	StatusTimedOut  Status = "timed_out"
	StatusCancelled Status = "cancelled"
	StatusError     Status = "error"
)

// Statuses lists every status, in life order.
var Statuses = []Status{StatusQueued, StatusRunning, StatusSucceeded, StatusFailed, StatusTimedOut, StatusCancelled, StatusError}

// Terminal reports whether a job with this status is finished for good.
func (s Status) Terminal() bool {
	switch s {
	case StatusSucceeded, StatusFailed, StatusTimedOut, StatusCancelled, StatusError:
		return true
	}
	return false
}

// Valid reports whether s is one of the known statuses.
func (s Status) Valid() bool {
	for _, v := range Statuses {
		if v == s {
			return true
		}
	}
	return false
}

// ErrorCode says why a job did not succeed (ErrorInfo.Code).
type ErrorCode string

// The codes of Job.Error.
const (
	ErrCodeTimedOut       ErrorCode = "timed_out"
	ErrCodeOOMKilled      ErrorCode = "oom_killed"
	ErrCodeCancelled      ErrorCode = "cancelled"
	ErrCodeInfrastructure ErrorCode = "infrastructure"
)

// ErrorCodes lists every ErrorCode.
var ErrorCodes = []ErrorCode{ErrCodeTimedOut, ErrCodeOOMKilled, ErrCodeCancelled, ErrCodeInfrastructure}

// ErrorInfo says why a job did not succeed: a limit it hit, or why gantry
// could not run it.
type ErrorInfo struct {
	Code    ErrorCode `json:"code"`
	Message string    `json:"message"`
}

// Artifact is a file the job produced and gantry stored.
type Artifact struct {
	Path        string `json:"path"`
	Size        int64  `json:"size"`
	SHA256      string `json:"sha256"`
	ContentType string `json:"content_type"`
	// URL is the API path that redirects to a presigned download URL. It is
	// filled in by the ingress, never stored.
	URL string `json:"url,omitempty"`
}

// OmittedArtifact is a file that matched the job's artifact patterns but
// was not kept because it broke one of the runner's caps.
type OmittedArtifact struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	Reason string `json:"reason"`
}

// Job is a job as the API shows it.
type Job struct {
	ID              string     `json:"id"`
	Status          Status     `json:"status"`
	Language        string     `json:"language"`
	SessionID       *string    `json:"session_id"`
	Attempt         int        `json:"attempt"`
	CreatedAt       time.Time  `json:"created_at"`
	StartedAt       *time.Time `json:"started_at"`
	FinishedAt      *time.Time `json:"finished_at"`
	ExitCode        *int       `json:"exit_code"`
	DurationMS      *int64     `json:"duration_ms"`
	Stdout          string     `json:"stdout"`
	Stderr          string     `json:"stderr"`
	StdoutTruncated bool       `json:"stdout_truncated"`
	StderrTruncated bool       `json:"stderr_truncated"`
	Artifacts       []Artifact `json:"artifacts"`
	// ArtifactsOmitted are the matching files left out: over a cap.
	ArtifactsOmitted []OmittedArtifact `json:"artifacts_omitted,omitempty"`
	Error            *ErrorInfo        `json:"error"`
	Metadata         map[string]string `json:"metadata"`
	// ToolCalls are the upstream MCP tool calls the job's code made
	// through the code-mode bridge, in the order they started.
	ToolCalls []ToolCall `json:"tool_calls"`
	// Egress lists the connections the job asked the egress proxy for,
	// allowed or refused, in the order they ended (at most MaxEgressRecords;
	// absent for a job whose tenant has no egress allow-list).
	Egress []EgressConnection `json:"egress,omitempty"`
	// EgressOmitted counts the connections past MaxEgressRecords.
	EgressOmitted int `json:"egress_omitted,omitempty"`
	// BatchID is the batch the job was submitted in (POST /v1/jobs/batch).
	BatchID *string `json:"batch_id"`
	// WebhookURL is the URL the request named, called when the job
	// finishes (null: the tenant's default, if any, is called).
	WebhookURL *string `json:"webhook_url"`
	// Webhook is the call made when the job finished, with its attempts
	// (null: none, or not finished yet).
	Webhook *WebhookDelivery `json:"webhook"`
	// Spec is what the job ran, when asked for (?include=spec); never its
	// env values.
	Spec *JobSpec `json:"spec,omitempty"`
	// Value is the value of the last expression of a Python job in a
	// stateful session, as a notebook shows it (absent otherwise).
	Value *Value `json:"value,omitempty"`
	// LiveState says, for a job of a stateful session that ran, whether it
	// found the session's live state (absent for other jobs).
	LiveState LiveState `json:"live_state,omitempty"`
	// LiveStateReason says why the live state was lost (live_state
	// "lost").
	LiveStateReason string `json:"live_state_reason,omitempty"`
	// StdoutKey and StderrKey locate a stream's bytes in the object store
	// when they were too long to keep in the row (Stdout or Stderr is then
	// empty until the history layer reads them back). Not part of the API.
	StdoutKey string `json:"-"`
	StderrKey string `json:"-"`
}

// ToolCall is one upstream tool call made by a job's code (code mode): what
// was called, how it went and how many bytes went each way. Arguments and
// results are not recorded.
type ToolCall struct {
	Server     string    `json:"server"`
	Tool       string    `json:"tool"`
	StartedAt  time.Time `json:"started_at"`
	DurationMS int64     `json:"duration_ms"`
	// Status is ok, error (the tool reported an error), denied,
	// budget_exceeded, unknown_server, unknown_tool, timeout,
	// upstream_error, too_large, bad_request or unavailable (gantry could
	// not make the call).
	Status   string `json:"status"`
	BytesIn  int    `json:"bytes_in"`  // arguments sent upstream
	BytesOut int    `json:"bytes_out"` // result returned to the code
	Error    string `json:"error,omitempty"`
}

// MaxEgressRecords bounds the egress connections a job's record lists.
const MaxEgressRecords = 200

// EgressConnection is one connection a job asked the egress proxy for.
type EgressConnection struct {
	Host string `json:"host"`
	Port int    `json:"port"`
	// Allowed: the host is on the tenant's allow-list and was reached.
	Allowed bool `json:"allowed"`
	// Reason says why it was refused or failed.
	Reason    string    `json:"reason,omitempty"`
	StartedAt time.Time `json:"started_at"`
	// DurationMS is how long it was open.
	DurationMS int64 `json:"duration_ms"`
	// BytesOut went from the job to the host, BytesIn back.
	BytesOut int64 `json:"bytes_out"`
	BytesIn  int64 `json:"bytes_in"`
}

// Result is what a runner records when a job attempt ends.
type Result struct {
	Status          Status
	ExitCode        *int
	Duration        time.Duration
	Stdout          []byte
	Stderr          []byte
	StdoutTruncated bool
	StderrTruncated bool
	Artifacts       []Artifact
	// ArtifactsOmitted are matching files over a cap, not uploaded.
	ArtifactsOmitted []OmittedArtifact
	Error            *ErrorInfo
	ToolCalls        []ToolCall
	Egress           []EgressConnection
	EgressOmitted    int
	// StdoutKey and StderrKey, when set, say that the stream's bytes were
	// moved to the object store under that key; Stdout or Stderr is then
	// empty.
	StdoutKey string
	StderrKey string
	// Value, LiveState and LiveStateReason: a stateful session's job (see
	// Job).
	Value           *Value
	LiveState       LiveState
	LiveStateReason string
}

// Spec is a validated, normalised job request: everything a runner needs to
// run it, with every default filled in. It is stored with the job.
type Spec struct {
	Language string     `json:"language"`
	Code     string     `json:"code,omitempty"`
	Command  []string   `json:"command,omitempty"`
	Files    []SpecFile `json:"files,omitempty"`
	// Stdin is the program's standard input, as raw bytes (it may be
	// binary: see MarshalJSON).
	Stdin string            `json:"stdin,omitempty"`
	Env   map[string]string `json:"env,omitempty"`
	// SealedEnv holds Env sealed at rest (SealEnv): Env is then empty
	// until OpenEnv. Specs stored without a key, or before env was
	// sealed, carry Env in the clear.
	SealedEnv *SealedEnv `json:"sealed_env,omitempty"`
	TimeoutMS int        `json:"timeout_ms"`
	Limits    Limits     `json:"limits"`
	Artifacts []string   `json:"artifacts"`
	// Environment names the sandbox image ("": the runner's own).
	Environment string `json:"environment,omitempty"`
}

// specFields is Spec without its JSON methods.
type specFields Spec

// specWire is how a spec is stored: stdin that is not text Postgres can
// hold in JSON (invalid UTF-8, or NUL bytes) travels base64-encoded in
// stdin_base64 instead of stdin, so binary input survives storage exactly.
type specWire struct {
	specFields
	StdinBase64 string `json:"stdin_base64,omitempty"`
}

// MarshalJSON encodes the spec, with binary stdin base64-encoded.
func (s Spec) MarshalJSON() ([]byte, error) {
	w := specWire{specFields: specFields(s)}
	if !utf8.ValidString(s.Stdin) || strings.ContainsRune(s.Stdin, 0) {
		w.StdinBase64, w.Stdin = base64.StdEncoding.EncodeToString([]byte(s.Stdin)), ""
	}
	return json.Marshal(w)
}

// UnmarshalJSON decodes a spec stored by MarshalJSON.
func (s *Spec) UnmarshalJSON(data []byte) error {
	var w specWire
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	*s = Spec(w.specFields)
	if w.StdinBase64 != "" {
		b, err := base64.StdEncoding.DecodeString(w.StdinBase64)
		if err != nil {
			return fmt.Errorf("spec stdin_base64: %w", err)
		}
		s.Stdin = string(b)
	}
	return nil
}

// SpecFile is an input file with its content decoded.
type SpecFile struct {
	Path    string `json:"path"`
	Content []byte `json:"content"`
}

// Timeout is the spec's wall-clock limit.
func (s *Spec) Timeout() time.Duration { return time.Duration(s.TimeoutMS) * time.Millisecond }

// RunMessage is the body of the JetStream message that asks a runner to run
// a job. It carries ids only: the spec is read from the store, so messages
// stay small however large the job's files are.
type RunMessage struct {
	JobID    string `json:"job_id"`
	TenantID string `json:"tenant_id"`
	// SessionID is set for a session's job. The message then asks a runner
	// to run the session's queued jobs in order, not this job alone.
	SessionID string `json:"session_id,omitempty"`
}

// StatusEvent is published on the job's status subject whenever its status
// changes.
type StatusEvent struct {
	JobID  string `json:"job_id"`
	Status Status `json:"status"`
}

// Backlog is a runner's reply to a backlog request: the output a running job
// has produced so far.
type Backlog struct {
	Stdout []byte `json:"stdout"`
	Stderr []byte `json:"stderr"`
}

// MarshalSpec encodes a spec for storage.
func MarshalSpec(s Spec) ([]byte, error) { return json.Marshal(s) }
