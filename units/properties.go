package units

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	sd "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"

	"mosaic/sandbox"
	"mosaic/sandbox/egress"
)

// DefaultStopTimeout is how long a session gets between SIGTERM and SIGKILL.
const DefaultStopTimeout = 10 * time.Second

// startTimeout bounds the time from fork to the init's READY=1.
const startTimeout = 30 * time.Second

// StartTimeout is the unit's TimeoutStartUSec: how long systemd lets a
// session take to start.
const StartTimeout = startTimeout

// exitSIGTERM is how bwrap reports a command that died of SIGTERM (128+15).
// systemd counts a SIGTERM death as a clean stop; listing 143 keeps a stopped
// session "inactive" instead of "failed", since bwrap turns the signal into
// an exit status.
const exitSIGTERM = 143

// D-Bus shapes of systemd's sandboxing properties, which go-systemd has no
// helpers for (signatures from systemd's dbus-execute.c).
type (
	tmpfsEntry struct{ Path, Options string } // TemporaryFileSystem a(ss)
	bindEntry  struct {                       // Bind(ReadOnly)Paths a(ssbt)
		Src, Dst     string
		IgnoreENOENT bool
		Flags        uint64
	}
	execEx struct { // ExecStartEx a(sasas)
		Path  string
		Argv  []string
		Flags []string
	}
	execCmd struct { // ExecStopPost a(sasb)
		Path          string
		Argv          []string
		IgnoreFailure bool
	}
	exitStatusSet struct{ Status, Signals []int32 } // SuccessExitStatus (aiai)
	envFile       struct {                          // EnvironmentFiles a(sb)
		Path          string
		IgnoreMissing bool
	}
)

func prop(name string, v any) sd.Property { return sd.Property{Name: name, Value: dbus.MakeVariant(v)} }

// ExecArgv is a service's command line: mosaic's exec shim, which becomes
// bwrap, which runs mosaic's init, which runs the command. It holds
// credentials' names, never their values. (A scope's is ScopeBwrap.)
//
// With s.InitArgsFile the init's arguments stay out of it (the shim reads
// them from that file): a command line of any length then fits systemd's
// unit file, its D-Bus call and bwrap's 9,000 arguments.
func ExecArgv(s Spec) []string {
	if s.Landlock() {
		return landlockExecArgv(s)
	}
	initArgv := append([]string{sandbox.InitPath}, InitArgs(s)...)
	shim := sandbox.Shim{Promise: s.Promise.Encode(), Drop: s.CredentialFile, Bwrap: s.BwrapBin}
	if s.InitArgsFile != "" {
		initArgv = initArgv[:2] // InitPath "init"
		shim.InitArgs = s.InitArgsFile
	}
	shim.Args = sandbox.Argv(s.Binds(), s.Workspace, initArgv, netArgs(s)...)
	return shim.Argv(s.MosaicBin)
}

// ScopeBwrap is a scope's sandbox, which mosaic starts itself (no exec
// shim, see sandbox.Held): bwrap's command line, from bwrap's path to
// "InitPath init", and the init's arguments after "init". bwrap reports the
// init's PID on sandbox.ScopeInfoFD and runs it, the sandbox built; the init
// waits for a byte on sandbox.ScopeInitGoFD, sent once systemd has put it
// into the scope.
func ScopeBwrap(s Spec) (bwrapArgv, initArgs []string) {
	extra := append([]string{"--info-fd", strconv.Itoa(sandbox.ScopeInfoFD)}, netArgs(s)...)
	argv := append([]string{s.BwrapBin}, sandbox.Argv(s.Binds(), s.Workspace, []string{sandbox.InitPath, "init"}, extra...)...)
	return argv, InitArgs(s)[1:]
}

// netArgs are bwrap's options of the session's own: its host name, and its
// network (one of its own gets only loopback: no route, no host abstract
// socket).
func netArgs(s Spec) []string {
	args := sandbox.HostnameArgs(s.Name)
	if s.OwnNetwork() {
		args = append(args, "--unshare-net")
	}
	return args
}

// InitArgs are the arguments of the session's init, from "init" on.
func InitArgs(s Spec) []string {
	return sandbox.InitArgv(sandbox.InitOptions{Session: s.Name, Home: s.Home, TTY: s.TTY,
		Egress: s.Network == sandbox.NetworkAllow, Pass: s.Pass, Credentials: s.Credentials, SeccompAllow: s.SeccompAllow}, s.Command)
}

