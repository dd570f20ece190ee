package agent

import (
	"errors"
	"fmt"

	"github.com/gantryhq/gantry/agent/wire"
)

// A launcher makes a program's sandbox and starts the program in it. The
// agent has one per way of doing so, and chooses one for each run, once
// (choose): bubblewrap's sandbox (or, under the Container isolation, the
// container itself), a fork of the warm interpreter, a spare sandbox made
// ahead by either, or a stateful session's live sandbox. Every sandbox is
// made from the one layout (layout.go), and every launcher passes the same
// conformance suite (runner/launchers_test.go): isolation, limits,
// accounting, output and clean-up.
type launcher interface {
	// name is what Exit.Launcher reports.
	name() wire.Launcher
	// start starts the run's program (its files are in place, its compile
	// step has run) with env, feeding it req.Stdin and relaying its output
	// as frames. An error means nothing of the program ran.
	start(req wire.Request, env []string) (running, error)
	// drop gives back what the launcher holds for a run that will not start
	// (a spare it took).
	drop()
}

// running is a program in its sandbox, from its start to the end of its
// output.
type running interface {
	// wait is closed when the program ended and its output was read.
	wait() <-chan struct{}
	// exit reports how it ended (after wait); an error means the agent can
	// no longer tell, and must end.
	exit() (wire.Exit, error)
	// expire kills the program at its timeout, keeping what it used
	// accounted; exit then reports it (Exit.TimedOut).
	expire()
	// abandon kills the program: the runner is gone.
	abandon()
}

// choose picks the run's launcher: the one the request names, else a
// stateful session's sandbox for a stateful run, else a warm interpreter
// (w: the lean one or the full one, warmFor) for a Python program it may run
// (a spare of its if one waits), else a spare of bubblewrap's that suits,
// else a new sandbox.
func (s *server) choose(req wire.Request, w *warm) (launcher, error) {
	switch req.Launcher {
	case "":
	case wire.LauncherSession:
		if !req.Stateful {
			return nil, errors.New("the session launcher runs stateful requests only")
		}
		return kernelLauncher{s}, nil
	case wire.LauncherWarm, wire.LauncherLean:
		if w == nil {
			return nil, fmt.Errorf("the %s interpreter cannot run this program (not Python run as a file, or it is not loaded)", req.Launcher)
		}
		return warmLauncher{s, w}, nil
	case wire.LauncherSpare:
		if sp := s.takeSpare(req, w); sp != nil {
			return &spareLauncher{s: s, sp: sp}, nil
		}
		return nil, errors.New("no spare sandbox suits this program")
	case s.sandboxLauncher().name():
		return s.sandboxLauncher(), nil
	default:
		return nil, fmt.Errorf("launcher %q is not one this agent has", req.Launcher)
	}
	if req.Launcher == "" && req.Stateful {
		return kernelLauncher{s}, nil
	}
	if req.Stateful {
		return nil, errors.New("a stateful request runs in the session launcher only")
	}
	if sp := s.takeSpare(req, w); sp != nil {
		return &spareLauncher{s: s, sp: sp}, nil
	}
	if w != nil {
		return warmLauncher{s, w}, nil
	}
	return s.sandboxLauncher(), nil
}

// sandboxLauncher is the launcher that makes a sandbox for the program
// when the run starts: bubblewrap's, or the container itself.
func (s *server) sandboxLauncher() bwrapLauncher { return bwrapLauncher{s} }

// bwrapLauncher starts the program in a new bubblewrap sandbox (under the
// Container isolation: directly in the container). A job with egress runs
// under `gantry-agent relay`, which serves the sandbox's egress address.
type bwrapLauncher struct{ s *server }

func (l bwrapLauncher) name() wire.Launcher {
	if l.s.cfg.Isolation == wire.Container {
		return wire.LauncherContainer
	}
	return wire.LauncherBwrap
}

func (l bwrapLauncher) drop() {}

func (l bwrapLauncher) start(req wire.Request, env []string) (running, error) {
	s := l.s
	argv := req.Argv
	if req.Egress {
		argv = append([]string{s.cfg.Self, "relay", "--"}, argv...)
	}
	p, stdin, err := s.launch(argv, env, launchOpts{stdin: true, announce: s.announceStart, relayed: req.Egress})
	if err != nil {
		return nil, err
	}
	s.feed(stdin, nil, req.Stdin)
	p.relay(s, req.OutputCap, false)
	return p, nil
}

// warmLauncher forks the program's sandbox from a warm interpreter
// (warm.go: the full one, or the lean one); a job description too large
// for it gets bubblewrap's.
type warmLauncher struct {
	s *server
	w *warm
}

func (l warmLauncher) name() wire.Launcher {
	if l.w == l.s.lean {
		return wire.LauncherLean
	}
	return wire.LauncherWarm
}

func (warmLauncher) drop() {}

func (l warmLauncher) start(req wire.Request, env []string) (running, error) {
	p, err := l.s.runWarm(l.w, req, env)
	if errors.Is(err, errWarmTooLarge) {
		return l.s.sandboxLauncher().start(req, env)
	}
	return p, err
}

// spareLauncher starts the program in a spare sandbox (spare.go), made
// ahead by bubblewrap or the warm interpreter; a spare that cannot take it
// (it died meanwhile) gives way to a new sandbox.
type spareLauncher struct {
	s  *server
	sp spare
	// instead is the launcher that started the program when the spare
	// could not.
	instead launcher
}

func (l *spareLauncher) name() wire.Launcher {
	if l.instead != nil {
		return l.instead.name()
	}
	return wire.LauncherSpare
}

func (l *spareLauncher) drop() {
	if l.sp != nil {
		l.sp.discard()
		l.sp = nil
	}
}

func (l *spareLauncher) start(req wire.Request, env []string) (running, error) {
	sp := l.sp
	l.sp = nil
	if p, ok := sp.take(l.s, req, env); ok {
		return p, nil
	}
	l.instead = l.s.sandboxLauncher()
	if w := sp.interpreter(); w != nil && w.Err() == nil {
		l.instead = warmLauncher{l.s, w}
	}
	return l.instead.start(req, env)
}

// kernelLauncher runs the program in the container's stateful session
// sandbox (live.go), made first if there is none.
type kernelLauncher struct{ s *server }

func (kernelLauncher) name() wire.Launcher { return wire.LauncherSession }
func (kernelLauncher) drop()               {}

func (l kernelLauncher) start(req wire.Request, _ []string) (running, error) {
	return l.s.startLive(req)
}
