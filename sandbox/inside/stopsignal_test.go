package inside

import (
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// A SIGTERM pending for the process or its thread is seen; other pending
// signals, or none, are not.
func TestTermPending(t *testing.T) {
	for status, want := range map[string]bool{
		"Name:\tbwrap\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000004000\nSigBlk:\t0000000000004000\n": true,
		"SigPnd:\t0000000000004000\nShdPnd:\t0000000000000000\n":                                          true,
		"SigPnd:\t0000000000000000\nShdPnd:\t0000000000000002\nSigBlk:\t0000000000004000\n":               false,
		"SigBlk:\t0000000000004000\nSigIgn:\t0000000000004000\n":                                          false,
		"": false,
	} {
		if got := termPending(status); got != want {
			t.Errorf("termPending(%q) = %v, want %v", status, got, want)
		}
	}
}

// The init's look: the SIGTERM pending in the status it was handed is put
// on its signals, once; the descriptor is closed and the variable gone.
func TestStopBeforeHeard(t *testing.T) {
	for _, pending := range []bool{false, true} {
		status := "ShdPnd:\t0000000000000000\n"
		if pending {
			status = "ShdPnd:\t0000000000004000\n"
		}
		path := t.TempDir() + "/status"
		if err := os.WriteFile(path, []byte("Name:\tbwrap\n"+status), 0o600); err != nil {
			t.Fatal(err)
		}
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Setenv(MonitorStatusEnv, strconv.Itoa(fd))
		sigs := make(chan os.Signal, 2)
		stopBeforeHeard(sigs)
		if got, want := len(sigs), map[bool]int{false: 0, true: 1}[pending]; got != want {
			t.Errorf("SIGTERM pending %v: %d signals put on, want %d", pending, got, want)
		}
		if _, ok := os.LookupEnv(MonitorStatusEnv); ok {
			t.Errorf("%s is left in the environment", MonitorStatusEnv)
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil {
			t.Errorf("the status descriptor %d is left open", fd)
		}
	}
}
