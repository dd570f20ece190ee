// Command gantry-agent is the main process of every gantry sandbox
// container (see package agent). It is built static into the sandbox
// image and speaks to its runner over the container's stdin and stdout.
//
//	gantry-agent [-isolation namespaces|container]
//	gantry-agent exec -- PROGRAM ARGS...   (internal: raise the OOM score, then exec)
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"github.com/gantryhq/gantry/agent"
)

func main() {
	if len(os.Args) > 2 && os.Args[1] == "exec" && os.Args[2] == "--" {
		execProgram(os.Args[3:])
	}
	isolation := flag.String("isolation", string(agent.Namespaces), "how programs run: namespaces (a bubblewrap sandbox per program) or container")
	flag.Parse()
	cfg := agent.Config{Isolation: agent.Isolation(*isolation)}
	if cfg.Isolation != agent.Namespaces && cfg.Isolation != agent.Container {
		fmt.Fprintf(os.Stderr, "gantry-agent: -isolation=%q: want namespaces or container\n", *isolation)
		os.Exit(2)
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gantry-agent:", err)
		os.Exit(1)
	}
	cfg.Self = self
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