// Properties are the transient service's properties for spec s on a manager
// with features f.
func Properties(s Spec, f Features) []sd.Property {
	stop := s.StopTimeout
	if stop <= 0 {
		stop = DefaultStopTimeout
	}
	argv := ExecArgv(s)
	props := []sd.Property{
		prop("Description", Description(s.Name, s.Command)),
		prop("Slice", Slice),
		// no-env-expand: systemd would otherwise expand $VAR and ${VAR} in
		// the arguments, changing the user's command (and, with credentials
		// in the environment, putting a secret in bwrap's argv).
		prop("ExecStartEx", []execEx{{Path: argv[0], Argv: argv, Flags: []string{"no-env-expand"}}}),
		// notify: the job finishes when the init inside the sandbox has
		// checked it and started the command, not merely when fork succeeded.
		prop("Type", "notify"),
		prop("NotifyAccess", notifyAccess(s)),
		prop("WorkingDirectory", s.Workspace),
		// A 252 user manager needs PrivateUsers for any mount namespacing.
		prop("PrivateUsers", true),
		prop("PrivateTmp", true),
		prop("ProtectSystem", "strict"),
		// Without ":ro", so that the binds below can be made under them.
		prop("TemporaryFileSystem", tmpfsOf(s)),
		prop("BindPaths", readWriteBinds(s)),
		// The shim and bwrap may live under the hidden home; the notification
		// socket is the one file of the runtime dir the unit needs (the shim
		// connects it; the sandbox never sees it).
		prop("BindReadOnlyPaths", bindsOf(readOnlyPaths(s))),
		prop("NoNewPrivileges", true),
		prop("KillMode", "control-group"),
		prop("TimeoutStopUSec", usec(stop)),
		prop("TimeoutStartUSec", usec(startTimeout)),
		prop("SuccessExitStatus", exitStatusSet{Status: []int32{exitSIGTERM}, Signals: []int32{}}),
		prop("SyslogIdentifier", UnitPrefix+s.Name),
		// journald reads LogExtraFields only for the system manager's units
		// (systemd 252); set for when a user manager's are read too.
		// `mosaic logs` matches the SyslogIdentifier.
		prop("LogExtraFields", [][]byte{[]byte("MOSAIC_SESSION=" + s.Name)}),
	}
	if len(s.Env) > 0 {
		props = append(props, prop("Environment", s.Env))
	}
	if s.CredentialFile != "" {
		// Missing is allowed because the exec shim deletes the file as soon
		// as systemd has read it, and systemd loads it again for
		// ExecStopPost; the init refuses to run the command when a promised
		// credential did not arrive.
		props = append(props, prop("EnvironmentFiles", []envFile{{s.CredentialFile, true}}))
	}
	// When the session ends, whoever is or is not watching, the unit itself
	// records how (systemd passes SERVICE_RESULT, EXIT_CODE, EXIT_STATUS)
	// and deletes a credential file that is still there (a unit that died
	// before its exec shim ran). It runs inside the unit's namespaces, where
	// the state and credential directories are bound: a "privileged"
	// ExecStopPost would escape them, but a 252 user manager cannot run one
	// (226/NAMESPACE).
	// A one-shot run that mosaic named itself keeps no record (mosaic run
	// reports the end and removes its state), so unless it has a credential
	// file to guard it goes without: the ExecStopPost costs a second
	// namespace setup, some 8 ms of every run.
	if s.Stdio == nil || s.NameGiven || s.CredentialFile != "" {
		post := EndedArgv(s.MosaicBin, s.StateDir, s.CredentialFile)
		// ExecStopPost, not ExecStopPostEx: systemd 252 writes the latter
		// into the transient unit file under a key it cannot read back, so
		// a daemon-reload would lose how the session ends.
		// Its old form has no no-env-expand flag: "$" is written "$$", which
		// systemd's expansion gives back as "$".
		for i := range post {
			post[i] = strings.ReplaceAll(post[i], "$", "$$")
		}
		props = append(props, prop("ExecStopPost", []execCmd{{Path: s.MosaicBin, Argv: post, IgnoreFailure: true}}))
	}
	if f.PrivatePIDs {
		props = append(props, prop("PrivatePIDs", "yes"))
	}
	if s.Landlock() {
		// No bwrap builds a root here. systemd 257 mounts a sysfs of its own,
		// with the cgroup hierarchies, over the unit's empty /sys (for
		// PrivateNetwork, PrivatePIDs and ProtectControlGroups alike); its
		// inaccessible directory goes over their mount point after that
		// sysfs. "-": under 252 /sys stays empty and the path is absent.
		props = append(props, prop("InaccessiblePaths", []string{"-/sys/fs/cgroup"}))
	}
	if s.OwnNetwork() {
		props = append(props, prop("PrivateNetwork", true))
	}
	props = append(props, egressDependency(s)...)
	props = append(props, limitProperties(s.Limits)...)
	if s.Stdio != nil {
		props = append(props,
			prop("StandardInputFileDescriptor", dbus.UnixFD(s.Stdio[0])),
			prop("StandardOutputFileDescriptor", dbus.UnixFD(s.Stdio[1])),
			prop("StandardErrorFileDescriptor", dbus.UnixFD(s.Stdio[2])),
			prop("CollectMode", "inactive-or-failed"),
		)
	}
	return props
}

