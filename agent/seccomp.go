package agent

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"syscall"
)

// The job's own seccomp filter. The container's profile (Docker's default
// plus one rule, see runner/seccomp.go) lets processes call unshare, clone
// with namespace flags, setns, mount, umount2 and pivot_root, because the
// agent builds each job's sandbox with them. The job itself needs none of
// them, so every job (bubblewrap's, the warm interpreter's forks, a
// session's interpreter) runs under this filter as well, stacked on the
// container's: those calls, the new mount API and clone with namespace
// flags fail with EPERM; clone3, whose flags a filter cannot read, fails
// with ENOSYS (the C library then falls back to clone); a system call of
// another architecture (32-bit or x32 calls from a 64-bit process, whose
// numbers differ) kills the process.
//
// The program is classic BPF as the kernel's seccomp_data is laid out:
// nr at offset 0, arch at 4, the arguments from 16, 8 bytes each.

// BPF opcodes (linux/filter.h).
const (
	bpfLdAbsW = 0x20 // BPF_LD | BPF_W | BPF_ABS
	bpfJeqK   = 0x15 // BPF_JMP | BPF_JEQ | BPF_K
	bpfJgeK   = 0x35 // BPF_JMP | BPF_JGE | BPF_K
	bpfJsetK  = 0x45 // BPF_JMP | BPF_JSET | BPF_K
	bpfRetK   = 0x06 // BPF_RET | BPF_K
)

// Filter results (linux/seccomp.h).
const (
	seccompRetKillProcess = 0x80000000
	seccompRetErrno       = 0x00050000
	seccompRetAllow       = 0x7fff0000
)

// Namespace flags clone must not carry (CLONE_NEWTIME is left out: in
// clone's flags its bit is part of the exit signal).
const cloneNewFlags = syscall.CLONE_NEWNS | syscall.CLONE_NEWCGROUP | syscall.CLONE_NEWUTS |
	syscall.CLONE_NEWIPC | syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID | syscall.CLONE_NEWNET

// initPID is the sandbox's init, as the job sees it: bubblewrap's, or the
// warm interpreter's sandbox init. The job may not trace it, nor read or
// write its memory: a stopped init would hold the job after its program
// ended (it would end as timed_out).
const initPID = 1

// System calls added after the syscall package was frozen; their numbers
// are the same on every architecture.
const (
	sysOpenTree     = 428
	sysMoveMount    = 429
	sysFsopen       = 430
	sysFsconfig     = 431
	sysFsmount      = 432
	sysFspick       = 433
	sysClone3       = 435
	sysMountSetattr = 442
)

type bpfInsn struct {
	code   uint16
	jt, jf uint8
	k      uint32
}

// filterArch is what the filter needs of an architecture: its audit
// number, whether it has an x32 ABI (whose calls must be refused by
// number), and the numbers of the calls that differ between architectures.
type filterArch struct {
	audit uint32
	x32   bool
	// unshare, setns, mount, umount2, pivot_root; clone
	sandbox []uint32
	clone   uint32
	// ptrace (its pid in args[1]); process_vm_readv and _writev (pid in
	// args[0])
	ptrace    uint32
	processVM []uint32
}

var filterArchs = map[string]filterArch{
	"amd64": {audit: 0xc000003e, x32: true, sandbox: []uint32{272, 308, 165, 166, 155}, clone: 56, ptrace: 101, processVM: []uint32{310, 311}}, // AUDIT_ARCH_X86_64
	"arm64": {audit: 0xc00000b7, x32: false, sandbox: []uint32{97, 268, 40, 39, 41}, clone: 220, ptrace: 117, processVM: []uint32{270, 271}},   // AUDIT_ARCH_AARCH64
}

