package agent

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/gantryhq/gantry/agent/wire"
)

// What a program's sandbox used: its init's account, reaped by the agent
// (reapInit, usage), the CPU time of a process tree (treeCPU), and the
// container's out-of-memory kills (oomKills).

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

// procTree names the processes a sandbox's runs are charged for: root
// and its descendants, and, in a sandbox the warm interpreter made, its
// init and what the init adopted (the orphans of root's tree). The init's
// other threads are Go's runtime and start nothing: its children are read
// from its main thread alone. 0 for either: none.
type procTree struct{ root, init int }

// treeCPU is the CPU time t's processes used so far, their own and what
// they reaped (in clock ticks: the difference of two is exact to a tick).
func treeCPU(t procTree) time.Duration {
	const tick = 10 * time.Millisecond // USER_HZ is 100 on Linux
	var total time.Duration
	t.each(func(p string) {
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
	})
	return total
}

// each calls fn with each of t's processes alive now (as /proc names
// them).
func (t procTree) each(fn func(p string)) {
	var todo []int
	if t.root > 0 {
		todo = append(todo, t.root)
	}
	if t.init > 0 {
		fn(strconv.Itoa(t.init))
		todo = append(todo, taskChildren(t.init, t.init)...)
	}
	for len(todo) > 0 {
		n := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		p := strconv.Itoa(n)
		fn(p)
		todo = append(todo, children(n)...)
	}
}

// resetPeaks sets the peak resident set (VmHWM) of pid and its
// descendants back to what each holds now (clear_refs 5, Linux 4.0). It
// returns the processes it could not reset (gantry's own, not dumpable:
// the sandbox's init and the processes that made it), whose peaks are not
// the job's; ok is false when it could reset none (gVisor has no
// clear_refs). A process that ended meanwhile is neither.
func resetPeaks(t procTree) (stale map[string]bool, ok bool) {
	stale = map[string]bool{}
	t.each(func(p string) {
		switch err := writeProc("/proc/"+p+"/clear_refs", "5"); {
		case err == nil:
			ok = true
		case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH):
		default:
			stale[p] = true
		}
	})
	return stale, ok
}

// writeProc writes s to a file of /proc, which exists or not.
func writeProc(path, s string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(s)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// treePeak is the largest peak resident set (VmHWM, KiB) among pid and
// its descendants alive now, but for those in skip; -1 when none could be
// read.
func treePeak(t procTree, skip map[string]bool) int64 {
	peak := int64(-1)
	t.each(func(p string) {
		if skip[p] {
			return
		}
		b, err := os.ReadFile("/proc/" + p + "/status")
		if err != nil {
			return
		}
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				if f := strings.Fields(v); len(f) > 0 { // "1234 kB"
					if n, err := strconv.ParseInt(f[0], 10, 64); err == nil {
						peak = max(peak, n)
					}
				}
				return
			}
		}
	})
	return peak
}

// peakEvery is how often a session job's peak memory is read while it
// runs: a process of the job that ends between two reads (less than this
// long after the last) is not seen.
const peakEvery = 50 * time.Millisecond

// peakWatch keeps the largest resident set any process of a session's
// sandbox reached while one job ran, from outside the sandbox (the
// session's interpreter runs the job's code, so its own word is not
// taken): every process's peak is reset as the job starts, then read
// every peakEvery and once more as the job ends. A process that lives on
// is measured exactly (its kernel-kept high-water mark); one that ended
// as of its last read.
type peakWatch struct {
	tree  procTree
	stale map[string]bool // not reset: left out (resetPeaks)
	mu    sync.Mutex
	max   int64 // -1: nothing read
	stop  chan struct{}
	done  chan struct{}
}

// watchPeak starts watching t's processes; nil when their peaks cannot be
// reset (the job's peak is then not known: none is reported).
func watchPeak(t procTree) *peakWatch {
	stale, ok := resetPeaks(t)
	if !ok {
		return nil
	}
	w := &peakWatch{tree: t, stale: stale, max: -1, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		t := time.NewTicker(peakEvery)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-t.C:
				w.read()
			}
		}
	}()
	return w
}

func (w *peakWatch) read() {
	n := treePeak(w.tree, w.stale)
	w.mu.Lock()
	w.max = max(w.max, n)
	w.mu.Unlock()
}

// take stops the watch and returns the peak (KiB), nil when w is nil or
// nothing could be read.
func (w *peakWatch) take() *int64 {
	if w == nil {
		return nil
	}
	close(w.stop)
	<-w.done
	w.read()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.max < 0 {
		return nil
	}
	n := w.max
	return &n
}

// usage is what the sandbox used (after exited closed): under Namespaces
// its init's account, which the agent reaped (reapInit), holding every
// process of the sandbox and not bubblewrap's own launcher (whose peak
// memory counts the agent's, by way of its exec); else, and when
// bubblewrap reaped the init itself, the first process's and its
// children's. nil when unknown.
func (p *process) usage() *wire.Usage {
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
	peak := ru.Maxrss
	return &wire.Usage{CPUTimeUS: cpu, PeakMemoryKB: &peak, WaitUS: p.reapWait.Microseconds()}
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
