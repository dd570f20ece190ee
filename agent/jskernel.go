package agent

import (
	"bytes"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/gantryhq/gantry/agent/wire"
)

// A stateful session's JavaScript and TypeScript jobs run as cells of a
// kernel: a Node process of the live sandbox (jskernel.js), started by the
// process service at the kernel's first cell, whose globals persist from
// cell to cell, as the session's Python interpreter keeps its own. A
// session may have several, each named (wire.Request.Kernel; by default
// the language's own) and tagged with wire.KernelTag among the sandbox's
// processes, where live operations list and signal it. The agent holds the
// kernel's stdin, on which it sends each cell (one JSON line), and its
// stdout and stderr, which carry each cell's output between markers that
// name it (jsCell): what a kernel writes while a cell runs is the cell's
// (a timer an earlier cell left included); what comes between cells is
// dropped. A cell that runs past its timeout kills its kernel (the runner
// then ends the session's live sandbox, as after a Python cell's timeout);
// a cell that ends its kernel (process.exit) reports its exit, and the
// kernel's next cell starts a new one.

//go:embed jskernel.js
var jsKernelSource string

// kernelCell reports whether a stateful run is a cell of a kernel: a Node
// or TypeScript program file run as the runner runs it (nodeProgram),
// without arguments. It returns the kernel's language ("javascript" or
// "typescript") and the program's path in the sandbox.
func kernelCell(argv []string) (language, path string, ok bool) {
	language, path, args, ok := nodeProgram(argv)
	if !ok || len(args) > 0 {
		return "", "", false
	}
	return language, path, true
}

// jsKernel is a kernel of the live sandbox, as the agent holds it.
type jsKernel struct {
	name, language string
	proc           *liveProc
	ps             *processService
	stdin          *os.File
	// outEnd and errEnd are closed when its stdout and stderr ended (every
	// process holding them gone).
	outEnd, errEnd chan struct{}

	mu   sync.Mutex
	cell *runningCell // the cell running, nil between cells
}

func (k *jsKernel) ended() bool {
	select {
	case <-k.proc.ended:
		return true
	default:
		return false
	}
}

// kill kills the kernel (its end comes as the process service reports it).
func (k *jsKernel) kill() { _ = k.ps.signal(k.proc.pid, int(syscall.SIGKILL)) }

// kernelLanguageError: a cell names a kernel of another language.
type kernelLanguageError struct{ name, runs, wants string }

func (e *kernelLanguageError) Error() string {
	return fmt.Sprintf("the session's kernel %q runs %s, not %s; name another kernel", e.name, e.runs, e.wants)
}

// kernel is the live sandbox's kernel of that name, started if it does not
// run. One of another language under the name is a *kernelLanguageError.
func (l *liveSandbox) kernel(name, language string) (*jsKernel, error) {
	if k := l.kernels[name]; k != nil && !k.ended() {
		if k.language != language {
			return nil, &kernelLanguageError{name: name, runs: k.language, wants: language}
		}
		return k, nil
	}
	ps := l.processes()
	if ps == nil || ps.isGone() {
		return nil, errors.New("the session's process service is not running: its kernel cannot start")
	}
	k, err := ps.startKernel(name, language)
	if err != nil {
		return nil, fmt.Errorf("start the session's %s kernel: %w", language, err)
	}
	if l.kernels == nil {
		l.kernels = map[string]*jsKernel{}
	}
	l.kernels[name] = k
	return k, nil
}

// startKernel starts a kernel with the sandbox's own environment, in the
// workspace; its streams are the agent's.
func (ps *processService) startKernel(name, language string) (*jsKernel, error) {
	var ends []*os.File // the kernel's ends, closed once sent
	defer func() {
		for _, f := range ends {
			f.Close()
		}
	}()
	pipe := func() (r, w *os.File, err error) {
		if r, w, err = os.Pipe(); err == nil {
			ends = append(ends, r, w)
		}
		return r, w, err
	}
	inR, inW, err := pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := pipe()
	if err != nil {
		return nil, err
	}
	// Listed as what it is; started with the kernel's source.
	p := &liveProc{started: make(chan struct{}), ended: make(chan struct{}),
		info: wire.Process{Argv: []string{"node", "jskernel.js", language}, Cwd: wire.Workspace, Tag: wire.KernelTag(name, language)}}
	k := &jsKernel{name: name, language: language, proc: p, ps: ps, stdin: inW,
		outEnd: make(chan struct{}), errEnd: make(chan struct{})}
	ends = slices.DeleteFunc(ends, func(f *os.File) bool { return f == inW || f == outR || f == errR })
	go k.read(outR, wire.KindStdout, k.outEnd)
	go k.read(errR, wire.KindStderr, k.errEnd)
	argv := []string{"node", "-e", jsKernelSource, "--", language}
	if err := ps.start(p, argv, environ(nil), inR, outW, errW); err != nil {
		inW.Close()
		return nil, err
	}
	return k, nil
}

