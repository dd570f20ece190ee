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
	"os/exec"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/gantryhq/gantry/agent/wire"
)

// A stateful session's container keeps one live sandbox between the
// session's jobs: the session's own Python interpreter (forked from the
// warm interpreter into a sandbox like any job's, or under the Container
// isolation run directly in the container) with everything it started.
// Its globals, imports, /tmp and background processes persist from job to
// job. Each Python job runs in it as a notebook cell (the value of its last
// expression comes back, as a notebook shows it); a JavaScript or
// TypeScript job as a cell of one of the sandbox's Node kernels
// (jskernel.go); any other job as a process of the sandbox. The interpreter serves the agent on a stream
// socket: a request (4-byte big-endian length, JSON) per job with the job's
// stdin, stdout and stderr attached, and one answer in the same framing.
// That socket is open in the interpreter, where the session's own code
// runs: everything read from it is untrusted, and a stream that breaks the
// framing ends the sandbox.

// maxLiveAnswer bounds an answer from a session's interpreter (a value is
// at most 1 MiB of JSON, see warm.py's MAX_VALUE).
const maxLiveAnswer = 4 << 20

// liveRequest is a job for a session's interpreter.
type liveRequest struct {
	// Mode is "cell" (a Python file run in the session's globals) or
	// "exec" (a process).
	Mode string   `json:"mode"`
	Path string   `json:"path,omitempty"`
	Argv []string `json:"argv,omitempty"`
	// Env is the job's environment: its own variables for a cell (added to
	// the interpreter's), the whole of it for a process.
	Env []string `json:"env"`
}

// liveAnswer ends a job.
type liveAnswer struct {
	Event     string            `json:"event"`
	Code      int               `json:"code"`
	Value     json.RawMessage   `json:"value,omitempty"`
	Exception json.RawMessage   `json:"exception,omitempty"`
	Displays  []json.RawMessage `json:"displays,omitempty"`
	Error     string            `json:"error,omitempty"`
}

// liveSandbox is the container's session sandbox.
type liveSandbox struct {
	id   int
	conn *net.UnixConn
	// answers holds what the interpreter answered and no job took yet.
	answers chan liveAnswer
	// gone is closed when the sandbox ended (its interpreter's socket
	// closed); code is then its exit status (-1: unknown).
	gone chan struct{}
	kill func()
	// root is the sandbox's first process: the job's process the warm
	// interpreter forked, bubblewrap, or the interpreter itself. Its
	// processes are root's descendants, and, in a sandbox the warm
	// interpreter made, those its init (initPid) adopted.
	root int
	// exited is closed once code is known (the sandbox's last process is
	// gone).
	exited   chan struct{}
	exitOnce sync.Once

	// rootPid is a process of the sandbox whose /proc/<pid>/root is the
	// sandbox's root directory, for live file operations; with agentRoot
	// (the Container isolation) the sandbox's root is the agent's own.
	rootPid   int
	agentRoot bool
	// initPid, when the warm interpreter made the sandbox, is its init:
	// what the session's processes leave behind is its children, and
	// counts to the session's jobs as root's tree does.
	initPid int

	mu     sync.Mutex
	code   int
	broken string // why the agent ended it, if it did
	// procs is the sandbox's process service (liveprocs.go), nil until it
	// was started.
	procs *processService
	// kernels are its JavaScript and TypeScript kernels by name
	// (jskernel.go); only the serving goroutine uses them.
	kernels map[string]*jsKernel
	// spare: it was made ahead of its session (livespare.go).
	spare bool
}

// ended says why the sandbox ended, for the next job's report.
// tree is the sandbox's processes, which its runs are charged for.
func (l *liveSandbox) tree() procTree { return procTree{root: l.root, init: l.initPid} }

func (l *liveSandbox) ended() string {
	l.mu.Lock()
	code, broken := l.code, l.broken
	l.mu.Unlock()
	switch {
	case broken != "":
		return broken
	case code < 0:
		return "the session's interpreter stopped"
	case code > 128:
		return fmt.Sprintf("the session's interpreter was killed (signal %d)", code-128)
	}
	return fmt.Sprintf("the session's interpreter exited with status %d", code)
}

func (l *liveSandbox) setCode(code int) {
	l.exitOnce.Do(func() {
		l.mu.Lock()
		l.code = code
		l.mu.Unlock()
		close(l.exited)
	})
}

