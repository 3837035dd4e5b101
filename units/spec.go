// Package units turns a session's plan (Spec) and what its start made for
// it (Launch) into what systemd needs to run it, in one call (Render): the
// unit name and the []dbus.Property of a transient service or scope and of
// the units started with it, gated by the user manager's version so that
// no property it does not know is ever sent (an unknown property fails the
// whole StartTransientUnit call). It is pure: it reads nothing from the
// host and talks to no one.
package units

import (
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"mosaic/internal/errcode"

	"mosaic/sandbox"
	"mosaic/sandbox/egress"
	"mosaic/sandbox/publish"
)

// Slice is the slice every session runs in, so that all sessions can be
// limited together: systemctl --user set-property mosaic.slice MemoryMax=8G.
const Slice = "mosaic.slice"

// UnitPrefix and UnitSuffix frame a session's name in its unit name: a
// service, or a scope (ScopeSuffix) for a session mosaic started itself.
const (
	UnitPrefix  = "mosaic-"
	UnitSuffix  = ".service"
	ScopeSuffix = ".scope"
)

// The kinds of session, as `mosaic status` shows them.
const (
	KindService = "service" // a transient service: systemd's sandbox around bwrap's
	KindScope   = "scope"   // a transient scope around a bwrap mosaic started: bwrap's sandbox alone
)

// DescriptionPrefix starts the Description of every unit mosaic makes; it is
// how mosaic tells its own sessions from other units named mosaic-*.
const DescriptionPrefix = "mosaic session "

