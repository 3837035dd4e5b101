// Package syscallprobe makes each call the session's syscall filter denies,
// with arguments that make the kernel fail it harmlessly (a bad pointer, an
// unknown command, a path that does not exist), so that the answer tells
// the filter (EPERM) from the kernel (anything else, where the caller's
// privileges allow). Only tests use it: in a child process under the
// filter, on the host, and inside a session.
package syscallprobe

import (
	"fmt"
	"os"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A Probe is one harmless call of a denied system call.
type Probe struct {
	Row, Name string
	call      func() unix.Errno
}

func sys(nr uintptr, args ...uintptr) unix.Errno {
	var a [6]uintptr
	copy(a[:], args)
	_, _, e := unix.Syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
	return e
}

func str(s string) uintptr {
	p, _ := unix.BytePtrFromString(s)
	return uintptr(unsafe.Pointer(p))
}

// ioctlOnNull issues cmd on /dev/null, which is no terminal: the kernel
// answers ENOTTY.
func ioctlOnNull(cmd uint64) unix.Errno {
	fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err.(unix.Errno)
	}
	defer unix.Close(fd)
	var b byte = 'x'
	return sys(unix.SYS_IOCTL, uintptr(fd), uintptr(cmd), uintptr(unsafe.Pointer(&b)))
}

const nonexistent = "/nonexistent-mosaic-probe"

// Probes are the calls, by the row of sandbox.SyscallRules that denies them.
// The ones only an architecture has come from arch files.
var Probes = append([]Probe{
	{"io_uring", "io_uring_setup", func() unix.Errno { return sys(unix.SYS_IO_URING_SETUP, 0, 0) }},
	{"io_uring", "io_uring_enter", func() unix.Errno { return sys(unix.SYS_IO_URING_ENTER, ^uintptr(0), 0, 0, 0, 0, 0) }},
	{"io_uring", "io_uring_register", func() unix.Errno { return sys(unix.SYS_IO_URING_REGISTER, ^uintptr(0), 0, 0, 0) }},
	// UFFD_USER_MODE_ONLY passes the unprivileged check; the unknown bit is EINVAL.
	{"userfaultfd", "userfaultfd", func() unix.Errno { return sys(unix.SYS_USERFAULTFD, 1|0x100000) }},
	{"perf", "perf_event_open", func() unix.Errno { return sys(unix.SYS_PERF_EVENT_OPEN, 0, 0, ^uintptr(0), ^uintptr(0), 0) }},
	{"bpf", "bpf", func() unix.Errno { return sys(unix.SYS_BPF, 9999, 0, 0) }},
	{"keyring", "add_key", func() unix.Errno { return sys(unix.SYS_ADD_KEY, 0, 0, 0, 0, 0) }},
	{"keyring", "keyctl", func() unix.Errno { return sys(unix.SYS_KEYCTL, 9999) }},
	{"keyring", "request_key", func() unix.Errno { return sys(unix.SYS_REQUEST_KEY, 0, 0, 0, 0) }},
	{"kernel-modules", "init_module", func() unix.Errno { return sys(unix.SYS_INIT_MODULE, 0, 0, str("")) }},
	{"kernel-modules", "finit_module", func() unix.Errno { return sys(unix.SYS_FINIT_MODULE, ^uintptr(0), str(""), 0) }},
	{"kernel-modules", "delete_module", func() unix.Errno { return sys(unix.SYS_DELETE_MODULE, str("mosaic_no_such_module"), unix.O_NONBLOCK) }},
	{"kexec", "kexec_load", func() unix.Errno { return sys(unix.SYS_KEXEC_LOAD, 0, 0, 0, 0x7fff0000) }},
	{"kexec", "kexec_file_load", func() unix.Errno { return sys(unix.SYS_KEXEC_FILE_LOAD, ^uintptr(0), ^uintptr(0), 0, 0, 0x7fff0000) }},
	{"reboot", "reboot", func() unix.Errno { return sys(unix.SYS_REBOOT, 0, 0, 0, 0) }},
	{"host-admin", "acct", func() unix.Errno { return sys(unix.SYS_ACCT, str(nonexistent)) }},
	{"host-admin", "swapon", func() unix.Errno { return sys(unix.SYS_SWAPON, str(nonexistent), 0) }},
	{"host-admin", "swapoff", func() unix.Errno { return sys(unix.SYS_SWAPOFF, str(nonexistent)) }},
	{"host-admin", "quotactl", func() unix.Errno { return sys(unix.SYS_QUOTACTL, 0, str(nonexistent), 0, 0) }},
	{"host-admin", "nfsservctl", func() unix.Errno { return sys(unix.SYS_NFSSERVCTL, 0, 0, 0) }},
	// A microsecond count of 2,000,000 is EINVAL.
	{"clock", "settimeofday", func() unix.Errno {
		tv := unix.Timeval{Sec: 0, Usec: 2000000}
		return sys(unix.SYS_SETTIMEOFDAY, uintptr(unsafe.Pointer(&tv)), 0)
	}},
	{"clock", "clock_settime", func() unix.Errno {
		ts := unix.Timespec{Sec: 0, Nsec: -1}
		return sys(unix.SYS_CLOCK_SETTIME, unix.CLOCK_REALTIME, uintptr(unsafe.Pointer(&ts)))
	}},
	{"kernel-log", "syslog", func() unix.Errno { return sys(unix.SYS_SYSLOG, 10, 0, 0) }}, // SYSLOG_ACTION_SIZE_BUFFER
	{"file-handles", "open_by_handle_at", func() unix.Errno { return sys(unix.SYS_OPEN_BY_HANDLE_AT, ^uintptr(0), 0, 0) }},
	{"obsolete", "lookup_dcookie", func() unix.Errno { return sys(unix.SYS_LOOKUP_DCOOKIE, 0, 0, 0) }},
	{"terminal-injection", "ioctl(TIOCSTI)", func() unix.Errno { return ioctlOnNull(unix.TIOCSTI) }},
	{"terminal-injection", "ioctl(TIOCSTI|1<<32)", func() unix.Errno { return ioctlOnNull(1<<32 | unix.TIOCSTI) }},
	{"terminal-injection", "ioctl(TIOCLINUX)", func() unix.Errno { return ioctlOnNull(unix.TIOCLINUX) }},
	// ADDR_NO_RANDOMIZE: the call succeeds on the host (0), changing only
	// the persona of the probing process.
	{"personality", "personality(ADDR_NO_RANDOMIZE)", func() unix.Errno { return sys(unix.SYS_PERSONALITY, 0x0040000) }},
}, archProbes...)

