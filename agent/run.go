package agent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// drainGrace bounds how long output is read after the program's main
// process exited. Under Namespaces every process of the sandbox is dead by
// then and the pipes end at once; the bound is for what cannot be killed.
const drainGrace = 2 * time.Second

// errNotBuilt ends a run whose compile step failed: its KindCompiled frame
// said so, and nothing follows it.
var errNotBuilt = errors.New("the compile step failed")

// run runs one program and reports its exit and the workspace's files.
func (s *server) run(req Request) error {
	exit, err := s.runProgram(req)
	if errors.Is(err, ErrRunnerGone) || errors.Is(err, errWarmLost) {
		return err
	}
	if errors.Is(err, errNotBuilt) {
		return nil
	}
	if err != nil {
		exit = Exit{Message: err.Error()}
	}
	if err := s.fw.json(KindExit, exit); err != nil {
		return err
	}
	var list []byte
	if exit.Started {
		list = listing(Workspace)
	}
	if len(list) > MaxFrame {
		list = list[:0] // a workspace of millions of files: nothing to collect
	}
	return s.fw.frame(KindListing, list)
}

// running is a program in its sandbox, from its start to the end of its
// output.
type running interface {
	// wait is closed when the program ended and its output was read.
	wait() <-chan struct{}
	// exit reports how it ended (after wait); an error means the agent can
	// no longer tell, and must end.
	exit() (Exit, error)
	// expire kills the program at its timeout, keeping what it used
	// accounted; exit then reports it (Exit.TimedOut).
	expire()
	// abandon kills the program: the runner is gone.
	abandon()
}

// runProgram prepares the run's files and runs the program. An error means
// the program did not start.
func (s *server) runProgram(req Request) (Exit, error) {
	if len(req.Argv) == 0 {
		return Exit{}, errors.New("run request without argv")
	}
	if err := s.unfit(); err != nil {
		return Exit{}, err
	}
	if req.Stateful {
		return s.runLive(req)
	}
	// A Python job forks from the warm interpreter once it has loaded;
	// until then (a container made on demand, in its first second or so)
	// it runs as without one, rather than wait. An egress job runs behind
	// its relay, in a sandbox of its own.
	warm := s.warm != nil && !req.Egress && warmEligible(req.Argv, req.Env) && s.warm.waitReady(0)
	var sp *spare
	if !warm && !req.Egress {
		sp = s.takeSpare()
		if s.warm != nil {
			defer s.warm.pauseLoading()()
		}
	}
	if req.Egress {
		req.Argv = append([]string{s.cfg.Self, "relay", "--"}, req.Argv...)
	}
	if req.Fresh {
		if err := emptyDir(Workspace); err != nil {
			sp.discard()
			return Exit{}, fmt.Errorf("empty the workspace: %w", err)
		}
	}
	br, eg, cleanup, err := s.prepareRun(req)
	if err != nil {
		sp.discard()
		return Exit{}, err
	}
	defer cleanup()

	env := environ(req.Env)
	if err := s.build(req, env); err != nil {
		sp.discard()
		return Exit{}, err
	}
	var p running
	if warm {
		p, err = s.runWarm(req, env)
		if errors.Is(err, errWarmTooLarge) {
			p, err = s.handOver(nil, req, env) // a sandbox of its own
		}
	} else {
		p, err = s.handOver(sp, req, env)
	}
	if err != nil {
		return Exit{}, err
	}
	// The next job's sandbox starts as soon as this one's program runs
	// (under Container the container serves this one job): a Python one
	// only when the warm interpreter does not serve Python jobs.
	if s.cfg.Isolation == Namespaces {
		s.spawnSpares(isPython(req.Argv) && s.warm == nil)
	}
	return s.await(p, br, eg, req.TimeoutMS)
}