// limitProperties are the resource limits asked for, which a service and a
// scope take alike.
func limitProperties(l Limits) []sd.Property {
	var props []sd.Property
	if l.MemoryMax > 0 {
		props = append(props, prop("MemoryMax", l.MemoryMax))
	}
	if l.TasksMax > 0 {
		props = append(props, prop("TasksMax", l.TasksMax))
	}
	if l.CPUQuota > 0 {
		// 100% of one CPU is one second of CPU time per second.
		q := l.CPUQuota * 10000
		if l.CPUQuota == Infinity {
			q = Infinity
		}
		props = append(props, prop("CPUQuotaPerSecUSec", q))
	}
	if l.RuntimeMax > 0 {
		props = append(props, prop("RuntimeMaxUSec", usec(l.RuntimeMax)))
	}
	return props
}

// SliceProperties are mosaic.slice's limits.
func SliceProperties(l Limits) []sd.Property {
	l.RuntimeMax = 0 // a slice has none
	return limitProperties(l)
}

// ScopeProperties are the transient scope's properties for spec s, whose
// held init bwrap made as initPID. systemd takes no sandboxing property on a
// scope: it only gives the session its cgroup (limits, accounting, `systemctl
// --user` inspection, stop); bwrap's layer and the init are the sandbox.
func ScopeProperties(s Spec, initPID uint32) []sd.Property {
	stop := s.StopTimeout
	if stop <= 0 {
		stop = DefaultStopTimeout
	}
	props := []sd.Property{
		prop("Description", Description(s.Name, s.Command)),
		prop("Slice", Slice),
		prop("PIDs", []uint32{initPID}),
		prop("TimeoutStopUSec", usec(stop)),
		prop("CollectMode", "inactive-or-failed"),
	}
	props = append(props, egressDependency(s)...)
	return append(props, limitProperties(s.Limits)...)
}

// egressDependency makes a session with network allow need its egress
// proxy, started first (After=): the session does not start without it.
func egressDependency(s Spec) []sd.Property {
	if s.Network != sandbox.NetworkAllow {
		return nil
	}
	return []sd.Property{prop("Requires", []string{s.EgressUnit()}), prop("After", []string{s.EgressUnit()})}
}

// AuxUnits are the units started with the session in the same call: its
// egress proxy, for network allow.
func AuxUnits(s Spec) []sd.PropertyCollection {
	if s.Network != sandbox.NetworkAllow {
		return nil
	}
	return []sd.PropertyCollection{{Name: s.EgressUnit(), Properties: EgressProperties(s)}}
}

// The egress unit's own resource limits. The proxy holds at most
// egress.DefaultMaxConns connections of at most 64 KiB of head and two
// 32 KiB buffers each (some 40 MiB), plus TLS state for the injection hosts;
// it runs on two threads' worth of Go runtime.
const (
	EgressMemoryMax uint64 = 256 << 20
	EgressTasksMax  uint64 = 64
)

