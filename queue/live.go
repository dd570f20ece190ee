package queue

import (
	"strconv"
	"strings"

	"github.com/gantryhq/gantry/jobs"
)

// A stateful session's live sandbox answers operations beside its jobs
// (start a process that outlives them, write to its stdin, signal it,
// list them; read and change files as the sandbox sees them): the ingress
// sends each as a NATS request to LiveSubject, which only the runner
// holding the sandbox's container (Session.Live) serves, and that runner
// publishes the live processes' output and ends on ProcessSubject. The
// operations and their replies are the sandbox agent's (package agent,
// LiveOp and LiveReply, as JSON); the runner relays them.

// LiveSubject is where the runner holding the live sandbox live (a
// session's Session.Live) answers its operations.
func LiveSubject(sessionID, live string) string {
	return "gantry.live." + sessionID + ".ops." + liveToken(live)
}

// liveToken makes a live sandbox's name ("<container>/<number>") one
// subject token.
func liveToken(live string) string {
	return strings.NewReplacer("/", "_", ".", "_", "*", "_", ">", "_", " ", "_").Replace(live)
}

// ProcessSubject carries a session's live process pid's output and end,
// told apart by HeaderStream: HeaderStreamStdout and HeaderStreamStderr
// carry bytes, HeaderStreamExit the end (agent.ProcessExit as JSON).
func ProcessSubject(sessionID string, pid int) string {
	return "gantry.live." + sessionID + ".proc." + strconv.Itoa(pid)
}

// ProcessSubjectAll matches every live process of the session.
func ProcessSubjectAll(sessionID string) string { return "gantry.live." + sessionID + ".proc.*" }

// PidFromSubject is the pid of a ProcessSubject (0 if it is not one).
func PidFromSubject(subject string) int {
	i := strings.LastIndexByte(subject, '.')
	if i < 0 || !strings.Contains(subject[:i], ".proc") {
		return 0
	}
	pid, err := strconv.Atoi(subject[i+1:])
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// The values of HeaderStream on ProcessSubject.
const (
	HeaderStreamStdout = "stdout"
	HeaderStreamStderr = "stderr"
	HeaderStreamExit   = "exit"
)

// TakeSubject is where the runner holding a stateful session's live
// sandbox live is asked to run the session's jobs itself: a runner that
// was handed the session's message but does not hold its live state asks
// here before it would run the session elsewhere (which loses the live
// state). The request's body is empty; the answer is a TakeReply.
func TakeSubject(sessionID, live string) string {
	return "gantry.live." + sessionID + ".take." + liveToken(live)
}

// TakeReply is the answer on TakeSubject.
type TakeReply struct {
	Outcome TakeOutcome `json:"outcome"`
	// Reason says why a take was refused (for the session's live_state).
	Reason string `json:"reason,omitempty"`
}

// TakeOutcome is what the holder of a live sandbox did when asked to take
// its session.
type TakeOutcome string

// The outcomes of a take.
const (
	// TakeTaken: the holder owns the session now and runs its jobs.
	TakeTaken TakeOutcome = "taken"
	// TakeHeld: another owner holds the session (its jobs are in hand).
	TakeHeld TakeOutcome = "held"
	// TakeGone: the session is closed.
	TakeGone TakeOutcome = "gone"
	// TakeBusy: the holder cannot take it now; ask again later.
	TakeBusy TakeOutcome = "busy"
	// TakeRefused: the holder will not run it (it is stopping, or lost the
	// sandbox): run the session elsewhere, for Reason.
	TakeRefused TakeOutcome = "refused"
)

// ControlSubject is where the runner holding a stateful session's live
// sandbox live is asked to pause, snapshot or fork the session (a
// ControlRequest; the answer is a ControlReply). Only that runner serves
// it; no responder means no runner holds the sandbox.
func ControlSubject(sessionID, live string) string {
	return "gantry.live." + sessionID + ".control." + liveToken(live)
}

// ControlOp is what a ControlRequest asks.
type ControlOp string

// The control operations.
const (
	// ControlPause checkpoints the session's live state and frees its
	// sandbox: the session is paused.
	ControlPause ControlOp = "pause"
	// ControlSnapshot checkpoints it while it goes on, as snapshot
	// SnapshotID named Name.
	ControlSnapshot ControlOp = "snapshot"
	// ControlFork checkpoints it while it goes on and makes len(ChildIDs)
	// new sessions from the checkpoint, with those ids.
	ControlFork ControlOp = "fork"
)

// ControlRequest asks the runner holding a session's live sandbox for a
// control operation. The ids of what it makes are the caller's, so that a
// retry finds them.
type ControlRequest struct {
	Op         ControlOp `json:"op"`
	TenantID   string    `json:"tenant_id"`
	SnapshotID string    `json:"snapshot_id,omitempty"`
	Name       string    `json:"name,omitempty"`
	ChildIDs   []string  `json:"child_ids,omitempty"`
	TTLSeconds int       `json:"ttl_seconds,omitempty"`
}

// ControlReply answers a ControlRequest: Error (a code of the service's
// and a message) when it failed; the snapshot or the fork's sessions.
type ControlReply struct {
	Error    *ControlError  `json:"error,omitempty"`
	Snapshot *jobs.Snapshot `json:"snapshot,omitempty"`
	Sessions []jobs.Session `json:"sessions,omitempty"`
}

// ControlError is why a control operation failed: Code is "busy" (a job
// of the session runs: ask again), "gone" (the session is closed, or its
// sandbox is no longer here), "not_supported" (the runner keeps live state
// in memory only), "unavailable" (gantry's own failure) or "invalid".
type ControlError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}