// isGone reports whether the sandbox has ended.
func (l *liveSandbox) isGone() bool {
	select {
	case <-l.gone:
		return true
	default:
		return false
	}
}

// newLive gives the container a session sandbox: its spare, made ahead
// (livespare.go), when one is ready, else one made now. Either way it is
// numbered here, as the run takes it.
func (s *server) newLive() (*liveSandbox, error) {
	l := s.takeLiveSpare()
	if l == nil {
		var err error
		if l, err = s.makeLive(liveWarmWait); err != nil {
			return nil, err
		}
	}
	s.lives++
	l.id = s.lives
	return l, nil
}

// makeLive makes a session sandbox, its answers read (read): a fork of the
// warm interpreter (Namespaces), waiting up to warmWait for it to load,
// or the interpreter run directly in the container (the Container
// isolation, where the container is the sandbox). It holds nothing of any
// run: its environment is the container's, its layout the container's
// (the workspace's size), so that one made ahead is one made for the run.
// Safe beside the serving goroutine (a spare is made in the background).
func (s *server) makeLive(warmWait time.Duration) (*liveSandbox, error) {
	pair, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	ours, theirs := os.NewFile(uintptr(pair[0]), "live"), os.NewFile(uintptr(pair[1]), "live-child")
	defer theirs.Close()
	fc, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		return nil, err
	}
	l := &liveSandbox{conn: fc.(*net.UnixConn), answers: make(chan liveAnswer, 1), gone: make(chan struct{}),
		exited: make(chan struct{}), code: -1}
	switch {
	case s.cfg.Isolation == wire.Container:
		err = s.startLiveDirect(l, theirs)
	case s.warm != nil && s.warm.waitReady(warmWait):
		err = s.startLiveWarm(l, theirs)
	default:
		// No warm interpreter (turned off, or not loaded in time): the
		// same interpreter in a sandbox of bubblewrap's, without the
		// preloaded libraries.
		err = s.startLiveBwrap(l, theirs)
	}
	if err != nil {
		l.conn.Close()
		return nil, err
	}
	go l.read()
	return l, nil
}

// startLiveWarm forks the session's sandbox from the warm interpreter.
func (s *server) startLiveWarm(l *liveSandbox, sock *os.File) error {
	// Its relay to the egress proxy lives as long as it does; the socket
	// behind it is there only while a run with egress runs.
	events, err := s.warm.start(warmRequest{Kind: "session", Env: environ(nil),
		Layout: s.sandboxLayout(int(capacity(wire.Workspace)>>20), s.runDir(), false, true)}, int(sock.Fd()))
	if err != nil {
		return err
	}
	ev, ok := <-events
	switch {
	case !ok:
		return errors.New("the warm interpreter died")
	case ev.Event != "started":
		for range events { // its exit follows
		}
		return fmt.Errorf("the session's sandbox could not be set up: %s", ev.Error)
	}
	pid := ev.Pid
	l.rootPid = pid
	l.root, l.initPid = pid, ev.Init
	l.kill = func() {
		if pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL) // its init and everything in its namespace follow
		}
	}
	go func() {
		for ev := range events {
			if ev.Event == "exit" {
				l.setCode(ev.Code)
			}
		}
		l.setCode(-1) // the warm interpreter died first: unknown
	}()
	return nil
}

// startLiveBwrap runs the session's interpreter in a sandbox of
// bubblewrap's (its socket as fd 6).
func (s *server) startLiveBwrap(l *liveSandbox, sock *os.File) error {
	inited := make(chan struct{})
	p, _, err := s.launch([]string{"python3", "-c", warmSource, "kernel", "6"}, environ(nil),
		launchOpts{announce: func() { close(inited) }, extra: []*os.File{sock}})
	if err != nil {
		return fmt.Errorf("start the session's interpreter: %w", err)
	}
	select {
	case <-inited:
		// Its init is in the sandbox's namespaces: its root is the
		// sandbox's, for live file operations.
		p.mu.Lock()
		l.rootPid = p.childPID
		p.mu.Unlock()
	case <-p.statusEnd:
	}
	// Its own streams: between jobs nothing should come; what does is
	// dropped.
	for _, f := range []*os.File{p.outR, p.errR} {
		go func() {
			_, _ = io.Copy(io.Discard, f)
			f.Close()
		}()
	}
	l.root = p.cmd.Process.Pid
	l.kill = func() { _ = p.cmd.Process.Kill() } // --die-with-parent: the sandbox follows
	go func() {
		<-p.exited
		<-p.statusEnd
		e := p.result()
		code := e.Code
		if !e.Started {
			code = -1
		}
		l.setCode(code)
	}()
	return nil
}

