package wire

import (
	"encoding/binary"
	"errors"
	"strings"
	"time"
)

// Live operations act on a stateful session's live sandbox beside its
// jobs, at any time: while a job runs, and while the container waits for
// the session's next one. They start processes that outlive any job and
// stream their output (E2B's commands), write to their stdin, signal and
// list them, and read and change files as the sandbox sees them (its
// /workspace, its /tmp). The ingress sends them over NATS to the runner
// holding the sandbox's container, which relays them to the agent as
// KindLive frames, each answered by a KindLive frame with the same ID;
// the processes' output and ends come back unasked, as KindProcessOutput
// and KindProcessExit frames. Everything the agent answers is untrusted,
// as ever.

// Frame kinds of live operations.
const (
	// KindLive carries a LiveOp from the runner and the LiveReply to it,
	// JSON.
	KindLive Kind = 'L'
	// KindProcessOutput is a chunk of a live process's output: the pid (4
	// bytes, big-endian), KindStdout or KindStderr, then the bytes.
	KindProcessOutput Kind = 'P'
	// KindProcessExit is a live process's end, ProcessExit as JSON; it
	// follows all of its output.
	KindProcessExit Kind = 'Z'
)

// Op is a live operation's name (LiveOp.Op).
type Op string

// The live operations.
const (
	// OpSpawn starts a process (Argv, Env, Cwd, Stdin, TimeoutMS, Tag):
	// the reply has its Pid.
	OpSpawn Op = "spawn"
	// OpInput writes Data to the process Pid's stdin; OpCloseInput closes
	// it.
	OpInput      Op = "input"
	OpCloseInput Op = "close_input"
	// OpSignal sends Signal to the process Pid (its process group).
	OpSignal Op = "signal"
	// OpList lists the running processes; OpStatus answers the process
	// Pid, with Exit set once it has ended (ended ones are remembered for
	// a while).
	OpList   Op = "list"
	OpStatus Op = "status"
	// File operations on Path (absolute, as the sandbox sees it; symbolic
	// links that lead outside the sandbox's root are refused):
	// OpStat and OpListDir (Depth levels, at least 1) answer entries,
	// OpMkdir makes a directory and its parents (ErrExists if it is
	// there), OpMove renames Path to Dest, OpRemove removes a file or a
	// directory with everything in it, OpRead reads up to Length bytes at
	// Offset (Size is the file's size, EOF set at its end), OpWrite
	// writes Data at Offset (Truncate first empties or creates the file,
	// and its parent directories).
	OpStat    Op = "stat"
	OpListDir Op = "list_dir"
	OpMkdir   Op = "mkdir"
	OpMove    Op = "move"
	OpRemove  Op = "remove"
	OpRead    Op = "read"
	OpWrite   Op = "write"
	// OpKeep is the runner's, never the agent's: the container holding the
	// sandbox is kept for the session at least TimeoutMS from now (the
	// session's timeout changed).
	OpKeep Op = "keep"
	// OpNetwork is the runner's too: the session's network changed, and
	// the runner reads it again for its live processes' egress.
	OpNetwork Op = "network"
)

// MaxLiveChunk bounds the bytes one OpRead answers or one OpWrite carries
// (each travels as one NATS message, base64 in JSON).
const MaxLiveChunk = 512 << 10

// LiveOp is a live operation (see the Op constants for what each reads).
type LiveOp struct {
	// ID pairs the operation with its reply; Conn.Live sets it.
	ID int64 `json:"id,omitempty"`
	Op Op    `json:"op"`

	Argv []string          `json:"argv,omitempty"`
	Env  map[string]string `json:"env,omitempty"`
	// SessionEnv is the session's own environment, under Env: the
	// process gets it, and a listing of processes never shows it.
	SessionEnv map[string]string `json:"session_env,omitempty"`
	Cwd        string            `json:"cwd,omitempty"`
	Stdin      bool              `json:"stdin,omitempty"`
	TimeoutMS  int64             `json:"timeout_ms,omitempty"`
	Tag        string            `json:"tag,omitempty"`

	Pid    int    `json:"pid,omitempty"`
	Signal int    `json:"signal,omitempty"`
	Data   []byte `json:"data,omitempty"`

	Path     string `json:"path,omitempty"`
	Dest     string `json:"dest,omitempty"`
	Depth    int    `json:"depth,omitempty"`
	Offset   int64  `json:"offset,omitempty"`
	Length   int    `json:"length,omitempty"`
	Truncate bool   `json:"truncate,omitempty"`
}