// read passes one of the kernel's streams to the cell running, until it
// ends; what comes between cells is dropped.
func (k *jsKernel) read(f *os.File, kind wire.Kind, end chan struct{}) {
	defer close(end)
	defer f.Close()
	buf := make([]byte, wire.Chunk)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			k.mu.Lock()
			if c := k.cell; c != nil {
				c.take(kind, buf[:n])
			}
			k.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// runningCell is a cell's part of its kernel's output: stdout and stderr
// each read up to the cell's end marker, the cell's own output sent as the
// run's, up to its cap a stream.
type runningCell struct {
	s        *server
	out, err *jsCell
	cap      int
	sent     map[wire.Kind]int
	done     chan struct{} // both end markers came
	doneOnce sync.Once
}

func newRunningCell(s *server, id string, cap int) *runningCell {
	if cap <= 0 {
		cap = 1 << 20
	}
	return &runningCell{s: s, out: newJSCell(id), err: newJSCell(id), cap: cap, sent: map[wire.Kind]int{}, done: make(chan struct{})}
}

// take reads a chunk of the kernel's stream (under the kernel's lock).
func (c *runningCell) take(kind wire.Kind, data []byte) {
	cell := c.out
	if kind == wire.KindStderr {
		cell = c.err
	}
	cell.feed(data, func(text string) {
		// One byte past the cap tells the runner output was cut.
		if room := c.cap + 1 - c.sent[kind]; room > 0 {
			take := min(room, len(text))
			_ = c.s.fw.Frame(kind, []byte(text[:take]))
			c.sent[kind] += take
		}
	})
	if c.out.done && c.err.done {
		c.doneOnce.Do(func() { close(c.done) })
	}
}

// kernelResult is what the kernel says of a cell at its end.
type kernelResult struct {
	Code  int             `json:"code"`
	Value json.RawMessage `json:"value"`
	Error json.RawMessage `json:"error"`
}

// startCell runs a stateful run's program as a cell of its kernel.
func (s *server) startCell(l *liveSandbox, req wire.Request, language, path string, info *wire.Live) (running, error) {
	name := req.Kernel
	if name == "" {
		name = language
	}
	k, err := l.kernel(name, language)
	var wrong *kernelLanguageError
	if errors.As(err, &wrong) {
		// The job's mistake, not the sandbox's: a program that fails.
		s.announceStart()
		_ = s.fw.Frame(wire.KindStderr, []byte("gantry: "+wrong.Error()+"\n"))
		return endedJob(wire.Exit{Started: true, Code: 1, Live: info}), nil
	}
	if err != nil {
		return nil, err
	}
	var nonce [16]byte
	_, _ = rand.Read(nonce[:])
	id := hex.EncodeToString(nonce[:])
	line, err := json.Marshal(map[string]any{"id": id, "path": path, "env": req.Env})
	if err != nil {
		return nil, err
	}
	c := newRunningCell(s, id, req.OutputCap)
	k.mu.Lock()
	k.cell = c
	k.mu.Unlock()
	j := &cellJob{k: k, c: c, info: info, oomBefore: oomKills(), cpuBefore: treeCPU(l.tree()), peakWatch: watchPeak(l.tree()), tree: l.tree(),
		finished: make(chan struct{})}
	s.announceStart()
	_ = k.stdin.SetWriteDeadline(time.Now().Add(stdinWait))
	if _, err := k.stdin.Write(append(line, '\n')); err != nil {
		// The kernel is gone or stuck: the cell ends as the kernel does.
		k.kill()
	}
	go j.follow()
	return j, nil
}

// cellJob is a cell running in its kernel.
type cellJob struct {
	k         *jsKernel
	c         *runningCell
	info      *wire.Live
	oomBefore int
	cpuBefore time.Duration
	peakWatch *peakWatch // as a Python cell's: from outside
	tree      procTree
	finished  chan struct{}

	// Set before finished closes.
	result *kernelResult
	code   int
	cpu    time.Duration
	peak   *int64

	mu       sync.Mutex
	timedOut bool
}

// follow waits for the cell's end markers, or its kernel's end (then what
// its streams still hold, for a moment).
func (j *cellJob) follow() {
	defer close(j.finished)
	select {
	case <-j.c.done:
	case <-j.k.proc.ended:
		t := time.NewTimer(200 * time.Millisecond)
		for _, end := range []chan struct{}{j.k.outEnd, j.k.errEnd} {
			select {
			case <-end:
			case <-j.c.done:
			case <-t.C:
			}
		}
		t.Stop()
	}
	j.k.mu.Lock()
	j.k.cell = nil
	ended := j.c.out.done && j.c.err.done
	j.k.mu.Unlock()
	j.cpu, j.peak = treeCPU(j.tree)-j.cpuBefore, j.peakWatch.take()
	var res kernelResult
	switch {
	case ended && json.Unmarshal(j.c.out.result, &res) == nil:
		j.result = &res
		return
	case ended:
		// It answered something malformed: it is not to be trusted.
		j.k.kill()
		j.code = 255
		return
	}
	// The kernel ended under the cell: its exit status is the cell's.
	st, err := j.k.ps.status(j.k.proc.pid)
	switch {
	case err != nil || st.Exit == nil:
		j.code = 255
	case st.Exit.Signal > 0:
		j.code = 128 + st.Exit.Signal
	default:
		j.code = st.Exit.Code
	}
}

func (j *cellJob) wait() <-chan struct{} { return j.finished }
func (j *cellJob) abandon()              { j.k.kill() }

// expire kills the cell's kernel: a cell cannot be stopped alone.
func (j *cellJob) expire() {
	j.mu.Lock()
	j.timedOut = true
	j.mu.Unlock()
	j.k.kill()
}

func (j *cellJob) exit() (wire.Exit, error) {
	<-j.finished
	j.mu.Lock()
	e := wire.Exit{Started: true, Live: j.info, TimedOut: j.timedOut, Code: j.code}
	j.mu.Unlock()
	e.Usage = &wire.Usage{CPUTimeUS: max(j.cpu.Microseconds(), 0), PeakMemoryKB: j.peak}
	if r := j.result; r != nil {
		e.Code = r.Code
		if len(r.Value) > 0 && string(r.Value) != "null" {
			e.Value = r.Value
		}
		if len(r.Error) > 0 && string(r.Error) != "null" {
			e.Exception = r.Error
		}
	}
	if e.Code > 128 && e.Code < 128+65 {
		e.Signal = e.Code - 128
	}
	e.OOMKills = max(oomKills()-j.oomBefore, 0)
	return e, nil
}

// jsCell reads one cell's part of one of its kernel's streams: what
// follows its start marker is its output, up to its end marker, which
// carries its result.
type jsCell struct {
	start, end    []byte
	buf           []byte
	started, done bool
	result        []byte
}

// maxCellResult bounds what an end marker may carry (untrusted: the
// cell's own code writes to the same stream).
const maxCellResult = 4 << 20

func newJSCell(id string) *jsCell {
	return &jsCell{start: []byte("\x1e" + id + ":start\n"), end: []byte("\x1e" + id + ":end:")}
}

// feed takes a chunk of the stream, passing the cell's own output to emit.
func (c *jsCell) feed(data []byte, emit func(string)) {
	if c.done {
		return
	}
	c.buf = append(c.buf, data...)
	if !c.started {
		i := bytes.Index(c.buf, c.start)
		if i < 0 {
			// Another cell's output: keep only what could begin the marker.
			if keep := len(c.start) - 1; len(c.buf) > keep {
				c.buf = c.buf[len(c.buf)-keep:]
			}
			return
		}
		c.buf, c.started = c.buf[i+len(c.start):], true
	}
	if j := bytes.Index(c.buf, c.end); j >= 0 {
		if j > 0 {
			emit(string(c.buf[:j]))
		}
		rest := c.buf[j+len(c.end):]
		k := bytes.Index(rest, []byte("\x1e\n"))
		if k < 0 && len(rest) < maxCellResult {
			c.buf = c.buf[j:] // the rest of the marker is still to come
			return
		}
		if k < 0 {
			k = len(rest)
		}
		c.result, c.done = rest[:k], true
		return
	}
	// All but what could begin the end marker is the cell's.
	cut := len(c.buf)
	if i := bytes.LastIndexByte(c.buf, 0x1e); i >= 0 && len(c.buf)-i < len(c.end) {
		cut = i
	}
	if cut > 0 {
		emit(string(c.buf[:cut]))
	}
	c.buf = append([]byte(nil), c.buf[cut:]...)
}
