package service

import (
	"context"
	"encoding/json"

	"github.com/gantryhq/gantry/agent/wire"
	"github.com/gantryhq/gantry/jobs"
)

// The live operations in the agent's protocol: the one place the service
// translates its live types to agent/wire's and back (wire.LiveOp out,
// wire.LiveReply and wire.ProcessExit in). Everything else of the service,
// and every adapter, speaks ProcessSpec, FileEntry, LiveError and the
// rest (live.go).

// MaxFileChunk bounds the bytes one Read answers or one WriteAt carries
// (each travels as one NATS message).
const MaxFileChunk = wire.MaxLiveChunk

// ReservedPort reports whether port is one gantry itself listens on inside
// a sandbox (its egress proxy): never reachable from outside.
func ReservedPort(port int) bool { return wire.ReservedPort(port) }

// Spawn starts a process in the live sandbox and returns its pid. Open a
// stream (WatchProcesses) first to miss none of its output.
func (l *Live) Spawn(ctx context.Context, spec ProcessSpec) (int, error) {
	senv, err := l.sb.s.sessionEnv(l.p.TenantID, l.sess)
	if err != nil {
		return 0, err
	}
	reply, err := l.op(ctx, wire.LiveOp{Op: wire.OpSpawn, Argv: spec.Argv, Env: spec.Env,
		SessionEnv: senv, // applied, never listed
		Cwd:        spec.Cwd, Stdin: spec.Stdin, TimeoutMS: spec.Timeout.Milliseconds(), Tag: spec.Tag})
	return reply.Pid, err
}

// Input writes data to the process's stdin.
func (l *Live) Input(ctx context.Context, pid int, data []byte) error {
	_, err := l.op(ctx, wire.LiveOp{Op: wire.OpInput, Pid: pid, Data: data})
	return err
}

// CloseInput closes the process's stdin.
func (l *Live) CloseInput(ctx context.Context, pid int) error {
	_, err := l.op(ctx, wire.LiveOp{Op: wire.OpCloseInput, Pid: pid})
	return err
}

// Signal sends sig to the process (its process group).
func (l *Live) Signal(ctx context.Context, pid, sig int) error {
	_, err := l.op(ctx, wire.LiveOp{Op: wire.OpSignal, Pid: pid, Signal: sig})
	return err
}

// Processes lists the sandbox's running processes.
func (l *Live) Processes(ctx context.Context) ([]Process, error) {
	reply, err := l.op(ctx, wire.LiveOp{Op: wire.OpList})
	if err != nil {
		return nil, err
	}
	out := make([]Process, 0, len(reply.Processes))
	for _, p := range reply.Processes {
		out = append(out, Process{Pid: p.Pid, Argv: p.Argv, Env: p.Env, Cwd: p.Cwd, Tag: p.Tag})
	}
	return out, nil
}

// Status is the process's end, or nil while it runs; a process the
// sandbox does not know (or no longer remembers) is LiveNotFound.
func (l *Live) Status(ctx context.Context, pid int) (*ProcessExit, error) {
	reply, err := l.op(ctx, wire.LiveOp{Op: wire.OpStatus, Pid: pid})
	return exitOf(reply.Exit), err
}

// Stat describes the file at path.
func (l *Live) Stat(ctx context.Context, path string) (FileEntry, error) {
	return l.entry(ctx, wire.LiveOp{Op: wire.OpStat, Path: path})
}

// Mkdir makes the directory path and its parents (LiveExists if it is
// there) and describes it.
func (l *Live) Mkdir(ctx context.Context, path string) (FileEntry, error) {
	return l.entry(ctx, wire.LiveOp{Op: wire.OpMkdir, Path: path})
}

// Move renames from to to and describes it there.
func (l *Live) Move(ctx context.Context, from, to string) (FileEntry, error) {
	return l.entry(ctx, wire.LiveOp{Op: wire.OpMove, Path: from, Dest: to})
}

// ListDir lists the directory path, depth levels down (at least 1).
func (l *Live) ListDir(ctx context.Context, path string, depth int) ([]FileEntry, error) {
	reply, err := l.op(ctx, wire.LiveOp{Op: wire.OpListDir, Path: path, Depth: depth})
	if err != nil {
		return nil, err
	}
	out := make([]FileEntry, 0, len(reply.Entries))
	for _, e := range reply.Entries {
		out = append(out, entryOf(e))
	}
	return out, nil
}

// Remove removes the file, or the directory with everything in it.
func (l *Live) Remove(ctx context.Context, path string) error {
	_, err := l.op(ctx, wire.LiveOp{Op: wire.OpRemove, Path: path})
	return err
}

// Read reads up to length bytes (at most MaxFileChunk) of the file at
// offset.
func (l *Live) Read(ctx context.Context, path string, offset int64, length int) (FileChunk, error) {
	reply, err := l.op(ctx, wire.LiveOp{Op: wire.OpRead, Path: path, Offset: offset, Length: min(length, MaxFileChunk)})
	return FileChunk{Data: reply.Data, Size: reply.Size, EOF: reply.EOF}, err
}

// Create creates or empties the file (and makes its parent directories)
// and writes data (at most MaxFileChunk bytes) to it.
func (l *Live) Create(ctx context.Context, path string, data []byte) error {
	_, err := l.op(ctx, wire.LiveOp{Op: wire.OpWrite, Path: path, Data: data, Truncate: true})
	return err
}

