package agent

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gantryhq/gantry/agent/wire"
)

// The warm interpreter (warm.py): one Python per container that has
// imported the data libraries (numpy, pandas, matplotlib by default) and
// forks every Python job into a sandbox it builds itself, as strong as
// bubblewrap's (see warm.py for each step), so that a job costs neither an
// interpreter's start nor its imports. It is started with the agent, as the
// agent's child, and never runs a job's code; the agent speaks to it on a
// SOCK_SEQPACKET socket: a request (JSON, with the job's stdin, stdout and
// stderr attached) per job, events back (started, failed, exit). If it dies
// or misbehaves the container is retired: the agent refuses further runs.

//go:embed warm.py
var warmMain string

// warmSource is the warm interpreter's program: the shared program
// runner, then its own part.
var warmSource = pyrunSource + "\n" + warmMain

// maxWarmSpec bounds a job's description (argv and environment): it must
// fit in a pipe's buffer, written before the job's process reads it. A
// larger job runs in a sandbox of bubblewrap's.
const maxWarmSpec = 60 << 10

// warmEvent is what the warm interpreter reports.
type warmEvent struct {
	ID int64 `json:"id"`
	// ready, failed (the sandbox could not be made, or the interpreter
	// could not load), started, exit, bad (the interpreter is unfit).
	Event string `json:"event"`
	Code  int    `json:"code"`
	Error string `json:"error"`
	// started: the sandbox's job process and its init, as the agent's
	// pid namespace numbers them (the job process is in the sandbox's
	// mount namespace; killing it ends the sandbox: the interpreter then
	// kills its init, and the kernel everything else in it).
	Pid     int      `json:"pid"`
	Init    int      `json:"init"`
	Modules []string `json:"modules"`
	// ready: the top-level modules the interpreter has loaded.
	Roots []string `json:"roots"`
	// exit: what the sandbox used after it was set up (its processes'
	// CPU; the peak memory its processes added to the interpreter's own).
	CPUUS  int64 `json:"cpu_us"`
	PeakKB int64 `json:"peak_kb"`
}

// warmRequest asks the warm interpreter for a sandbox: a job's (kind
// "job", with the job's stdin, stdout and stderr, and a pipe holding its
// warmJobSpec) or a stateful session's (kind "session", with the socket
// its interpreter serves jobs on). It holds nothing of the job itself:
// what the interpreter reads stays in what it forks for later jobs.
type warmRequest struct {
	ID   int64  `json:"id"`
	Kind string `json:"kind"`
	// Layout is the sandbox's (layout.go), which the interpreter carries
	// out step by step.
	Layout layout `json:"layout"`
	// Env is the image's environment, for a session's interpreter.
	Env []string `json:"env,omitempty"`
}

// warmJobSpec is what a forked job runs, read only by its own process.
type warmJobSpec struct {
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
}

type warm struct {
	conn *net.UnixConn
	cmd  *exec.Cmd
	// ready is closed once the interpreter loaded its libraries, or failed
	// to (err says why).
	ready chan struct{}
	// dead is closed when its socket ended: it is gone, and err says why.
	dead chan struct{}

	mu      sync.Mutex
	err     error
	roots   map[string]bool // once ready: the top-level modules loaded
	nextID  int64
	waiting map[int64]chan warmEvent
	paused  time.Duration // its loading's pauses so far (pauseLoading)
}

// warmFiles writes the warm interpreters' program and the job seccomp
// filter into stateDir, once for every interpreter the agent starts, and
// returns their paths.
func warmFiles(stateDir string, filter []byte) (src, bpf string, err error) {
	src, bpf = filepath.Join(stateDir, "warm.py"), filepath.Join(stateDir, "job.bpf")
	if err := os.WriteFile(src, []byte(warmSource), 0o644); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(bpf, filter, 0o644); err != nil {
		return "", "", err
	}
	return src, bpf, nil
}