// prepareRun writes the run's program files and opens the code-mode
// bridge and the egress socket; cleanup closes them (every egress
// connection ended, nothing of them sent after) and empties the program
// directory.
func (s *server) prepareRun(req Request) (*bridge, *egressRelay, func(), error) {
	runDir := s.runDir()
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return nil, nil, nil, err
	}
	if err := emptyDir(runDir); err != nil {
		return nil, nil, nil, err
	}
	if err := placeFiles(req.Files, runDir); err != nil {
		return nil, nil, nil, err
	}
	var br *bridge
	var eg *egressRelay
	closeAll := func() {
		if br != nil {
			br.close()
		}
		if eg != nil {
			eg.close()
		}
		_ = emptyDir(runDir) // the next run empties it again
	}
	if req.Bridge {
		var err error
		if br, err = openBridge(filepath.Join(runDir, filepath.Base(BridgeSocket)), s.fw); err != nil {
			return nil, nil, nil, err
		}
	}
	if req.Egress {
		var err error
		if eg, err = openEgress(filepath.Join(runDir, filepath.Base(EgressSocket)), s.fw); err != nil {
			closeAll()
			return nil, nil, nil, fmt.Errorf("egress socket: %w", err)
		}
	}
	return br, eg, closeAll, nil
}

// build runs the request's compile step, if it has one (after
// prepareRun): errNotBuilt when the program did not compile.
func (s *server) build(req Request, env []string) error {
	if req.Compile == nil {
		return nil
	}
	built, err := s.compile(*req.Compile, env, s.runDir())
	if err == nil && !built {
		err = errNotBuilt
	}
	return err
}

// await relays the runner's bridge replies (br may be nil) and egress
// streams (eg may be nil) until the program ends, and kills it timeoutMS
// after now (0: never).
func (s *server) await(p running, br *bridge, eg *egressRelay, timeoutMS int) (Exit, error) {
	var deadline <-chan time.Time
	if timeoutMS > 0 {
		t := time.NewTimer(time.Duration(timeoutMS) * time.Millisecond)
		defer t.Stop()
		deadline = t.C
	}
	for {
		select {
		case f, ok := <-s.frames:
			if !ok {
				p.abandon()
				return Exit{}, ErrRunnerGone
			}
			if isNetFrame(f.kind) && eg != nil {
				eg.handle(f.kind, f.payload)
				continue
			}
			if f.kind != KindRequest {
				continue
			}
			var r Request
			if json.Unmarshal(f.payload, &r) == nil && r.Op == "reply" && br != nil {
				br.reply(r.ID, r.Body)
			}
		case <-deadline:
			deadline = nil
			p.expire()
		case <-p.wait():
			return p.exit()
		}
	}
}

// compile runs a compile step into runDir's build directory and reports
// it (KindCompileOutput, KindCompiled); built says whether the program
// may run. An error means the step did not start, or the runner is gone.
func (s *server) compile(c Compile, env []string, runDir string) (built bool, err error) {
	if len(c.Argv) == 0 {
		return false, errors.New("compile step without argv")
	}
	if err := os.MkdirAll(buildDir(runDir), 0o755); err != nil {
		return false, err
	}
	// A stateful session's live sandbox shares the container under the
	// Container isolation.
	keep := s.live != nil && !s.live.isGone()
	p, _, err := s.launch(c.Argv, env, launchOpts{announce: s.announceStart, build: true, keep: keep})
	if err != nil {
		return false, err
	}
	p.relayMerged(s, KindCompileOutput, c.OutputCap)
	exit, err := s.await(p, nil, nil, c.TimeoutMS)
	if err != nil {
		return false, err
	}
	if err := s.fw.json(KindCompiled, exit); err != nil {
		return false, err
	}
	return exit.Succeeded(), nil
}

