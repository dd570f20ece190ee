package agent

import (
	"os"
	"path/filepath"
	"strconv"

	"github.com/gantryhq/gantry/agent/wire"
)

// The sandbox layout: what a program's sandbox is made of, defined once
// here and rendered two ways, as bubblewrap's arguments (bwrapArgs) and
// as the steps the warm interpreter's forked sandboxes carry out (the
// JSON of layout, which warm.py executes without adding to it). Every
// launcher makes its sandbox from a layout, so every sandbox has the same
// namespaces and mount table (TestLayoutMountTable pins it):
//
//   - new user, mount, pid, ipc, uts, network and cgroup namespaces, and no
//     further user namespaces inside; the agent's uid and gid mapped to
//     themselves, no capabilities;
//   - the container's mounts read-only (bubblewrap's --ro-bind / /);
//   - a fresh /dev with the usual devices, its own pts and shm; a fresh
//     /proc, with the paths Docker masks in a container hidden and the
//     kernel's knobs read-only;
//   - a fresh /tmp, /var/tmp and /dev/shm, each of the workspace's size
//     (HOME is /tmp in the image): the writable places of an ordinary machine,
//     gone with the sandbox (a session's live sandbox keeps them for the
//     session's life);
//   - the container's /workspace (read-only for a compile step), the
//     skills read-only at /skills, the run's program directory read-only
//     at /tmp/gantry (a compile step's build directory writable in it);
//   - the egress relay's address on the sandbox's own loopback, when the
//     sandbox has egress.
type layout struct {
	// Namespaces are the new namespaces the sandbox is made in (user,
	// mount, pid, net, ipc, uts, cgroup); no further user namespace can
	// be made inside.
	Namespaces []string `json:"namespaces"`
	// Mounts are made in order.
	Mounts []mount `json:"mounts"`
	// Chdir is the program's working directory.
	Chdir string `json:"chdir"`
	// Egress, when set, is the address the sandbox's egress relay listens
	// on (wire.EgressProxy), bound before the program starts.
	Egress string `json:"egress,omitempty"`
	// Init is the argv of the sandbox's pid 1 when the warm interpreter
	// makes it (cmd/gantry-sandbox-init): with egress, it serves the relay
	// to the agent's egress socket (named as the container sees it) on
	// the listener the job's process binds and passes it.
	Init []string `json:"init"`
}

// sandboxInit is where the sandbox image installs cmd/gantry-sandbox-init,
// execute-only (images/sandbox/build.sh).
const sandboxInit = "/usr/local/lib/gantry/sandbox-init"

// varTmp is the other usual writable place (ComputeSDK's probe writes
// there, as programs do that expect a file to outlive /tmp's).
const varTmp = "/var/tmp"

// sandboxNamespaces are every sandbox's new namespaces.
var sandboxNamespaces = []string{"user", "mount", "pid", "net", "ipc", "uts", "cgroup"}

// mountKind is what a mount step makes.
type mountKind string

const (
	// mountRoot makes every mount the container has read-only, as
	// bubblewrap's --ro-bind / / does (the later steps cover what they
	// cover).
	mountRoot mountKind = "root"
	// mountDev is a fresh /dev at Dst: Devices bound from the container's,
	// Links, a devpts of its own at pts and an empty shm.
	mountDev mountKind = "dev"
	// mountProc is a fresh proc at Dst, with the kernel's knobs (Paths)
	// read-only where they are writable at all (as bubblewrap's --proc
	// does).
	mountProc mountKind = "proc"
	// mountTmpfs is a fresh tmpfs of SizeMB at Dst.
	mountTmpfs mountKind = "tmpfs"
	// mountBind binds Src at Dst (read-only with ReadOnly).
	mountBind mountKind = "bind"
	// mountMask hides the file Dst under /dev/null, read-only.
	mountMask mountKind = "mask"
	// mountHide hides the directory Dst under an empty read-only tmpfs.
	mountHide mountKind = "hide"
)

// mount is one step of a layout.
type mount struct {
	Kind     mountKind `json:"kind"`
	Src      string    `json:"src,omitempty"`
	Dst      string    `json:"dst"`
	ReadOnly bool      `json:"ro,omitempty"`
	SizeMB   int       `json:"size_mb,omitempty"`
	// Devices and Links are a dev step's: device names under /dev, and
	// symbolic links (name to target).
	Devices []string    `json:"devices,omitempty"`
	Links   [][2]string `json:"links,omitempty"`
	// Paths are a proc step's read-only knobs.
	Paths []string `json:"paths,omitempty"`
}

// devDevices and devLinks are what a sandbox's /dev holds, as bubblewrap's
// --dev makes it.
var (
	devDevices = []string{"null", "zero", "full", "random", "urandom", "tty"}
	devLinks   = [][2]string{{"fd", "/proc/self/fd"}, {"stdin", "/proc/self/fd/0"}, {"stdout", "/proc/self/fd/1"},
		{"stderr", "/proc/self/fd/2"}, {"ptmx", "pts/ptmx"}, {"core", "/proc/kcore"}}
)

// procReadOnly are the kernel's knobs in a sandbox's /proc, made read-only
// (bubblewrap's --proc does exactly these).
var procReadOnly = []string{"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"}

