package agent

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gantryhq/gantry/agent/wire"
)

// A live sandbox's processes: started by its process service (warm.py's
// _processes, forked from the session's interpreter before any job ran),
// with their streams held here, in the agent. Their output goes to the
// runner as KindProcessOutput frames as it comes, their end as a
// KindProcessExit frame after the last of it.

// exitedKept is how long an ended process is remembered for OpStatus.
const exitedKept = time.Minute

// maxProcessAnswer bounds an answer of the process service (untrusted).
const maxProcessAnswer = 64 << 10

// processService is the agent's end of a live sandbox's process service.
type processService struct {
	conn *net.UnixConn
	fw   *wire.FrameWriter // the runner's stream
	gone chan struct{}

	mu      sync.Mutex // one request at a time; the maps below
	nextID  int64
	replies map[int64]pending
	procs   map[int]*liveProc
	exited  map[int]wire.ProcessExit
	// rate bounds the output of all the sandbox's processes together
	// (outrate.go).
	rate *byteRate
}

// pending is a request waiting for its reply; a spawn's carries its
// process, registered as soon as the reply names its pid (the process's
// end may follow at once, and must find it).
type pending struct {
	ch   chan psAnswer
	proc *liveProc
}

// psAnswer is what the process service sends: a reply (ID set) or an
// event.
type psAnswer struct {
	ID     int64  `json:"id"`
	Event  string `json:"event"`
	Pid    int    `json:"pid"`
	Code   int    `json:"code"`
	Signal int    `json:"signal"`
	OK     bool   `json:"ok"`
	Error  string `json:"error"`
}

// liveProc is a process the service started.
type liveProc struct {
	info    wire.Process
	stdinMu sync.Mutex
	stdin   *os.File // nil: not taken, or closed
	// started is closed once the spawn's reply came, pid set (0: it did
	// not start).
	started chan struct{}
	pid     int
	ended   chan struct{}
	outputs sync.WaitGroup
	timer   *time.Timer
	// rate bounds its output (outrate.go); throttled is how long its
	// output was held back by either bound.
	rate      *byteRate
	throttled atomic.Int64 // ns
}

func newProcessService(conn *net.UnixConn, fw *wire.FrameWriter) *processService {
	ps := &processService{conn: conn, fw: fw, gone: make(chan struct{}),
		replies: map[int64]pending{}, procs: map[int]*liveProc{}, exited: map[int]wire.ProcessExit{},
		rate: newByteRate(SandboxOutputRate, OutputBurst)}
	go ps.read()
	return ps
}

func (ps *processService) isGone() bool {
	select {
	case <-ps.gone:
		return true
	default:
		return false
	}
}