// handOver starts the program: in the spare sandbox when there is one that
// is alive (it receives the job on stdin), else in a sandbox of its own.
func (s *server) handOver(sp *spare, req Request, env []string) (*process, error) {
	if sp != nil {
		if p, ok := sp.take(s, req, env); ok {
			return p, nil
		}
	}
	p, stdin, err := s.launch(req.Argv, env, launchOpts{stdin: true, announce: s.announceStart})
	if err != nil {
		return nil, err
	}
	s.feed(stdin, nil, req.Stdin)
	p.relay(s, req.OutputCap, false)
	return p, nil
}

// announceStart tells the runner the program may act from now on: what
// goes wrong after this may be the program's doing.
func (s *server) announceStart() { _ = s.fw.frame(KindStarted, nil) }

// placeFiles writes the run's files: the workspace's, and the program's
// own under runDir (which the program sees as ProgramDir).
func placeFiles(files []File, runDir string) error {
	ws, err := os.OpenRoot(Workspace)
	if err != nil {
		return err
	}
	defer ws.Close()
	prog, err := os.OpenRoot(runDir)
	if err != nil {
		return err
	}
	defer prog.Close()
	for _, f := range files {
		root, rel := ws, ""
		if r, ok := strings.CutPrefix(f.Path, Workspace+"/"); ok {
			rel = r
		} else if r, ok := strings.CutPrefix(f.Path, ProgramDir+"/"); ok {
			root, rel = prog, r
		} else {
			return fmt.Errorf("file %q is outside %s and %s", f.Path, Workspace, ProgramDir)
		}
		clean, ok := cleanRel(rel)
		if !ok {
			return fmt.Errorf("file %q: bad path", f.Path)
		}
		if err := placeFile(root, clean, f.Data); err != nil {
			return fmt.Errorf("write %s: %w", f.Path, err)
		}
	}
	// out/, where artifacts are collected from by default, is there when
	// every job starts (plt.savefig("out/plot.png") must just work); in a
	// session whose job left something else named out, that stays.
	if err := ws.Mkdir(OutDir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("make %s/%s: %w", Workspace, OutDir, err)
	}
	return nil
}

// OutDir is the workspace directory every job finds (empty in a fresh
// workspace), from which artifacts are collected by default.
const OutDir = "out"

// process is a program's own sandbox (bubblewrap's, or the container
// under the Container isolation), from its launch to the end of its
// output.
type process struct {
	cmd       *exec.Cmd
	isolation Isolation
	exited    chan struct{} // closed when the sandbox's main process ended
	reaped    chan struct{} // closed after exited, when its usage is known (reapInit)
	done      chan struct{} // closed when, also, its output was read (after relay)
	outR      *os.File
	errR      *os.File
	statusEnd chan struct{} // closed when bwrap's status stream ended
	oomBefore int
	// announce, when set, tells the runner the program may act from now
	// on (KindStarted); it is called before the program is let go.
	announce func()

	mu       sync.Mutex
	code     int // Namespaces: the exit status bwrap reported
	hasCode  bool
	childPID int  // Namespaces: the sandbox's init, in the agent's pid namespace
	timedOut bool // the agent killed it at its deadline
	// initUsage is the sandbox's init's usage, when the agent reaped it,
	// and reapWait how much waiting for it added to the run, after the
	// sandbox's output ended.
	initUsage *syscall.Rusage
	initSelf  time.Duration // the init's own CPU time, left out of its usage
	reapWait  time.Duration
	setupErr  []byte // the first bytes of stderr, which name a setup failure
	waitErr   error
}

// launchOpts say how to launch a sandbox.
type launchOpts struct {
	// stdin: launch returns the write end of the program's stdin, else the
	// program reads /dev/null.
	stdin bool
	// announce (if not nil) is called just before argv can run.
	announce func()
	// build makes a compile step's sandbox (see sandboxArgs), whose
	// stdout and stderr are one pipe (relayMerged).
	build bool
	// extra files are passed to the program from fd 6 on (Namespaces).
	extra []*os.File
	// keep (Container) leaves the container's other processes alone when
	// the program ends: they are a stateful session's.
	keep bool
}