// WriteAt writes data (at most MaxFileChunk bytes) to the file at offset.
func (l *Live) WriteAt(ctx context.Context, path string, offset int64, data []byte) error {
	_, err := l.op(ctx, wire.LiveOp{Op: wire.OpWrite, Path: path, Offset: offset, Data: data})
	return err
}

// entry carries out a file operation that answers an entry.
func (l *Live) entry(ctx context.Context, op wire.LiveOp) (FileEntry, error) {
	reply, err := l.op(ctx, op)
	if err != nil {
		return FileEntry{}, err
	}
	if reply.Entry == nil {
		return FileEntry{}, &LiveError{Code: LiveFailed, Message: "the sandbox answered no entry"}
	}
	return entryOf(*reply.Entry), nil
}

// op carries out a live operation (Live.call: waking the session's
// sandbox if it must).
func (l *Live) op(ctx context.Context, op wire.LiveOp) (wire.LiveReply, error) {
	body, err := json.Marshal(op)
	if err != nil {
		return wire.LiveReply{}, err
	}
	var reply wire.LiveReply
	err = l.call(ctx, func(sess jobs.Session) error {
		var err error
		reply, err = l.sb.request(ctx, sess, body)
		return err
	})
	return reply, err
}

// request sends an operation to the session's live sandbox, as it is now,
// and reads its answer. A failure of the operation is a *LiveError.
func (sb *Sandboxes) request(ctx context.Context, sess jobs.Session, body []byte) (wire.LiveReply, error) {
	data, err := sb.liveRequest(ctx, sess, body)
	if err != nil {
		return wire.LiveReply{}, err
	}
	var reply wire.LiveReply
	if err := json.Unmarshal(data, &reply); err != nil {
		return wire.LiveReply{}, Unavailable("the session's live sandbox answered something malformed")
	}
	if e := reply.Error; e != nil {
		code, ok := liveErrorCodes[e.Code]
		if !ok {
			code = LiveFailed
		}
		return reply, &LiveError{Code: code, Message: e.Message}
	}
	return reply, nil
}

// liveErrorCodes are the agent's error codes in the service's words; a
// code not here is LiveFailed.
var liveErrorCodes = map[wire.LiveErrCode]LiveErrorCode{
	wire.LiveErrNoSandbox:  LiveNoSandbox,
	wire.LiveErrNotFound:   LiveNotFound,
	wire.LiveErrExists:     LiveExists,
	wire.LiveErrInvalid:    LiveInvalid,
	wire.LiveErrPermission: LivePermission,
	wire.LiveErrNotDir:     LiveNotDir,
	wire.LiveErrIsDir:      LiveIsDir,
	wire.LiveErrNoSpace:    LiveNoSpace,
	wire.LiveErrBusy:       LiveBusy,
	wire.LiveErrFailed:     LiveFailed,
}

// status asks the sandbox sess.Live for the process, as Live.Status does,
// without waking the session (a stream's probe: a sandbox gone is an
// answer).
func (sb *Sandboxes) status(ctx context.Context, sess jobs.Session, pid int) (*ProcessExit, error) {
	body, _ := json.Marshal(wire.LiveOp{Op: wire.OpStatus, Pid: pid})
	reply, err := sb.request(ctx, sess, body)
	return exitOf(reply.Exit), err
}

// keepFor tells the runner holding the session's live sandbox to keep its
// container at least ttl seconds from now (the runner's own operation).
func (sb *Sandboxes) keepFor(ctx context.Context, sess jobs.Session, ttlSeconds int) error {
	body, _ := json.Marshal(wire.LiveOp{Op: wire.OpKeep, TimeoutMS: int64(ttlSeconds) * 1000})
	_, err := sb.request(ctx, sess, body)
	return err
}

// networkChanged tells the runner holding the session's live sandbox that
// the session's network changed (the runner's own operation: it reads it
// again for its live processes' egress).
func (sb *Sandboxes) networkChanged(ctx context.Context, sess jobs.Session) error {
	body, _ := json.Marshal(wire.LiveOp{Op: wire.OpNetwork})
	_, err := sb.request(ctx, sess, body)
	return err
}

// processExitOf reads a process's end as the runner publishes it.
func processExitOf(data []byte) (*ProcessExit, error) {
	var e wire.ProcessExit
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, err
	}
	return exitOf(&e), nil
}

func exitOf(e *wire.ProcessExit) *ProcessExit {
	if e == nil {
		return nil
	}
	return &ProcessExit{Pid: e.Pid, Code: e.Code, Signal: e.Signal}
}

func entryOf(e wire.FileEntry) FileEntry {
	t := FileType(e.Type)
	switch t {
	case FileRegular, FileDir, FileSymlink:
	default:
		t = FileOther
	}
	return FileEntry{Name: e.Name, Path: e.Path, Type: t, Size: e.Size, Mode: e.Mode, Owner: e.Owner, Group: e.Group,
		Modified: e.Modified, Target: e.Target}
}

// ParseKernelTag reads the tag of a session's JavaScript or TypeScript
// kernel among its processes (Process.Tag): the kernel's name and
// language; ok is false for any other process.
func ParseKernelTag(tag string) (name, language string, ok bool) { return wire.ParseKernelTag(tag) }
