package sandbox

import (
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// A scope's sandbox has no exec shim: mosaic starts bwrap itself, with
// these descriptors (see Held).
const (
	ScopeInfoFD   = 3 // bwrap's --info-fd: {"child-pid": N}, the init's PID
	ScopeArgsFD   = 4 // the init's arguments (InitArgvFD)
	ScopeInitGoFD = 5 // the init's --go-fd, a socket: its byte once held, mosaic's once it is in the scope
)

// InitGoFD is the init's option naming the socket on which a scope's init,
// started before its scope, says it is held (it keeps every signal from
// then on) and then reads one byte before it does anything.
const InitGoFD = "--go-fd"

// Held is a scope's bwrap as mosaic starts it: bwrap reports the init's PID
// on ScopeInfoFD as soon as it has cloned it, builds the sandbox and runs
// the init, which waits for one byte on ScopeInitGoFD (InitGoFD), sent once
// mosaic has had systemd put it into the scope. bwrap's setup and the init's
// own start (a Go program's) thus overlap systemd's work, and nothing of the
// session runs outside its scope: the init checks its cgroup
// (Promise.Scope) before anything else, and refuses on EOF (mosaic gone
// while it was held).
type Held struct {
	Argv []string // bwrap's command line, argv[0] bwrap's path
	Env  []string // its environment: InitEnv's, with the promise
	Args *os.File // the init's arguments, to hand over as ScopeArgsFD and then close
}

// HoldBwrap makes a scope's Held from bwrap's command line (ending in
// "InitPath init"), the init's arguments after "init", the environment a
// unit would have had (the secrets among it) and the encoded promise.
func HoldBwrap(bwrapArgv, initArgs, environ []string, promise string) (Held, error) {
	n := len(bwrapArgv)
	if !endsInInit(bwrapArgv) {
		return Held{}, fmt.Errorf("bwrap's command line does not end in mosaic's init")
	}
	environ = append(environ[:len(environ):len(environ)], PromiseEnv+"="+promise)
	env, err := InitEnv(environ, append(bwrapArgv[:n:n], initArgs...))
	if err != nil {
		return Held{}, err
	}
	if weakened {
		env = environ
	}
	f, err := sealedFile(EncodeInitArgs(initArgs))
	if err != nil {
		return Held{}, err
	}
	return Held{Argv: append(bwrapArgv[:n:n], InitArgvFD, strconv.Itoa(ScopeArgsFD)), Env: env, Args: f}, nil
}

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
				env = append(withoutEnv(env, "NOTIFY_SOCKET"), NotifyFDEnv+"="+strconv.Itoa(fd))
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