// pipes are the descriptors a launch makes, every one closed if it fails
// (pointer methods: the method values see later additions).
type pipes []*os.File

func (p *pipes) pipe() (*os.File, *os.File, error) {
	r, w, err := os.Pipe()
	if err == nil {
		*p = append(*p, r, w)
	}
	return r, w, err
}

func (p *pipes) add(f *os.File) { *p = append(*p, f) }

func (p *pipes) closeAll() {
	for _, f := range *p {
		f.Close()
	}
}

// launch starts argv in a new sandbox (Namespaces: bubblewrap; Container:
// directly, through this binary's exec, which raises the OOM score first).
// Its output is not read until relay.
func (s *server) launch(argv, env []string, o launchOpts) (*process, *os.File, error) {
	withStdin, announce := o.stdin, o.announce
	p := &process{isolation: s.cfg.Isolation, exited: make(chan struct{}), reaped: make(chan struct{}), done: make(chan struct{}),
		statusEnd: make(chan struct{}), oomBefore: oomKills(), announce: announce}
	var files pipes // ours, closed when launch fails
	closeAll, pipe := files.closeAll, files.pipe
	var status, block *os.File // Namespaces: bwrap's status and block pipes, our ends
	var childEnds []*os.File   // closed once the child has them
	if s.cfg.Isolation == Namespaces {
		args := append(s.sandboxArgs(int(capacity(Workspace)>>20), s.runDir(), o.build), "--json-status-fd", "3", "--block-fd", "4", "--seccomp", "5", "--")
		p.cmd = exec.Command(s.cfg.Bwrap, append(args, argv...)...)
		statusR, statusW, err := pipe()
		if err != nil {
			return nil, nil, err
		}
		blockR, blockW, err := pipe()
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		filterR, err := s.filterPipe()
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		files.add(filterR)
		p.cmd.ExtraFiles = append([]*os.File{statusW, blockR, filterR}, o.extra...) // extra from fd 6
		childEnds = append(childEnds, statusW, blockR, filterR)
		status, block = statusR, blockW
	} else {
		p.cmd = exec.Command(s.cfg.Self, append([]string{"exec", "--"}, argv...)...)
	}
	p.cmd.Env = env
	p.cmd.Dir = Workspace
	// The sandbox dies with the agent; it has a process group of its own,
	// so that a program killing its group does not kill the agent.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}

	outR, outW, err := pipe()
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	p.cmd.Stdout, p.cmd.Stderr = outW, outW
	childEnds = append(childEnds, outW)
	var errR *os.File
	if !o.build {
		var errW *os.File
		if errR, errW, err = pipe(); err != nil {
			closeAll()
			return nil, nil, err
		}
		p.cmd.Stderr = errW
		childEnds = append(childEnds, errW)
	}
	var stdinW *os.File
	if withStdin {
		var stdinR *os.File
		if stdinR, stdinW, err = pipe(); err != nil {
			closeAll()
			return nil, nil, err
		}
		p.cmd.Stdin = stdinR
		childEnds = append(childEnds, stdinR)
	}
	if status == nil && announce != nil {
		announce() // Container: the program runs as soon as it starts
	}
	if err := p.cmd.Start(); err != nil {
		closeAll()
		return nil, nil, fmt.Errorf("start the sandbox: %w", err)
	}
	for _, f := range childEnds {
		f.Close()
	}
	p.outR, p.errR = outR, errR
	if status != nil {
		go p.watchStatus(status, block)
	} else {
		close(p.statusEnd)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		if p.isolation == Container && !o.keep {
			// The program's leftovers share the container with the agent:
			// kill every process the agent may signal (all but itself and
			// the container's init).
			_ = syscall.Kill(-1, syscall.SIGKILL)
		}
		close(p.exited)
		if p.isolation == Namespaces {
			<-p.statusEnd
			p.reapInit()
		}
		close(p.reaped)
	}()
	return p, stdinW, nil
}