// hostMasks are what Docker's default masked paths hide in a container
// (kernel memory and keys, timer and scheduler internals, firmware tables,
// hardware lists), for the paths this kernel has: the files hidden under
// /dev/null, the directories under an empty tmpfs. The container itself
// runs with /proc unmasked (a new /proc cannot be mounted over a masked
// one), so each sandbox masks its own.
func hostMasks() []mount {
	var out []mount
	for _, f := range []string{"kcore", "keys", "latency_stats", "timer_list", "timer_stats", "sched_debug"} {
		p := "/proc/" + f
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			out = append(out, mount{Kind: mountMask, Dst: p})
		}
	}
	for _, d := range []string{"/proc/acpi", "/proc/asound", "/proc/scsi", "/sys/firmware"} {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			out = append(out, mount{Kind: mountHide, Dst: d})
		}
	}
	return out
}

// sandboxLayout is the layout of a program's sandbox: /tmp of tmpMB, the
// skills from skillsDir, the program directory from runDir; build makes a
// compile step's (the workspace read-only, runDir's build directory
// writable at wire.BuildDir); egress gives it the egress relay's address.
func (s *server) sandboxLayout(tmpMB int, runDir string, build, egress bool) layout {
	l := layout{Namespaces: sandboxNamespaces, Chdir: wire.Workspace}
	l.Mounts = append(l.Mounts,
		mount{Kind: mountRoot, Dst: "/"},
		mount{Kind: mountDev, Dst: "/dev", Devices: devDevices, Links: devLinks},
		mount{Kind: mountProc, Dst: "/proc", Paths: procReadOnly},
		// /dev/shm, the dev step's directory, is a writable place of the
		// job's size like /tmp (the dev tmpfs itself has no size).
		mount{Kind: mountTmpfs, Dst: "/dev/shm", SizeMB: max(tmpMB, 1)},
	)
	l.Mounts = append(l.Mounts, s.masks...)
	// Pid 1 is the sandbox's init, the job's uid: its memory file is
	// covered, so the job cannot write it (the seccomp filter refuses
	// ptrace and process_vm_* on it).
	l.Mounts = append(l.Mounts,
		mount{Kind: mountMask, Dst: "/proc/1/mem"},
		mount{Kind: mountMask, Dst: "/proc/1/task/1/mem"},
		mount{Kind: mountTmpfs, Dst: "/tmp", SizeMB: max(tmpMB, 1)},
		mount{Kind: mountTmpfs, Dst: varTmp, SizeMB: max(tmpMB, 1)},
		mount{Kind: mountBind, Src: wire.Workspace, Dst: wire.Workspace, ReadOnly: build},
		mount{Kind: mountBind, Src: s.skillsDir(), Dst: wire.SkillsDir, ReadOnly: true},
		mount{Kind: mountBind, Src: runDir, Dst: wire.ProgramDir, ReadOnly: true},
	)
	if build {
		l.Mounts = append(l.Mounts, mount{Kind: mountBind, Src: buildDir(runDir), Dst: wire.BuildDir})
	}
	l.Init = []string{sandboxInit}
	if egress {
		l.Egress = wire.EgressProxy
		l.Init = append(l.Init, "-egress", filepath.Join(runDir, filepath.Base(wire.EgressSocket)))
	}
	return l
}

// bwrapArgs renders the layout as bubblewrap's arguments, with the
// namespaces and identity every sandbox has. The program, its seccomp
// filter and bwrap's status descriptors are the caller's to add. (The
// egress relay is not bwrap's: the program runs under `gantry-agent
// relay`.)
func (l layout) bwrapArgs() []string {
	uid, gid := strconv.Itoa(os.Getuid()), strconv.Itoa(os.Getgid())
	var args []string
	for _, ns := range l.Namespaces {
		if ns != "mount" { // bwrap always makes a mount namespace
			args = append(args, "--unshare-"+ns)
		}
	}
	args = append(args, "--disable-userns", "--die-with-parent", "--new-session",
		"--uid", uid, "--gid", gid, "--cap-drop", "ALL")
	for _, m := range l.Mounts {
		switch m.Kind {
		case mountRoot:
			args = append(args, "--ro-bind", "/", "/")
		case mountDev:
			// bwrap's --dev makes Devices, Links, pts and shm itself.
			args = append(args, "--dev", m.Dst)
		case mountProc:
			// bwrap's --proc makes Paths read-only itself.
			args = append(args, "--proc", m.Dst)
		case mountTmpfs:
			args = append(args, "--size", strconv.Itoa(m.SizeMB<<20), "--tmpfs", m.Dst)
		case mountBind:
			bind := "--bind"
			if m.ReadOnly {
				bind = "--ro-bind"
			}
			args = append(args, bind, m.Src, m.Dst)
		case mountMask:
			args = append(args, "--ro-bind", "/dev/null", m.Dst)
		case mountHide:
			args = append(args, "--tmpfs", m.Dst, "--remount-ro", m.Dst)
		}
	}
	return append(args, "--chdir", l.Chdir)
}

// buildDir is where, in the agent's run directory, a compile step's
// output goes: the program sees it as wire.BuildDir.
func buildDir(runDir string) string { return filepath.Join(runDir, filepath.Base(wire.BuildDir)) }
