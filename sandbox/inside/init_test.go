package inside

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"mosaic/sandbox"
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

// TestRefuse: the init's one refusal exits with ExitSandboxRefused and
// puts its status, when it has one, in the unit's status line, and
// nothing there when it has none.
func TestRefuse(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	if got := refuse(fds[0], checkFailed+"no PID namespace", errors.New("no PID namespace")); got != sandbox.ExitSandboxRefused {
		t.Errorf("refuse = %d, want %d", got, sandbox.ExitSandboxRefused)
	}
	if got := refuse(fds[0], "", errors.New("no status")); got != sandbox.ExitSandboxRefused {
		t.Errorf("refuse without a status = %d", got)
	}
	if got := refuse(-1, "credential K did not arrive", errors.New("no descriptor yet")); got != sandbox.ExitSandboxRefused {
		t.Errorf("refuse before the descriptor = %d", got)
	}
	buf := make([]byte, 256)
	n, err := unix.Read(fds[1], buf)
	if err != nil || string(buf[:n]) != "STATUS=sandbox check failed: no PID namespace" {
		t.Errorf("status line %q, %v", buf[:n], err)
	}
	if n, _, _ := unix.Recvfrom(fds[1], buf, unix.MSG_DONTWAIT); n > 0 {
		t.Errorf("a refusal without a status wrote %q", buf[:n])
	}
}
