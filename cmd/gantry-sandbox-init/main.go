// Command gantry-sandbox-init is pid 1 of every sandbox the warm
// interpreter makes (agent/warm.py; docs/ARCHITECTURE.md, "The warm
// interpreter"). The interpreter starts it first in the sandbox's new pid
// namespace, then forks the job's process beside it. It runs nothing of
// the job's: it reaps whatever the job leaves behind (orphans come to a
// pid namespace's first process) and, when the sandbox has egress, serves
// the egress relay on the listener the job's process bound in the
// sandbox's network namespace and passed it. The interpreter kills it when
// the job's process has ended, and the kernel then kills everything left
// in the namespace.
//
//	gantry-sandbox-init [-egress SOCKET]
//
// Descriptor 3 is a unix socket from the job's process: the relay's
// listener arrives on it, or nothing (the socket closes) when the sandbox
// has no egress. SOCKET is the agent's egress socket, as this process
// (in the container's mount namespace, not the sandbox's) sees it.
//
// It is installed execute-only (mode 0111), so the kernel makes it not
// dumpable from its first instruction on; it says so again itself. Its
// user namespace is the interpreter's, not the job's, where the job holds
// no capability: the job can neither trace it nor read its memory, its
// root or its descriptors. It is kept small (standard library only): every
// sandbox starts one.
package main

import (
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/gantryhq/gantry/agent/egressrelay"
)

func main() {
	const prSetDumpable = 4
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetDumpable, 0, 0)
	// Signals from inside its pid namespace reach a namespace's first
	// process only through a handler: the Go runtime installs one for
	// nearly every signal, so the usual ones are ignored outright. (One the
	// runtime must keep, sent by the job, can end this process, which ends
	// the job's sandbox: the job's own doing.)
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGUSR1,
		syscall.SIGUSR2, syscall.SIGPIPE, syscall.SIGALRM, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU,
		syscall.SIGVTALRM, syscall.SIGPROF, syscall.SIGXCPU, syscall.SIGXFSZ, syscall.SIGWINCH, syscall.SIGIO,
		syscall.SIGPWR, syscall.SIGTRAP, syscall.SIGABRT, syscall.SIGSYS, syscall.SIGSTKFLT)
	egress := ""
	if len(os.Args) == 3 && os.Args[1] == "-egress" {
		egress = os.Args[2]
	}
	go relay(egress)
	reap()
}

// relay serves the egress relay on the listener that arrives on
// descriptor 3, if one does.
func relay(socket string) {
	conn := os.NewFile(3, "init")
	defer conn.Close()
	buf, oob := make([]byte, 1), make([]byte, syscall.CmsgSpace(4))
	_, oobn, _, _, err := syscall.Recvmsg(3, buf, oob, syscall.MSG_CMSG_CLOEXEC)
	if err != nil || oobn == 0 || socket == "" {
		return
	}
	msgs, err := syscall.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return
	}
	fds, err := syscall.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		for _, fd := range fds {
			_ = syscall.Close(fd)
		}
		return
	}
	ln, err := net.FileListener(os.NewFile(uintptr(fds[0]), "egress-relay"))
	if err != nil {
		return
	}
	egressrelay.Serve(ln, socket)
}

// reap waits for every process that comes to it, for ever.
func reap() {
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	for {
		var st syscall.WaitStatus
		_, err := syscall.Wait4(-1, &st, syscall.WALL, nil)
		switch err {
		case nil, syscall.EINTR:
		case syscall.ECHILD:
			<-chld // none now: wait for one
		default:
			<-chld
		}
	}
}
