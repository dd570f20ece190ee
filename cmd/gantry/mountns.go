package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

// envPrivateMounts marks the gantry that privateMounts started.
const envPrivateMounts = "GANTRY_PRIVATE_MOUNTS"

// privateMounts runs this gantry again (a runner, or dev with its runner)
// in a mount namespace of its own when its runner will keep live state
// under gVisor: that runner mounts sandbox images' layers as gVisor's
// root filesystems (runner/gvisor.go), and in a namespace of its own those
// mounts end with it however it ends, where a runner killed outright would
// leave them on the host. The first process only waits for the second,
// passing it the signals that stop a gantry, and exits as it does
// (handled). Where no namespace can be made (no CAP_SYS_ADMIN), gantry
// runs as it is and unmounts what it mounted when it stops.
func privateMounts(cfg config) (handled bool, err error) {
	if os.Getenv(envPrivateMounts) != "" || os.Geteuid() != 0 || cfg.LiveState == "memory" {
		return false, nil
	}
	if cfg.Runsc == "" {
		if _, err := exec.LookPath("runsc"); err != nil {
			return false, nil // live state in memory: nothing is mounted
		}
	}
	self, err := os.Executable()
	if err != nil {
		return false, nil
	}
	cmd := exec.Command(self, os.Args[1:]...)
	cmd.Env = append(os.Environ(), envPrivateMounts+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// Go makes the new namespace's mounts private (MS_REC|MS_PRIVATE on
	// /), so nothing mounted in it reaches the host's.
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) {
			return false, nil
		}
		return true, fmt.Errorf("start gantry in a mount namespace of its own: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case s := <-sigs:
			_ = cmd.Process.Signal(s)
		case err := <-done:
			var ee *exec.ExitError
			switch {
			case err == nil:
				return true, nil
			case errors.As(err, &ee):
				code := ee.ExitCode()
				if code < 0 { // killed by a signal
					code = 128 + int(ee.Sys().(syscall.WaitStatus).Signal())
				}
				return true, &exitError{code: code}
			default:
				return true, err
			}
		}
	}
}
