package sandbox

import (
	"fmt"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A SyscallRule is one row of the session's syscall filter: system calls the
// command (and everything it starts, nested sandboxes included) gets EPERM
// for, and why. A profile's SeccompAllow= names rows to lift, unless Fixed.
type SyscallRule struct {
	Name     string   `json:"name"`
	Syscalls []string `json:"syscalls"`
	// Arg, when set, narrows the rule to calls whose argument Arg.Index,
	// compared on its low 32 bits (ioctl's request and personality's
	// persona are 32-bit in the kernel, whatever the upper half holds), is
	// among Arg.Values, or with Arg.Unless, is not.
	Arg    *ArgMatch `json:"arg,omitempty"`
	What   string    `json:"what,omitempty"` // the calls in words, where Arg narrows them
	Reason string    `json:"reason"`
	Fixed  bool      `json:"fixed,omitempty"` // no profile can lift it
}

// ArgMatch narrows a SyscallRule to some values of one argument.
type ArgMatch struct {
	Index  int      `json:"index"`
	Values []uint32 `json:"values"`
	Unless bool     `json:"unless,omitempty"`
}

// SyscallRules is the filter every session runs under: what Docker's and
// Flatpak's default profiles deny and coding agents do not need. Left
// allowed on purpose: unshare, clone and clone3 with namespace flags, setns,
// mount, umount2, pivot_root, seccomp and ptrace (Codex's and Claude Code's
// own sandboxes run bwrap inside a session; debuggers trace), and adjtimex
// and clock_adjtime (read-only uses are common; setting the clock needs
// CAP_SYS_TIME in the host's namespace, which a session never has).
var SyscallRules = []SyscallRule{
	{Name: "io_uring", Syscalls: []string{"io_uring_setup", "io_uring_enter", "io_uring_register"},
		Reason: "asynchronous I/O engine with a long record of kernel privilege escalations; Docker denies it, programs fall back to ordinary I/O"},
	{Name: "userfaultfd", Syscalls: []string{"userfaultfd"},
		Reason: "stalls the kernel on a chosen page fault: the usual way a kernel exploit wins its race; Docker and Flatpak deny it"},
	{Name: "perf", Syscalls: []string{"perf_event_open"},
		Reason: "kernel and CPU performance counters: a large attack surface and a side channel on other processes; Docker and Flatpak deny it"},
	{Name: "bpf", Syscalls: []string{"bpf"},
		Reason: "loads programs into the kernel; unprivileged eBPF is a frequent road to kernel exploits; Docker denies it"},
	{Name: "keyring", Syscalls: []string{"add_key", "keyctl", "request_key"},
		Reason: "the kernel keyring is not namespaced: the user's keys (Kerberos tickets, fscrypt and ecryptfs keys) would be in reach; Docker and Flatpak deny it"},
	{Name: "kernel-modules", Syscalls: []string{"init_module", "finit_module", "delete_module", "create_module", "get_kernel_syms", "query_module"},
		Reason: "loads or unloads kernel code"},
	{Name: "kexec", Syscalls: []string{"kexec_load", "kexec_file_load"},
		Reason: "replaces the running kernel"},
	{Name: "reboot", Syscalls: []string{"reboot"},
		Reason: "reboots or halts the machine"},
	{Name: "host-admin", Syscalls: []string{"acct", "swapon", "swapoff", "quotactl", "nfsservctl"},
		Reason: "administers the host (process accounting, swap, disk quotas, the NFS server): no agent's business"},
	{Name: "clock", Syscalls: []string{"settimeofday", "clock_settime"},
		Reason: "sets the host's clock"},
	{Name: "kernel-log", Syscalls: []string{"syslog"},
		Reason: "the kernel log shows the host's devices, addresses and traces of other sessions; Docker denies it"},
	{Name: "file-handles", Syscalls: []string{"open_by_handle_at"},
		Reason: "opens a file by its handle, around the mount tree the sandbox built (the \"Shocker\" container escape); Docker denies it"},
	{Name: "obsolete", Syscalls: []string{"lookup_dcookie", "uselib", "ustat", "sysfs", "_sysctl", "iopl", "ioperm"},
		Reason: "obsolete interfaces and raw hardware I/O ports that no current program needs; Docker denies them"},
	{Name: "terminal-injection", Syscalls: []string{"ioctl"}, Arg: &ArgMatch{Index: 1, Values: []uint32{unix.TIOCSTI, unix.TIOCLINUX}},
		What:   "ioctl TIOCSTI and TIOCLINUX",
		Reason: "TIOCSTI types keystrokes into a terminal's input and TIOCLINUX drives the Linux console: a session never types into a shell of the user's",
		Fixed:  true},
	{Name: "personality", Syscalls: []string{"personality"},
		// PER_LINUX, PER_LINUX32, their UNAME26 variants, and the query.
		Arg:    &ArgMatch{Index: 0, Values: []uint32{0, 0x8, 0x20000, 0x20008, 0xffffffff}, Unless: true},
		What:   "personality, but to Linux's own personas",
		Reason: "other personas turn on legacy behaviours that help exploits (READ_IMPLIES_EXEC, MMAP_PAGE_ZERO, ADDR_NO_RANDOMIZE turns off ASLR); Docker allows only Linux's own"},
}

// CheckSeccompAllow checks that each name is a row of SyscallRules that a
// profile may lift.
func CheckSeccompAllow(names []string) error {
	for _, n := range names {
		r, ok := findRule(n)
		if !ok {
			var known []string
			for _, r := range SyscallRules {
				if !r.Fixed {
					known = append(known, r.Name)
				}
			}
			return fmt.Errorf("SeccompAllow=%s: there is no such row of the syscall filter (known: %s)", n, strings.Join(known, ", "))
		}
		if r.Fixed {
			return fmt.Errorf("SeccompAllow=%s: this row of the syscall filter cannot be lifted", n)
		}
	}
	return nil
}

func findRule(name string) (SyscallRule, bool) {
	for _, r := range SyscallRules {
		if r.Name == name {
			return r, true
		}
	}
	return SyscallRule{}, false
}

// BPF opcodes (linux/bpf_common.h) and the layout of struct seccomp_data
// (linux/seccomp.h): int nr; __u32 arch; __u64 instruction_pointer;
// __u64 args[6]. Both architectures mosaic builds a filter for are
// little-endian: an argument's low 32 bits come first.
const (
	bpfLdAbsW = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	bpfJeqK   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	bpfJgeK   = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	bpfRetK   = unix.BPF_RET | unix.BPF_K

	offNr   = 0
	offArch = 4
	offArgs = 16

	retAllow = unix.SECCOMP_RET_ALLOW
	retEPERM = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
)

// filterProg assembles a classic BPF program whose jumps go to labels.
type filterProg struct {
	insns  []unix.SockFilter
	jumps  map[int][2]string // instruction index → labels of jt, jf ("" = next)
	labels map[string]int
}

func (p *filterProg) emit(code uint16, k uint32) {
	p.insns = append(p.insns, unix.SockFilter{Code: code, K: k})
}

func (p *filterProg) jump(code uint16, k uint32, jt, jf string) {
	p.jumps[len(p.insns)] = [2]string{jt, jf}
	p.emit(code, k)
}

func (p *filterProg) label(name string) { p.labels[name] = len(p.insns) }

func (p *filterProg) resolve() ([]unix.SockFilter, error) {
	for i, j := range p.jumps {
		for side, l := range j {
			if l == "" {
				continue
			}
			at, ok := p.labels[l]
			off := at - i - 1
			if !ok || off < 0 || off > 255 {
				return nil, fmt.Errorf("syscall filter: jump from %d to %q out of range", i, l)
			}
			if side == 0 {
				p.insns[i].Jt = uint8(off)
			} else {
				p.insns[i].Jf = uint8(off)
			}
		}
	}
	return p.insns, nil
}

// SyscallFilter is the session's seccomp program for this architecture,
// without the rows named in allow: a call from another architecture's ABI
// (i386's int 0x80 on x86_64, whose numbers differ) or from x32 gets EPERM,
// so that no table of numbers can be sidestepped; each denied call gets
// EPERM; everything else is allowed.
func SyscallFilter(allow []string) ([]unix.SockFilter, error) {
	if auditArch == 0 {
		return nil, fmt.Errorf("mosaic has no syscall filter for this architecture")
	}
	lifted := map[string]bool{}
	for _, n := range allow {
		lifted[n] = true
	}
	p := &filterProg{jumps: map[int][2]string{}, labels: map[string]int{}}
	p.emit(bpfLdAbsW, offArch)
	p.jump(bpfJeqK, auditArch, "", "deny")
	p.emit(bpfLdAbsW, offNr)
	if x32Bit != 0 {
		p.jump(bpfJgeK, x32Bit, "deny", "")
	}
	var narrowed []SyscallRule
	argRule := map[uint32]bool{}
	for _, r := range SyscallRules {
		if lifted[r.Name] && !r.Fixed {
			continue
		}
		if r.Arg != nil {
			narrowed = append(narrowed, r)
			continue
		}
		for _, s := range r.Syscalls {
			if nr, ok := syscallNumbers[s]; ok {
				p.jump(bpfJeqK, nr, "deny", "")
			}
		}
	}
	// Each narrowed call is decided in a block of its own, which ends the
	// program (its argument replaced the number in the accumulator); so a
	// call may be narrowed by one rule only.
	for i, r := range narrowed {
		for j, s := range r.Syscalls {
			nr, ok := syscallNumbers[s]
			if !ok {
				continue
			}
			if argRule[nr] {
				return nil, fmt.Errorf("syscall filter: %s narrowed by two rules", s)
			}
			argRule[nr] = true
			next := fmt.Sprintf("next-%d-%d", i, j)
			p.jump(bpfJeqK, nr, "", next)
			p.emit(bpfLdAbsW, uint32(offArgs+8*r.Arg.Index))
			match, rest := "deny", "allow"
			if r.Arg.Unless {
				match, rest = "allow", "deny"
			}
			for _, v := range r.Arg.Values {
				p.jump(bpfJeqK, v, match, "")
			}
			p.jump(bpfJeqK, 0, rest, rest) // an unconditional jump within reach
			p.label(next)
		}
	}
	p.label("allow")
	p.emit(bpfRetK, retAllow)
	p.label("deny")
	p.emit(bpfRetK, retEPERM)
	return p.resolve()
}

// InstallSyscallFilter puts the calling process, every thread of it
// (SECCOMP_FILTER_FLAG_TSYNC: the Go runtime's threads too) and all it
// starts from now on under SyscallFilter(allow). It is irreversible.
func InstallSyscallFilter(allow []string) error {
	if weakened {
		return nil
	}
	if err := CheckSeccompAllow(allow); err != nil {
		return err
	}
	insns, err := SyscallFilter(allow)
	if err != nil {
		return err
	}
	// A filter without CAP_SYS_ADMIN needs no_new_privs (bwrap and the
	// unit's NoNewPrivileges set it already).
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("cannot set no_new_privs for the syscall filter: %w", err)
	}
	prog := unix.SockFprog{Len: uint16(len(insns)), Filter: &insns[0]}
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog)))
	if errno != 0 {
		return fmt.Errorf("cannot install the syscall filter: %w", errno)
	}
	if r != 0 {
		return fmt.Errorf("cannot install the syscall filter: thread %d could not take it", r)
	}
	return nil
}
