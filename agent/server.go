package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gantryhq/gantry/agent/wire"
)

// Config is how the agent runs.
type Config struct {
	Isolation wire.Isolation
	// StateDir is the agent's own directory for the skills and each run's
	// program. Under Namespaces it lies in the container's /tmp, which
	// every sandbox covers with a fresh /tmp of its own.
	StateDir string
	// Bwrap is the bubblewrap binary (Namespaces).
	Bwrap string
	// Self is this binary, which the Container isolation runs programs
	// through (it raises their OOM score before it execs them).
	Self string
	// Idle ends the agent after this long without a request: its runner
	// is gone (the runner retires idle containers well before).
	Idle time.Duration
	// Warm lists the modules the warm interpreter imports (Namespaces
	// only); none: Python jobs start their own interpreter, and a stateful
	// session's runs in a sandbox of bubblewrap's.
	Warm []string
}

// WithDefaults fills in zero fields.
func (c Config) WithDefaults() Config {
	if c.Isolation == "" {
		c.Isolation = wire.Namespaces
	}
	if c.StateDir == "" {
		c.StateDir = "/tmp/.gantry-agent"
	}
	if c.Bwrap == "" {
		c.Bwrap = "/usr/bin/bwrap"
	}
	if c.Idle == 0 {
		c.Idle = 40 * time.Minute
	}
	return c
}

// ErrRunnerGone is returned by Serve when the runner's side of the stream
// closed: the runner died or let go of the container, and the agent (with
// it the container) should end.
var ErrRunnerGone = errors.New("runner went away")

// server is the agent: one request at a time, in order.
type server struct {
	cfg    Config
	fw     *wire.FrameWriter
	frames <-chan wire.Frame
	// masks hide host details in each sandbox's /proc and /sys, as
	// Docker's masked paths do for containers (layout.go).
	masks []mount
	// spares are the next runs' sandboxes (spare.go), oldest first, each
	// delivered on its channel once made (nil if it could not be). Only the
	// serving goroutine touches the slice.
	spares []pendingSpare
	// warm is the warm interpreter (warm.go), nil without one; lean is
	// the lean one beside it (lean.go), nil without it.
	warm *warm
	lean *warm
	// filter is the job seccomp filter (seccomp.go).
	filter []byte
	// live is a stateful session's sandbox (live.go); lives counts those
	// made, liveEnded says why the last one ended when the agent ended it.
	live      *liveSandbox
	lives     int
	liveEnded string
	// liveSpare is the next session's sandbox, made ahead (livespare.go);
	// only the serving goroutine touches it.
	liveSpare liveSpareMaker
	// liveMu guards live against live operations (liveops.go), served
	// beside the requests; liveOps bounds those in progress.
	liveMu  sync.Mutex
	liveOps chan struct{}
	// kept is a stateful session's egress relay kept between runs
	// (keptegress.go), under liveMu.
	kept *egressRelay
	// ports are the streams to the live sandbox's ports (ports.go),
	// served at any time beside the requests.
	ports *wire.NetMux
}

