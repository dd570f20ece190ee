package queue

import (
	"strings"

	"github.com/gantryhq/gantry/jobs"
)

// RunMessage is the body of the JetStream message that asks a runner to run
// a job. It carries ids only: the spec is read from the store, so messages
// stay small however large the job's files are.
type RunMessage struct {
	JobID    string `json:"job_id"`
	TenantID string `json:"tenant_id"`
	// SessionID is set for a session's job. The message then asks a runner
	// to run the session's queued jobs in order, not this job alone.
	SessionID string `json:"session_id,omitempty"`
	// MemoryMB is the job's limits.memory_mb, so that a runner admits the
	// job's sandbox against its host's memory before it claims the job
	// (0: not said; the runner assumes the default limits).
	MemoryMB int `json:"memory_mb,omitempty"`
}

// StatusEvent is published on the job's status subject whenever its status
// changes.
type StatusEvent struct {
	JobID  string      `json:"job_id"`
	Status jobs.Status `json:"status"`
}

// Backlog is a runner's reply to a backlog request: the output a running job
// has produced so far.
type Backlog struct {
	Stdout []byte `json:"stdout"`
	Stderr []byte `json:"stderr"`
}

// SessionClosedSubject announces that a session was deleted or expired, so
// that runners drop any warm container they keep for it.
func SessionClosedSubject(sessionID string) string { return "gantry.session." + sessionID + ".closed" }

// SessionClosedAll matches every session-closed subject.
const SessionClosedAll = "gantry.session.*.closed"

// SessionIDFromSubject returns the session id in a
// gantry.session.<id>.<kind> subject ("" for another subject).
func SessionIDFromSubject(subject string) string {
	rest, ok := strings.CutPrefix(subject, "gantry.session.")
	if !ok {
		return ""
	}
	id, _, ok := strings.Cut(rest, ".")
	if !ok {
		return ""
	}
	return id
}
