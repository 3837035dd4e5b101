package sandbox

import (
	"strconv"
	"time"

	"mosaic/internal/testhook"
)

// NotifyFDEnv carries the number of the descriptor, connected to systemd's
// notification socket, on which the init reports READY=1 once the sandbox
// checked out and the command runs. The socket's path is never visible inside
// the sandbox and the descriptor is closed before the command starts.
const NotifyFDEnv = "MOSAIC_NOTIFY_FD"

// ExitSandboxRefused is the init's exit status when the sandbox it was promised
// is not there; the command never ran.
const ExitSandboxRefused = 125

// DefaultPath is the command's PATH when the unit has none.
const DefaultPath = "/usr/local/bin:/usr/bin:/bin"

// InitOptions are what the init is told on its command line.
type InitOptions struct {
	Session, Home string
	TTY           bool // stdin is a pseudo-terminal mosaic made for the session
	KeepHome      bool // the home is kept: saved back to disk at the end (HomeStore)
	// KillAfter, when set, is how long after a stop's SIGTERM the init
	// kills a command that ignores it, so that the rest of the stop
	// timeout is left to save the home (half of it, with KeepHome).
	KillAfter time.Duration
	Egress    bool // network allow: relay 127.0.0.1:ProxyPort to the egress proxy
	// TUN: every connection through the egress proxy too (network allow in
	// bwrap's network namespace, with the device and the capabilities to
	// make it, which the init drops before the command runs; see package
	// sandbox/netstack).
	TUN          bool
	Pass         []string // variables to let through when set
	Credentials  []string // variables that must have arrived (names only)
	SeccompAllow []string // rows of SyscallRules a profile lifted
	Publish      []int    // session ports the host reaches through the publish forwarder (--publish)
	// Landlock, for --sandbox landlock, is the encoded LandlockPolicy the
	// command runs under (no bwrap: the init runs in the unit directly);
	// EgressSocket is then the egress proxy's socket at its own path.
	Landlock, EgressSocket string
}

// InitArgv is the argument list of mosaic's init (after the mosaic binary's
// argv[0]) for one session's command.
func InitArgv(o InitOptions, command []string) []string {
	argv := []string{"init", "--session", o.Session, "--home", o.Home}
	if o.TTY {
		argv = append(argv, "--tty")
	}
	if o.KeepHome {
		argv = append(argv, "--keep-home")
	}
	if o.KillAfter > 0 {
		argv = append(argv, "--kill-after", o.KillAfter.String())
	}
	if o.Egress {
		argv = append(argv, "--egress")
	}
	if o.TUN {
		argv = append(argv, "--tun")
	}
	if o.TUN && testhook.Flag("MOSAIC_TEST_NET_UP_FRONT") {
		argv = append(argv, "--test-net-up-front")
	}
	if o.Landlock != "" {
		argv = append(argv, "--landlock", o.Landlock, "--egress-socket", o.EgressSocket)
	}
	pass, credentials := o.Pass, o.Credentials
	for _, p := range pass {
		argv = append(argv, "--pass", p)
	}
	for _, c := range credentials {
		argv = append(argv, "--credential", c)
	}
	for _, r := range o.SeccompAllow {
		argv = append(argv, "--seccomp-allow", r)
	}
	for _, p := range o.Publish {
		argv = append(argv, "--publish", strconv.Itoa(p))
	}
	return append(append(argv, "--"), command...)
}