// startWarm starts a warm interpreter (the program src, the filter in
// bpf: warmFiles) with the modules to import. It returns at once; the
// interpreter loads in the background.
func startWarm(src, bpf string, probe layout, modules []string) (*warm, error) {
	probeJSON, err := json.Marshal(probe)
	if err != nil {
		return nil, err
	}
	pair, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("warm interpreter socket: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(pair[0]), "warm"), os.NewFile(uintptr(pair[1]), "warm-child")
	defer theirs.Close()
	fc, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		return nil, fmt.Errorf("warm interpreter socket: %w", err)
	}
	w := &warm{conn: fc.(*net.UnixConn), ready: make(chan struct{}), dead: make(chan struct{}), waiting: map[int64]chan warmEvent{}}
	w.cmd = exec.Command("python3", src)
	// No thread may run in the interpreter when it forks: BLAS libraries
	// start theirs only when asked for more than one.
	w.cmd.Env = append(environ(nil), "GANTRY_WARM_FILTER="+bpf, "GANTRY_WARM_PRELOAD="+strings.Join(modules, ","),
		"GANTRY_WARM_PROBE="+string(probeJSON),
		"OPENBLAS_NUM_THREADS=1", "OMP_NUM_THREADS=1", "MKL_NUM_THREADS=1")
	w.cmd.Dir = wire.Workspace
	w.cmd.ExtraFiles = []*os.File{theirs} // fd 3
	w.cmd.Stdout, w.cmd.Stderr = os.Stderr, os.Stderr
	// It dies with the agent; a group of its own keeps a job's kill of
	// its group from reaching the agent.
	w.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := w.cmd.Start(); err != nil {
		w.conn.Close()
		return nil, fmt.Errorf("start the warm interpreter: %w", err)
	}
	go w.read()
	go func() { _ = w.cmd.Wait() }()
	return w, nil
}

// read dispatches the interpreter's events until its socket ends.
func (w *warm) read() {
	buf := make([]byte, 64<<10)
	defer close(w.dead)
	for {
		// No room for descriptors: any sent are closed by the kernel.
		n, _, flags, _, err := w.conn.ReadMsgUnix(buf, nil)
		if err != nil || n == 0 {
			w.fail(errors.New("the warm interpreter exited"))
			return
		}
		var ev warmEvent
		if flags&syscall.MSG_TRUNC != 0 || json.Unmarshal(buf[:n], &ev) != nil {
			w.fail(errors.New("the warm interpreter sent a malformed event"))
			return
		}
		switch ev.Event {
		case "ready":
			w.mu.Lock()
			w.roots = map[string]bool{}
			for _, r := range ev.Roots {
				w.roots[r] = true
			}
			w.mu.Unlock()
			close(w.ready)
			continue
		case "failed":
			if ev.ID == 0 { // loading the libraries, or its probe sandbox, failed
				w.fail(fmt.Errorf("the warm interpreter could not start: %s", ev.Error))
				return
			}
		case "bad":
			w.fail(fmt.Errorf("the warm interpreter is unfit: %s", ev.Error))
			return
		}
		w.mu.Lock()
		ch := w.waiting[ev.ID]
		if ev.Event == "exit" {
			delete(w.waiting, ev.ID)
		}
		w.mu.Unlock()
		if ch != nil {
			ch <- ev // buffered for every event of one request
		}
	}
}

// fail records why the interpreter cannot serve and stops it.
func (w *warm) fail(err error) {
	w.mu.Lock()
	if w.err == nil {
		w.err = err
	}
	waiting := w.waiting
	w.waiting = map[int64]chan warmEvent{}
	w.mu.Unlock()
	for _, ch := range waiting {
		close(ch)
	}
	select {
	case <-w.ready:
	default:
		close(w.ready)
	}
	w.conn.Close()
	if w.cmd.Process != nil {
		_ = w.cmd.Process.Kill()
	}
}

// Err is why the interpreter cannot serve, or nil.
func (w *warm) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// liveWarmWait bounds how long a stateful session's first job waits for
// the warm interpreter of a container just made (the runner waits for it
// before such a job, and for the pool's containers) before the session's
// interpreter starts in a sandbox of bubblewrap's: the wait counts against
// the job's timeout. A plain job never waits: one that finds the
// interpreter still loading (a container made on demand, in its first
// second or so) runs in a sandbox of bubblewrap's, as without it.
const liveWarmWait = 3 * time.Second

// readyWarmWait bounds the warm op's wait (the runner's readiness check,
// the pool's containers, a stateful session's).
const readyWarmWait = time.Minute

