package sandbox

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gantryhq/gantry/ingress/service"
)

// envd's process service over the session's live processes: each command
// is a process of the session's live sandbox, started beside its jobs
// (envd's Start is the same call whether the SDK then waits for it or
// runs it in the background). A process lives until it ends, its
// Connect-Timeout-Ms passes (as envd kills it), or the sandbox ends; a
// client that goes away leaves it running.

// decodeAsUser reads a unary request's message into v, refusing it if it
// names another user (requestUser).
func decodeAsUser(r *http.Request, v any) *rpcError {
	if e := decodeUnary(r, v); e != nil {
		return e
	}
	return requestUser(r)
}

// requestUser is the user a call names (envd's Authorization: Basic with
// the user's name), refusing any but E2B's "user": a gantry sandbox runs
// everything as one unprivileged user.
func requestUser(r *http.Request) *rpcError {
	auth, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Basic ")
	if !ok {
		return nil
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(auth))
	if err != nil {
		return errorf(codeInvalidArgument, "a malformed Authorization header")
	}
	name, _, _ := strings.Cut(string(raw), ":")
	if name != "" && name != username {
		return errorf(codePermissionDenied, "user %q: a gantry sandbox runs everything as one unprivileged user (%q), never as root", name, username)
	}
	return nil
}

func (s *Server) processStart(w http.ResponseWriter, r *http.Request, c caller) *rpcError {
	var req startRequest
	if e := decodeStreamRequest(r, &req); e != nil {
		return e
	}
	if e := requestUser(r); e != nil {
		return e
	}
	if len(req.Pty) > 0 && string(req.Pty) != "null" {
		return errorf(codeUnimplemented, "PTYs are not offered by gantry: run the command without one")
	}
	if req.Process.Cmd == "" {
		return errorf(codeInvalidArgument, "process.cmd is required")
	}
	timeout, e := connectTimeout(r)
	if e != nil {
		return e
	}
	cwd := ""
	if req.Process.Cwd != nil {
		cwd = *req.Process.Cwd
	}
	spec := service.ProcessSpec{Argv: append([]string{req.Process.Cmd}, req.Process.Args...),
		Env: e2bEnv(req.Process.Envs), Cwd: toSandbox(cwd), Stdin: req.Stdin == nil || *req.Stdin, Timeout: timeout}
	if _, set := spec.Env["PWD"]; !set {
		// The shell names its directory as E2B's (/home/user links to the
		// workspace).
		spec.Env["PWD"] = fromSandbox(spec.Cwd)
	}
	if req.Tag != nil {
		spec.Tag = *req.Tag
	}
	ctx := r.Context()
	// Following first: none of the process's output is missed.
	events, err := s.sandboxes.WatchProcesses(ctx, c.p, c.session)
	if err != nil {
		return s.rpcError(c, err)
	}
	defer events.Close()
	live, err := s.live(ctx, c)
	if err != nil {
		return s.rpcError(c, err)
	}
	pid, err := live.Spawn(ctx, spec)
	if err != nil {
		return s.rpcError(c, err)
	}
	events.Follow(live.Sandbox(), pid)
	st := newStream(w)
	if st.send(eventResponse{Event: processEvent{Start: &startEvent{Pid: uint32(pid)}}}) != nil {
		return nil
	}
	s.followProcess(ctx, r, c, st, events, pid)
	return nil
}

func (s *Server) processConnect(w http.ResponseWriter, r *http.Request, c caller) *rpcError {
	var req connectRequest
	if e := decodeStreamRequest(r, &req); e != nil {
		return e
	}
	ctx := r.Context()
	pid, e := s.selectProcess(ctx, c, req.Process)
	if e != nil {
		return e
	}
	events, err := s.sandboxes.WatchProcesses(ctx, c.p, c.session)
	if err != nil {
		return s.rpcError(c, err)
	}
	defer events.Close()
	live, err := s.live(ctx, c)
	if err != nil {
		return s.rpcError(c, err)
	}
	exit, err := live.Status(ctx, pid)
	if err != nil {
		return s.rpcError(c, err)
	}
	events.Follow(live.Sandbox(), pid)
	st := newStream(w)
	if st.send(eventResponse{Event: processEvent{Start: &startEvent{Pid: uint32(pid)}}}) != nil {
		return nil
	}
	if exit != nil {
		// It ended between the call and following it.
		if st.send(eventResponse{Event: processEvent{End: endOf(*exit)}}) == nil {
			st.end(nil)
		}
		return nil
	}
	s.followProcess(ctx, r, c, st, events, pid)
	return nil
}