// watchStatus reads bwrap's status lines: once the sandbox's init exists it
// raises its OOM score (the kernel then kills the program, never the
// agent, when the container runs out of memory) and lets it go on; at the
// end bwrap reports the program's exit status, which it only does when the
// program was started.
func (p *process) watchStatus(status, block *os.File) {
	defer close(p.statusEnd)
	defer status.Close()
	defer block.Close()
	sc := bufio.NewScanner(status)
	for sc.Scan() {
		var st struct {
			ChildPID *int `json:"child-pid"`
			ExitCode *int `json:"exit-code"`
		}
		if json.Unmarshal(sc.Bytes(), &st) != nil {
			continue
		}
		if st.ChildPID != nil {
			p.mu.Lock()
			p.childPID = *st.ChildPID
			p.mu.Unlock()
			_ = os.WriteFile("/proc/"+strconv.Itoa(*st.ChildPID)+"/oom_score_adj", []byte("1000"), 0)
			if p.announce != nil {
				p.announce() // before the program can act
			}
			_, _ = block.Write([]byte{0})
			block.Close()
		}
		if st.ExitCode != nil {
			p.mu.Lock()
			p.code, p.hasCode = *st.ExitCode, true
			p.mu.Unlock()
		}
	}
}

// relay starts sending the program's output as frames, up to cap bytes a
// stream; done closes when the program ended and its output was read.
// With skipReady, what the stderr pipe holds up to the ready line of a
// spare's waiting process is not the program's.
func (p *process) relay(s *server, cap int, skipReady bool) {
	drained := s.relay(p.outR, p.errR, cap, p.ended(), p, skipReady)
	go p.finish(drained)
}

// relayMerged is relay for a sandbox whose stdout and stderr are one pipe
// (a compile step's), sent as frames of kind.
func (p *process) relayMerged(s *server, kind byte, cap int) {
	drained := s.relay(p.outR, nil, cap, p.ended(), p, false, kind)
	go p.finish(drained)
}

// ended is closed when the sandbox's processes are all gone.
func (p *process) ended() <-chan struct{} {
	ended := make(chan struct{})
	go func() {
		<-p.exited
		<-p.statusEnd
		close(ended)
	}()
	return ended
}

func (p *process) wait() <-chan struct{} { return p.done }
func (p *process) abandon()              { p.kill() }

// expire kills the program at its timeout (see stop).
func (p *process) expire() {
	p.mu.Lock()
	p.timedOut = true
	p.mu.Unlock()
	p.stop()
}

// relay sends what outR and errR (nil: outR carries both) yield as output
// frames, up to cap bytes a stream, until both end: stdout and stderr, or
// kinds[0] for a merged outR. Once ended is closed every process of the
// program is dead and the pipes end at once; they are cut after drainGrace
// in case something that cannot be killed holds them. setup (may be nil)
// keeps the first bytes of stderr (of outR when merged). The channel
// returned closes when both are done.
func (s *server) relay(outR, errR *os.File, cap int, ended <-chan struct{}, setup *process, skipReady bool, kinds ...byte) <-chan struct{} {
	if cap <= 0 {
		cap = 1 << 20
	}
	var relays sync.WaitGroup
	if errR == nil {
		relays.Add(1)
		go func() { defer relays.Done(); s.copyOut(kinds[0], outR, cap, setup, false) }()
	} else {
		relays.Add(2)
		go func() { defer relays.Done(); s.copyOut(KindStdout, outR, cap, nil, false) }()
		go func() { defer relays.Done(); s.copyOut(KindStderr, errR, cap, setup, skipReady) }()
	}
	done := make(chan struct{})
	go func() {
		<-ended
		drained := make(chan struct{})
		go func() { relays.Wait(); close(drained) }()
		select {
		case <-drained:
		case <-time.After(drainGrace):
			outR.Close()
			if errR != nil {
				errR.Close()
			}
			<-drained
		}
		close(done)
	}()
	return done
}

