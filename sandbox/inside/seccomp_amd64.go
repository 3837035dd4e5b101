package inside

import "golang.org/x/sys/unix"

// auditArch is the only ABI a session's calls may use; x32's calls (the
// x86_64 numbers with x32Bit set) are refused.
const (
	auditArch = unix.AUDIT_ARCH_X86_64
	x32Bit    = 0x40000000
)

// syscallNumbers are the numbers of the calls SyscallRules names.
var syscallNumbers = map[string]uint32{
	"io_uring_setup":    unix.SYS_IO_URING_SETUP,
	"io_uring_enter":    unix.SYS_IO_URING_ENTER,
	"io_uring_register": unix.SYS_IO_URING_REGISTER,
	"userfaultfd":       unix.SYS_USERFAULTFD,
	"perf_event_open":   unix.SYS_PERF_EVENT_OPEN,
	"bpf":               unix.SYS_BPF,
	"add_key":           unix.SYS_ADD_KEY,
	"keyctl":            unix.SYS_KEYCTL,
	"request_key":       unix.SYS_REQUEST_KEY,
	"init_module":       unix.SYS_INIT_MODULE,
	"finit_module":      unix.SYS_FINIT_MODULE,
	"delete_module":     unix.SYS_DELETE_MODULE,
	"kexec_load":        unix.SYS_KEXEC_LOAD,
	"kexec_file_load":   unix.SYS_KEXEC_FILE_LOAD,
	"reboot":            unix.SYS_REBOOT,
	"acct":              unix.SYS_ACCT,
	"swapon":            unix.SYS_SWAPON,
	"swapoff":           unix.SYS_SWAPOFF,
	"quotactl":          unix.SYS_QUOTACTL,
	"nfsservctl":        unix.SYS_NFSSERVCTL,
	"settimeofday":      unix.SYS_SETTIMEOFDAY,
	"clock_settime":     unix.SYS_CLOCK_SETTIME,
	"syslog":            unix.SYS_SYSLOG,
	"open_by_handle_at": unix.SYS_OPEN_BY_HANDLE_AT,
	"lookup_dcookie":    unix.SYS_LOOKUP_DCOOKIE,
	"ioctl":             unix.SYS_IOCTL,
	"personality":       unix.SYS_PERSONALITY,
	"create_module":     unix.SYS_CREATE_MODULE,
	"get_kernel_syms":   unix.SYS_GET_KERNEL_SYMS,
	"query_module":      unix.SYS_QUERY_MODULE,
	"uselib":            unix.SYS_USELIB,
	"ustat":             unix.SYS_USTAT,
	"sysfs":             unix.SYS_SYSFS,
	"_sysctl":           unix.SYS__SYSCTL,
	"iopl":              unix.SYS_IOPL,
	"ioperm":            unix.SYS_IOPERM,
}