// followProcess streams the process's output and end, with a keep-alive
// event every Keepalive-Ping-Interval seconds, until it ends, the client
// goes away, or the stream ends early: its reader fell behind past a bound
// (resource_exhausted), or the sandbox is gone (unavailable). Keep-alives
// never outlast the sandbox: its loss ends the stream within seconds.
func (s *Server) followProcess(ctx context.Context, r *http.Request, c caller, st *stream, events *service.ProcessEvents, pid int) {
	every := 50 * time.Second
	if n, err := strconv.Atoi(r.Header.Get("Keepalive-Ping-Interval")); err == nil && n > 0 {
		every = time.Duration(min(n, 3600)) * time.Second
	}
	defer giveUpWhenCutOff(events, st.rc)()
	for {
		wait, cancel := context.WithTimeout(ctx, every)
		ev, ok := events.Next(wait)
		cancel()
		if !ok {
			if ctx.Err() != nil {
				return // the client went away: the process runs on
			}
			if st.send(eventResponse{Event: processEvent{Keepalive: &struct{}{}}}) != nil {
				return
			}
			continue
		}
		if ev.Err != nil {
			// Cut off (the process runs on; Connect follows it again), or
			// the sandbox is gone.
			st.end(s.rpcError(c, ev.Err))
			return
		}
		if ev.Pid != pid {
			continue
		}
		var out processEvent
		switch ev.Stream {
		case service.StreamStdout:
			out.Data = &dataEvent{Stdout: ev.Data}
		case service.StreamStderr:
			out.Data = &dataEvent{Stderr: ev.Data}
		default:
			out.End = endOf(*ev.Exit)
		}
		if st.send(eventResponse{Event: out}) != nil {
			return
		}
		if out.End != nil {
			st.end(nil)
			return
		}
	}
}

// cutGrace is how long a stream cut off (or whose sandbox is gone) waits
// for its client to take what is written to it before the connection is
// dropped: a client that reads nothing holds nothing of the ingress's for
// long (what it held is let go at once), and one that reads again in time
// is told why.
const cutGrace = 30 * time.Second

// giveUpWhenCutOff makes writes to the response fail cutGrace after the
// stream is cut off, so that a handler blocked on a client that reads
// nothing returns. The returned function stops it, and clears the
// deadline if it was set (the connection may serve another request).
func giveUpWhenCutOff(events *service.ProcessEvents, rc *http.ResponseController) (stop func()) {
	done, exited := make(chan struct{}), make(chan bool, 1)
	go func() {
		select {
		case <-events.CutOff():
			_ = rc.SetWriteDeadline(time.Now().Add(cutGrace))
			exited <- true
		case <-done:
			exited <- false
		}
	}()
	return func() {
		close(done)
		if <-exited {
			_ = rc.SetWriteDeadline(time.Time{})
		}
	}
}

// endOf is envd's end event for a process's end (as Go's os.ProcessState
// words it).
func endOf(e service.ProcessExit) *endEvent {
	end := &endEvent{ExitCode: int32(e.Code), Exited: e.Signal == 0, Status: fmt.Sprintf("exit status %d", e.Code)}
	if e.Signal != 0 {
		end.ExitCode, end.Status = -1, "signal: "+syscall.Signal(e.Signal).String()
	}
	if end.ExitCode != 0 {
		msg := end.Status
		end.Error = &msg
	}
	return end
}