// finish closes done once the output was relayed (drained) and the
// sandbox's init was reaped.
func (p *process) finish(drained <-chan struct{}) {
	<-drained
	// What accounting adds to the run: the wait for the sandbox's init
	// beyond its output's end (the init holds the sandbox's stdout and
	// stderr, so it has mostly ended by then).
	waited := time.Now()
	<-p.reaped
	p.mu.Lock()
	p.reapWait = time.Since(waited)
	p.mu.Unlock()
	close(p.done)
}

// readyLine is what a spare's waiting process writes on stderr when it is
// ready for its job (see zygote.py and cmd/gantry-agent).
var readyLine = []byte("\x00gantry-ready\n")

// copyOut sends what r yields as frames of kind, up to cap bytes, and
// reads and drops the rest. With p set it keeps the first bytes for
// p.setupErr.
func (s *server) copyOut(kind byte, r *os.File, cap int, p *process, skipReady bool) {
	defer r.Close()
	buf := make([]byte, chunk)
	var skipped []byte
	sent := 0
	for {
		n, err := r.Read(buf)
		data := buf[:n]
		if skipReady && n > 0 {
			skipped = append(skipped, data...)
			i := bytes.Index(skipped, readyLine)
			switch {
			case i >= 0:
				data, skipReady = skipped[i+len(readyLine):], false
			case len(skipped) > chunk: // no ready line: it is all output
				data, skipReady = skipped, false
			default:
				data = nil
			}
		}
		if len(data) > 0 {
			if p != nil {
				p.mu.Lock()
				if room := 2048 - len(p.setupErr); room > 0 {
					p.setupErr = append(p.setupErr, data[:min(len(data), room)]...)
				}
				p.mu.Unlock()
			}
			// One byte past the cap tells the runner output was cut.
			if room := cap + 1 - sent; room > 0 {
				take := min(room, len(data))
				_ = s.fw.frame(kind, data[:take])
				sent += take
			}
		}
		if err != nil {
			return
		}
	}
}

// feed writes head, then the job's stdin, to w and closes it (in the
// background: the program may read slowly, or never).
func (s *server) feed(w *os.File, head, stdin []byte) {
	if w == nil {
		return
	}
	go func() {
		if len(head) > 0 {
			if _, err := w.Write(head); err != nil {
				w.Close()
				return
			}
		}
		_, _ = w.Write(stdin)
		w.Close()
	}()
}

func (p *process) kill() {
	if p.cmd.Process != nil {
		_ = p.cmd.Process.Kill()
	}
	<-p.exited
}

// stop kills the program so that what it used is still accounted. Under
// Namespaces that is the sandbox's first process (the program itself,
// which the languages' commands exec), not its init: the init reaps it
// into its account and then ends the sandbox. (Killing the init instead
// would have the kernel reap the whole pid namespace unaccounted; the
// processes the program left behind are reaped so when the init ends.)
// Otherwise it is the program. done closes once its output ends.
func (p *process) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	p.mu.Lock()
	pid := p.childPID
	p.mu.Unlock()
	if pid > 0 && stopInit(pid) {
		return
	}
	if p.cmd.Process != nil {
		_ = p.cmd.Process.Kill()
	}
}

// stopInit kills the processes the sandbox's init (pid) started, or the
// init itself when it has none; false if it could signal none. The agent
// owns the sandbox's user namespace, so it may read and signal its
// processes.
func stopInit(pid int) bool {
	killed := false
	for _, k := range children(pid) {
		if syscall.Kill(k, syscall.SIGKILL) == nil {
			killed = true
		}
	}
	return killed || syscall.Kill(pid, syscall.SIGKILL) == nil
}

