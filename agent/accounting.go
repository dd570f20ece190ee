package agent

import (
	"bytes"
	"os"
	"strconv"
	"strings"
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
		n := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		p := strconv.Itoa(n)
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
			if tid, err := strconv.Atoi(t.Name()); err == nil {
				todo = append(todo, taskChildren(n, tid)...)
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
	return &wire.Usage{CPUTimeUS: cpu, PeakMemoryKB: ru.Maxrss, WaitUS: p.reapWait.Microseconds()}
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
