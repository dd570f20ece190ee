package agent

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
	"unsafe"

	"github.com/gantryhq/gantry/agent/wire"
)

// RelayThenRun is `gantry-agent relay -- PROGRAM ARGS...`: the first
// process of an egress job's sandbox. It listens on EgressProxy in the
// sandbox's own network namespace (where the program's HTTP_PROXY
// points), connects each connection to the agent's EgressSocket, runs the
// program as its child and ends as the program ends (its exit status, or
// the signal that killed it). The program can kill it, which ends the job:
// nothing of gantry's depends on it.
func RelayThenRun(argv []string) int {
	if len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "gantry: relay: no program")
		return 127
	}
	ln, err := net.Listen("tcp", wire.EgressProxy)
	if err != nil {
		fmt.Fprintf(os.Stderr, "gantry: the egress proxy could not listen on %s: %v\n", wire.EgressProxy, err)
		return 127
	}
	go serveRelay(ln)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// Signals meant for the job reach the program too.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "gantry: cannot run %s: %v\n", argv[0], err)
		return 127
	}
	go func() {
		for s := range sigs {
			_ = cmd.Process.Signal(s)
		}
	}()
	err = cmd.Wait()
	ln.Close()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			// Die by the same signal, so the sandbox reports it alike.
			signal.Reset(ws.Signal())
			_ = syscall.Kill(os.Getpid(), ws.Signal())
		}
		return ee.ExitCode()
	}
	if err != nil {
		return 127
	}
	return 0
}

// ServeRelay is `gantry-agent relay -fd N`: the egress relay of a sandbox
// the warm interpreter made, serving the listener its init bound on the
// layout's egress address and passed as descriptor fd, for as long as the
// sandbox lives. It is the relay RelayThenRun runs, without a program.
func ServeRelay(fd int) int {
	// Named for what it is among the sandbox's processes.
	name := []byte("egress-relay\x00")
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_NAME, uintptr(unsafe.Pointer(&name[0])), 0)
	ln, err := net.FileListener(os.NewFile(uintptr(fd), "egress-relay"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "gantry: relay: descriptor %d is no listener: %v\n", fd, err)
		return 127
	}
	serveRelay(ln)
	return 0
}

// serveRelay joins each connection ln accepts to the agent's egress
// socket, until ln is closed.
func serveRelay(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // out of descriptors: do not spin
			continue
		}
		go splice(c)
	}
}

// splice joins a program's proxy connection to the agent's socket.
func splice(c net.Conn) {
	defer c.Close()
	up, err := net.Dial("unix", wire.EgressSocket)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(up, c)
		if cw, ok := up.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		close(done)
	}()
	_, _ = io.Copy(c, up)
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	<-done
}
