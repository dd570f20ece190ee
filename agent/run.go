package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// drainGrace bounds how long output is read after the program's main
// process exited. Under Namespaces every process of the sandbox is dead by
// then and the pipes end at once; the bound is for what cannot be killed.
const drainGrace = 2 * time.Second

// run runs one program and reports its exit and the workspace's files.
func (s *server) run(req Request) error {
	exit, err := s.runProgram(req)
	if errors.Is(err, ErrRunnerGone) {
		return err
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

// runProgram prepares the run's files and runs the program. An error means
// the program did not start.
func (s *server) runProgram(req Request) (Exit, error) {
	if len(req.Argv) == 0 {
		return Exit{}, errors.New("run request without argv")
	}
	if req.Fresh {
		if err := emptyDir(Workspace); err != nil {
			return Exit{}, fmt.Errorf("empty the workspace: %w", err)
		}
	}
	runDir := s.runDir()
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return Exit{}, err
	}
	if err := emptyDir(runDir); err != nil {
		return Exit{}, err
	}
	defer emptyDir(runDir) //nolint:errcheck // the next run empties it again
	if err := placeFiles(req.Files, runDir); err != nil {
		return Exit{}, err
	}
	var br *bridge
	if req.Bridge {
		var err error
		if br, err = openBridge(filepath.Join(runDir, filepath.Base(BridgeSocket)), s.fw); err != nil {
			return Exit{}, err
		}
		defer br.close()
	}

	p, err := s.start(req, runDir)
	if err != nil {
		return Exit{}, err
	}
	for {
		select {
		case f, ok := <-s.frames:
			if !ok {
				p.kill()
				return Exit{}, ErrRunnerGone
			}
			if f.kind != KindRequest {
				continue
			}
			var r Request
			if json.Unmarshal(f.payload, &r) == nil && r.Op == "reply" && br != nil {
				br.reply(r.ID, r.Body)
			}
		case <-p.done:
			return p.exit(), nil
		}
	}
}

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
	return nil
}

// process is a running program and what it produces.
type process struct {
	cmd       *exec.Cmd
	isolation Isolation
	done      chan struct{} // closed when the program ended and its output was read
	oomBefore int

	mu       sync.Mutex
	started  bool // Namespaces: bwrap finished the sandbox and started the program
	code     int  // Namespaces: the exit status bwrap reported
	hasCode  bool
	setupErr []byte // the first bytes of stderr, which name a setup failure
	waitErr  error
}

// start starts the program in its sandbox and the goroutines that relay
// its output; p.done closes when all of that ended.
func (s *server) start(req Request, runDir string) (*process, error) {
	p := &process{isolation: s.cfg.Isolation, done: make(chan struct{}), oomBefore: oomKills()}
	env := environ(req.Env)
	var status, block *os.File // Namespaces: bwrap's status and block pipes, our ends
	if s.cfg.Isolation == Namespaces {
		args := append(s.sandboxArgs(req.TmpMB, runDir), "--json-status-fd", "3", "--block-fd", "4", "--")
		p.cmd = exec.Command(s.cfg.Bwrap, append(args, req.Argv...)...)
		statusR, statusW, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		blockR, blockW, err := os.Pipe()
		if err != nil {
			statusR.Close()
			statusW.Close()
			return nil, err
		}
		p.cmd.ExtraFiles = []*os.File{statusW, blockR}
		defer statusW.Close()
		defer blockR.Close()
		status, block = statusR, blockW
	} else {
		p.cmd = exec.Command(s.cfg.Self, append([]string{"exec", "--"}, req.Argv...)...)
	}
	p.cmd.Env = env
	p.cmd.Dir = Workspace
	// The program (bwrap, or the program itself) dies with the agent.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}

	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	p.cmd.Stdout, p.cmd.Stderr = outW, errW
	var stdinW *os.File
	if req.Stdin != nil {
		var stdinR *os.File
		if stdinR, stdinW, err = os.Pipe(); err != nil {
			return nil, err
		}
		p.cmd.Stdin = stdinR
		defer stdinR.Close()
	}
	err = p.cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		if status != nil {
			status.Close()
			block.Close()
		}
		if stdinW != nil {
			stdinW.Close()
		}
		return nil, fmt.Errorf("start the sandbox: %w", err)
	}
	if stdinW != nil {
		go func() {
			_, _ = stdinW.Write(req.Stdin)
			stdinW.Close()
		}()
	}

	var relays sync.WaitGroup
	relays.Add(2)
	cap := req.OutputCap
	if cap <= 0 {
		cap = 1 << 20
	}
	go func() { defer relays.Done(); s.relay(KindStdout, outR, cap, nil) }()
	go func() { defer relays.Done(); s.relay(KindStderr, errR, cap, p) }()

	statusDone := make(chan struct{})
	if status != nil {
		go func() { defer close(statusDone); s.watchStatus(p, status, block) }()
	} else {
		close(statusDone)
		_ = s.fw.frame(KindStarted, nil)
	}

	go func() {
		p.waitErr = p.cmd.Wait()
		if p.isolation == Container {
			// The program's leftovers share the container with the agent:
			// kill every process the agent may signal (all but itself and
			// the container's init).
			_ = syscall.Kill(-1, syscall.SIGKILL)
		}
		<-statusDone
		drained := make(chan struct{})
		go func() { relays.Wait(); close(drained) }()
		select {
		case <-drained:
		case <-time.After(drainGrace):
			outR.Close()
			errR.Close()
			<-drained
		}
		close(p.done)
	}()
	return p, nil
}