// startLiveDirect runs the session's interpreter directly in the
// container, as the Container isolation runs every program (its OOM score
// raised by this binary's exec).
func (s *server) startLiveDirect(l *liveSandbox, sock *os.File) error {
	src := s.cfg.StateDir + "/warm.py"
	if err := os.MkdirAll(s.cfg.StateDir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(src, []byte(warmSource), 0o644); err != nil {
		return err
	}
	// The session's egress relay (a job's is `gantry-agent relay`): the
	// agent holds the proxy's address for as long as the sandbox lives.
	ln, err := net.Listen("tcp", wire.EgressProxy)
	if err != nil {
		return fmt.Errorf("the session's egress relay could not listen on %s: %w", wire.EgressProxy, err)
	}
	go serveRelay(ln)
	cmd := exec.Command(s.cfg.Self, "exec", "--", "python3", src, "kernel")
	cmd.Env = environ(nil)
	cmd.Dir = wire.Workspace
	cmd.ExtraFiles = []*os.File{sock} // fd 3
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		ln.Close()
		return fmt.Errorf("start the session's interpreter: %w", err)
	}
	l.root = cmd.Process.Pid
	l.kill = func() { _ = cmd.Process.Kill() }
	l.agentRoot = true
	go func() {
		err := cmd.Wait()
		ln.Close()
		code := 0
		if err != nil {
			code = -1
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
				if ws.Signaled() {
					code = 128 + int(ws.Signal())
				} else {
					code = ws.ExitStatus()
				}
			}
		}
		l.setCode(code)
	}()
	return nil
}

// startLive starts a stateful session's job in the container's live
// sandbox, making one first if there is none (or it ended). The sandbox's
// egress relay outlives the run; the socket behind it is the run's
// (prepareRun), closed as the run ends. A compiled program was built in a
// sandbox of its own; it runs in the session's.
func (s *server) startLive(req wire.Request) (running, error) {
	fresh := false
	ended := ""
	if s.live != nil && s.live.isGone() {
		ended = s.live.ended()
		s.live.conn.Close()
		s.setLive(nil)
	}
	if s.live == nil {
		if ended == "" {
			ended = s.liveEnded
		}
		l, err := s.newLive()
		if err != nil {
			return nil, err
		}
		fresh = true
		s.setLive(l)
	}
	l := s.live
	info := &wire.Live{ID: l.id, Fresh: fresh, Ended: ended, Spare: fresh && l.spare}
	// Its process service (live operations) runs before any job's code.
	s.startProcesses(l)
	if language, path, ok := kernelCell(req.Argv); ok {
		return s.startCell(l, req, language, path, info)
	}
	lr := liveRequest{Mode: "exec", Argv: req.Argv, Env: environ(req.Env)}
	if inProcess(req.Argv, req.Env) {
		lr = liveRequest{Mode: "cell", Path: req.Argv[1], Env: envList(req.Env)}
	}
	body, err := json.Marshal(lr)
	if err != nil {
		return nil, err
	}

	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		for _, f := range []*os.File{stdinR, stdinW, outR, outW} {
			f.Close()
		}
		return nil, err
	}
	select {
	case <-l.answers: // written by the session's own code between jobs: not an answer
	default:
	}
	msg := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	oomBefore, cpuBefore, peak := oomKills(), treeCPU(l.tree()), watchPeak(l.tree())
	s.announceStart()
	_, _, err = l.conn.WriteMsgUnix(append(msg, body...), syscall.UnixRights(int(stdinR.Fd()), int(outW.Fd()), int(errW.Fd())), nil)
	stdinR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		// The sandbox is gone (or going): this job reports what became of
		// it, the next one gets a new sandbox.
		stdinW.Close()
		outR.Close()
		errR.Close()
		peak.take()
		l.kill()
		<-l.gone
		return endedJob(wire.Exit{Started: true, Code: max(l.exitCode(), 0), OOMKills: max(oomKills()-oomBefore, 0), Live: info}), nil
	}
	s.feed(stdinW, nil, req.Stdin)
	p := &liveJob{l: l, oomBefore: oomBefore, info: info, finished: make(chan struct{})}
	go func() {
		defer close(p.finished)
		select {
		case a := <-l.answers:
			p.answer = &a
			// Everything the sandbox's processes used while the job ran
			// (what runs on in the background too), measured from
			// outside: the interpreter's own account is the session's
			// code's to forge.
			p.cpu, p.peak = treeCPU(l.tree())-cpuBefore, peak.take()
		case <-l.gone:
			peak.take()
		}
	}()
	p.done = s.relayCell(outR, errR, req.OutputCap, p.finished)
	return p, nil
}

