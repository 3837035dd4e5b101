package inside

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"

	"mosaic/internal/sessionfile"
	"mosaic/sandbox"
)

// keep holds the files whose descriptors must survive until the exec
// (their finalizers would close them).
var keep []*os.File

// ExecBwrap replaces the calling process (the unit's main process) with bwrap,
// after two things bwrap cannot do itself:
//
//   - SIGTERM is blocked (keepStopSignal). bwrap's monitor process does not
//     handle it, so systemd's SIGTERM would kill bwrap at once and
//     --die-with-parent would SIGKILL the session before the command could
//     shut down. Blocked, the monitor lives on while the init (which systemd
//     signals too, as it does every process of the unit) forwards the
//     signal and waits for the command, and a SIGTERM that came before the
//     init had its handler is found pending in the monitor; the init
//     installs its own handler, so the command starts with the default
//     disposition and an empty mask.
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
	runtime.LockOSThread() // the signal mask is this thread's, which the exec keeps
	argv = testHoldBwrap(argv)
	env = append(env, keepStopSignal()...)
	releaseTerminal()
	if sock := os.Getenv("NOTIFY_SOCKET"); sock != "" {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM, 0) // inherited on purpose: no CLOEXEC
		if err == nil {
			if err := unix.Connect(fd, &unix.SockaddrUnix{Name: sock}); err == nil {
				env = append(withoutEnv(env, "NOTIFY_SOCKET"), sandbox.NotifyFDEnv+"="+strconv.Itoa(fd))
			} else {
				unix.Close(fd)
			}
		}
	}
	err := unix.Exec(argv[0], argv, env)
	return fmt.Errorf("cannot run %s: %w", argv[0], err)
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

// ShimMain runs the shim with the arguments after its name: it checks the
// outer layer, deletes the credential file and becomes bwrap. It returns only on failure, and the
// caller exits with ExitSandboxRefused: no partial sandbox ever runs.
func ShimMain(args []string) error {
	s, err := sandbox.ParseShim(args)
	if err != nil {
		return err
	}
	if err := checkOuter(s.Promise); err != nil {
		return err
	}
	if s.InitArgs != "" {
		noteOutputLost(filepath.Join(filepath.Dir(s.InitArgs), sandbox.OutputLostName))
	}
	if s.Drop != "" {
		// systemd has read the credentials (the link to the memfd mosaic
		// holds, credentials.Hold; a file, for a unit of a mosaic before
		// issue 31) into our environment: the link has no reason to exist
		// any more, and gone it cannot name another file once mosaic's
		// PID is reused.
		if err := sessionfile.Remove(s.Drop); err != nil {
			fmt.Fprintf(os.Stderr, "mosaic: %v\n", err)
		}
	}
	bwrapArgs, inline, err := sandbox.InitArgsAside(s)
	if err != nil {
		return err
	}
	env, err := sandbox.InitEnv(os.Environ(), append([]string{s.Bwrap}, inline...))
	if err != nil {
		return err
	}
	if s.HomeStore != "" {
		if env, err = passHomeStore(s.HomeStore, env); err != nil {
			return err
		}
	}
	if s.TUN {
		if env, err = passNetwork(env); err != nil {
			return err
		}
	}
	return ExecBwrap(append([]string{s.Bwrap}, bwrapArgs...), env)
}

// checkOuter checks the outer layer against the promise read on the host,
// and hands the init the promise it must check in turn.
func checkOuter(encoded string) error {
	p, err := sandbox.DecodePromise(encoded)
	if err != nil {
		return err
	}
	if err := CheckUnit(p); err != nil {
		return err
	}
	return os.Setenv(sandbox.PromiseEnv, inner(p).Encode())
}

// noteOutputLost writes the file at path when the unit's stdout is
// /dev/null: what systemd gives a unit whose output is for the journal
// when it cannot reach journald (not running, its socket gone), instead of
// failing the start. The session's output is then lost, and nothing else
// would say so. (A mosaic run to /dev/null writes it too: logs has nothing
// to say of a run's output anyway.)
func noteOutputLost(path string) {
	var out, null unix.Stat_t
	if unix.Fstat(1, &out) != nil || unix.Stat(os.DevNull, &null) != nil {
		return
	}
	if out.Mode&unix.S_IFMT == unix.S_IFCHR && out.Rdev == null.Rdev {
		_ = os.WriteFile(path, nil, 0o600)
	}
}