// waitReady waits up to d (0: not at all) for the interpreter to load,
// and reports whether it serves.
func (w *warm) waitReady(d time.Duration) bool {
	select {
	case <-w.ready:
		return w.Err() == nil
	default:
		if d <= 0 {
			return false
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-w.ready:
		return w.Err() == nil
	case <-t.C:
		return false
	}
}

// loadPauseBudget bounds how long, in all, an interpreter's loading is
// paused for jobs running beside it: a stream of jobs back to back (whose
// gaps are milliseconds) must not keep it from ever loading. Loading
// takes 0.5-1 s of CPU.
const loadPauseBudget = 2 * time.Second

// pauseLoading stops the interpreter while it is still loading, so that a
// job running beside it (a container made on demand runs its first jobs at
// once) has the container's CPUs to itself, for at most what is left of
// loadPauseBudget; the function returned resumes it. Loaded, it is left
// alone: it then only forks.
func (w *warm) pauseLoading() (resume func()) {
	select {
	case <-w.ready:
		return func() {}
	default:
	}
	w.mu.Lock()
	left := loadPauseBudget - w.paused
	w.mu.Unlock()
	// Its process group: the process the agent started and the
	// interpreter it forked into its own namespaces (warm.py,
	// _own_namespaces); sandboxes' processes have groups of their own.
	group := -w.cmd.Process.Pid
	if left <= 0 || syscall.Kill(group, syscall.SIGSTOP) != nil {
		return func() {}
	}
	start := time.Now()
	var once sync.Once
	cont := func() {
		once.Do(func() {
			_ = syscall.Kill(group, syscall.SIGCONT)
			w.mu.Lock()
			w.paused += time.Since(start)
			w.mu.Unlock()
		})
	}
	budget := time.AfterFunc(left, cont)
	return func() {
		budget.Stop()
		cont()
	}
}

// start asks for a sandbox and returns the channel its events come on,
// closed if the interpreter dies first. fds are passed to it (and may be
// closed by the caller after).
func (w *warm) start(req warmRequest, fds ...int) (<-chan warmEvent, error) {
	w.mu.Lock()
	if w.err != nil {
		w.mu.Unlock()
		return nil, w.err
	}
	w.nextID++
	req.ID = w.nextID
	ch := make(chan warmEvent, 4)
	w.waiting[req.ID] = ch
	w.mu.Unlock()
	msg, err := json.Marshal(req)
	if err == nil {
		_, _, err = w.conn.WriteMsgUnix(msg, syscall.UnixRights(fds...), nil)
	}
	if err != nil {
		w.mu.Lock()
		delete(w.waiting, req.ID)
		w.mu.Unlock()
		return nil, err
	}
	return ch, nil
}

var errWarmTooLarge = errors.New("the job's environment is too large for the warm interpreter")

// warmEligible reports whether a job may run in a fork of the warm
// interpreter: it runs a Python program file as the spare's interpreter
// would run it in process (inProcess), and its environment sets nothing the
// preloaded libraries read when they were imported (their thread counts,
// matplotlib's backend).
func warmEligible(argv []string, env map[string]string) bool {
	if !inProcess(argv, env) {
		return false
	}
	for k := range env {
		for _, p := range []string{"MPLBACKEND", "OPENBLAS_", "OMP_", "MKL_", "NUMEXPR_", "NPY_", "NUMPY_", "PANDAS_",
			"KMP_", "GOTO_", "BLIS_", "VECLIB_"} {
			if strings.HasPrefix(k, p) {
				return false
			}
		}
	}
	return true
}

// warmJob is a job in a sandbox the warm interpreter forked: the events of
// its request, turned into its exit.
type warmJob struct {
	outR, errR *os.File
	exited     chan struct{} // the sandbox ended, or the interpreter died
	done       <-chan struct{}
	oomBefore  int

	mu       sync.Mutex
	started  bool
	pid      int // the sandbox's forked child, once started
	failure  string
	code     int
	usage    *wire.Usage
	timedOut bool // the agent killed it at its deadline
	lost     bool // the interpreter died while the job ran
}

// watch turns the request's events into the job's state.
func (j *warmJob) watch(events <-chan warmEvent) {
	defer close(j.exited)
	for ev := range events {
		j.mu.Lock()
		switch ev.Event {
		case "started":
			j.started, j.pid = true, ev.Pid
		case "failed":
			j.failure = ev.Error
		case "exit":
			j.code = ev.Code
			j.usage = &wire.Usage{CPUTimeUS: ev.CPUUS, PeakMemoryKB: &ev.PeakKB}
			j.mu.Unlock()
			return
		}
		j.mu.Unlock()
	}
	j.mu.Lock()
	j.lost = true
	j.mu.Unlock()
}

func (j *warmJob) wait() <-chan struct{} { return j.done }

// abandon is not needed: the job's sandbox dies with the interpreter,
// which dies with the agent.
func (j *warmJob) abandon() {}

// expire kills the job's program (as process.stop does): the warm
// interpreter then ends its sandbox, and reaps it into the account.
func (j *warmJob) expire() {
	j.mu.Lock()
	j.timedOut = true
	pid := j.pid
	j.mu.Unlock()
	if pid <= 0 {
		return // not started: the runner's own deadline holds
	}
	_ = syscall.Kill(pid, syscall.SIGKILL) // the init and everything in its namespace follow
}

func (j *warmJob) exit() (wire.Exit, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	e := wire.Exit{OOMKills: max(oomKills()-j.oomBefore, 0), TimedOut: j.timedOut}
	switch {
	case j.lost && j.started:
		// What the program did cannot be told from a dead interpreter:
		// the container goes, and the runner asks Docker what happened.
		return e, errWarmLost
	case j.lost:
		e.Message = "the warm interpreter died before the job's sandbox was made"
	case !j.started:
		e.Message = "the sandbox could not be set up: " + j.failure
	default:
		e.Started, e.Code, e.Usage = true, j.code, j.usage
		if e.Code > 128 && e.Code < 128+65 {
			e.Signal = e.Code - 128
		}
	}
	return e, nil
}

// errWarmLost ends the agent: its warm interpreter died under a job.
var errWarmLost = errors.New("the warm interpreter died while a job ran")

// runWarm starts the job in a fork of w (the warm interpreter, or the
// lean one), relaying its output.
func (s *server) runWarm(w *warm, req wire.Request, env []string) (*warmJob, error) {
	layout := s.sandboxLayout(int(capacity(wire.Workspace)>>20), s.runDir(), false, req.Egress)
	return s.startWarmJob(req, env, func(fds ...int) (<-chan warmEvent, error) {
		return w.start(warmRequest{Kind: "job", Layout: layout}, fds...)
	})
}

// startWarmJob starts a job in a sandbox of the warm interpreter's: send
// hands the job's stdin, stdout, stderr and description (a pipe holding
// its warmJobSpec) to the job's process (through the interpreter, or to a
// spare's job process directly) and returns the channel the sandbox's
// events come on. The program can act once send returned.
func (s *server) startWarmJob(req wire.Request, env []string, send func(fds ...int) (<-chan warmEvent, error)) (*warmJob, error) {
	spec, err := json.Marshal(warmJobSpec{Argv: req.Argv, Env: env})
	if err != nil {
		return nil, err
	}
	if len(spec) > maxWarmSpec {
		return nil, errWarmTooLarge
	}
	var files pipes
	closeAll, pipe := files.closeAll, files.pipe
	stdinR, stdinW, err := pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	errR, errW, err := pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	specR, specW, err := pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	if _, err := specW.Write(spec); err != nil { // within the pipe's buffer
		closeAll()
		return nil, err
	}
	specW.Close()
	j := &warmJob{outR: outR, errR: errR, exited: make(chan struct{}), oomBefore: oomKills()}
	events, err := send(int(stdinR.Fd()), int(outW.Fd()), int(errW.Fd()), int(specR.Fd()))
	// The job's process has its own copies now (or failed).
	for _, f := range []*os.File{stdinR, outW, errW, specR} {
		f.Close()
	}
	if err != nil {
		closeAll()
		return nil, err
	}
	s.announceStart() // the program can act once its process has its streams
	go j.watch(events)
	s.feed(stdinW, nil, req.Stdin)
	j.done = s.relay(outR, errR, req.OutputCap, j.exited, nil, false)
	return j, nil
}
