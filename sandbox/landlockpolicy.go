package sandbox

import (
	"encoding/json"
	"fmt"

	"golang.org/x/sys/unix"
)

// LandlockMinABI is the Landlock ABI a session needs for its scoping, and
// that --sandbox landlock needs at all: 6 scopes abstract Unix sockets and
// signals (Linux 6.12). Without signal scoping a session with no PID
// namespace could kill any of the user's processes.
const LandlockMinABI = 6

// LandlockABI is the kernel's Landlock ABI version, 0 where Landlock is not
// built in or disabled at boot (landlock_create_ruleset's version call).
func LandlockABI() int {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0
	}
	return int(v)
}

// LandlockFaultEnv, set to "old-kernel" in the init's environment (the
// user manager's), makes the init see a kernel with Landlock ABI 5: tests
// use it to run a session without the scoping, and to show that a session
// of --sandbox landlock then refuses to start. It gives a session what an
// older kernel would, never more: whoever can set the user manager's
// environment can start unconfined units anyway.
const LandlockFaultEnv = "MOSAIC_LANDLOCK_FAULT"

// LandlockPolicy is what a command in --sandbox landlock may do; the init
// reads it from its command line. Paths that do not exist grant nothing.
type LandlockPolicy struct {
	Exec  []string `json:"exec"`  // read and execute beneath
	Read  []string `json:"read"`  // read beneath
	Write []string `json:"write"` // every access beneath
	Dev   []string `json:"dev"`   // device files (and /dev/pts): read, write, ioctl
	// Network is the session's network: none (no TCP connect at all), allow
	// (TCP connect to ProxyPort only, the init's relay) or host (unlimited).
	Network string `json:"network"`
}

// Encode is the policy as one argument.
func (p LandlockPolicy) Encode() string {
	b, _ := json.Marshal(p)
	return string(b)
}

// DecodeLandlockPolicy reads an encoded policy.
func DecodeLandlockPolicy(s string) (LandlockPolicy, error) {
	var p LandlockPolicy
	if err := json.Unmarshal([]byte(s), &p); err != nil || !ValidNetwork(p.Network) {
		return p, fmt.Errorf("unreadable Landlock policy %q", s)
	}
	return p, nil
}

// LandlockOptions are the paths of one session in --sandbox landlock, where
// they are seen at their own paths (systemd's layer hides the rest).
type LandlockOptions struct {
	Workspace, SessionHome string
	Binary                 string
	ExtraRO, ExtraRW       []string
	Network                string
}

// landlockDevices are the device files a command may use, as bwrap's
// private /dev offers them; the host's other devices stay closed.
var landlockDevices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx", "/dev/pts"}

// LandlockPolicyFor is the policy of a session in --sandbox landlock: the
// same system directories bwrap binds, read and execute; /proc readable
// (there is no private one: the mode's main gap); writes only to the
// session's own places.
func LandlockPolicyFor(o LandlockOptions) LandlockPolicy {
	p := LandlockPolicy{Read: []string{"/etc", "/proc"}, Dev: landlockDevices, Network: o.Network}
	// The merged-/usr links resolve into /usr; where they are real
	// directories they need their own rule; where absent they grant nothing.
	p.Exec = append([]string{"/usr"}, mergedUsrLinks...)
	if o.Binary != "" {
		p.Exec = append(p.Exec, o.Binary)
	}
	p.Exec = append(p.Exec, o.ExtraRO...)
	p.Write = append([]string{o.Workspace, o.SessionHome, "/tmp", "/dev/shm"}, o.ExtraRW...)
	return p
}

// The sandbox modes (--sandbox): bwrap's layer inside systemd's (the
// default), or Landlock inside systemd's where bwrap cannot run. A mode is
// only ever what was asked for: mosaic never falls back from one to the
// other.
const (
	ModeBwrap    = "bwrap"
	ModeLandlock = "landlock"
)

// ValidMode reports whether m names a sandbox mode.
func ValidMode(m string) bool { return m == ModeBwrap || m == ModeLandlock }
