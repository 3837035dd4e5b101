//go:build !amd64 && !arm64

package inside

// No filter is built for other architectures: SyscallFilter fails, and the
// init refuses to run the command.
const (
	auditArch = 0
	x32Bit    = 0
)

var syscallNumbers = map[string]uint32{}