// EgressProperties are the properties of the session's egress proxy: the
// mosaic binary in proxy mode, in the host's network (it is the way out),
// confined otherwise (no home, no runtime dir but its own socket's
// directory), stopped by systemd once the session no longer needs it
// (StopWhenUnneeded), however the session ended.
func EgressProperties(s Spec) []sd.Property {
	argv := egress.Config{Session: s.Name, Socket: filepath.Join(s.EgressDir, sandbox.EgressSocketName), Allow: s.Allow,
		Inject: s.Inject, Drop: s.EgressCredentialFile}.Argv(s.MosaicBin)
	binds := bindsOf([]string{s.EgressDir})
	if s.EgressCredentialFile != "" {
		// Its directory is bound so that the proxy can delete the file.
		d := filepath.Dir(s.EgressCredentialFile)
		binds = append(binds, bindEntry{Src: d, Dst: d, IgnoreENOENT: true})
	}
	props := []sd.Property{
		prop("Description", "mosaic egress proxy of session "+s.Name),
		prop("Slice", Slice),
		prop("ExecStartEx", []execEx{{Path: argv[0], Argv: argv, Flags: []string{"no-env-expand"}}}),
		prop("Type", "notify"),
		prop("NotifyAccess", "main"),
		prop("PrivateUsers", true),
		prop("PrivateTmp", true),
		prop("ProtectSystem", "strict"),
		prop("TemporaryFileSystem", []tmpfsEntry{{s.Home, ""}, {s.RuntimeDir, ""}}),
		prop("BindPaths", binds),
		prop("BindReadOnlyPaths", bindsOf([]string{s.MosaicBin, filepath.Join(s.RuntimeDir, "systemd", "notify")})),
		prop("NoNewPrivileges", true),
		// The proxy reads what the session sends: its own bounds keep a
		// session from growing it past them, whatever the session's limits.
		prop("MemoryMax", EgressMemoryMax),
		prop("TasksMax", EgressTasksMax),
		// GOMAXPROCS keeps the Go runtime's threads within TasksMax on a
		// machine of many cores; GOMEMLIMIT makes it collect before the
		// cgroup's limit is reached.
		prop("Environment", []string{"GOMAXPROCS=2", fmt.Sprintf("GOMEMLIMIT=%d", EgressMemoryMax*3/4)}),
		prop("StopWhenUnneeded", true),
		prop("CollectMode", "inactive-or-failed"),
		prop("TimeoutStopUSec", usec(5*time.Second)),
		prop("SyslogIdentifier", strings.TrimSuffix(s.EgressUnit(), UnitSuffix)),
	}
	// Its CPU share (its memory and tasks are bounded above, with the Go
	// runtime's settings that keep it within them).
	props = append(props, prop("CPUQuotaPerSecUSec", EgressLimits.CPUQuota*10000))
	if s.EgressCredentialFile != "" {
		// The keys the proxy injects reach it, and only it, through its
		// own environment file (missing allowed: the proxy deletes it once
		// read, and systemd reads it again at stop). Should the proxy die
		// before it read it (and mosaic with it), the unit's ExecStopPost
		// deletes it.
		props = append(props, prop("EnvironmentFiles", []envFile{{s.EgressCredentialFile, true}}),
			// The old form, as the session's (see Properties): 252 reads it back.
			prop("ExecStopPost", []execCmd{{Path: s.MosaicBin, Argv: []string{s.MosaicBin, EndedStage, "--drop", s.EgressCredentialFile},
				IgnoreFailure: true}}))
	}
	return props
}

// Description is the unit's Description: the marker prefix, the name and the
// command, shortened.
func Description(name string, command []string) string {
	d := DescriptionPrefix + name + ": " + strings.Join(command, " ")
	if len(d) > 200 {
		d = d[:197] + "..."
	}
	return d
}

// readWriteBinds are the unit's writable binds: the workspace, the session's
// state, --rw paths, and the session's own credential directory (gone once
// the session started, hence allowed to be missing) so that the shim and
// ExecStopPost can delete the file.
func readWriteBinds(s Spec) []bindEntry {
	b := bindsOf(append([]string{s.Workspace, s.StateDir}, s.ExtraRW...))
	b = append(b, bindsOf(landlockProtect(s, sandbox.KindRW))...)
	if s.CredentialFile != "" {
		d := filepath.Dir(s.CredentialFile)
		b = append(b, bindEntry{Src: d, Dst: d, IgnoreENOENT: true})
	}
	return b
}

// readOnlyPaths are the unit's read-only binds: what the exec shim, bwrap and
// the sandbox's own read-only binds need from under the hidden directories.
func readOnlyPaths(s Spec) []string {
	ro := []string{s.MosaicBin}
	if s.BwrapBin != "" { // none in --sandbox landlock
		ro = append(ro, s.BwrapBin)
	}
	ro = append(ro, filepath.Join(s.RuntimeDir, "systemd", "notify"))
	if s.Binary != "" {
		ro = append(ro, s.Binary)
	}
	if d := s.busDir(); d != "" {
		ro = append(ro, d)
	}
	if d := s.egressDir(); d != "" {
		ro = append(ro, d)
	}
	return append(append(ro, s.ExtraRO...), landlockProtect(s, sandbox.KindRO)...)
}

// landlockProtect are, in --sandbox landlock, the binds of kind over the
// workspace's host-executed entries (sandbox.ProtectHostExec): with no
// bwrap, systemd's layer makes them read-only (and pins the directories
// holding them), since a Landlock rule that lets the workspace be written
// cannot keep a path below it from being written.
func landlockProtect(s Spec, kind string) []string {
	if !s.Landlock() {
		return nil
	}
	var out []string
	for _, b := range s.Protect {
		if b.Kind == kind {
			out = append(out, b.Dst)
		}
	}
	return out
}

func bindsOf(paths []string) []bindEntry {
	b := make([]bindEntry, 0, len(paths))
	for _, p := range paths {
		b = append(b, bindEntry{Src: p, Dst: p})
	}
	return b
}

func usec(d time.Duration) uint64 { return uint64(d / time.Microsecond) }