// Allowed are calls the filter must let through (nested sandboxes, the
// persona query), with the same harmless arguments.
var Allowed = []Probe{
	{"", "personality(query)", func() unix.Errno { return sys(unix.SYS_PERSONALITY, 0xffffffff) }},
	{"", "ioctl(TIOCGWINSZ)", func() unix.Errno { return ioctlOnNull(unix.TIOCGWINSZ) }},
	{"", "unshare(bad flag)", func() unix.Errno { return sys(unix.SYS_UNSHARE, 0x1) }}, // not a namespace flag: EINVAL
	{"", "pivot_root", func() unix.Errno { return sys(unix.SYS_PIVOT_ROOT, str(nonexistent), str(nonexistent)) }},
}

// NoEntry is a probe's answer where the machine has no entry for the call
// at all (i386's int $0x80 with IA-32 emulation off): not an errno of the
// kernel's, printed as NoEntryName.
const NoEntry = unix.Errno(1 << 20)

// NoEntryName is how NoEntry is printed.
const NoEntryName = "no-entry"

// Denied reports whether a probe's answer got is a denial, given the host's
// answer: EPERM, or no entry for the call on a machine that has none for it
// on the host either (nothing reaches the kernel there, filtered or not).
func Denied(host, got string) bool {
	return got == "EPERM" || (got == NoEntryName && host == NoEntryName)
}

// Name is how a result is printed: "0" for success, else the errno's name.
func Name(e unix.Errno) string {
	if e == 0 {
		return "0"
	}
	if e == NoEntry {
		return NoEntryName
	}
	if n := unix.ErrnoName(e); n != "" {
		return n
	}
	return fmt.Sprintf("errno-%d", int(e))
}

// Run makes every probe and returns "NAME RESULT" lines.
func Run(ps []Probe) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "%s %s\n", p.Name, Name(p.call()))
	}
	return b.String()
}

// Main is a probing program's main: it prints Run(Probes) and Run(Allowed).
func Main() {
	fmt.Print(Run(Probes), Run(Allowed))
	os.Exit(0)
}