// validName reports whether name matches ^[a-z0-9][a-z0-9-]{0,62}$. It is
// a loop, not a regexp: that regexp compiles to 63 nested repetitions, some
// 700 allocations made at every start of the mosaic binary, which is also
// each session's exec shim and init (GODEBUG=inittrace=1).
func validName(name string) bool {
	if len(name) == 0 || len(name) > 63 || name[0] == '-' {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// ValidateName checks a session name: 1 to 63 characters of lowercase letters,
// digits and '-', starting with a letter or digit. "bus" and names ending in
// "-egress" or FinishSuffix are kept for mosaic's own units.
func ValidateName(name string) error {
	if !validName(name) {
		return errcode.BadName.New("session name %q is invalid: use 1 to 63 lowercase letters, digits or '-', starting with a letter or digit", name)
	}
	if name == "bus" || strings.HasSuffix(name, "-egress") || IsFinishName(name) {
		return errcode.BadName.New("session name %q is reserved for mosaic's own units: choose another --name", name)
	}
	return nil
}

// UnitName is the systemd unit of session name when it is a service.
func UnitName(name string) string { return UnitPrefix + name + UnitSuffix }

// ScopeName is the systemd unit of session name when it is a scope.
func ScopeName(name string) string { return UnitPrefix + name + ScopeSuffix }

// UnitOf is the unit of a session of the given kind.
func UnitOf(name, kind string) string {
	if kind == KindScope {
		return ScopeName(name)
	}
	return UnitName(name)
}

// SessionName returns the session name and kind of a unit name, or "" when
// the unit is not named like a session.
func SessionName(unit string) (name, kind string) {
	name, ok := strings.CutPrefix(unit, UnitPrefix)
	if !ok {
		return "", ""
	}
	if n, ok := strings.CutSuffix(name, UnitSuffix); ok && ValidateName(n) == nil {
		return n, KindService
	}
	if n, ok := strings.CutSuffix(name, ScopeSuffix); ok && ValidateName(n) == nil {
		return n, KindScope
	}
	return "", ""
}

// GenerateName makes a session name from the command's base name and a random
// suffix, e.g. "claude-3fa9c2".
func GenerateName(command []string) string {
	base := "session"
	if len(command) > 0 {
		b := strings.Map(func(r rune) rune {
			switch {
			case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
				return r
			case r >= 'A' && r <= 'Z':
				return r + ('a' - 'A')
			}
			return '-'
		}, filepath.Base(command[0]))
		b = strings.Trim(b, "-")
		if len(b) > 40 {
			b = b[:40]
		}
		if b != "" {
			base = b
		}
	}
	var r [3]byte
	_, _ = rand.Read(r[:])
	return base + "-" + hex.EncodeToString(r[:])
}

// Spec is one session's plan, with every path already checked and
// resolved: what the session is (its request and the host's facts), never
// changed once made (manager.NewPlan). What a start makes for it is its
// Launch, beside it; Render renders both. Its fields are exported, and
// only the functions that make a plan write them: a source test
// (TestNothingChangesAPlan in cmd/mosaic) fails on any other write.
type Spec struct {
	Name       string
	NameGiven  bool // false when mosaic made the name up (and so it is free)
	Command    []string
	Binary     string // the command's binary, bound read-only when it lives outside the system dirs
	Workspace  string // the workspace's real path
	GivenAs    string // the workspace as the user gave it, when that was a symlink
	Home       string // the user's home: hidden, and HOME's path inside
	RuntimeDir string // $XDG_RUNTIME_DIR: hidden
	StateDir   string // the session's own state: home/ and tmp/ below it
	MosaicBin  string // the mosaic binary, for the broker units and --may-launch
	StageBin   string // the stage binary (cmd/mosaic-stage): the exec shim, the init, session-ended
	NetBin     string // mosaic-net beside it (cmd/mosaic-net), for a session with the network device
	// Promise is what the shim and the init check the sandbox against
	// (encoded onto their command line).
	Promise  sandbox.Promise
	BwrapBin string   // the bwrap binary
	ExtraRO  []string // --ro paths, resolved
	ExtraRW  []string // --rw paths, resolved
	// ToolCache is the workspace's tool caches' directory on the host
	// (request.ToolCacheDir; sandbox.ToolCaches), "" for none.
	ToolCache string
	// Toolchains are the directories of ExtraRO bound for the session's
	// PATH (the user's toolchains, read-only); PathDropped the user's PATH
	// directories left out of it, each "DIR: why" (request.sessionPath).
	Toolchains  []string
	PathDropped []string
	// EnvDropped are the build settings of the user's environment not
	// passed, their values looking like credentials (names only).
	EnvDropped []string
	// OwnGitDir is the session's own repository in its state, bound over
	// the workspace's .git placeholder (directfloor.OwnGitDir); "" for none.
	OwnGitDir string
	// GitConfig is the session's ~/.gitconfig, written at each start: the
	// user's identity and harmless settings (request.gitSettings); "" for
	// none (--no-git-identity, or the user has none).
	GitConfig string
	// BindIDs are the workspace's and the --ro/--rw paths' identities as
	// checked, which the sandbox's layers compare with what they mounted.
	BindIDs []sandbox.BindID
	// Protect are the read-only binds over the workspace's host-executed
	// entries (directfloor.Protect), none when AllowWriteHostExec.
	Protect            []sandbox.Bind
	AllowWriteHostExec bool
	Env                []string // non-secret KEY=VALUE for the unit (TERM, LANG, a profile's variables)
	Pass               []string // names the init passes besides its allowlist (a profile's variables)
	// SeccompAllow are the rows of sandbox.SyscallRules the profile lifted.
	SeccompAllow []string
	// Credentials are the names of the secrets in the launch's
	// CredentialFile, which systemd reads (EnvironmentFiles=) and the init
	// requires and passes on. The values are never in the spec.
	Credentials []string
	Profile     string
	Limits      Limits
	// SliceLimits are mosaic.slice's, set when the slice has none.
	SliceLimits Limits
	// StopTimeout is how long systemd waits after SIGTERM before SIGKILL.
	StopTimeout time.Duration
	// TTY says the session's stdin, stdout and stderr are a pseudo-terminal
	// mosaic made for it, which the init makes the command's controlling
	// terminal.
	TTY bool
	// Publish are the session's published ports (--publish): its
	// forwarder (publishProperties) listens on the host side of each.
	Publish []publish.Port
	// SSHAgent, when set, is the user's ssh agent as lent to the session
	// (--lend-ssh-key, --lend-ssh-sign): its filter (sshAgentProperties)
	// is the only agent the session reaches.
	SSHAgent *SSHAgent
	// MayLaunch binds the bus's socket directory (BusDir) into the session,
	// which may then ask the bus to launch others.
	MayLaunch bool
	BusDir    string
	// Network is the session's network: sandbox.NetworkNone, NetworkAllow
	// (through its egress proxy, to Allow) or NetworkHost.
	Network string
	// TUN: network allow with the session's network device (package
	// sandbox/netstack): every connection goes through the egress proxy,
	// proxy-aware or not. False where the host's TUN node is not the
	// user's to open (the session then reaches only proxy-aware clients'
	// hosts) and for --sandbox landlock (no bwrap).
	TUN bool
	// Ask is how long the egress proxy holds a connection to a host not on
	// the list for the user's answer (--ask); 0: refused at once.
	Ask time.Duration
	// Allow is the egress allowlist ("host:port", or an address a name may
	// resolve to); EgressDir holds the proxy's socket.
	Allow     []string
	EgressDir string
	// Inject are the credentials the egress proxy puts into requests
	// (names and hosts; the session holds placeholders); their values
	// travel in the launch's EgressCredentialFile.
	Inject []egress.Rule
	// GitLends are the git credentials lent to the session (--lend-git):
	// the repositories and operations; their tokens travel in the launch's
	// EgressCredentialFile, the session's ~/.gitconfig holds placeholders.
	GitLends []egress.GitLend
	// CAFile is the session's --ca-file, which the egress proxy also trusts
	// when it opens TLS to a host it injects into.
	CAFile string
	// CABundle is the bundle of the system's roots and CAFile the session's
	// clients read (egress.TrustEnv), written when it starts.
	CABundle string
	// SSHConfig is the user's copy of the system's ssh client snippets
	// (sandbox.SSHConfigCopy) bwrap binds over them, or "" for none.
	SSHConfig string
	// Notes are what mosaic start says about the session besides its
	// name: how a credential travels when it cannot be injected, a custom
	// endpoint's host allowed.
	Notes []string
	// Scope makes the session a scope: mosaic starts the exec shim itself
	// and systemd only adopts it (no unit sandbox; bwrap's is the whole).
	Scope bool
	// Sandbox is the inner layer: sandbox.ModeBwrap ("" too) or
	// sandbox.ModeLandlock (no bwrap; the init applies a Landlock policy).
	Sandbox string
	// Clone, when set, makes this a clone-mode session: its copy is
	// mounted at the workspace's path instead of the workspace.
	Clone *Clone
	// WorkDir, when set, is the directory below the workspace the session
	// starts in: the user's workspace when clone mode copies the whole
	// repository it is in (Workspace is then the repository's top).
	WorkDir string
}

// Dir is the directory the session's command starts in.
func (s Spec) Dir() string {
	if s.WorkDir != "" {
		return s.WorkDir
	}
	return s.Workspace
}

// Intercepts reports whether the session's egress proxy terminates TLS
// for some hosts from the start: to put credentials in (Inject,
// GitLends), or to refuse a read-only registry's writes (a package group
// on Allow: egress.Guards). The session then waits for its proxy, whose CA
// its command trusts from its first moment. (Every session with a proxy
// trusts its CA; one that does not wait may start a client before the
// proxy wrote it: egress.WritePlaceholders.)
func (s Spec) Intercepts() bool {
	return len(s.Inject) > 0 || len(s.GitLends) > 0 || s.Network == sandbox.NetworkAllow && readsRegistry(s.Allow)
}

// readsRegistry reports whether the allowlist allow holds a registry host
// whose writes the proxy refuses (a package group without its write grant).
func readsRegistry(allow []string) bool {
	a, err := egress.ParseAllow(allow)
	if err != nil {
		return false
	}
	for hp := range a.Hosts {
		if egress.Guards(hp) && !a.Write[hp] {
			return true
		}
	}
	return false
}

// Landlock reports whether the session runs in --sandbox landlock.
func (s Spec) Landlock() bool { return s.Sandbox == sandbox.ModeLandlock }

// LandlockPolicy is the policy of a --sandbox landlock session's command.
func (s Spec) LandlockPolicy() sandbox.LandlockPolicy {
	ro := s.ExtraRO
	if s.Intercepts() || s.Network == sandbox.NetworkAllow { // the egress proxy's CA, which the command trusts
		ro = append(append([]string{}, ro...), s.EgressDir)
	}
	if s.CABundle != "" {
		ro = append(append([]string{}, ro...), s.CABundle)
	}
	return sandbox.LandlockPolicyFor(sandbox.LandlockOptions{Workspace: s.Workspace, SessionHome: s.SessionHome(),
		Binary: s.Binary, ExtraRO: ro, ExtraRW: s.ExtraRW, Network: s.Network})
}

// Kind is the session's kind: KindService or KindScope.
func (s Spec) Kind() string {
	if s.Scope {
		return KindScope
	}
	return KindService
}

// Unit is the session's unit name.
func (s Spec) Unit() string { return UnitOf(s.Name, s.Kind()) }

// Limits are the resource limits asked for; zero means none.
type Limits struct {
	MemoryMax  uint64        // bytes
	TasksMax   uint64        // processes and threads
	CPUQuota   uint64        // percent of one CPU
	RuntimeMax time.Duration // wall-clock time before systemd stops the session
	// TmpSize bounds the session's /tmp, a tmpfs of its own (in memory,
	// charged to its MemoryMax), in bytes; Infinity is the kernel's
	// default for a tmpfs (half the RAM). It is no property of systemd's.
	TmpSize uint64
	// HomeSize bounds the session's home the same way: a tmpfs of its
	// own, which a kept home is loaded into and saved from
	// (sandbox.HomeStore).
	HomeSize uint64
}

// SessionHome is the directory mounted as the session's HOME.
func (s Spec) SessionHome() string { return filepath.Join(s.StateDir, "home") }

// SessionTmp is the directory of the session's state that once was its
// /tmp (a tmpfs now, Limits.TmpSize): a start removes one an older mosaic
// left, and makes none.
func (s Spec) SessionTmp() string { return filepath.Join(s.StateDir, "tmp") }

// Binds are the sandbox's mounts for this session, with reasons.
func (s Spec) Binds() []sandbox.Bind {
	return sandbox.HostBinds(sandbox.Options{
		Workspace:    s.Workspace,
		WorkspaceSrc: s.scopeCopy(),
		Home:         s.Home,
		SessionHome:  s.SessionHome(),
		HomeSize:     s.Limits.HomeSize,
		TmpSize:      s.Limits.TmpSize,
		MosaicBin:    s.MosaicBin,
		StageBin:     s.StageBin,
		Binary:       s.Binary,
		ExtraRO:      s.ExtraRO,
		ExtraRW:      s.ExtraRW,
		Toolchains:   s.Toolchains,
		BusDir:       s.busDir(),
		EgressDir:    s.egressDir(),
		TUN:          s.TUN,
		NetBin:       s.NetBin,
		PublishDir:   s.publishDir(),
		SSHAgentDir:  s.sshAgentDir(),
		CABundle:     s.CABundle,
		SSHConfig:    s.SSHConfig,
		BwrapBin:     s.BwrapBin,
		ToolCache:    s.ToolCache,
		Protect:      append(s.cloneBinds(), s.Protect...),
	})
}

// publishDir is the publish forwarder's socket directory, or "" without
// --publish.
func (s Spec) publishDir() string {
	if len(s.Publish) == 0 {
		return ""
	}
	return PublishDir(s.RuntimeDir, s.Name)
}

func (s Spec) egressDir() string {
	if s.Network == sandbox.NetworkAllow {
		return s.EgressDir
	}
	return ""
}

// OwnNetwork reports whether the session has a network namespace of its own.
func (s Spec) OwnNetwork() bool { return s.Network != sandbox.NetworkHost }

// EgressUnit is the unit of the session's egress proxy.
func (s Spec) EgressUnit() string { return EgressUnitName(s.Name) }

// EgressUnitName is the egress proxy unit of session name.
func EgressUnitName(name string) string { return UnitPrefix + name + "-egress" + UnitSuffix }

func (s Spec) busDir() string {
	if s.MayLaunch {
		return s.BusDir
	}
	return ""
}

// Features are what the user manager supports, read from its Version once per
// connection.
type Features struct {
	Version     int
	PrivatePIDs bool // PrivatePIDs=, from 257
	// UnitByPIDFD: the manager's GetUnitByPIDFD, from 253, names the unit
	// of a process by pidfd, so a reused PID cannot answer for it.
	UnitByPIDFD bool
}

// FeaturesFor returns the features of systemd version v.
func FeaturesFor(v int) Features {
	return Features{Version: v, PrivatePIDs: v >= 257, UnitByPIDFD: v >= 253}
}

// ParseVersion reads the leading number of systemd's Version property
// ("252.38-1~deb12u1" is 252; "v245.4-1.fc32" is 245, as runc's cgroups
// reads it: an optional "v" before the number).
func ParseVersion(s string) int {
	s = strings.TrimPrefix(strings.Trim(s, `"`), "v")
	end := 0
	for end < len(s) && s[end] >= '0' && s[end] <= '9' {
		end++
	}
	v, _ := strconv.Atoi(s[:end])
	return v
}