// endedJob is a job that ended as it started, with exit.
type endedJob wire.Exit

func (j endedJob) wait() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}
func (j endedJob) exit() (wire.Exit, error) { return wire.Exit(j), nil }
func (endedJob) expire()                    {}
func (endedJob) abandon()                   {}

// endLive ends the container's live sandbox, if any, and its kept egress
// relay: its session closed, and the container goes on to its tenant's
// next one. An error means the sandbox would not end: the container must
// not serve again.
func (s *server) endLive() error {
	s.keepEgress(wire.Request{}) // closes the kept relay
	l := s.live
	if l == nil {
		return nil
	}
	l.kill()
	t := time.NewTimer(liveEndWait)
	defer t.Stop()
	select {
	case <-l.gone:
	case <-t.C:
		return fmt.Errorf("the session's sandbox did not end within %s of its kill", liveEndWait)
	}
	l.conn.Close()
	s.setLive(nil)
	s.liveEnded = ""
	return nil
}

// liveEndWait bounds how long ending a session's sandbox may take (its
// processes die with its pid namespace).
const liveEndWait = 10 * time.Second

// setLive replaces the container's live sandbox (only the serving
// goroutine does; live operations read it under liveMu).
func (s *server) setLive(l *liveSandbox) {
	s.liveMu.Lock()
	s.live = l
	s.liveMu.Unlock()
}

