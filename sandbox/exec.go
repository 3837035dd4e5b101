package sandbox

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"

	"golang.org/x/sys/unix"
)

// The descriptors a scope's exec shim is started with (see units.ExecArgv).
const (
	ScopeInfoFD = 3 // bwrap's --info-fd: {"child-pid": N}, the init's PID
	ScopeGoFD   = 4 // one byte once the shim is in its scope; EOF means give up
)

// WaitForGo blocks until one byte arrives on fd, then closes it. EOF (mosaic
// could not make the scope, or died) is an error: nothing may run outside
// the scope.
func WaitForGo(fd int) error {
	var b [1]byte
	for {
		n, err := unix.Read(fd, b[:])
		if err == unix.EINTR {
			continue
		}
		unix.Close(fd)
		if n == 1 {
			return nil
		}
		return fmt.Errorf("mosaic did not place the session in its scope (%v)", err)
	}
}

// ExecBwrap replaces the calling process (the unit's main process) with bwrap,
// after two things bwrap cannot do itself:
//
//   - SIGTERM is set to ignored. bwrap's monitor process does not handle it,
//     so systemd's SIGTERM would kill bwrap at once and --die-with-parent
//     would SIGKILL the session before the command could shut down. Ignored,
//     the monitor lives on while the init (which systemd signals too, as it
//     does every process of the unit) forwards the signal and waits for the
//     command; the init installs its own handler, so the command starts
//     with the default disposition.
//   - bwrap, and so the init, gets only env: the environment the init
//     needs (InitEnv, which the shim computes): what the user manager holds for every unit never enters
//     the sandbox.
//   - systemd's notification socket (bound into the unit, never into the
//     sandbox) is connected here and handed down as a descriptor, so that the
//     init can report READY=1 from inside without the socket's path.
//
// It returns only on failure.
func ExecBwrap(argv, env []string) error {
	if len(argv) == 0 {
		return fmt.Errorf("usage: exec-bwrap BWRAP [ARG...]")
	}
	if weakened {
		env = os.Environ()
	}
	signal.Ignore(unix.SIGTERM)
	releaseTerminal()
	if sock := os.Getenv("NOTIFY_SOCKET"); sock != "" {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM, 0) // inherited on purpose: no CLOEXEC
		if err == nil {
			if err := unix.Connect(fd, &unix.SockaddrUnix{Name: sock}); err == nil {
				env = append(withoutEnv(env, "NOTIFY_SOCKET"), NotifyFDEnv+"="+strconv.Itoa(fd))
			} else {
				unix.Close(fd)
			}
		}
	}
	err := unix.Exec(argv[0], argv, env)
	return fmt.Errorf("cannot run %s: %v", argv[0], err)
}

// releaseTerminal gives up stdin's terminal when it is this process's
// controlling terminal. systemd starts a service's main process as a session
// leader, and one that holds a terminal on stdin acquires it: the session's
// init could then not make it the command's controlling terminal. The
// sandbox never shares a controlling terminal with a layer above it.
func releaseTerminal() {
	if _, err := unix.IoctlGetInt(0, unix.TIOCGSID); err != nil {
		return // not our controlling terminal (or none)
	}
	// A session leader letting go sends SIGHUP to its foreground group,
	// which may be this process.
	signal.Ignore(unix.SIGHUP)
	_ = unix.IoctlSetInt(0, unix.TIOCNOTTY, 0)
	signal.Reset(unix.SIGHUP)
}

func withoutEnv(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if len(kv) > len(name) && kv[:len(name)+1] == name+"=" {
			continue
		}
		out = append(out, kv)
	}
	return out
}