// children lists pid's child processes (nil when unknown).
func children(pid int) []int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if k, err := strconv.Atoi(f); err == nil {
			out = append(out, k)
		}
	}
	return out
}

// reapInit reaps the sandbox's init (Namespaces) once bubblewrap exited,
// and keeps what it used. Bubblewrap learns the program's exit status from
// its init over a pipe and exits without waiting for it (the init dies
// with it: --die-with-parent); the init, with everything it reaped (the
// program and every other process of the pid namespace), then falls to the
// agent, the container's subreaper (setup). When bubblewrap reaped it
// first, its usage is in bubblewrap's. The init's own CPU time (setting up
// the sandbox's mounts, then waiting) is read from its schedstat while it
// is a zombie, and left out.
func (p *process) reapInit() {
	p.mu.Lock()
	pid := p.childPID
	p.mu.Unlock()
	if pid <= 0 {
		return
	}
	ended := make(chan bool, 1)
	go func() { ended <- awaitZombie(pid) }()
	select {
	case ok := <-ended:
		if !ok {
			return // not ours: bubblewrap reaped it
		}
	case <-time.After(drainGrace):
		// It does not end: bubblewrap's account stands, and the init is
		// reaped whenever it does (not to be left a zombie).
		go func() {
			if <-ended {
				_, _ = syscall.Wait4(pid, nil, 0, nil)
			}
		}()
		return
	}
	self := ownCPU(pid)
	var ws syscall.WaitStatus
	var ru syscall.Rusage
	if got, _ := syscall.Wait4(pid, &ws, syscall.WNOHANG, &ru); got == pid {
		p.mu.Lock()
		p.initUsage, p.initSelf = &ru, self
		p.mu.Unlock()
	}
}

// awaitZombie waits until the child pid has exited, without reaping it;
// false when it is not the agent's child.
func awaitZombie(pid int) bool {
	var info struct {
		signo, errno, code, _ int32
		pid                   int32
		_                     [108]byte
	}
	const wexited, wnowait = 4, 0x1000000
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, 1 /* P_PID */, uintptr(pid), uintptr(unsafe.Pointer(&info)), wexited|wnowait, 0, 0)
		switch errno {
		case 0:
			return info.pid == int32(pid)
		case syscall.EINTR:
			continue
		}
		return false
	}
}

// ownCPU is the CPU time a process used itself, not its children (its
// schedstat's run time), 0 when unknown.
func ownCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/schedstat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	ns, _ := strconv.ParseInt(f[0], 10, 64)
	return time.Duration(ns)
}

// treeCPU is the CPU time pid and its descendants used so far, their
// own and what they reaped (in clock ticks: the difference of two is
// exact to a tick). 0 for pid 0.
func treeCPU(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	const tick = 10 * time.Millisecond // USER_HZ is 100 on Linux
	var total time.Duration
	todo := []int{pid}
	for len(todo) > 0 {
		p := strconv.Itoa(todo[len(todo)-1])
		todo = todo[:len(todo)-1]
		if b, err := os.ReadFile("/proc/" + p + "/stat"); err == nil {
			// After the command's closing parenthesis, from field 3:
			// utime, stime, cutime and cstime are fields 14 to 17.
			if i := bytes.LastIndexByte(b, ')'); i >= 0 {
				if f := strings.Fields(string(b[i+1:])); len(f) > 14 {
					for _, v := range f[11:15] {
						n, _ := strconv.ParseInt(v, 10, 64)
						total += time.Duration(n) * tick
					}
				}
			}
		}
		tasks, _ := os.ReadDir("/proc/" + p + "/task")
		for _, t := range tasks {
			if b, err := os.ReadFile("/proc/" + p + "/task/" + t.Name() + "/children"); err == nil {
				for _, c := range strings.Fields(string(b)) {
					if k, err := strconv.Atoi(c); err == nil {
						todo = append(todo, k)
					}
				}
			}
		}
	}
	return total
}