// exitCode waits briefly for the ended sandbox's exit status (it comes
// once the sandbox's last process is gone), -1 if it does not come.
func (l *liveSandbox) exitCode() int {
	t := time.NewTimer(2 * time.Second)
	defer t.Stop()
	select {
	case <-l.exited:
	case <-t.C:
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.code
}

// read takes the interpreter's answers until its socket ends or breaks the
// framing (then the sandbox is killed); gone closes after.
func (l *liveSandbox) read() {
	defer close(l.gone)
	r := bufio.NewReader(l.conn)
	for {
		a, err := readAnswer(r)
		if errors.Is(err, io.EOF) {
			// The interpreter is gone: the sandbox ends with it, by
			// itself. (One that lingers, its interpreter having closed
			// the socket, is ended.)
			if l.exitCode() < 0 {
				l.kill()
				l.exitCode()
			}
			return
		}
		if err != nil {
			l.mu.Lock()
			l.broken = "the session's interpreter broke its protocol, and its sandbox was ended: " + err.Error()
			l.mu.Unlock()
			l.kill()
			l.exitCode()
			return
		}
		select {
		case l.answers <- a:
		default: // one is already waiting: keep that one
		}
	}
}

// readAnswer reads one answer from a session's interpreter.
func readAnswer(r *bufio.Reader) (liveAnswer, error) {
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return liveAnswer{}, err
	}
	n := binary.BigEndian.Uint32(head[:])
	if n > maxLiveAnswer {
		return liveAnswer{}, fmt.Errorf("an answer of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return liveAnswer{}, fmt.Errorf("a cut answer: %w", err)
	}
	var a liveAnswer
	if err := json.Unmarshal(body, &a); err != nil || a.Event != "done" {
		return liveAnswer{}, errors.New("a malformed answer")
	}
	return a, nil
}

// liveJob is a job running in the session's sandbox.
type liveJob struct {
	l         *liveSandbox
	finished  chan struct{} // the answer came, or the sandbox ended
	answer    *liveAnswer   // set before finished closes, if one came
	done      <-chan struct{}
	oomBefore int
	info      *wire.Live
	cpu       time.Duration // set with answer
	peak      *int64        // set with answer (KiB; nil: not measured)

	mu       sync.Mutex
	timedOut bool
}

func (j *liveJob) wait() <-chan struct{} { return j.done }
func (j *liveJob) abandon()              { j.l.kill() }

// expire ends the session's sandbox: a cell cannot be stopped alone.
func (j *liveJob) expire() {
	j.mu.Lock()
	j.timedOut = true
	j.mu.Unlock()
	j.l.kill()
}

func (j *liveJob) exit() (wire.Exit, error) {
	<-j.finished
	j.mu.Lock()
	e := wire.Exit{Started: true, Live: j.info, TimedOut: j.timedOut}
	j.mu.Unlock()
	if j.answer != nil {
		e.Code, e.Value, e.Exception, e.Displays = j.answer.Code, j.answer.Value, j.answer.Exception, j.answer.Displays
		e.Usage = &wire.Usage{CPUTimeUS: max(j.cpu.Microseconds(), 0), PeakMemoryKB: j.peak}
	} else {
		// The sandbox ended under the job: its exit status is the job's.
		e.Code = j.l.exitCode()
		if e.Code <= 0 {
			e.Code = 255
		}
	}
	if e.Code > 128 && e.Code < 128+65 {
		e.Signal = e.Code - 128
	}
	e.OOMKills = max(oomKills()-j.oomBefore, 0)
	if e.OOMKills > 0 && !j.l.isGone() {
		// A container that ran out of memory may hold a half-broken
		// state: the runner retires it, and the sandbox goes first.
		j.l.kill()
	}
	return e, nil
}

// relayCell sends a session job's output as frames, up to cap bytes a
// stream, until the job ended (ended: its answer came, or the sandbox is
// gone): then it
// takes what the pipes hold at that moment and stops. Processes the job
// left running may keep writing to them: that is read and dropped (so they
// neither block nor die of a broken pipe) until they close them.
func (s *server) relayCell(outR, errR *os.File, cap int, ended <-chan struct{}) <-chan struct{} {
	if cap <= 0 {
		cap = 1 << 20
	}
	var relays sync.WaitGroup
	relays.Add(2)
	go func() { defer relays.Done(); s.copyCell(wire.KindStdout, outR, cap, ended) }()
	go func() { defer relays.Done(); s.copyCell(wire.KindStderr, errR, cap, ended) }()
	done := make(chan struct{})
	go func() { relays.Wait(); close(done) }()
	return done
}

// copyCell is copyOut for a session job: it returns once ended is closed
// and what the pipe held then was sent, leaving a reader that drops the
// rest.
func (s *server) copyCell(kind wire.Kind, f *os.File, cap int, ended <-chan struct{}) {
	sent := 0
	drainUntil(f, ended, func(data []byte) {
		// One byte past the cap tells the runner output was cut.
		if room := cap + 1 - sent; room > 0 && len(data) > 0 {
			take := min(room, len(data))
			_ = s.fw.Frame(kind, data[:take])
			sent += take
		}
	})
}

// drainUntil hands forward what f yields, until f ends or ended is
// closed: then it takes what the pipe holds at that moment without
// waiting for more, and leaves a reader that drops the rest (so that
// processes still writing neither block nor die of a broken pipe) until
// they close it. forward may keep nothing of its argument.
func drainUntil(f *os.File, ended <-chan struct{}, forward func([]byte)) {
	buf := make([]byte, wire.Chunk)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-ended:
			_ = f.SetReadDeadline(time.Now()) // wakes a blocked read
		case <-stop:
		}
	}()
	for {
		n, err := f.Read(buf)
		if n > 0 {
			forward(buf[:n])
		}
		if err == nil {
			continue
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			f.Close() // the end of the stream: nobody holds it any more
			return
		}
		break
	}
	// It ended: what was written is in the pipe now. Take it without
	// waiting for more.
	_ = f.SetReadDeadline(time.Time{})
	if rc, err := f.SyscallConn(); err == nil {
		for {
			n := 0
			if rc.Read(func(fd uintptr) bool { n, _ = syscall.Read(int(fd), buf); return true }) != nil || n <= 0 {
				break
			}
			forward(buf[:n])
		}
	}
	go func() {
		_, _ = io.Copy(io.Discard, f)
		f.Close()
	}()
}

// envList is a job's own environment as "K=V" strings, in order.
func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