// Serve runs the agent on the runner's stream until the runner goes away
// (ErrRunnerGone) or the agent was idle for cfg.Idle (nil).
func Serve(cfg Config, in io.Reader, out io.Writer) error {
	cfg = cfg.WithDefaults()
	s := &server{cfg: cfg, fw: wire.NewFrameWriter(out), liveOps: make(chan struct{}, maxLiveOps)}
	s.ports = wire.NewPortMux(s.fw.Frame, s.acceptPort)
	defer s.ports.Close()
	frames := make(chan wire.Frame, 16)
	// A live operation is served at once, beside any request: it counts as
	// activity, like a request.
	active := make(chan struct{}, 1)
	go func() {
		fr := wire.NewFrameReader(in, wire.MaxFrame)
		for {
			k, p, err := fr.Next()
			if err != nil {
				close(frames)
				return
			}
			if k == wire.KindLive {
				select {
				case active <- struct{}{}:
				default:
				}
				s.serveLive(p)
				continue
			}
			if wire.IsPortFrame(k) {
				// Traffic to the sandbox's ports is activity too: a
				// long connection keeps the container.
				select {
				case active <- struct{}{}:
				default:
				}
				s.ports.Handle(k, p)
				continue
			}
			if e := s.keptEgress(); e != nil && wire.IsNetFrame(k) {
				e.handle(k, p)
				continue
			}
			frames <- wire.Frame{Kind: k, Payload: p}
		}
	}()
	s.frames = frames

	hello := wire.Hello{Protocol: wire.Protocol, Isolation: cfg.Isolation}
	if err := s.setup(); err != nil {
		hello.Error = err.Error()
	} else {
		// Most jobs are Python.
		s.topUpSpares(wire.Request{Argv: []string{"python3"}}, false)
	}
	if err := s.fw.JSON(wire.KindHello, hello); err != nil {
		return err
	}

	idle := time.NewTimer(cfg.Idle)
	defer idle.Stop()
	// quiet: the agent answered a quiesce request and writes nothing until
	// a resume (its sandbox is being checkpointed, or was restored).
	quiet := false
	for {
		var f wire.Frame
		var ok bool
		select {
		case f, ok = <-frames:
			if !ok {
				return ErrRunnerGone
			}
		case <-idle.C:
			if quiet {
				continue // checkpointed, or about to be: its time does not pass
			}
			return nil
		case <-active:
			idle.Reset(cfg.Idle)
			continue
		}
		if f.Kind != wire.KindRequest {
			continue // the rest of a stream nobody waits for
		}
		var req wire.Request
		if err := json.Unmarshal(f.Payload, &req); err != nil {
			_ = s.fw.Frame(wire.KindError, []byte("malformed request: "+err.Error()))
			continue
		}
		var err error
		switch req.Op {
		case "run":
			err = s.run(req)
		case "tar":
			err = s.tar(req)
		case "restore":
			err = s.answer(s.restore())
		case "skills":
			err = s.answer(s.skills(req.Files))
		case "clean":
			err = s.answer(s.clean())
		case "warm":
			err = s.answer(s.warmReady())
		case "quiesce":
			// Before a checkpoint: the answer is the last frame on the
			// stream until a resume, which comes on the same stream (the
			// sandbox went on) or on the stream of a restored copy.
			if quiet {
				err = s.answer(errors.New("already quiesced"))
				break
			}
			quiet = true
			err = s.fw.FrameAndHold(wire.KindOK, nil)
		case "resume":
			if !quiet {
				err = s.answer(errors.New("not quiesced"))
				break
			}
			quiet = false
			s.fw.Release()
			err = s.answer(nil)
		case "reply":
			// The answer to a bridge request of a run that ended.
		default:
			err = s.answer(fmt.Errorf("unknown op %q", req.Op))
		}
		if err != nil {
			return err
		}
		idle.Reset(cfg.Idle)
	}
}

// clean readies the container for its tenant's next job or session: it
// ends a stateful session's live sandbox (with everything it started) and
// its kept egress relay, empties the workspace and, after a session, makes
// the next session's sandbox ahead (livespare.go), unless the container
// must not serve another: its warm interpreter died.
func (s *server) clean() error {
	if err := s.unfit(); err != nil {
		return err
	}
	session := s.live != nil
	if err := s.endLive(); err != nil {
		return err
	}
	if err := emptyDir(wire.Workspace); err != nil {
		return err
	}
	if session {
		// The tenant's next session likely follows: its sandbox is made
		// now, from nothing of this one's.
		s.spareLive()
	}
	return nil
}

// warmReady waits for the warm interpreters to load (if there are any)
// and says whether they serve.
func (s *server) warmReady() error {
	for _, w := range []*warm{s.warm, s.lean} {
		if w == nil {
			continue
		}
		if !w.waitReady(readyWarmWait) {
			if err := w.Err(); err != nil {
				return err
			}
			return fmt.Errorf("the warm interpreter did not load within %s", readyWarmWait)
		}
	}
	return nil
}

// unfit says why the container must not run another program, or nil.
func (s *server) unfit() error {
	for _, w := range []*warm{s.warm, s.lean} {
		if w != nil {
			if err := w.Err(); err != nil {
				return fmt.Errorf("%w; this container must be retired", err)
			}
		}
	}
	return nil
}

// answer ends a request that has no stream of its own.
func (s *server) answer(err error) error {
	if err != nil {
		return s.fw.Frame(wire.KindError, []byte(err.Error()))
	}
	return s.fw.Frame(wire.KindOK, nil)
}

