package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/gantryhq/gantry/agent/wire"
)

// drainGrace bounds how long output is read after the program's main
// process exited. Under Namespaces every process of the sandbox is dead by
// then and the pipes end at once; the bound is for what cannot be killed.
const drainGrace = 2 * time.Second

// errNotBuilt ends a run whose compile step failed: its KindCompiled frame
// said so, and nothing follows it.
var errNotBuilt = errors.New("the compile step failed")

// run runs one program and reports its exit and the workspace's files.
func (s *server) run(req wire.Request) error {
	exit, err := s.runProgram(req)
	if errors.Is(err, ErrRunnerGone) || errors.Is(err, errWarmLost) {
		return err
	}
	if errors.Is(err, errNotBuilt) {
		return nil
	}
	if err != nil {
		exit = wire.Exit{Message: err.Error()}
	}
	if err := s.fw.JSON(wire.KindExit, exit); err != nil {
		return err
	}
	var list []byte
	if exit.Started {
		list = wire.Listing(wire.Workspace)
	}
	if len(list) > wire.MaxFrame {
		list = list[:0] // a workspace of millions of files: nothing to collect
	}
	return s.fw.Frame(wire.KindListing, list)
}

// runProgram prepares the run's files and runs the program with the
// launcher chosen for it. An error means the program did not start.
func (s *server) runProgram(req wire.Request) (wire.Exit, error) {
	if len(req.Argv) == 0 {
		return wire.Exit{}, errors.New("run request without argv")
	}
	if err := s.unfit(); err != nil {
		return wire.Exit{}, err
	}
	if !req.Stateful {
		s.dropLiveSpare() // the container serves jobs now
	}
	w := s.warmFor(req)
	l, err := s.choose(req, w)
	if err != nil {
		return wire.Exit{}, err
	}
	defer l.drop()
	if s.warm != nil && l.name() != wire.LauncherWarm && l.name() != wire.LauncherSession {
		// A program beside the warm interpreter still loading (a container
		// made on demand, in its first second or so) gets the container's
		// CPUs for itself. The lean interpreter is left to load (about
		// 0.1 s of CPU): with it paused too, a cold burst of HumanEval's
		// 328 programs at 32 at once had 1 to 8 reported timed out in
		// most rounds, against none in six rounds without that pause.
		defer s.warm.pauseLoading()()
	}
	if req.Fresh {
		if err := emptyDir(wire.Workspace); err != nil {
			return wire.Exit{}, fmt.Errorf("empty the workspace: %w", err)
		}
	}
	br, eg, cleanup, err := s.prepareRun(req)
	if err != nil {
		return wire.Exit{}, err
	}
	defer cleanup()
	env := environ(req.Env)
	if err := s.build(req, env); err != nil {
		return wire.Exit{}, err
	}
	p, err := l.start(req, env)
	if err != nil {
		return wire.Exit{}, err
	}
	// The next job's sandbox starts as soon as this one's program runs.
	if !req.Stateful {
		s.topUpSpares(req, w != nil && w == s.lean)
	}
	exit, err := s.await(p, br, eg, req.TimeoutMS)
	exit.Launcher = l.name()
	return exit, err
}

// prepareRun writes the run's program files and opens the code-mode
// bridge and the egress socket; cleanup closes them (every egress
// connection ended, nothing of them sent after) and empties the program
// directory.
func (s *server) prepareRun(req wire.Request) (*bridge, *egressRelay, func(), error) {
	runDir := s.runDir()
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return nil, nil, nil, err
	}
	keep := s.keepEgress(req)
	if err := s.emptyRunDir(runDir, keep); err != nil {
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
		if !keep {
			_ = emptyDir(runDir) // the next run empties it again
		}
	}
	if req.Bridge {
		var err error
		if br, err = openBridge(filepath.Join(runDir, filepath.Base(wire.BridgeSocket)), s.fw); err != nil {
			return nil, nil, nil, err
		}
	}
	switch {
	case keep:
		if err := s.openKept(runDir); err != nil {
			closeAll()
			return nil, nil, nil, fmt.Errorf("egress socket: %w", err)
		}
	case req.Egress:
		var err error
		if eg, err = openEgress(filepath.Join(runDir, filepath.Base(wire.EgressSocket)), s.fw); err != nil {
			closeAll()
			return nil, nil, nil, fmt.Errorf("egress socket: %w", err)
		}
	}
	return br, eg, closeAll, nil
}

