package agent

import (
	_ "embed"
	"encoding/binary"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/gantryhq/gantry/agent/wire"
	"github.com/gantryhq/gantry/jobs"
)

// A spare is the next run's sandbox, made as soon as the last run's
// program started, so that a run costs neither the sandbox's set-up nor
// (for Python) the interpreter's start. It is made from the same layout as
// any run's sandbox (its workspace, skills and program directory bound in,
// which the run fills later); only its first process differs: it waits
// for its job. Two launchers make spares:
//
//   - a warm interpreter (the full one or the lean one, lean.go) forks
//     one whose job process, locked down, waits on a socket whose other
//     end the agent holds for the job's streams and description
//     (warmSpare);
//   - bubblewrap makes one whose first process waits on stdin for a job
//     header: spare.py (a Python interpreter started ahead, which runs a
//     Python program in itself or execs anything else), nodespare.js (a
//     Node started ahead, which runs a Node or TypeScript program in
//     itself: nodespare.go) or this binary's "wait", which execs
//     (bwrapSpare).
//
// Which kind, and how many, is decided here only (topUpSpares): at most
// maxSpares, of the kind the last job suggests the next will want. A
// spare serves one job, like any sandbox.
type spare interface {
	// suits reports whether the spare may run the request's program.
	suits(req wire.Request) bool
	// take starts the job in the spare, false when it cannot (it is then
	// discarded, and the run starts elsewhere).
	take(s *server, req wire.Request, env []string) (running, bool)
	// interpreter is the warm interpreter that made it (nil: bubblewrap).
	interpreter() *warm
	// discard ends the spare unused.
	discard()
}

// maxSpares is how many sandboxes the agent keeps ahead of its jobs. With
// two, a job takes a spare that has had two jobs' time to start, so back
// to back jobs rarely wait for one.
const maxSpares = 2

// spareKind is what a spare's first process is.
type spareKind int

const (
	spareWait   spareKind = iota // bwrap, `gantry-agent wait`: execs the job's program
	sparePython                  // bwrap, spare.py: a Python already started
	spareNode                    // bwrap, nodespare.js: a Node already started
	spareWarm                    // a fork of the warm interpreter
	spareLean                    // a fork of the lean interpreter (lean.go)
)

// topUpSpares starts sandboxes in the background until maxSpares are made
// or being made (one under the Container isolation, where the container
// serves one job): warm forks after a Python job (the lean interpreter's
// after a job it ran, lean), Python interpreters after another Python job when there is no warm
// interpreter, Nodes after a Node or TypeScript job, else waiting
// processes. When every place is taken by spares of other kinds, the
// oldest of them makes room for one of this kind: a container whose jobs
// alternate between two kinds keeps one of each, instead of discarding
// the head at every job.
func (s *server) topUpSpares(last wire.Request, lean bool) {
	kind := spareWait
	switch {
	case isPython(last.Argv) && lean:
		kind = spareLean
	case isPython(last.Argv) && s.warm != nil && s.warm.waitReady(0):
		kind = spareWarm
	case isPython(last.Argv) && s.warm == nil:
		kind = sparePython
	case isNode(last.Argv):
		kind = spareNode
	}
	limit := maxSpares
	if s.cfg.Isolation == wire.Container {
		limit = 1
	}
	if len(s.spares) >= limit && !slices.ContainsFunc(s.spares, func(p pendingSpare) bool { return p.kind == kind }) {
		s.dropSpare(0)
	}
	for len(s.spares) < limit {
		ch := make(chan spare, 1)
		s.spares = append(s.spares, pendingSpare{kind: kind, ch: ch})
		go func() {
			sp, err := s.makeSpare(kind)
			if err != nil {
				ch <- nil
				return
			}
			ch <- sp
		}()
	}
}

