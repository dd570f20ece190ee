package agent

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/gantryhq/gantry/agent/egressrelay"
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

// serveRelay joins each connection ln accepts to the agent's egress
// socket, until ln is closed.
func serveRelay(ln net.Listener) { egressrelay.Serve(ln, wire.EgressSocket) }
