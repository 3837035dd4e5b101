package sandbox

import (
	"fmt"
	"strings"

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
