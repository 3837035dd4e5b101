package inside

import (
	"testing"

	"golang.org/x/sys/unix"
)

func TestExitCode(t *testing.T) {
	// Wait statuses as the kernel encodes them: exit code in bits 8-15, a
	// terminating signal in bits 0-6.
	for ws, want := range map[unix.WaitStatus]int{0: 0, 7 << 8: 7, 255 << 8: 255, 9: 137, 15: 143} {
		if got := ExitCode(ws); got != want {
			t.Errorf("ExitCode(%#x) = %d, want %d", uint32(ws), got, want)
		}
	}
}
