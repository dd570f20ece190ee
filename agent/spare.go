package agent

import (
	_ "embed"
	"encoding/binary"
	"os"
	"strconv"
	"strings"

	"github.com/gantryhq/gantry/agent/wire"
	"github.com/gantryhq/gantry/jobs"
)

// A spare is the next run's sandbox, started as soon as the last run's
// program did, so that a run costs neither bubblewrap's set-up nor (for
// Python) the interpreter's start-up. It is made the same way as any
// run's sandbox (fresh namespaces, /tmp, /dev and /proc; the workspace,
// skills and program directory bound in, which the run fills later); only
// its first process differs: it waits on stdin for its job. That is the
// Python zygote (zygote.py), which runs a Python program in its own
// interpreter or execs anything else, or this binary's "wait", which
// execs. A spare serves one job, like any sandbox.

// spareSource is the spare's Python: the shared program runner, then the
// spare's own part.
var spareSource = pyrunSource + "\n" + spareMain

var (
	//go:embed pyrun.py
	pyrunSource string
	//go:embed spare.py
	spareMain string
)

type spare struct {
	p      *process
	stdin  *os.File
	python bool
}

// maxSpares is how many sandboxes the agent keeps ahead of its jobs. With
// two, a job takes a spare that has had two jobs' time to start, so back
// to back jobs rarely wait for one.
const maxSpares = 2

// spawnSpares starts sandboxes in the background until maxSpares are
// made or being made: Python zygotes after a Python job, else plain
// waiting processes.
func (s *server) spawnSpares(python bool) {
	limit := maxSpares
	if s.cfg.Isolation == wire.Container {
		limit = 1 // the container serves one job
	}
	for len(s.spares) < limit {
		ch := make(chan *spare, 1)
		s.spares = append(s.spares, ch)
		go func() {
			argv := []string{s.cfg.Self, "wait"}
			if python {
				argv = []string{"python3", "-c", spareSource}
			}
			p, stdin, err := s.launch(argv, environ(nil), launchOpts{stdin: true})
			if err != nil {
				ch <- nil
				return
			}
			ch <- &spare{p: p, stdin: stdin, python: python}
		}()
	}
}

// takeSpare returns the oldest spare (the likeliest to be ready), waiting
// for it to be launched, or nil when there is none.
func (s *server) takeSpare() *spare {
	if len(s.spares) == 0 {
		return nil
	}
	ch := s.spares[0]
	s.spares = s.spares[1:]
	return <-ch
}

func (sp *spare) discard() {
	if sp != nil {
		sp.stdin.Close()
		sp.p.kill()
	}
}

// maxHeader is the largest job header handed to a spare in one write; a
// larger job (a huge environment) gets a sandbox of its own.
const maxHeader = 32 << 10

// take gives the spare its job: argv, environment and then stdin, as a
// header on its stdin. It reports false (the spare is discarded) when the
// spare cannot take it, and the run starts a sandbox of its own.
func (sp *spare) take(s *server, req wire.Request, env []string) (*process, bool) {
	select {
	case <-sp.p.exited:
		sp.discard()
		return nil, false
	default:
	}
	mode := "exec"
	switch {
	case sp.python && inProcess(req.Argv, req.Env):
		mode = "run"
	case sp.python && !isPython(req.Argv):
		// The zygote's interpreter would stay in the program's peak memory
		// (the kernel's maxrss spans exec): another program gets a sandbox
		// of its own.
		sp.discard()
		return nil, false
	}
	head, ok := header(mode, req.Argv, env)
	if !ok {
		sp.discard()
		return nil, false
	}
	sp.p.oomBefore = oomKills()
	s.announceStart() // the program can act once it has its header
	if _, err := sp.stdin.Write(head); err != nil {
		// Announced, but nothing of the program ran: a sandbox of its own
		// follows, and the run's exit says how that one went.
		sp.discard()
		return nil, false
	}
	s.feed(sp.stdin, nil, req.Stdin)
	sp.p.relay(s, req.OutputCap, true)
	return sp.p, true
}

// header encodes a job for a spare: a 4-byte big-endian length, then
// NUL-separated fields: mode, argc, argv..., env.... It fails on a NUL in
// any field (which no program could receive anyway) or a header too large
// for one pipe write.
func header(mode string, argv, env []string) ([]byte, bool) {
	fields := append([]string{mode, strconv.Itoa(len(argv))}, argv...)
	fields = append(fields, env...)
	for _, f := range fields {
		if strings.IndexByte(f, 0) >= 0 {
			return nil, false
		}
	}
	body := strings.Join(fields, "\x00")
	if len(body)+4 > maxHeader {
		return nil, false
	}
	head := make([]byte, 4, 4+len(body))
	binary.BigEndian.PutUint32(head, uint32(len(body)))
	return append(head, body...), true
}

// inProcess reports whether the Python zygote may run the job in its own
// interpreter exactly as `python3 <file>` would: the job is a program file
// of ProgramDir, and its environment sets nothing the interpreter (or the
// image's sitecustomize) reads at start-up, except PYTHONPATH, which the
// zygote applies itself.
func inProcess(argv []string, jobEnv map[string]string) bool {
	if len(argv) != 2 || argv[0] != "python3" || !strings.HasPrefix(argv[1], wire.ProgramDir+"/") || !strings.HasSuffix(argv[1], ".py") {
		return false
	}
	for k := range jobEnv {
		if jobs.StartupVariable(k) {
			return false
		}
	}
	return true
}

// isPython says which spare suits the next run, going by the last one.
func isPython(argv []string) bool { return len(argv) > 0 && argv[0] == "python3" }