// build runs the request's compile step, if it has one, or unpacks the
// build it brings (after prepareRun): errNotBuilt when the program did
// not compile.
func (s *server) build(req wire.Request, env []string) error {
	if req.Compile == nil && len(req.Build) > 0 {
		dir := buildDir(s.runDir())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := extractTar(dir, bytes.NewReader(req.Build), wire.MaxBuild); err != nil {
			return fmt.Errorf("unpack the build: %w", err)
		}
		return nil
	}
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
func (s *server) await(p running, br *bridge, eg *egressRelay, timeoutMS int) (wire.Exit, error) {
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
				return wire.Exit{}, ErrRunnerGone
			}
			if wire.IsNetFrame(f.Kind) && eg != nil {
				eg.handle(f.Kind, f.Payload)
				continue
			}
			if f.Kind != wire.KindRequest {
				continue
			}
			var r wire.Request
			if json.Unmarshal(f.Payload, &r) == nil && r.Op == "reply" && br != nil {
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
func (s *server) compile(c wire.Compile, env []string, runDir string) (built bool, err error) {
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
	p.relayMerged(s, wire.KindCompileOutput, c.OutputCap)
	exit, err := s.await(p, nil, nil, c.TimeoutMS)
	if err != nil {
		return false, err
	}
	if c.SendBuild && exit.Succeeded() {
		if err := s.fw.Frame(wire.KindBuild, tarBuild(buildDir(runDir))); err != nil {
			return false, err
		}
	}
	if err := s.fw.JSON(wire.KindCompiled, exit); err != nil {
		return false, err
	}
	return exit.Succeeded(), nil
}

// tarBuild is what a compile step built in dir, as a tar of its
// directories and regular files (KindBuild), or nothing when it holds more
// than MaxBuild bytes or cannot be read whole.
func tarBuild(dir string) []byte {
	var buf bytes.Buffer
	if err := writeTar(dir, nil, true, &limitedBuffer{b: &buf, room: wire.MaxBuild}); err != nil {
		return nil
	}
	return buf.Bytes()
}

// limitedBuffer fails a write past room bytes.
type limitedBuffer struct {
	b    *bytes.Buffer
	room int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if len(p) > l.room {
		return 0, errors.New("over the limit")
	}
	l.room -= len(p)
	return l.b.Write(p)
}

// announceStart tells the runner the program may act from now on: what
// goes wrong after this may be the program's doing.
func (s *server) announceStart() { _ = s.fw.Frame(wire.KindStarted, nil) }

// placeFiles writes the run's files: the workspace's, and the program's
// own under runDir (which the program sees as ProgramDir).
func placeFiles(files []wire.File, runDir string) error {
	ws, err := os.OpenRoot(wire.Workspace)
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
		if r, ok := strings.CutPrefix(f.Path, wire.Workspace+"/"); ok {
			rel = r
		} else if r, ok := strings.CutPrefix(f.Path, wire.ProgramDir+"/"); ok {
			root, rel = prog, r
		} else {
			return fmt.Errorf("file %q is outside %s and %s", f.Path, wire.Workspace, wire.ProgramDir)
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
		return fmt.Errorf("make %s/%s: %w", wire.Workspace, OutDir, err)
	}
	return nil
}

// OutDir is the workspace directory every job finds (empty in a fresh
// workspace), from which artifacts are collected by default.
const OutDir = "out"

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
	args := append(s.sandboxLayout(1, s.runDir(), false, false).bwrapArgs(), "--seccomp", "3", "--", "true")
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