// usage is what the sandbox used (after exited closed): under Namespaces
// its init's account, which the agent reaped (reapInit), holding every
// process of the sandbox and not bubblewrap's own launcher (whose peak
// memory counts the agent's, by way of its exec); else, and when
// bubblewrap reaped the init itself, the first process's and its
// children's. nil when unknown.
func (p *process) usage() *Usage {
	ru, self := p.initUsage, p.initSelf
	if ru == nil {
		if p.cmd.ProcessState == nil {
			return nil
		}
		var ok bool
		if ru, ok = p.cmd.ProcessState.SysUsage().(*syscall.Rusage); !ok || ru == nil {
			return nil
		}
	}
	us := func(tv syscall.Timeval) int64 { return tv.Sec*1_000_000 + tv.Usec }
	cpu := max(us(ru.Utime)+us(ru.Stime)-self.Microseconds(), 0)
	return &Usage{CPUTimeUS: cpu, PeakMemoryKB: ru.Maxrss, WaitUS: p.reapWait.Microseconds()}
}

// exit reports how the program ended (after done closed).
func (p *process) exit() (Exit, error) { return p.result(), nil }

func (p *process) result() Exit {
	e := Exit{OOMKills: max(oomKills()-p.oomBefore, 0)}
	p.mu.Lock()
	e.TimedOut = p.timedOut
	p.mu.Unlock()
	if p.isolation == Namespaces {
		p.mu.Lock()
		defer p.mu.Unlock()
		if !p.hasCode {
			msg := strings.TrimSpace(string(p.setupErr))
			if msg == "" && p.waitErr != nil {
				msg = p.waitErr.Error()
			}
			e.Message = "the sandbox could not be set up: " + msg
			return e
		}
		e.Started, e.Code, e.Usage = true, p.code, p.usage()
		if e.Code > 128 && e.Code < 128+65 {
			e.Signal = e.Code - 128
		}
		return e
	}
	e.Started, e.Usage = true, p.usage()
	if p.cmd.ProcessState == nil {
		e.Code = 255
		return e
	}
	ws, _ := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case ws.Signaled():
		e.Signal = int(ws.Signal())
		e.Code = 128 + e.Signal
	default:
		e.Code = ws.ExitStatus()
	}
	return e
}

// environ is the program's environment: the image's (the agent's own, as
// Docker set it from the image), overridden by the job's.
func environ(job map[string]string) []string {
	m := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	for k, v := range job {
		m[k] = v
	}
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// oomKills is the container's count of out-of-memory kills so far.
func oomKills() int {
	for _, path := range []string{"/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"} {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
				n, _ := strconv.Atoi(strings.TrimSpace(v))
				return n
			}
		}
	}
	return 0
}

// filterPipe returns a pipe that holds the job seccomp filter, for
// bubblewrap's --seccomp (the filter is far smaller than a pipe's buffer).
func (s *server) filterPipe() (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	_, err = w.Write(s.filter)
	w.Close()
	if err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// probe runs an empty sandbox once: if bubblewrap cannot create one here
// (no unprivileged user namespaces, a seccomp or AppArmor profile that
// forbids mount), the runner learns it from the Hello instead of from
// every job.
func (s *server) probe() error {
	if err := os.MkdirAll(s.runDir(), 0o755); err != nil {
		return err
	}
	filterR, err := s.filterPipe()
	if err != nil {
		return err
	}
	defer filterR.Close()
	args := append(s.sandboxArgs(1, s.runDir(), false), "--seccomp", "3", "--", "true")
	cmd := exec.Command(s.cfg.Bwrap, args...)
	cmd.ExtraFiles = []*os.File{filterR}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("bubblewrap cannot run: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("bubblewrap cannot create a sandbox in this container (%v): %s", err, strings.TrimSpace(out.String()))
		}
		return nil
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		return errors.New("bubblewrap did not make an empty sandbox within 30s")
	}
}