// dropSpare discards the i-th pending spare (in the background once it is
// made: the run does not wait for it).
func (s *server) dropSpare(i int) {
	ch := s.popSpare(i)
	go func() {
		if sp := <-ch; sp != nil {
			sp.discard()
		}
	}()
}

// popSpare takes the i-th pending spare out of the list; its channel
// delivers it once it is made.
func (s *server) popSpare(i int) chan spare {
	ch := s.spares[i].ch
	s.spares = slices.Delete(s.spares, i, i+1)
	return ch
}

// makeSpare makes a spare of the kind.
func (s *server) makeSpare(kind spareKind) (spare, error) {
	switch kind {
	case spareWarm:
		return s.warmSpare(s.warm)
	case spareLean:
		return s.warmSpare(s.lean)
	}
	argv := []string{s.cfg.Self, "wait"}
	switch kind {
	case sparePython:
		argv = []string{"python3", "-c", spareSource}
	case spareNode:
		argv = nodeSpareArgv()
	}
	p, stdin, err := s.launch(argv, environ(nil), launchOpts{stdin: true})
	if err != nil {
		return nil, err
	}
	return &bwrapSpare{p: p, stdin: stdin, kind: kind}, nil
}

// pendingSpare is a spare being made, delivered on ch (nil if it could
// not be made).
type pendingSpare struct {
	kind spareKind
	ch   chan spare
}

// takeSpare returns the oldest spare of a kind that may suit the request
// (with w, only one a warm interpreter made, the lean one's first when w
// is the lean one; without, any other),
// waiting for it to be made, if it does suit it; nil when there is none or
// it does not (it is then discarded). Spares of other kinds stay for the
// jobs they suit (under the Container isolation, where the container
// serves one job, they are discarded first). An egress job takes none: no
// spare serves the egress relay.
func (s *server) takeSpare(req wire.Request, w *warm) spare {
	if req.Egress {
		return nil
	}
	if s.cfg.Isolation == wire.Container {
		// The container serves this one job, and a spare is a process of
		// it: one that may not run the job goes before the job starts.
		for i := len(s.spares) - 1; i >= 0; i-- {
			if !s.mayRun(s.spares[i].kind, req, w) {
				if sp := <-s.popSpare(i); sp != nil {
					sp.discard()
				}
			}
		}
	}
	i := -1
	if w != nil && w == s.lean {
		i = slices.IndexFunc(s.spares, func(p pendingSpare) bool { return p.kind == spareLean })
	}
	if i < 0 {
		i = slices.IndexFunc(s.spares, func(p pendingSpare) bool { return s.mayRun(p.kind, req, w) })
	}
	if i < 0 {
		return nil
	}
	sp := <-s.popSpare(i)
	if sp == nil {
		return nil
	}
	if !sp.suits(req) {
		sp.discard()
		return nil
	}
	return sp
}

// mayRun reports whether a spare of kind k may run the request, before it
// is made (the spare's suits decides then), w being the interpreter chosen
// for it (warmFor): a fork of the full interpreter what either warm
// interpreter runs (a program the lean one runs imports only what the
// full one has too), a fork of the lean one only what it runs, the others
// only what neither runs, a Python spare a Python program and a Node spare
// a Node one.
func (s *server) mayRun(k spareKind, req wire.Request, w *warm) bool {
	switch k {
	case spareWarm:
		return w != nil
	case spareLean:
		return w != nil && w == s.lean
	case sparePython:
		return w == nil && isPython(req.Argv)
	case spareNode:
		return w == nil && isNode(req.Argv)
	}
	return w == nil
}

// spareSource is the Python of a bubblewrap spare: the shared program
// runner, then the spare's own part.
var spareSource = pyrunSource + "\n" + spareMain

var (
	//go:embed pyrun.py
	pyrunSource string
	//go:embed spare.py
	spareMain string
)

// bwrapSpare is a bubblewrap sandbox whose first process waits on stdin
// for its job's header.
type bwrapSpare struct {
	p     *process
	stdin *os.File
	kind  spareKind
}

