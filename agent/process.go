package agent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gantryhq/gantry/agent/wire"
)

// The sandbox one program runs in, from its launch to the end of its
// output: launching it, relaying its output, stopping it and reporting how
// it ended. (A live sandbox's processes are liveprocs.go's.)

// process is a program's own sandbox (bubblewrap's, or the container
// under the Container isolation), from its launch to the end of its
// output.
type process struct {
	cmd       *exec.Cmd
	isolation wire.Isolation
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
	relayed  bool // launchOpts.relayed
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
	// relayed: argv is `gantry-agent relay -- PROGRAM` (an egress job), so
	// stop kills the relay's child, the program, which the relay reaps
	// into its account (stop).
	relayed bool
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
		statusEnd: make(chan struct{}), oomBefore: oomKills(), announce: announce, relayed: o.relayed}
	var files pipes // ours, closed when launch fails
	closeAll, pipe := files.closeAll, files.pipe
	var status, block *os.File // Namespaces: bwrap's status and block pipes, our ends
	var childEnds []*os.File   // closed once the child has them
	if s.cfg.Isolation == wire.Namespaces {
		args := append(s.sandboxLayout(int(capacity(wire.Workspace)>>20), s.runDir(), o.build, false).bwrapArgs(),
			"--json-status-fd", "3", "--block-fd", "4", "--seccomp", "5", "--")
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
	p.cmd.Dir = wire.Workspace
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
		if p.isolation == wire.Container && !o.keep {
			// The program's leftovers share the container with the agent:
			// kill every process the agent may signal (all but itself and
			// the container's init).
			_ = syscall.Kill(-1, syscall.SIGKILL)
		}
		close(p.exited)
		if p.isolation == wire.Namespaces {
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
func (p *process) relayMerged(s *server, kind wire.Kind, cap int) {
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
func (s *server) relay(outR, errR *os.File, cap int, ended <-chan struct{}, setup *process, skipReady bool, kinds ...wire.Kind) <-chan struct{} {
	if cap <= 0 {
		cap = 1 << 20
	}
	var relays sync.WaitGroup
	if errR == nil {
		relays.Add(1)
		go func() { defer relays.Done(); s.copyOut(kinds[0], outR, cap, setup, false) }()
	} else {
		relays.Add(2)
		go func() { defer relays.Done(); s.copyOut(wire.KindStdout, outR, cap, nil, false) }()
		go func() { defer relays.Done(); s.copyOut(wire.KindStderr, errR, cap, setup, skipReady) }()
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
func (s *server) copyOut(kind wire.Kind, r *os.File, cap int, p *process, skipReady bool) {
	defer r.Close()
	buf := make([]byte, wire.Chunk)
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
			case len(skipped) > wire.Chunk: // no ready line: it is all output
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
				_ = s.fw.Frame(kind, data[:take])
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
// Otherwise it is the program. An egress job's first process is the
// relay: it is the relay's child that is killed, which the relay reaps
// into its own account before it dies by the same signal (killing the
// relay would orphan the program, and its usage would be lost with it).
// done closes once its output ends.
func (p *process) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	p.mu.Lock()
	pid, relayed := p.childPID, p.relayed
	p.mu.Unlock()
	if pid > 0 {
		if relayed && killChildren(children(pid)...) {
			return
		}
		if stopInit(pid) {
			return
		}
	}
	if p.cmd.Process != nil {
		if relayed && killChildren(p.cmd.Process.Pid) {
			return
		}
		_ = p.cmd.Process.Kill()
	}
}

// stopInit kills the processes the sandbox's init (pid) started, or the
// init itself when it has none; false if it could signal none. The agent
// owns the sandbox's user namespace, so it may read and signal its
// processes.
func stopInit(pid int) bool {
	return killChildren(pid) || syscall.Kill(pid, syscall.SIGKILL) == nil
}

// killChildren kills the child processes of pids; false if it could
// signal none.
func killChildren(pids ...int) bool {
	killed := false
	for _, pid := range pids {
		for _, k := range children(pid) {
			if syscall.Kill(k, syscall.SIGKILL) == nil {
				killed = true
			}
		}
	}
	return killed
}

// children lists pid's child processes, those of every thread of it (a Go
// program, the egress relay, forks from any of its threads); nil when
// unknown.
func children(pid int) []int {
	tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	var out []int
	for _, t := range tasks {
		if tid, err := strconv.Atoi(t.Name()); err == nil {
			out = append(out, taskChildren(pid, tid)...)
		}
	}
	return out
}

// taskChildren lists the child processes thread tid of process pid
// started (nil when unknown).
func taskChildren(pid, tid int) []int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, tid))
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

// exit reports how the program ended (after done closed).
func (p *process) exit() (wire.Exit, error) { return p.result(), nil }

func (p *process) result() wire.Exit {
	e := wire.Exit{OOMKills: max(oomKills()-p.oomBefore, 0)}
	p.mu.Lock()
	e.TimedOut = p.timedOut
	p.mu.Unlock()
	if p.isolation == wire.Namespaces {
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