// setup prepares the state directory and, for Namespaces, checks that
// bubblewrap can make a sandbox here.
func (s *server) setup() error {
	if err := os.MkdirAll(s.skillsDir(), 0o755); err != nil {
		return fmt.Errorf("agent state: %w", err)
	}
	if s.cfg.Isolation != wire.Namespaces {
		return nil
	}
	filter, err := JobFilter()
	if err != nil {
		return err
	}
	s.filter = filter
	s.masks = hostMasks()
	if err := s.probe(); err != nil {
		return err
	}
	// A sandbox's init may outlive its bubblewrap (see reapInit): it then
	// falls to the agent, which reaps it to account for what it used,
	// rather than to the container's init.
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		return fmt.Errorf("become the sandboxes' subreaper: %w", errno)
	}
	if len(s.cfg.Warm) > 0 {
		src, bpf, err := warmFiles(s.cfg.StateDir, filter)
		if err != nil {
			return err
		}
		probe := s.sandboxLayout(1, s.runDir(), false, false)
		if s.warm, err = startWarm(src, bpf, probe, s.cfg.Warm); err != nil {
			return err
		}
		if s.lean, err = startWarm(src, bpf, probe, leanModules); err != nil {
			return err
		}
	}
	return nil
}

// prSetChildSubreaper is prctl's PR_SET_CHILD_SUBREAPER.
const prSetChildSubreaper = 36

func (s *server) skillsDir() string {
	if s.cfg.Isolation == wire.Container {
		return wire.SkillsDir
	}
	return filepath.Join(s.cfg.StateDir, "skills")
}

// runDir is where a run's program, wrappers and bridge socket go; the
// program sees it as ProgramDir.
func (s *server) runDir() string {
	if s.cfg.Isolation == wire.Container {
		return wire.ProgramDir
	}
	return filepath.Join(s.cfg.StateDir, "run")
}

func (s *server) tar(req wire.Request) error {
	dw := wire.NewDataWriter(s.fw)
	if err := writeTar(wire.Workspace, req.Paths, req.All, dw); err != nil {
		// The stream is cut: the runner's tar reader fails on it.
		_ = dw.Close()
		return nil
	}
	return dw.Close()
}

// restore unpacks the tar the runner streams after the request into the
// workspace, which it empties first.
func (s *server) restore() error {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := emptyDir(wire.Workspace)
		if err == nil {
			err = extractTar(wire.Workspace, pr, capacity(wire.Workspace))
		}
		pr.CloseWithError(io.ErrClosedPipe) // a failed extract drains the rest below
		done <- err
	}()
	for {
		f, ok := <-s.frames
		if !ok {
			pw.CloseWithError(ErrRunnerGone)
			_ = <-done // the runner is gone: the restore's outcome has no reader
			return ErrRunnerGone
		}
		switch f.Kind {
		case wire.KindData:
			_, _ = pw.Write(f.Payload)
			continue
		case wire.KindDataEnd:
			pw.Close()
		default:
			pw.CloseWithError(errors.New("restore stream cut by another frame"))
		}
		return <-done
	}
}

// capacity is the size of the filesystem at dir (the workspace's tmpfs).
func capacity(dir string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 1 << 40
	}
	return int64(st.Blocks) * st.Bsize
}

// skills replaces the skills directory's content.
func (s *server) skills(files []wire.File) error {
	dir := s.skillsDir()
	if err := emptyDir(dir); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	for _, f := range files {
		rel, ok := strings.CutPrefix(f.Path, wire.SkillsDir+"/")
		if !ok {
			return fmt.Errorf("skill file %q is not under %s", f.Path, wire.SkillsDir)
		}
		if rel, ok = cleanRel(rel); !ok {
			return fmt.Errorf("skill file %q: bad path", f.Path)
		}
		if err := placeFile(root, rel, f.Data); err != nil {
			return fmt.Errorf("skill file %s: %w", f.Path, err)
		}
	}
	if s.cfg.Isolation == wire.Container {
		// No bind mount makes them read-only for the program here; their
		// modes keep it from changing them by accident (it is their owner,
		// and the container serves this one job).
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && p != dir {
				if d.IsDir() {
					_ = os.Chmod(p, 0o555)
				} else {
					_ = os.Chmod(p, 0o444)
				}
			}
			return nil
		})
	}
	return nil
}