// connectTimeout is the call's Connect-Timeout-Ms (0: none): envd kills a
// process when it passes.
func connectTimeout(r *http.Request) (time.Duration, *rpcError) {
	h := r.Header.Get("Connect-Timeout-Ms")
	if h == "" {
		return 0, nil
	}
	ms, err := strconv.ParseInt(h, 10, 64)
	if err != nil || ms < 0 || ms > 1<<40 {
		return 0, errorf(codeInvalidArgument, "Connect-Timeout-Ms %q", h)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// processes lists the sandbox's running processes.
func (s *Server) processes(ctx context.Context, c caller) ([]service.Process, error) {
	live, err := s.live(ctx, c)
	if err != nil {
		return nil, err
	}
	return live.Processes(ctx)
}

// selectProcess is the pid a selector names (a tag is looked up).
func (s *Server) selectProcess(ctx context.Context, c caller, sel processSelector) (int, *rpcError) {
	switch {
	case sel.Pid != nil:
		return int(*sel.Pid), nil
	case sel.Tag != nil:
		list, err := s.processes(ctx, c)
		if err != nil {
			return 0, s.rpcError(c, err)
		}
		for _, p := range list {
			if p.Tag == *sel.Tag {
				return p.Pid, nil
			}
		}
		return 0, errorf(codeNotFound, "no process with tag %q", *sel.Tag)
	}
	return 0, errorf(codeInvalidArgument, "process: a pid or a tag is required")
}

func (s *Server) processList(w http.ResponseWriter, r *http.Request, c caller) *rpcError {
	var req struct{}
	if e := decodeUnary(r, &req); e != nil {
		return e
	}
	list, err := s.processes(r.Context(), c)
	if err != nil {
		return s.rpcError(c, err)
	}
	out := listResponse{Processes: []processInfo{}}
	for _, p := range list {
		if len(p.Argv) == 0 {
			continue
		}
		cwd := fromSandbox(p.Cwd)
		info := processInfo{Pid: uint32(p.Pid), Config: processConfig{Cmd: p.Argv[0], Args: p.Argv[1:], Envs: userEnvs(p.Env), Cwd: &cwd}}
		if p.Tag != "" {
			tag := p.Tag
			info.Tag = &tag
		}
		out.Processes = append(out.Processes, info)
	}
	writeUnary(w, out, nil)
	return nil
}

// userEnvs are a process's variables without the ones envd adds.
func userEnvs(env map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range env {
		if k != "HOME" && k != "USER" && k != "LOGNAME" && k != "PWD" {
			out[k] = v
		}
	}
	return out
}

func (s *Server) processSendInput(w http.ResponseWriter, r *http.Request, c caller) *rpcError {
	var req sendInputRequest
	if e := decodeUnary(r, &req); e != nil {
		return e
	}
	if req.Input.Pty != nil {
		return errorf(codeUnimplemented, "PTYs are not offered by gantry")
	}
	return s.onProcess(w, r, c, req.Process, func(ctx context.Context, live *service.Live, pid int) error {
		return live.Input(ctx, pid, req.Input.Stdin)
	})
}

func (s *Server) processSendSignal(w http.ResponseWriter, r *http.Request, c caller) *rpcError {
	var req sendSignalRequest
	if e := decodeUnary(r, &req); e != nil {
		return e
	}
	if req.Signal <= 0 || req.Signal > 64 {
		return errorf(codeInvalidArgument, "signal %d", req.Signal)
	}
	return s.onProcess(w, r, c, req.Process, func(ctx context.Context, live *service.Live, pid int) error {
		return live.Signal(ctx, pid, int(req.Signal))
	})
}

func (s *Server) processCloseStdin(w http.ResponseWriter, r *http.Request, c caller) *rpcError {
	var req closeStdinRequest
	if e := decodeUnary(r, &req); e != nil {
		return e
	}
	return s.onProcess(w, r, c, req.Process, func(ctx context.Context, live *service.Live, pid int) error {
		return live.CloseInput(ctx, pid)
	})
}

// onProcess runs op on the selected process and answers the empty
// message.
func (s *Server) onProcess(w http.ResponseWriter, r *http.Request, c caller, sel processSelector,
	op func(ctx context.Context, live *service.Live, pid int) error) *rpcError {
	ctx := r.Context()
	pid, e := s.selectProcess(ctx, c, sel)
	if e != nil {
		return e
	}
	live, err := s.live(ctx, c)
	if err == nil {
		err = op(ctx, live, pid)
	}
	if err != nil {
		return s.rpcError(c, err)
	}
	writeUnary(w, struct{}{}, nil)
	return nil
}