// JobFilter is the job seccomp filter as the kernel takes it: an array of
// struct sock_filter in this machine's byte order (bubblewrap's --seccomp
// and prctl(PR_SET_SECCOMP) both read it so).
func JobFilter() ([]byte, error) {
	a, ok := filterArchs[runtime.GOARCH]
	if !ok {
		return nil, fmt.Errorf("no job seccomp filter for %s", runtime.GOARCH)
	}
	// The calls that build sandboxes: the job may not make them.
	denied := append(append([]uint32(nil), a.sandbox...),
		sysOpenTree, sysMoveMount, sysFsopen, sysFsconfig, sysFsmount, sysFspick, sysMountSetattr)
	// Laid out as: checks, then the four returns at the end; jumps are
	// forward offsets, filled in once the length is known.
	var prog []bpfInsn
	type jump struct {
		at     int
		target int // one of the labels below
		onTrue bool
	}
	const (
		toAllow = iota
		toEPERM
		toENOSYS
		toKill
	)
	var jumps []jump
	emit := func(in bpfInsn) int { prog = append(prog, in); return len(prog) - 1 }
	jumpIf := func(code uint16, k uint32, target int) {
		jumps = append(jumps, jump{at: emit(bpfInsn{code: code, k: k}), target: target, onTrue: true})
	}

	emit(bpfInsn{code: bpfLdAbsW, k: 4}) // arch
	jumps = append(jumps, jump{at: emit(bpfInsn{code: bpfJeqK, k: a.audit}), target: toKill, onTrue: false})
	emit(bpfInsn{code: bpfLdAbsW, k: 0}) // nr
	if a.x32 {
		jumpIf(bpfJgeK, 0x40000000, toKill) // __X32_SYSCALL_BIT
	}
	for _, nr := range denied {
		jumpIf(bpfJeqK, nr, toEPERM)
	}
	jumpIf(bpfJeqK, sysClone3, toENOSYS)
	// Calls whose target pid must not be the init: load the pid's low half
	// (the kernel reads a pid_t, an int, from the argument) and refuse 1.
	// The accumulator holds nr until a match, so each check is a pair of
	// jumps to its own short block.
	type pidCheck struct{ nr, argOff uint32 }
	checks := []pidCheck{{a.ptrace, 24}}
	for _, nr := range a.processVM {
		checks = append(checks, pidCheck{nr, 16})
	}
	// nr == check.nr: jump to its block (laid out after clone's check,
	// each ending in its own return); else fall through to the next.
	type block struct {
		at     int
		argOff uint32
	}
	var blocks []block
	for _, c := range checks {
		blocks = append(blocks, block{at: emit(bpfInsn{code: bpfJeqK, k: c.nr}), argOff: c.argOff})
	}
	jumps = append(jumps, jump{at: emit(bpfInsn{code: bpfJeqK, k: a.clone}), target: toAllow, onTrue: false})
	emit(bpfInsn{code: bpfLdAbsW, k: 16}) // clone's flags: the low half of args[0] (little-endian)
	jumpIf(bpfJsetK, cloneNewFlags, toEPERM)
	emit(bpfInsn{code: bpfRetK, k: seccompRetAllow})
	for _, b := range blocks {
		off := len(prog) - b.at - 1
		if off > 255 {
			return nil, fmt.Errorf("seccomp filter jump of %d", off)
		}
		prog[b.at].jt = uint8(off)
		emit(bpfInsn{code: bpfLdAbsW, k: b.argOff}) // the pid's low half (little-endian)
		jumpIf(bpfJeqK, initPID, toEPERM)
		emit(bpfInsn{code: bpfRetK, k: seccompRetAllow})
	}
	labels := map[int]int{
		toAllow:  emit(bpfInsn{code: bpfRetK, k: seccompRetAllow}),
		toEPERM:  emit(bpfInsn{code: bpfRetK, k: seccompRetErrno | uint32(syscall.EPERM)}),
		toENOSYS: emit(bpfInsn{code: bpfRetK, k: seccompRetErrno | uint32(syscall.ENOSYS)}),
		toKill:   emit(bpfInsn{code: bpfRetK, k: seccompRetKillProcess}),
	}
	for _, j := range jumps {
		off := labels[j.target] - j.at - 1
		if off < 0 || off > 255 {
			return nil, fmt.Errorf("seccomp filter jump of %d", off)
		}
		if j.onTrue {
			prog[j.at].jt = uint8(off)
		} else {
			prog[j.at].jf = uint8(off)
		}
	}
	out := make([]byte, 0, 8*len(prog))
	for _, in := range prog {
		out = binary.NativeEndian.AppendUint16(out, in.code)
		out = append(out, in.jt, in.jf)
		out = binary.NativeEndian.AppendUint32(out, in.k)
	}
	return out, nil
}
