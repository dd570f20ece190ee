package agent

import (
	"os"
	"path/filepath"
	"strconv"

	"github.com/gantryhq/gantry/agent/wire"
)

// sandboxArgs are bubblewrap's arguments for one program (Namespaces):
//
//   - new user, mount, pid, ipc, uts, network and cgroup namespaces, and no
//     further user namespaces inside (--disable-userns);
//   - the agent's uid and gid (the container's unprivileged user) with no
//     capabilities, in a new session (no terminal to push input into);
//   - the image's root read-only; fresh /dev and /proc, with the same
//     paths hidden as Docker hides in containers; a fresh /tmp of tmpMB
//     (the size of the container's workspace);
//   - the container's /workspace, the skills (read-only) and the run's
//     program directory (read-only, as ProgramDir);
//   - bwrap's own init as pid 1: when the program's main process exits,
//     init exits and the kernel kills every process left in the namespace
//     (the job cannot trace it or write its memory, so cannot hold it);
//     --die-with-parent kills the sandbox if bwrap itself dies;
//   - (added by launch and probe) the job seccomp filter (seccomp.go).
//
// A compile step's sandbox (build) differs in two binds: the workspace is
// read-only, and the run's build directory is writable at BuildDir.
//
// The environment is bwrap's own, which the agent sets to the job's.
func (s *server) sandboxArgs(tmpMB int, runDir string, build bool) []string {
	uid, gid := strconv.Itoa(os.Getuid()), strconv.Itoa(os.Getgid())
	args := []string{
		"--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup",
		"--disable-userns", "--die-with-parent", "--new-session",
		"--uid", uid, "--gid", gid, "--cap-drop", "ALL",
		"--ro-bind", "/", "/",
		"--dev", "/dev",
		"--proc", "/proc",
	}
	args = append(args, s.masks...)
	// Pid 1 is bwrap's own init, the job's uid and dumpable: the seccomp
	// filter refuses ptrace and process_vm_* on it, and its memory file
	// is covered, so the job cannot stop or steer it.
	args = append(args, "--ro-bind", "/dev/null", "/proc/1/mem", "--ro-bind", "/dev/null", "/proc/1/task/1/mem")
	workspace := "--bind"
	if build {
		workspace = "--ro-bind"
	}
	args = append(args,
		"--size", strconv.Itoa(max(tmpMB, 1)<<20), "--tmpfs", "/tmp",
		workspace, wire.Workspace, wire.Workspace,
		"--ro-bind", s.skillsDir(), wire.SkillsDir,
		"--ro-bind", runDir, wire.ProgramDir,
	)
	if build {
		args = append(args, "--bind", buildDir(runDir), wire.BuildDir)
	}
	return append(args, "--chdir", wire.Workspace)
}

// buildDir is where, in the agent's run directory, a compile step's
// output goes: the program sees it as BuildDir.
func buildDir(runDir string) string { return filepath.Join(runDir, filepath.Base(wire.BuildDir)) }

// procMasks hides in a sandbox's /proc and /sys what Docker's default
// masked paths hide in a container (kernel memory and keys, timer and
// scheduler internals, firmware tables, hardware lists), for the paths
// that exist on this kernel. The container itself runs with /proc
// unmasked (bubblewrap cannot mount a new /proc over a masked one); bwrap
// also makes /proc/sys, /proc/sysrq-trigger, /proc/irq and /proc/bus
// read-only in every sandbox.
func procMasks() []string {
	var args []string
	for _, f := range []string{"kcore", "keys", "latency_stats", "timer_list", "timer_stats", "sched_debug"} {
		p := "/proc/" + f
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			args = append(args, "--ro-bind", "/dev/null", p)
		}
	}
	for _, d := range []string{"/proc/acpi", "/proc/asound", "/proc/scsi", "/sys/firmware"} {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			args = append(args, "--tmpfs", d, "--remount-ro", d)
		}
	}
	return args
}
