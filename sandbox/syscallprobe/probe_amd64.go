package syscallprobe

import (
	"runtime/debug"

	"golang.org/x/sys/unix"
)

var archProbes = []Probe{
	{"kernel-modules", "create_module", func() unix.Errno { return sys(unix.SYS_CREATE_MODULE, 0, 0) }},
	{"obsolete", "uselib", func() unix.Errno { return sys(unix.SYS_USELIB, 0) }},
	{"obsolete", "ustat", func() unix.Errno { return sys(unix.SYS_USTAT, 0, 0) }},
	{"obsolete", "sysfs", func() unix.Errno { return sys(unix.SYS_SYSFS, 99) }},
	{"obsolete", "_sysctl", func() unix.Errno { return sys(unix.SYS__SYSCTL, 0) }},
	{"obsolete", "iopl", func() unix.Errno { return sys(unix.SYS_IOPL, 4) }},
	{"obsolete", "ioperm", func() unix.Errno { return sys(unix.SYS_IOPERM, 0x10000, 1, 0) }},
	// An x32 call (getpid's number with the x32 bit): ENOSYS or a pid on
	// a kernel without x32, EPERM under the filter.
	{"x32", "x32 getpid", func() unix.Errno { return sys(0x40000000 | unix.SYS_GETPID) }},
	// i386's getpid (20) through int $0x80: a pid on a kernel with IA-32
	// emulation, EPERM under the filter (which allows x86_64's ABI only).
	{"i386", "i386 getpid", func() unix.Errno { return i386Getpid() }},
}

// i386Getpid makes i386's getpid through int $0x80. Where the kernel has
// IA-32 emulation off at boot (ia32_emulation=0, or a paravirtualised guest
// such as this project's CI machines, kernel 6.18 under PVM), int $0x80 has no
// entry: the CPU faults before the kernel or its seccomp filter sees a call,
// and the process gets SIGSEGV (SI_KERNEL). That is answered NoEntry, not a
// crash: no i386 call can be made at all there, filtered or not.
func i386Getpid() (e unix.Errno) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if recover() != nil {
			e = NoEntry
		}
	}()
	if r := int32(int80(20)); r < 0 && r > -4096 {
		return unix.Errno(-r)
	}
	return 0
}

// int80 makes a call through i386's ABI (int80_amd64.s).
func int80(nr uintptr) uintptr
