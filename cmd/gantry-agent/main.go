// Command gantry-agent is the main process of every gantry sandbox
// container (see package agent). It is built static into the sandbox
// image and speaks to its runner over the container's stdin and stdout.
//
//	gantry-agent [-isolation namespaces|container] [-warm numpy,pandas,...]
//	gantry-agent exec -- PROGRAM ARGS...   (internal: raise the OOM score, then exec)
//	gantry-agent init -- PROGRAM ARGS...   (internal: a container's pid 1 where Docker's --init is not there)
//	gantry-agent wait                      (internal: a spare sandbox's first process)
//	gantry-agent relay -- PROGRAM ARGS...  (internal: an egress job's first process)
package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/gantryhq/gantry/agent"
	"github.com/gantryhq/gantry/agent/wire"
)

// prSetDumpable is PR_SET_DUMPABLE (linux/prctl.h).
const prSetDumpable = 4

func main() {
	if len(os.Args) > 2 && os.Args[1] == "exec" && os.Args[2] == "--" {
		execProgram(os.Args[3:])
	}
	if len(os.Args) > 3 && os.Args[1] == "init" && os.Args[2] == "--" {
		os.Exit(initProcess(os.Args[3:]))
	}
	if len(os.Args) == 2 && os.Args[1] == "wait" {
		waitForJob()
	}
	if len(os.Args) > 2 && os.Args[1] == "relay" && os.Args[2] == "--" {
		os.Exit(agent.RelayThenRun(os.Args[3:]))
	}
	isolation := flag.String("isolation", string(wire.Namespaces), "how programs run: namespaces (a sandbox per program) or container")
	warm := flag.String("warm", "", "comma-separated modules the warm interpreter imports (namespaces only; empty: no warm interpreter)")
	flag.Parse()
	cfg := agent.Config{Isolation: wire.Isolation(*isolation)}
	for _, m := range strings.Split(*warm, ",") {
		if m = strings.TrimSpace(m); m != "" {
			cfg.Warm = append(cfg.Warm, m)
		}
	}
	if cfg.Isolation != wire.Namespaces && cfg.Isolation != wire.Container {
		fmt.Fprintf(os.Stderr, "gantry-agent: -isolation=%q: want namespaces or container\n", *isolation)
		os.Exit(2)
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gantry-agent:", err)
		os.Exit(1)
	}
	cfg.Self = self
	// Programs run as the agent's uid; under the container isolation they
	// share its pid namespace. Not dumpable, the agent cannot be traced
	// and its memory cannot be read or written by them (what it starts
	// with exec is dumpable again).
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetDumpable, 0, 0); errno != 0 {
		fmt.Fprintln(os.Stderr, "gantry-agent: prctl(PR_SET_DUMPABLE):", errno)
		os.Exit(1)
	}
	err = agent.Serve(cfg, os.Stdin, os.Stdout)
	if err != nil && !errors.Is(err, agent.ErrRunnerGone) {
		fmt.Fprintln(os.Stderr, "gantry-agent:", err)
		os.Exit(1)
	}
}

// execProgram makes the kernel's out-of-memory killer pick the program
// (and all it starts) before the agent, then becomes the program.
func execProgram(argv []string) {
	if len(argv) == 0 {
		os.Exit(2)
	}
	_ = os.WriteFile("/proc/self/oom_score_adj", []byte("1000"), 0)
	path, err := exec.LookPath(argv[0])
	if err == nil {
		err = syscall.Exec(path, argv, os.Environ())
	}
	fmt.Fprintf(os.Stderr, "gantry: cannot run %s: %v\n", argv[0], err)
	os.Exit(127)
}

// waitForJob is the first process of a spare sandbox (see package agent):
// it says it is ready on stderr, reads its job's header from stdin (the
// job's own stdin follows, untouched) and becomes the job's program.
func waitForJob() {
	_, _ = os.Stderr.Write([]byte("\x00gantry-ready\n"))
	var size [4]byte
	if _, err := io.ReadFull(os.Stdin, size[:]); err != nil {
		os.Exit(0) // the agent went away before a job came
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(os.Stdin, body); err != nil {
		os.Exit(0)
	}
	fields := strings.Split(string(body), "\x00")
	argc, err := strconv.Atoi(fields[min(1, len(fields)-1)])
	if err != nil || argc < 1 || len(fields) < 2+argc {
		fmt.Fprintln(os.Stderr, "gantry: malformed job header")
		os.Exit(127)
	}
	argv, env := fields[2:2+argc], fields[2+argc:]
	path := argv[0]
	if !strings.Contains(path, "/") {
		path = lookPath(path, env)
	}
	err = syscall.Exec(path, argv, env)
	fmt.Fprintf(os.Stderr, "gantry: cannot run %s: %v\n", argv[0], err)
	os.Exit(127)
}

// lookPath finds name in the PATH of env.
func lookPath(name string, env []string) string {
	for _, kv := range env {
		if dirs, ok := strings.CutPrefix(kv, "PATH="); ok {
			for _, dir := range filepath.SplitList(dirs) {
				p := filepath.Join(dir, name)
				if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
					return p
				}
			}
		}
	}
	return name
}

// initProcess is a container's pid 1 where no init of Docker's runs (the
// runner's own gVisor containers): it runs the program (the agent) as its
// child, passes signals on to it, reaps every process orphaned into the
// container, and ends with the program's status, as tini does for Docker.
func initProcess(argv []string) int {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "gantry-agent init: %v\n", err)
		return 127
	}
	child := cmd.Process.Pid
	go func() {
		for s := range sigs {
			_ = syscall.Kill(child, s.(syscall.Signal))
		}
	}()
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return 127
		}
		if pid != child {
			continue // an orphan, reaped
		}
		if ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ws.ExitStatus()
	}
}
