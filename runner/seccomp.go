package runner

import (
	"encoding/json"
	"sync"

	"github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// sandboxSyscalls are the system calls Docker's default seccomp profile
// allows only to containers with CAP_SYS_ADMIN, and that bubblewrap needs
// to build each program's sandbox inside the container: new namespaces
// (unshare, clone with CLONE_NEW* flags, setns), and the sandbox's own
// mount tree (mount, umount2, pivot_root). The container still has no
// capabilities in the host's user namespace, so these act only inside the
// user namespaces bubblewrap creates: mounts there cannot touch the
// container's or the host's mounts, and no-new-privileges stays set.
var sandboxSyscalls = []string{"unshare", "clone", "mount", "umount2", "pivot_root", "setns"}

var (
	seccompOnce sync.Once
	seccompJSON string
	seccompErr  error
)

// seccompProfile is Docker's default profile (github.com/moby/profiles,
// the same rules dockerd applies by default) plus one rule allowing
// sandboxSyscalls. docs/ARCHITECTURE.md lists the difference and why.
func seccompProfile() (string, error) {
	seccompOnce.Do(func() {
		p := seccomp.DefaultProfile()
		p.Syscalls = append(p.Syscalls, &seccomp.Syscall{
			LinuxSyscall: specs.LinuxSyscall{Names: sandboxSyscalls, Action: specs.ActAllow},
			Comment:      "gantry: bubblewrap builds each program's sandbox in new user, mount and pid namespaces",
		})
		b, err := json.Marshal(p)
		seccompJSON, seccompErr = string(b), err
	})
	return seccompJSON, seccompErr
}