func (sp *bwrapSpare) interpreter() *warm { return nil }

// suits: a Python spare runs Python programs only (its interpreter would
// stay in another program's peak memory: the kernel's maxrss spans exec);
// a Node spare only what it runs in itself.
func (sp *bwrapSpare) suits(req wire.Request) bool {
	switch sp.kind {
	case sparePython:
		return isPython(req.Argv)
	case spareNode:
		_, ok := nodeJobOf(req.Argv, req.Env, nil)
		return ok
	}
	return true
}

func (sp *bwrapSpare) discard() {
	sp.stdin.Close()
	sp.p.kill()
}

// maxHeader is the largest job header handed to a spare in one write; a
// larger job (a huge environment) gets a sandbox of its own.
const maxHeader = 32 << 10

// take gives the spare its job: argv, environment and then stdin, as a
// header on its stdin.
func (sp *bwrapSpare) take(s *server, req wire.Request, env []string) (running, bool) {
	select {
	case <-sp.p.exited:
		sp.discard()
		return nil, false
	default:
	}
	var head []byte
	ok := false
	if job, node := nodeJobOf(req.Argv, req.Env, env); sp.kind == spareNode && node {
		head, ok = job.header()
	} else if sp.kind != spareNode {
		mode := "exec"
		if sp.kind == sparePython && inProcess(req.Argv, req.Env) {
			mode = "run"
		}
		head, ok = header(mode, req.Argv, env)
	}
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

// warmSpare is a sandbox the warm interpreter forked ahead: its job
// process waits, locked down, on sock for the job's stdin, stdout, stderr
// and description.
type warmSpare struct {
	w      *warm
	sock   *net.UnixConn
	events <-chan warmEvent
}

// warmSpare asks warm interpreter w for a spare.
func (s *server) warmSpare(w *warm) (spare, error) {
	pair, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	ours, theirs := os.NewFile(uintptr(pair[0]), "spare"), os.NewFile(uintptr(pair[1]), "spare-child")
	defer theirs.Close()
	fc, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		return nil, err
	}
	events, err := w.start(warmRequest{Kind: "spare", Layout: s.sandboxLayout(int(capacity(wire.Workspace)>>20), s.runDir(), false, false)},
		int(theirs.Fd()))
	if err != nil {
		fc.Close()
		return nil, err
	}
	return &warmSpare{w: w, sock: fc.(*net.UnixConn), events: events}, nil
}

func (sp *warmSpare) interpreter() *warm { return sp.w }

// suits: a Python program the warm interpreter may run.
func (sp *warmSpare) suits(req wire.Request) bool { return warmEligible(req.Argv, req.Env) }

// discard closes the spare's socket: its job process ends, and so does
// its sandbox (the interpreter reports the end, which nobody reads).
func (sp *warmSpare) discard() { sp.sock.Close() }

// take sends the job to the spare's job process, then follows it as a
// forked job (warmJob).
func (sp *warmSpare) take(s *server, req wire.Request, env []string) (running, bool) {
	select {
	case ev, ok := <-sp.events:
		if !ok || ev.Event != "started" { // it failed, or the interpreter died
			sp.discard()
			return nil, false
		}
	default:
	}
	p, err := s.startWarmJob(req, env, func(fds ...int) (<-chan warmEvent, error) {
		_, _, err := sp.sock.WriteMsgUnix([]byte("job"), syscall.UnixRights(fds...), nil)
		return sp.events, err
	})
	sp.sock.Close()
	if err != nil {
		return nil, false
	}
	return p, true
}

// inProcess reports whether a Python interpreter may run the job in itself
// exactly as `python3 <file>` would: the job is a program file of
// ProgramDir, and its environment sets nothing the interpreter (or the
// image's sitecustomize) reads at start-up, except PYTHONPATH, which is
// applied in process.
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