// read takes the service's answers until its socket ends or breaks the
// framing; then every process it started is taken as killed (the sandbox
// is going, or the sandbox's own code killed the service).
func (ps *processService) read() {
	defer func() {
		ps.conn.Close()
		close(ps.gone)
		ps.mu.Lock()
		pids := make([]int, 0, len(ps.procs))
		for pid := range ps.procs {
			pids = append(pids, pid)
		}
		ps.mu.Unlock()
		for _, pid := range pids {
			ps.ended(wire.ProcessExit{Pid: pid, Code: -1, Signal: int(syscall.SIGKILL)})
		}
	}()
	r := bufio.NewReader(ps.conn)
	for {
		var head [4]byte
		if _, err := io.ReadFull(r, head[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(head[:])
		if n > maxProcessAnswer {
			return
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		var a psAnswer
		if json.Unmarshal(body, &a) != nil {
			return
		}
		if a.Event == "exit" {
			ps.ended(wire.ProcessExit{Pid: a.Pid, Code: a.Code, Signal: a.Signal})
			continue
		}
		ps.mu.Lock()
		w, ok := ps.replies[a.ID]
		delete(ps.replies, a.ID)
		if ok && w.proc != nil && a.Error == "" && a.Pid > 0 {
			if _, taken := ps.procs[a.Pid]; taken {
				// A pid reused before its last holder's end was seen:
				// cannot be, unless the service lies.
				a.Error = "the process service reported a pid in use"
			} else {
				w.proc.pid = a.Pid
				ps.procs[a.Pid] = w.proc
				delete(ps.exited, a.Pid)
			}
		}
		ps.mu.Unlock()
		if ok {
			w.ch <- a
		}
	}
}

// request sends one request (with descriptors) and waits for its reply;
// proc is the process a spawn starts.
func (ps *processService) request(req map[string]any, fds []int, proc *liveProc) (psAnswer, error) {
	ps.mu.Lock()
	ps.nextID++
	id := ps.nextID
	ch := make(chan psAnswer, 1)
	ps.replies[id] = pending{ch: ch, proc: proc}
	ps.mu.Unlock()
	req["id"] = id
	body, err := json.Marshal(req)
	if err != nil {
		return psAnswer{}, err
	}
	msg := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	var oob []byte
	if len(fds) > 0 {
		oob = syscall.UnixRights(fds...)
	}
	ps.mu.Lock()
	_, _, err = ps.conn.WriteMsgUnix(append(msg, body...), oob, nil)
	ps.mu.Unlock()
	if err != nil {
		return psAnswer{}, errProcessesGone
	}
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	select {
	case a := <-ch:
		return a, nil
	case <-ps.gone:
		return psAnswer{}, errProcessesGone
	case <-t.C:
		ps.mu.Lock()
		delete(ps.replies, id)
		ps.mu.Unlock()
		return psAnswer{}, errors.New("the sandbox's process service did not answer")
	}
}

var errProcessesGone = &wire.LiveError{Code: wire.LiveErrNoSandbox,
	Message: "the sandbox's process service is gone (the sandbox ended, or its own code stopped the service); the session's next job starts it again"}

// spawn starts a process with the op's argv, environment (env, the
// sandbox's whole environment) and working directory.
func (ps *processService) spawn(op wire.LiveOp, env []string) (int, error) {
	if len(op.Argv) == 0 || op.Argv[0] == "" {
		return 0, &wire.LiveError{Code: wire.LiveErrInvalid, Message: "a process needs a command"}
	}
	var files []*os.File // the process's ends, closed once sent
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	p := &liveProc{started: make(chan struct{}), ended: make(chan struct{}), rate: newByteRate(ProcessOutputRate, OutputBurst),
		info: wire.Process{Argv: op.Argv, Env: op.Env, Cwd: op.Cwd, Tag: op.Tag}}
	var stdin *os.File
	if op.Stdin {
		r, w, err := os.Pipe()
		if err != nil {
			return 0, err
		}
		files = append(files, r)
		stdin, p.stdin = r, w
	} else {
		null, err := os.Open(os.DevNull)
		if err != nil {
			return 0, err
		}
		files = append(files, null)
		stdin = null
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		p.closeStdin()
		return 0, err
	}
	files = append(files, outW)
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		p.closeStdin()
		return 0, err
	}
	files = append(files, errW)
	// The pumps run from the start: a process that writes and ends at
	// once is read whole.
	p.outputs.Add(2)
	go ps.pump(p, wire.KindStdout, outR)
	go ps.pump(p, wire.KindStderr, errR)
	if err := ps.start(p, op.Argv, env, stdin, outW, errW); err != nil {
		return 0, err
	}
	pid := p.pid
	if op.TimeoutMS > 0 {
		timer := time.AfterFunc(time.Duration(op.TimeoutMS)*time.Millisecond, func() {
			_, _ = ps.request(map[string]any{"op": "signal", "pid": pid, "signal": int(syscall.SIGKILL)}, nil, nil)
		})
		ps.mu.Lock()
		p.timer = timer
		ps.mu.Unlock()
		select {
		case <-p.ended: // it ended before the timer was set
			timer.Stop()
		default:
		}
	}
	return pid, nil
}

// start asks the service to start p with argv, env and the three
// descriptors as its stdin, stdout and stderr; once it answers, p is
// started (or, on an error, ended).
func (ps *processService) start(p *liveProc, argv, env []string, stdin, stdout, stderr *os.File) error {
	a, err := ps.request(map[string]any{"op": "spawn", "argv": argv, "env": env, "cwd": p.info.Cwd},
		[]int{int(stdin.Fd()), int(stdout.Fd()), int(stderr.Fd())}, p)
	if err == nil && (a.Error != "" || a.Pid <= 0) {
		msg := a.Error
		if msg == "" {
			msg = "the process service gave no pid"
		}
		err = &wire.LiveError{Code: wire.LiveErrInvalid, Message: msg}
	}
	close(p.started)
	if err != nil {
		p.closeStdin()
		close(p.ended)
		return err
	}
	p.info.Pid = p.pid
	return nil
}

// pump sends a process's output as it comes, until the stream ends or the
// process has ended (then what the pipe holds is sent, and the rest, from
// processes it left behind, read and dropped).
func (ps *processService) pump(p *liveProc, stream wire.Kind, f *os.File) {
	defer p.outputs.Done()
	var held [][]byte // what came before the pid was known
	drainUntil(f, p.ended, func(data []byte) {
		select {
		case <-p.started:
		default:
			held = append(held, append([]byte(nil), data...))
			return
		}
		for _, h := range held {
			ps.send(p, stream, h)
		}
		held = nil
		ps.send(p, stream, data)
	})
	<-p.started
	if p.pid > 0 {
		for _, h := range held {
			ps.send(p, stream, h)
		}
	}
}

// send sends a chunk of a process's output once its rate and the
// sandbox's let it: until then the pump reads no more of the process's
// pipe, which fills and blocks the process's writes.
func (ps *processService) send(p *liveProc, stream wire.Kind, data []byte) {
	waited := p.rate.take(len(data), ps.gone) + ps.rate.take(len(data), ps.gone)
	p.throttled.Add(int64(waited))
	_ = ps.fw.Frame(wire.KindProcessOutput, wire.EncodeProcessOutput(p.pid, stream, data))
}

// ended records a process's end and reports it after its output.
func (ps *processService) ended(e wire.ProcessExit) {
	ps.mu.Lock()
	p := ps.procs[e.Pid]
	if p == nil {
		ps.mu.Unlock()
		return
	}
	delete(ps.procs, e.Pid)
	ps.exited[e.Pid] = e
	timer := p.timer
	ps.mu.Unlock()
	if timer != nil {
		timer.Stop()
	}
	close(p.ended)
	p.closeStdin()
	go func() {
		p.outputs.Wait()
		e.ThrottledMS = time.Duration(p.throttled.Load()).Milliseconds()
		_ = ps.fw.JSON(wire.KindProcessExit, e)
		time.AfterFunc(exitedKept, func() {
			ps.mu.Lock()
			if cur, ok := ps.exited[e.Pid]; ok && cur == e {
				delete(ps.exited, e.Pid)
			}
			ps.mu.Unlock()
		})
	}()
}

func (p *liveProc) closeStdin() {
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	if p.stdin != nil {
		p.stdin.Close()
		p.stdin = nil
	}
}

// stdinWait bounds a write to a process's stdin that does not read it.
const stdinWait = 10 * time.Second

func (ps *processService) proc(pid int) (*liveProc, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if p := ps.procs[pid]; p != nil {
		return p, nil
	}
	return nil, &wire.LiveError{Code: wire.LiveErrNotFound, Message: fmt.Sprintf("process %d not found", pid)}
}

func (ps *processService) input(pid int, data []byte) error {
	p, err := ps.proc(pid)
	if err != nil {
		return err
	}
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	if p.stdin == nil {
		return &wire.LiveError{Code: wire.LiveErrInvalid, Message: fmt.Sprintf("process %d has no stdin open (start it with stdin)", pid)}
	}
	_ = p.stdin.SetWriteDeadline(time.Now().Add(stdinWait))
	if _, err := p.stdin.Write(data); err != nil {
		return &wire.LiveError{Code: wire.LiveErrFailed, Message: fmt.Sprintf("write to the stdin of process %d: %v", pid, errors.Unwrap(err))}
	}
	return nil
}

func (ps *processService) closeInput(pid int) error {
	p, err := ps.proc(pid)
	if err != nil {
		return err
	}
	p.closeStdin()
	return nil
}

func (ps *processService) signal(pid, sig int) error {
	if _, err := ps.proc(pid); err != nil {
		return err
	}
	if sig <= 0 || sig > 64 {
		return &wire.LiveError{Code: wire.LiveErrInvalid, Message: fmt.Sprintf("signal %d", sig)}
	}
	a, err := ps.request(map[string]any{"op": "signal", "pid": pid, "signal": sig}, nil, nil)
	if err != nil {
		return err
	}
	if a.Error != "" {
		return &wire.LiveError{Code: wire.LiveErrNotFound, Message: fmt.Sprintf("process %d: %s", pid, a.Error)}
	}
	return nil
}

func (ps *processService) list() []wire.Process {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	out := make([]wire.Process, 0, len(ps.procs))
	for _, p := range ps.procs {
		out = append(out, p.info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pid < out[j].Pid })
	return out
}

// status answers a process: running (no Exit), or how it ended.
func (ps *processService) status(pid int) (wire.LiveReply, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if p := ps.procs[pid]; p != nil {
		return wire.LiveReply{Pid: pid, Processes: []wire.Process{p.info}}, nil
	}
	if e, ok := ps.exited[pid]; ok {
		return wire.LiveReply{Pid: pid, Exit: &e}, nil
	}
	return wire.LiveReply{}, &wire.LiveError{Code: wire.LiveErrNotFound, Message: fmt.Sprintf("process %d not found", pid)}
}