// watchStatus reads bwrap's status lines: once the sandbox's init exists it
// raises its OOM score (the kernel then kills the program, never the
// agent, when the container runs out of memory) and lets it start the
// program; at the end bwrap reports the program's exit status, which it
// only does when the program was started.
func (s *server) watchStatus(p *process, status, block *os.File) {
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
			_ = os.WriteFile("/proc/"+strconv.Itoa(*st.ChildPID)+"/oom_score_adj", []byte("1000"), 0)
			_, _ = block.Write([]byte{0})
			block.Close()
			_ = s.fw.frame(KindStarted, nil)
		}
		if st.ExitCode != nil {
			p.mu.Lock()
			p.started, p.code, p.hasCode = true, *st.ExitCode, true
			p.mu.Unlock()
		}
	}
}

// relay sends what r yields as frames of kind, up to cap bytes, and reads
// and drops the rest. With p set it keeps the first bytes for p.setupErr.
func (s *server) relay(kind byte, r *os.File, cap int, p *process) {
	defer r.Close()
	buf := make([]byte, chunk)
	sent := 0
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if p != nil {
				p.mu.Lock()
				if room := 2048 - len(p.setupErr); room > 0 {
					p.setupErr = append(p.setupErr, buf[:min(n, room)]...)
				}
				p.mu.Unlock()
			}
			// One byte past the cap tells the runner output was cut.
			if room := cap + 1 - sent; room > 0 {
				take := min(room, n)
				_ = s.fw.frame(kind, buf[:take])
				sent += take
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *process) kill() {
	if p.cmd.Process != nil {
		_ = p.cmd.Process.Kill()
	}
	<-p.done
}

// exit reports how the program ended (after done closed).
func (p *process) exit() Exit {
	e := Exit{OOMKills: max(oomKills()-p.oomBefore, 0)}
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
		e.Started, e.Code = true, p.code
		if e.Code > 128 && e.Code < 128+65 {
			e.Signal = e.Code - 128
		}
		return e
	}
	e.Started = true
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

// probe runs an empty sandbox once: if bubblewrap cannot create one here
// (no unprivileged user namespaces, a seccomp or AppArmor profile that
// forbids mount), the runner learns it from the Hello instead of from
// every job.
func (s *server) probe() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := append(s.sandboxArgs(1, s.cfg.StateDir), "--", "true")
	out, err := exec.CommandContext(ctx, s.cfg.Bwrap, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("bubblewrap cannot create a sandbox in this container (%v): %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}
