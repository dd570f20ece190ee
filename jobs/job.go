// Package jobs holds the API's types and their rules: the job request and
// its validation into a Spec, the job and its result, sessions, languages,
// tenants' quotas and ids. The ingress and the runners both depend on it
// (and on package queue, for the messages between them) without depending
// on each other; it imports nothing of gantry but package glob.
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
	// ErrCodeCompileError: the program did not compile (Job.Compile says
	// how the compile step ended); it never ran.
	ErrCodeCompileError ErrorCode = "compile_error"
)

// ErrorCodes lists every ErrorCode.
var ErrorCodes = []ErrorCode{ErrCodeTimedOut, ErrCodeOOMKilled, ErrCodeCancelled, ErrCodeInfrastructure, ErrCodeCompileError, ErrCodeTestsFailed}

// CompileStatus is how a compile step ended.
type CompileStatus string

// The compile statuses: the compiler exited 0; it exited otherwise or was
// killed (out of memory, say); it ran longer than its timeout.
const (
	CompileSucceeded CompileStatus = "succeeded"
	CompileFailed    CompileStatus = "failed"
	CompileTimedOut  CompileStatus = "timed_out"
)

// CompileStatuses lists every CompileStatus.
var CompileStatuses = []CompileStatus{CompileSucceeded, CompileFailed, CompileTimedOut}

// Compile is how a compiled language's compile step went. Its output is
// the job's CompileOutput.
type Compile struct {
	Status CompileStatus `json:"status"`
	// ExitCode is the compiler's exit status (128+n when signal n killed
	// it); null when it timed out.
	ExitCode *int `json:"exit_code"`
	// DurationMS is the compile's wall-clock time.
	DurationMS int64 `json:"duration_ms"`
	// CPUTimeMS and PeakMemoryKB measure the compiler's processes as the
	// job's own fields measure the program's.
	CPUTimeMS    *int64 `json:"cpu_time_ms"`
	PeakMemoryKB *int64 `json:"peak_memory_kb"`
	// OutputTruncated: the compiler printed more than CompileOutputCap
	// bytes, and the rest was dropped.
	OutputTruncated bool `json:"output_truncated"`
	// Cached: the program was not compiled for this job; the build (or
	// the compiler's refusal) of the very same program, compiled earlier,
	// was used. DurationMS is then 0, and CPUTimeMS and PeakMemoryKB are
	// null; CompileOutput is what that compile printed.
	Cached bool `json:"cached"`
}