// LiveReply answers a LiveOp: Error, or what the operation yields.
type LiveReply struct {
	ID    int64      `json:"id,omitempty"`
	Error *LiveError `json:"error,omitempty"`

	Pid       int          `json:"pid,omitempty"`
	Processes []Process    `json:"processes,omitempty"`
	Exit      *ProcessExit `json:"exit,omitempty"`

	Entry   *FileEntry  `json:"entry,omitempty"`
	Entries []FileEntry `json:"entries,omitempty"`
	Data    []byte      `json:"data,omitempty"`
	Size    int64       `json:"size,omitempty"`
	EOF     bool        `json:"eof,omitempty"`
}

// LiveError is why a live operation failed.
type LiveError struct {
	// Code is one of the LiveErr constants.
	Code    LiveErrCode `json:"code"`
	Message string      `json:"message"`
}

func (e *LiveError) Error() string { return e.Message }

// LiveErrCode says what kind of failure a LiveError is.
type LiveErrCode string

// The codes of LiveError.
const (
	// LiveErrNoSandbox: the container holds no live sandbox, or its
	// process service is gone (a job of the session makes both again).
	LiveErrNoSandbox LiveErrCode = "no_sandbox"
	LiveErrNotFound  LiveErrCode = "not_found"
	LiveErrExists    LiveErrCode = "exists"
	LiveErrInvalid   LiveErrCode = "invalid"
	// LiveErrPermission: the sandbox's user may not (a read-only path, a
	// file it does not own).
	LiveErrPermission LiveErrCode = "permission"
	LiveErrNotDir     LiveErrCode = "not_dir"
	LiveErrIsDir      LiveErrCode = "is_dir"
	// LiveErrNoSpace: the filesystem is full.
	LiveErrNoSpace LiveErrCode = "no_space"
	LiveErrFailed  LiveErrCode = "failed"
	// LiveErrBusy: too many operations at once.
	LiveErrBusy LiveErrCode = "busy"
)

// Process is a live process as OpList shows it: what it was started with.
type Process struct {
	Pid  int               `json:"pid"`
	Argv []string          `json:"argv"`
	Env  map[string]string `json:"env,omitempty"`
	Cwd  string            `json:"cwd"`
	Tag  string            `json:"tag,omitempty"`
}

// ProcessExit is how a live process ended: its exit code, or -1 and the
// signal that killed it.
type ProcessExit struct {
	Pid    int `json:"pid"`
	Code   int `json:"code"`
	Signal int `json:"signal,omitempty"`
	// ThrottledMS is how long the agent held the process's output back
	// to its output rate (agent.ProcessOutputRate, SandboxOutputRate):
	// meanwhile its writes blocked. Nothing of its output was dropped.
	ThrottledMS int64 `json:"throttled_ms,omitempty"`
}

// FileEntry describes a file as the sandbox sees it.
type FileEntry struct {
	Name string `json:"name"`
	// Path is absolute, as the sandbox sees it.
	Path string `json:"path"`
	// Type is "file", "dir", "symlink" or "other".
	Type     string    `json:"type"`
	Size     int64     `json:"size"`
	Mode     uint32    `json:"mode"`
	Owner    string    `json:"owner"`
	Group    string    `json:"group"`
	Modified time.Time `json:"modified"`
	// Target is a symbolic link's target.
	Target string `json:"target,omitempty"`
}

// EncodeProcessOutput is a KindProcessOutput payload.
func EncodeProcessOutput(pid int, stream Kind, data []byte) []byte {
	b := make([]byte, 5+len(data))
	binary.BigEndian.PutUint32(b, uint32(pid))
	b[4] = byte(stream)
	copy(b[5:], data)
	return b
}

// ParseProcessOutput reads a KindProcessOutput payload: the process, the
// stream (KindStdout or KindStderr) and the bytes.
func ParseProcessOutput(p []byte) (pid int, stream Kind, data []byte, err error) {
	if len(p) < 5 || (Kind(p[4]) != KindStdout && Kind(p[4]) != KindStderr) {
		return 0, 0, nil, errors.New("malformed process output")
	}
	return int(binary.BigEndian.Uint32(p)), Kind(p[4]), p[5:], nil
}

// kernelTagPrefix starts the tag of a live sandbox's JavaScript or
// TypeScript kernel (Request.Kernel), as OpList shows it.
const kernelTagPrefix = "gantry-kernel:"

// KernelTag is the tag of the kernel named name, of language
// ("javascript" or "typescript").
func KernelTag(name, language string) string { return kernelTagPrefix + name + ":" + language }

// ParseKernelTag reads a kernel's tag: its name and language; ok is false
// for any other process's tag.
func ParseKernelTag(tag string) (name, language string, ok bool) {
	rest, ok := strings.CutPrefix(tag, kernelTagPrefix)
	if !ok {
		return "", "", false
	}
	i := strings.LastIndexByte(rest, ':')
	if i <= 0 {
		return "", "", false
	}
	name, language = rest[:i], rest[i+1:]
	return name, language, language == "javascript" || language == "typescript"
}
