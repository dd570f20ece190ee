package agent

import (
	"encoding/binary"
	"runtime"
	"syscall"
	"testing"
)

// evalFilter runs a classic BPF seccomp program (the instructions
// JobFilter uses) over one system call, as the kernel would.
func evalFilter(t *testing.T, prog []byte, arch, nr uint32, args ...uint64) uint32 {
	t.Helper()
	var data [64]byte
	binary.NativeEndian.PutUint32(data[0:], nr)
	binary.NativeEndian.PutUint32(data[4:], arch)
	for i, a := range args {
		binary.NativeEndian.PutUint64(data[16+8*i:], a)
	}
	var acc uint32
	for pc := 0; pc < len(prog)/8; pc++ {
		in := prog[8*pc:]
		code, jt, jf, k := binary.NativeEndian.Uint16(in), in[2], in[3], binary.NativeEndian.Uint32(in[4:])
		switch code {
		case bpfLdAbsW:
			acc = binary.NativeEndian.Uint32(data[k:])
		case bpfJeqK, bpfJgeK, bpfJsetK:
			var take bool
			switch code {
			case bpfJeqK:
				take = acc == k
			case bpfJgeK:
				take = acc >= k
			default:
				take = acc&k != 0
			}
			if take {
				pc += int(jt)
			} else {
				pc += int(jf)
			}
		case bpfRetK:
			return k
		default:
			t.Fatalf("instruction %d: unknown code %#x", pc, code)
		}
	}
	t.Fatal("the program ran off its end")
	return 0
}

func TestJobFilter(t *testing.T) {
	a, ok := filterArchs[runtime.GOARCH]
	if !ok {
		t.Skip("no filter for", runtime.GOARCH)
	}
	prog, err := JobFilter()
	if err != nil {
		t.Fatal(err)
	}
	eperm, enosys := uint32(seccompRetErrno|uint32(syscall.EPERM)), uint32(seccompRetErrno|uint32(syscall.ENOSYS))
	unshare, setns, mount, umount2, pivotRoot := a.sandbox[0], a.sandbox[1], a.sandbox[2], a.sandbox[3], a.sandbox[4]
	for _, tc := range []struct {
		name string
		arch uint32
		nr   uint32
		args []uint64
		want uint32
	}{
		{"read", a.audit, uint32(syscall.SYS_READ), []uint64{0}, seccompRetAllow},
		{"getpid", a.audit, uint32(syscall.SYS_GETPID), []uint64{0}, seccompRetAllow},
		{"fork-like clone", a.audit, a.clone, []uint64{uint64(syscall.SIGCHLD)}, seccompRetAllow},
		{"thread clone", a.audit, a.clone, []uint64{syscall.CLONE_VM | syscall.CLONE_FS | syscall.CLONE_FILES | syscall.CLONE_SIGHAND | syscall.CLONE_THREAD}, seccompRetAllow},
		{"clone into a new user namespace", a.audit, a.clone, []uint64{syscall.CLONE_NEWUSER | uint64(syscall.SIGCHLD)}, eperm},
		{"clone into a new pid namespace", a.audit, a.clone, []uint64{syscall.CLONE_NEWPID}, eperm},
		{"clone into a new mount namespace", a.audit, a.clone, []uint64{syscall.CLONE_NEWNS}, eperm},
		{"clone into a new network namespace, high bits set", a.audit, a.clone, []uint64{1<<40 | syscall.CLONE_NEWNET}, eperm},
		{"clone3", a.audit, sysClone3, []uint64{0}, enosys},
		{"unshare", a.audit, unshare, []uint64{0}, eperm},
		{"setns", a.audit, setns, []uint64{0}, eperm},
		{"mount", a.audit, mount, []uint64{0}, eperm},
		{"umount2", a.audit, umount2, []uint64{0}, eperm},
		{"pivot_root", a.audit, pivotRoot, []uint64{0}, eperm},
		{"open_tree", a.audit, sysOpenTree, []uint64{0}, eperm},
		{"move_mount", a.audit, sysMoveMount, []uint64{0}, eperm},
		{"fsopen", a.audit, sysFsopen, []uint64{0}, eperm},
		{"fsmount", a.audit, sysFsmount, []uint64{0}, eperm},
		{"mount_setattr", a.audit, sysMountSetattr, []uint64{0}, eperm},
		{"ptrace of another process", a.audit, a.ptrace, []uint64{16 /* PTRACE_ATTACH */, 7}, seccompRetAllow},
		{"ptrace of a child (PTRACE_TRACEME)", a.audit, a.ptrace, []uint64{0, 0}, seccompRetAllow},
		{"ptrace of the init", a.audit, a.ptrace, []uint64{16, 1}, eperm},
		{"PTRACE_SEIZE of the init", a.audit, a.ptrace, []uint64{0x4206, 1}, eperm},
		{"ptrace of the init, high bits set", a.audit, a.ptrace, []uint64{16, 1<<32 | 1}, eperm},
		{"process_vm_readv of another process", a.audit, a.processVM[0], []uint64{7}, seccompRetAllow},
		{"process_vm_readv of the init", a.audit, a.processVM[0], []uint64{1}, eperm},
		{"process_vm_writev of the init", a.audit, a.processVM[1], []uint64{1}, eperm},
		{"another architecture's call", 0x40000003 /* AUDIT_ARCH_I386 */, 1, []uint64{0}, seccompRetKillProcess},
	} {
		if got := evalFilter(t, prog, tc.arch, tc.nr, tc.args...); got != tc.want {
			t.Errorf("%s: %#x, want %#x", tc.name, got, tc.want)
		}
	}
	if a.x32 {
		if got := evalFilter(t, prog, a.audit, 0x40000000|uint32(syscall.SYS_READ)); got != seccompRetKillProcess {
			t.Errorf("an x32 call: %#x", got)
		}
	}
}