// CompileOutputCap bounds what is kept of a compile step's output.
const CompileOutputCap = 64 << 10

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
	ID         string     `json:"id"`
	Status     Status     `json:"status"`
	Language   string     `json:"language"`
	SessionID  *string    `json:"session_id"`
	Attempt    int        `json:"attempt"`
	CreatedAt  time.Time  `json:"created_at"`
	StartedAt  *time.Time `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
	ExitCode   *int       `json:"exit_code"`
	DurationMS *int64     `json:"duration_ms"`
	// CPUTimeMS is the CPU time (user and system) the program used: every
	// process of its sandbox, measured by the kernel (rusage) when the
	// sandbox ended. Null when the program did not run or its end was not
	// measured (cancelled, lost), and for jobs recorded before it existed.
	CPUTimeMS *int64 `json:"cpu_time_ms"`
	// PeakMemoryKB is the largest resident set (KiB) any one process of
	// the program's sandbox reached (rusage's maxrss; for a stateful
	// session's job, the largest peak of the session's processes while it
	// ran); null as CPUTimeMS, and for a session's job under gVisor, which
	// cannot measure it.
	PeakMemoryKB *int64 `json:"peak_memory_kb"`
	// Compile is how the compile step went, for code in a compiled
	// language (null for the others, and while the job has not finished).
	Compile *Compile `json:"compile"`
	// CompileOutput is what the compiler printed, stdout and stderr
	// interleaved as written ("" without a compile step).
	CompileOutput   string     `json:"compile_output"`
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
	// TraceID is the OpenTelemetry trace the job's spans are in, from the
	// request that submitted it to its recorded result, when the operator
	// turned traces on and the trace was sampled (absent otherwise).
	TraceID string `json:"trace_id,omitempty"`
	// Spec is what the job ran, when asked for (?include=spec); never its
	// env values.
	Spec *JobSpec `json:"spec,omitempty"`
	// Value is the value of the last expression of a Python job in a
	// stateful session, as a notebook shows it (absent otherwise).
	Value *Value `json:"value,omitempty"`
	// Displays are what such a job displayed besides its value, in order:
	// the figures it showed or left open, with GANTRY_FIGURES=display in
	// its env (absent otherwise).
	Displays []Value `json:"displays,omitempty"`
	// Exception is the exception that ended such a job (absent otherwise).
	Exception *Exception `json:"exception,omitempty"`
	// LiveState says, for a job of a stateful session that ran, whether it
	// found the session's live state (absent for other jobs).
	LiveState LiveState `json:"live_state,omitempty"`
	// LiveStateReason says why the live state was lost (live_state
	// "lost").
	LiveStateReason string `json:"live_state_reason,omitempty"`
	// Tests are the results of the job's tests, in order (absent for a
	// job without tests; with stop_on_failure they end at the first that
	// did not pass, and a program that did not compile has none).
	Tests []TestResult `json:"tests,omitempty"`
	// TestsPassed counts the tests that passed (absent without tests).
	TestsPassed *int `json:"tests_passed,omitempty"`
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
	Status   Status
	ExitCode *int
	Duration time.Duration
	// Usage is what the program's processes used, when it was measured.
	Usage *ProgramUsage
	// Compile and CompileOutput report the compile step, if there was one.
	Compile         *Compile
	CompileOutput   []byte
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
	// Value, Displays, Exception, LiveState and LiveStateReason: a
	// stateful session's job (see Job).
	Value           *Value
	Displays        []Value
	Exception       *Exception
	LiveState       LiveState
	LiveStateReason string
	// Tests are the results of the job's tests (Spec.Tests).
	Tests []TestResult
}

// ProgramUsage is what a sandbox's processes used, measured by the kernel
// when it ended.
type ProgramUsage struct {
	CPUTime time.Duration
	// PeakMemoryKB is nil when it was not measured (a stateful session's
	// job under gVisor).
	PeakMemoryKB *int64
}

// CPUTimeMS is the CPU time in milliseconds, rounded up: a program that
// ran at all used some.
func (u ProgramUsage) CPUTimeMS() int64 {
	return int64((u.CPUTime + time.Millisecond - 1) / time.Millisecond)
}

// Spec is a validated, normalised job request: everything a runner needs to
// run it, with every default filled in. It is stored with the job.
type Spec struct {
	Language string   `json:"language"`
	Code     string   `json:"code,omitempty"`
	Command  []string `json:"command,omitempty"`
	// Args follow the program on its command line.
	Args  []string   `json:"args,omitempty"`
	Files []SpecFile `json:"files,omitempty"`
	// Stdin is the program's standard input, as raw bytes (it may be
	// binary: see MarshalJSON).
	Stdin string            `json:"stdin,omitempty"`
	Env   map[string]string `json:"env,omitempty"`
	// SealedEnv holds Env sealed at rest (SealEnv): Env is then empty
	// until OpenEnv. Specs stored without a key, or before env was
	// sealed, carry Env in the clear.
	SealedEnv *SealedEnv `json:"sealed_env,omitempty"`
	TimeoutMS int        `json:"timeout_ms"`
	// CompileTimeoutMS bounds the compile step of code in a compiled
	// language (0 for any other job).
	CompileTimeoutMS int      `json:"compile_timeout_ms,omitempty"`
	Limits           Limits   `json:"limits"`
	Artifacts        []string `json:"artifacts"`
	// Compat is a compatible API's own data (Request.Compat).
	Compat json.RawMessage `json:"compat,omitempty"`
	// Environment names the sandbox image ("": the runner's own).
	Environment string `json:"environment,omitempty"`
	// Tests, Compare, Tolerance and StopOnFailure: the job's tests
	// (Request.Tests); Compare is set whenever Tests are.
	Tests         []Test  `json:"tests,omitempty"`
	Compare       Compare `json:"compare,omitempty"`
	Tolerance     float64 `json:"tolerance,omitempty"`
	StopOnFailure bool    `json:"stop_on_failure,omitempty"`
	// Network is the job's own (Request.Network), nil without one.
	Network *Network `json:"network,omitempty"`
	// Kernel is the stateful session's kernel the code runs in
	// (Request.Kernel).
	Kernel string `json:"kernel,omitempty"`
}

// KernelCell reports whether, in a stateful session, the job runs as a
// cell of a JavaScript or TypeScript kernel (the agent's rule: the
// language's own command on the code, nothing more), rather than as a
// program of its own.
func (s Spec) KernelCell() bool {
	return (s.Language == "node" || s.Language == "typescript") && s.Code != "" &&
		len(s.Command) == 0 && len(s.Args) == 0 && len(s.Tests) == 0
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

// CompileTimeout is the compile step's wall-clock limit (the default
// policy's for a spec that has none).
func (s *Spec) CompileTimeout() time.Duration {
	ms := s.CompileTimeoutMS
	if ms <= 0 {
		ms = DefaultPolicy().DefaultCompileTimeoutMS
	}
	return time.Duration(ms) * time.Millisecond
}

// MarshalSpec encodes a spec for storage.
func MarshalSpec(s Spec) ([]byte, error) { return json.Marshal(s) }
