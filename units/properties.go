package units

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	sd "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
	"golang.org/x/sys/unix"

	"mosaic/internal/testhook"
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

// ExecArgv is a service's command line: mosaic's exec shim (the stage
// binary), which becomes bwrap, which runs mosaic's init (the stage binary), which runs the command. It holds
// credentials' names, never their values. (A scope's is ScopeBwrap.)
//
// With l.InitArgsFile the init's arguments stay out of it (the shim reads
// them from that file): a command line of any length then fits systemd's
// unit file, its D-Bus call and bwrap's 9,000 arguments.
func ExecArgv(s Spec, l Launch) []string { return execArgv(session{s, l}) }

// execArgv is ExecArgv of a plan and its launch.
func execArgv(s session) []string {
	if s.Landlock() {
		return landlockExecArgv(s)
	}
	initArgv := append([]string{sandbox.InitPath}, InitArgs(s.Spec)...)
	shim := sandbox.Shim{Promise: s.Promise.Encode(), Drop: heldLink(s.Spec, s.CredentialFile), Bwrap: s.BwrapBin, HomeStore: s.StateDir}
	if s.InitArgsFile != "" {
		initArgv = initArgv[:2] // InitPath "init"
		shim.InitArgs = s.InitArgsFile
	}
	// No --unshare-net: the unit's network namespace (PrivateNetwork), which
	// the shim checks is not the host's, is the sandbox's too, and the init
	// checks it is not the host's in turn (Promise.Inner). A second one of
	// bwrap's held nothing the first did not (both only a loopback, the
	// unit's processes outside bwrap listen on no socket), and each costs
	// the kernel some 2 ms of CPU to make (copy_net_ns) and more to free.
	shim.TUN = s.TUN
	shim.Args = sandbox.Argv(s.Binds(), s.Dir(), initArgv, sandbox.HostnameArgs(s.Name)...)
	return shim.Argv(s.StageBin)
}

// TUNCapabilities are the capabilities the unit of a session with the
// network device (Spec.TUN) gives its exec shim (AmbientCapabilities):
// CAP_NET_ADMIN and CAP_NET_BIND_SERVICE, over the unit's own user and
// network namespaces (PrivateUsers, PrivateNetwork), to make the device
// and its DNS sockets; the shim drops them before it execs bwrap
// (sandbox.DropCapabilities).
const TUNCapabilities uint64 = 1<<unix.CAP_NET_ADMIN | 1<<unix.CAP_NET_BIND_SERVICE

// ScopeBwrap is a scope's sandbox, which mosaic starts itself (no exec
// shim, see sandbox.Held): bwrap's command line, from bwrap's path to
// "InitPath init", and the init's arguments after "init". bwrap reports the
// init's PID on sandbox.ScopeInfoFD and runs it, the sandbox built; the init
// waits for a byte on sandbox.ScopeInitGoFD, sent once systemd has put it
// into the scope.
func ScopeBwrap(s Spec) (bwrapArgv, initArgs []string) {
	extra := append([]string{"--info-fd", strconv.Itoa(sandbox.ScopeInfoFD)}, netArgs(s)...)
	argv := append([]string{s.BwrapBin}, sandbox.Argv(s.Binds(), s.Dir(), []string{sandbox.InitPath, "init"}, extra...)...)
	return argv, InitArgs(s)[1:]
}

// netArgs are a scope's bwrap options of the session's own: its host name,
// and its network (one of its own gets only loopback: no route, no host
// abstract socket). A service's network namespace is its unit's
// (PrivateNetwork, see ExecArgv).
func netArgs(s Spec) []string {
	args := sandbox.HostnameArgs(s.Name)
	if s.OwnNetwork() {
		args = append(args, "--unshare-net")
	}

	return args
}

// InitArgs are the arguments of the session's init, from "init" on.
func InitArgs(s Spec) []string {
	return sandbox.InitArgv(sandbox.InitOptions{Session: s.Name, Home: s.Home, TTY: s.TTY, KeepHome: s.NameGiven, KillAfter: s.killAfter(),
		Egress: s.Network == sandbox.NetworkAllow, TUN: s.TUN, Pass: s.Pass, Credentials: s.Credentials, SeccompAllow: s.SeccompAllow,
		Publish: publishedPorts(s)}, s.Command)
}

// killAfter is how long after a stop's SIGTERM the init of a session
// whose home is kept kills a command that ignores it: half the stop
// timeout, the other half left to save the home (mosaic stop waits past
// its own timeout while the init saves). None for a scope (mosaic run
// --scope), whose stop is mosaic's, or a home that is not kept.
func (s Spec) killAfter() time.Duration {
	if !s.NameGiven || s.Scope || testhook.Flag("MOSAIC_TEST_NO_KILL_AFTER") { // the weakened stop: as before issue 40
		return 0
	}
	stop := s.StopTimeout
	if stop <= 0 {
		stop = DefaultStopTimeout
	}
	return stop / 2
}

// properties are the transient service's properties for session s on a
// manager with features f.
func properties(s session, f Features) []sd.Property {
	stop := s.StopTimeout
	if stop <= 0 {
		stop = DefaultStopTimeout
	}
	argv := execArgv(s)
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
		prop("NotifyAccess", notifyAccess(s.Spec)),
		prop("WorkingDirectory", s.Dir()),
		// A 252 user manager needs PrivateUsers for any mount namespacing.
		prop("PrivateUsers", true),
		prop("PrivateTmp", true),
		prop("ProtectSystem", "strict"),
		// Without ":ro", so that the binds below can be made under them.
		prop("TemporaryFileSystem", tmpfsOf(s.Spec)),
		prop("BindPaths", readWriteBinds(s)),
		// The shim and bwrap may live under the hidden home; the notification
		// socket is the one file of the runtime dir the unit needs (the shim
		// connects it; the sandbox never sees it).
		prop("BindReadOnlyPaths", append(bindsOf(ReadOnlyPaths(s.Spec)), cloneReadOnly(s.Spec)...)),
		prop("NoNewPrivileges", true),
		prop("KillMode", "control-group"),
		prop("TimeoutStopUSec", usec(stop)),
		prop("TimeoutStartUSec", usec(startTimeout)),
		prop("SuccessExitStatus", exitStatusSet{Status: []int32{exitSIGTERM}, Signals: []int32{}}),
		// journald reads LogExtraFields only for the system manager's units
		// (systemd 252); set for when a user manager's are read too.
		// `mosaic logs` matches the SyslogIdentifier.
		prop("LogExtraFields", [][]byte{[]byte("MOSAIC_SESSION=" + s.Name)}),
	}
	props = append(props, journalIdentity(UnitPrefix+s.Name)...)
	if len(s.Env) > 0 {
		props = append(props, prop("Environment", s.Env))
	}
	if s.CredentialFile != "" {
		// The file lives only while mosaic starts the unit
		// (credentials.Hold). Missing is allowed because systemd loads it
		// again for ExecStopPost, when it is long gone; the init refuses to
		// run the command when a promised credential did not arrive.
		props = append(props, prop("EnvironmentFiles", []envFile{{s.CredentialFile, true}}))
	}
	// When the session ends, whoever is or is not watching, the unit itself
	// records how (systemd passes SERVICE_RESULT, EXIT_CODE, EXIT_STATUS).
	// It runs inside the unit's namespaces, where the state directory is
	// bound: a "privileged"
	// ExecStopPost would escape them, but a 252 user manager cannot run one
	// (226/NAMESPACE).
	// A one-shot run that mosaic named itself keeps no record (mosaic run
	// reports the end and removes its state), so it goes without: the
	// ExecStopPost costs a second namespace setup, some 8 ms of every run.
	if EndRecorded(s.Spec, s.Launch) {
		post := EndedArgv(s.StageBin, s.StateDir, s.egressAlive())
		// ExecStopPost, not ExecStopPostEx: systemd 252 writes the latter
		// into the transient unit file under a key it cannot read back, so
		// a daemon-reload would lose how the session ends.
		// Its old form has no no-env-expand flag: "$" is written "$$", which
		// systemd's expansion gives back as "$".
		for i := range post {
			post[i] = strings.ReplaceAll(post[i], "$", "$$")
		}
		props = append(props, prop("ExecStopPost", []execCmd{{Path: s.StageBin, Argv: post, IgnoreFailure: true}}))
	}
	if f.PrivatePIDs {
		props = append(props, prop("PrivatePIDs", "yes"))
	}
	if s.TUN {
		props = append(props, prop("AmbientCapabilities", TUNCapabilities))
	}
	if s.Landlock() {
		// No bwrap builds a root here. systemd 257 mounts a sysfs of its own,
		// with the cgroup hierarchies, over the unit's empty /sys (for
		// PrivateNetwork, PrivatePIDs and ProtectControlGroups alike); its
		// inaccessible directory goes over their mount point after that
		// sysfs. "-": under 252 /sys stays empty and the path is absent.
		props = append(props, prop("InaccessiblePaths", []string{"-/sys/fs/cgroup"}))
	}
	// The hooked build's MOSAIC_TEST_UNIT_HOST_NETWORK drops it, as systemd
	// does when it cannot make the namespace (it logs "PrivateNetwork=yes
	// is configured, but network namespace setup failed, ignoring" and runs
	// the unit in the manager's): the exec shim must then refuse.
	if s.OwnNetwork() && !testhook.Flag("MOSAIC_TEST_UNIT_HOST_NETWORK") {
		props = append(props, prop("PrivateNetwork", true))
	}
	props = append(props, dependencies(s)...)
	props = append(props, limitProperties(s.Limits)...)
	return append(props, stdioProperties(s)...)
}

// stdioProperties hand the session's stdin, stdout and stderr to the unit
// when mosaic gives them (Stdio); a run's unit is then collected once it
// ended, even failed, so that nothing is left (a start --pty session's
// stays, as any started one's).
func stdioProperties(s session) []sd.Property {
	if s.Stdio == nil {
		return nil
	}
	props := []sd.Property{
		prop("StandardInputFileDescriptor", dbus.UnixFD(s.Stdio[0])),
		prop("StandardOutputFileDescriptor", dbus.UnixFD(s.Stdio[1])),
		prop("StandardErrorFileDescriptor", dbus.UnixFD(s.Stdio[2])),
	}
	if s.Attach == nil {
		props = append(props, prop("CollectMode", "inactive-or-failed"))
	}
	return props
}

// journalIdentity is how a unit's output is stored: under identifier,
// at the unit's own priority. A line starting "<0>" would otherwise be
// stored at that priority (emergency), which journald may wall to every
// terminal: what a session prints never chooses its priority.
func journalIdentity(identifier string) []sd.Property {
	return []sd.Property{prop("SyslogIdentifier", identifier), prop("SyslogLevelPrefix", false)}
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

// scopeProperties are the transient scope's properties for session s,
// whose held init bwrap made as s.InitPID. systemd takes no sandboxing
// property on a scope: it only gives the session its cgroup (limits,
// accounting, `systemctl --user` inspection, stop); bwrap's layer and the
// init are the sandbox.
func scopeProperties(s session) []sd.Property {
	stop := s.StopTimeout
	if stop <= 0 {
		stop = DefaultStopTimeout
	}
	props := []sd.Property{
		prop("Description", Description(s.Name, s.Command)),
		prop("Slice", Slice),
		prop("PIDs", []uint32{s.InitPID}),
		prop("TimeoutStopUSec", usec(stop)),
		prop("CollectMode", "inactive-or-failed"),
	}
	props = append(props, dependencies(s)...)
	return append(props, limitProperties(s.Limits)...)
}

// dependencies are the units a session is bound to, each started first
// (After=): the session does not start without them, and stops when one
// stops (BindsTo=). A session with network allow needs its egress proxy:
// BindsTo, not Requires, so that a proxy that dies on its own (killed, out
// of memory) stops the session too, rather than leave it running with a
// network that answers nothing; how it ended then says so (the session's
// ExecStopPost finds the proxy dead). So, for the same reason, with the
// holder of its terminal (start --pty: a dead holder hangs the terminal up)
// and its publish forwarder (--publish). A mosaic run's session needs its
// run's tie scope (Rendered.Tie): the run killed, the session stops.
func dependencies(s session) []sd.Property {
	var to []string
	if s.EgressActivated() {
		to = append(to, s.EgressSocketUnit())
	} else if s.Network == sandbox.NetworkAllow {
		to = append(to, s.EgressUnit())
	}
	if s.Attach != nil && !s.Scope {
		to = append(to, s.PTYUnit())
	}
	if len(s.Publish) > 0 {
		to = append(to, s.PublishUnit())
	}
	if s.SSHAgent != nil {
		to = append(to, s.SSHAgentUnit())
	}
	if s.TiePID != 0 && !s.Scope {
		to = append(to, TieScopeName(s.Name, s.TiePID))
	}
	if len(to) == 0 {
		return nil
	}
	// After its egress proxy's socket (EgressActivated), which systemd
	// makes in its own loop at once: the proxy starts on the first
	// connection. A session the proxy puts credentials in waits for the
	// proxy itself: its command trusts the CA the proxy makes.
	after := to
	props := []sd.Property{prop("BindsTo", to)}
	if len(after) > 0 {
		props = append(props, prop("After", after))
	}
	return props
}

// TieScopeName is the scope of session name's mosaic run, whose PID is
// pid: the PID keeps a run's scope, which ends a moment after the run
// exits, from meeting the next run of the same name. Its "." keeps it from
// being taken for a session's (no session name has one).
func TieScopeName(name string, pid uint32) string {
	return fmt.Sprintf("%s%s.run-%d%s", UnitPrefix, name, pid, ScopeSuffix)
}

// tieScope is the scope that holds a mosaic run itself (Launch.TiePID).
func tieScope(s session) sd.PropertyCollection {
	return sd.PropertyCollection{Name: TieScopeName(s.Name, s.TiePID), Properties: []sd.Property{
		prop("Description", fmt.Sprintf("mosaic run of session %s: the session stops when it ends", s.Name)),
		prop("Slice", Slice),
		prop("PIDs", []uint32{s.TiePID}),
		prop("CollectMode", "inactive-or-failed"),
	}}
}

// auxUnits are the units started with the session in the same call: its
// egress proxy, for network allow; the holder of its terminal, for start
// --pty; its publish forwarder, for --publish. (A mosaic run's tie scope is
// started before, in a call of its own: manager/runtie.go.)
func auxUnits(s session) []sd.PropertyCollection {
	var aux []sd.PropertyCollection
	if s.EgressActivated() {
		aux = append(aux, sd.PropertyCollection{Name: s.EgressSocketUnit(), Properties: egressSocketProperties(s.Spec)})
	}
	if s.Network == sandbox.NetworkAllow {
		aux = append(aux, sd.PropertyCollection{Name: s.EgressUnit(), Properties: egressProperties(s)})
	}
	if len(s.Publish) > 0 {
		aux = append(aux, sd.PropertyCollection{Name: s.PublishUnit(), Properties: publishProperties(s.Spec)})
	}
	if s.SSHAgent != nil {
		aux = append(aux, sd.PropertyCollection{Name: s.SSHAgentUnit(), Properties: sshAgentProperties(s.Spec)})
	}
	if s.Attach != nil && !s.Scope {
		aux = append(aux, sd.PropertyCollection{Name: s.PTYUnit(), Properties: ptyProperties(s)})
	}
	return aux
}

// The egress unit's own resource limits. The proxy holds at most
// egress.DefaultMaxConns connections of at most 64 KiB of head and two
// 32 KiB buffers each (some 40 MiB), plus TLS state for the injection hosts;
// it runs on two threads' worth of Go runtime.
const (
	EgressMemoryMax uint64 = 256 << 20
	EgressTasksMax  uint64 = 64
)

// egressProperties are the properties of the session's egress proxy: the
// mosaic binary in proxy mode, in the host's network (it is the way out),
// confined otherwise (no home, no runtime dir but its own socket's
// directory), stopped by systemd once the session no longer needs it
// (StopWhenUnneeded), however the session ended.
func egressProperties(s session) []sd.Property {
	argv := egress.Config{Session: s.Name, Socket: filepath.Join(s.EgressDir, sandbox.EgressSocketName), Allow: s.Allow,
		Inject: s.Inject, Git: s.GitLends, Control: egress.ControlDir(s.EgressDir), Record: egress.RecordDir(s.StateDir), Drop: heldLink(s.Spec, s.EgressCredentialFile), Ask: s.Ask}.Argv(s.MosaicBin)
	// The control directory (grants, `mosaic allow`) is the proxy's and the
	// user's only: no session binds it.
	// Its record (refusals, grants) goes beside the session's home, for
	// status and run once it has ended.
	binds := append(bindsOf([]string{s.EgressDir, egress.RecordDir(s.StateDir)}), heldLinkDir(s.Spec, s.EgressCredentialFile)...)
	if c := egress.ControlDir(s.EgressDir); c != s.EgressDir {
		binds = append(binds, bindsOf([]string{c})...)
	}
	props := brokerProperties(s.Spec, broker{Description: "mosaic egress proxy of session " + s.Name, Unit: s.EgressUnit(),
		Argv: argv, Binds: binds, MemoryMax: EgressMemoryMax, TasksMax: EgressTasksMax, Procs: 2})
	// Its CPU share (its memory and tasks are bounded above, with the Go
	// runtime's settings that keep it within them).
	props = append(props, prop("CPUQuotaPerSecUSec", EgressLimits.CPUQuota*10000))
	if s.EgressActivated() {
		props = activatedProperties(s.Spec, props)
	}
	if s.EgressCredentialFile != "" {
		// The keys the proxy injects reach it, and only it, through its
		// own environment file, held in mosaic's memory while it starts
		// the session (credentials.Hold; missing allowed, as the session's).
		props = append(props, prop("EnvironmentFiles", []envFile{{s.EgressCredentialFile, true}}))
	}
	return props
}

// Description is the unit's Description: the marker prefix, the name and the
// command, shortened to at most 200 bytes. It is valid UTF-8, as D-Bus
// requires of every string: a byte of the command that is not UTF-8 is
// shown as \xNN, and the cut never falls inside a character.
func Description(name string, command []string) string {
	args := make([]string, len(command))
	for i, a := range command {
		args[i] = escapeInvalid(a)
	}
	d := DescriptionPrefix + name + ": " + strings.Join(args, " ")
	if len(d) > 200 {
		cut := 197
		for cut > 0 && !utf8.RuneStart(d[cut]) {
			cut--
		}
		d = d[:cut] + "..."
	}
	return d
}

// escapeInvalid writes each byte of a that is not part of a UTF-8
// character as \xNN.
func escapeInvalid(a string) string {
	var b strings.Builder
	for i := 0; i < len(a); {
		r, n := utf8.DecodeRuneInString(a[i:])
		if r == utf8.RuneError && n <= 1 {
			fmt.Fprintf(&b, "\\x%02x", a[i])
			i++
			continue
		}
		b.WriteString(a[i : i+n])
		i += n
	}
	return b.String()
}

// readWriteBinds are the unit's writable binds: the workspace, the session's
// state and --rw paths.
func readWriteBinds(s session) []bindEntry {
	b := append([]bindEntry{{Src: s.workspaceSource(), Dst: s.Workspace}}, bindsOf(append([]string{s.StateDir}, s.ExtraRW...))...)
	if s.ToolCache != "" {
		b = append(b, bindsOf([]string{s.ToolCache})...)
	}
	b = append(b, heldLinkDir(s.Spec, s.CredentialFile)...)
	return append(b, bindsOf(landlockProtect(s.Spec, sandbox.KindRW))...)
}

// heldLink is path when it is the link to credentials mosaic holds
// (credentials.Hold: in the runtime directory), for the unit's first
// process to remove as soon as systemd has read it (the exec shim's, the
// egress proxy's --drop); "" otherwise. Removed there, the link is gone
// before anything of the session runs, even when mosaic was killed during
// the start: a dangling link to /proc/PID/fd/N, which a process that gets
// the PID again could fill with a FIFO of its own, never waits for the
// unit's next read of it (ExecStopPost) or for the next mosaic command.
func heldLink(s Spec, path string) string {
	// MOSAIC_TEST_KEEP_HELD_LINK=1 (the hooked build only): the weakened
	// mosaic whose unit leaves the link to mosaic, as before.
	if s.RuntimeDir == "" || !strings.HasPrefix(path, s.RuntimeDir+"/") || testhook.Flag("MOSAIC_TEST_KEEP_HELD_LINK") {
		return ""
	}
	return path
}

// heldLinkDir binds the directory of a held link (heldLink) into the unit,
// where the runtime directory is hidden, so that its first process can
// remove the link; bwrap binds nothing of it into the sandbox, and no
// Landlock rule of a session allows it.
func heldLinkDir(s Spec, path string) []bindEntry {
	if heldLink(s, path) == "" {
		return nil
	}
	d := filepath.Dir(path)
	return []bindEntry{{Src: d, Dst: d, IgnoreENOENT: true}}
}

// ReadOnlyPaths are the unit's read-only binds (but a clone's): what the exec shim, bwrap and
// the sandbox's own read-only binds need from under the hidden directories.
func ReadOnlyPaths(s Spec) []string {
	var ro []string
	// mosaic's own binaries, each only where the unit would not see it
	// (hiddenFromUnit): every mount is some of the unit's start. The stage
	// binary is the unit's ExecStart and the init bwrap binds in, bwrap is
	// what the shim runs; mosaic itself is needed only at BinInside for
	// --may-launch (a pin of it is a bind of the workspace's own file).
	bins := []string{s.StageBin, s.BwrapBin} // no bwrap in --sandbox landlock
	if s.TUN {
		bins = append(bins, s.NetBin) // bound in at sandbox.NetPath
	}
	if s.busDir() != "" {
		bins = append(bins, s.MosaicBin)
	}
	for _, b := range bins {
		if b != "" && (hiddenFromUnit(b) || underWritable(s, b)) {
			ro = append(ro, b)
		}
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
	if d := s.publishDir(); d != "" {
		ro = append(ro, d)
	}
	if d := s.sshAgentDir(); d != "" {
		ro = append(ro, d)
	}
	if s.CABundle != "" { // bwrap binds it at sandbox.CABundleInside
		ro = append(ro, s.CABundle)
	}
	if s.SSHConfig != "" { // bwrap binds it over sandbox.SSHConfigDirHost
		ro = append(ro, s.SSHConfig)
	}
	return append(append(ro, s.ExtraRO...), landlockProtect(s, sandbox.KindRO)...)
}

// hiddenFromUnit says whether path may be out of the unit's sight without a
// bind of its own: true but for a file under /usr reached through no symlink
// (its path is its real path), which ProtectSystem=strict leaves visible,
// read-only, and under which no tmpfs of the unit goes (they are over the
// home, the runtime dir, and /run, /sys, /dev/shm in --sandbox landlock;
// PrivateTmp's over /tmp and /var/tmp). A link, even to /usr, may pass
// through a hidden directory; a path that cannot be resolved is bound too.
func hiddenFromUnit(path string) bool {
	real, err := filepath.EvalSymlinks(path)
	return err != nil || real != path || !strings.HasPrefix(path, "/usr/")
}

// underWritable says whether path lies under one of the session's
// writable binds (its workspace, an --rw path): there a binary the unit
// would see unbound is bound read-only all the same, so that the session
// cannot rewrite what a later session's unit runs outside bwrap.
func underWritable(s Spec, path string) bool {
	for _, w := range append([]string{s.Workspace, s.workspaceSource()}, s.ExtraRW...) {
		if w != "" && sandbox.Within(path, filepath.Clean(w)) {
			return true
		}
	}
	return false
}

// landlockProtect are, in --sandbox landlock, the binds of kind over the
// workspace's host-executed entries (directfloor.Protect): with no
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

// A broker is a unit beside a session whose input is the session's (the
// egress proxy, the terminal holder, the publish forwarder): the mosaic
// binary in one of its stages, confined as brokerProperties says.
type broker struct {
	Description, Unit string
	Argv              []string
	Binds             []bindEntry // read-write: its sockets' directories
	MemoryMax         uint64
	TasksMax          uint64
	Procs             int // GOMAXPROCS
}

// brokerProperties are the properties every broker unit has: Type=notify
// (the session, After= it, starts once it is ready), no home and no runtime
// dir but b.Binds (TemporaryFileSystem over both), the system read-only,
// no new privileges, its own memory and task bounds whatever the session's
// (it reads what the session sends: the session cannot grow it past them),
// and stopped by systemd once the session no longer needs it
// (StopWhenUnneeded), however the session ended.
func brokerProperties(s Spec, b broker) []sd.Property {
	// It logs what sessions send it (journalIdentity: no priority prefix).
	return append([]sd.Property{
		prop("Description", b.Description),
		prop("Slice", Slice),
		prop("ExecStartEx", []execEx{{Path: b.Argv[0], Argv: b.Argv, Flags: []string{"no-env-expand"}}}),
		prop("Type", "notify"),
		prop("NotifyAccess", "main"),
		prop("PrivateUsers", true),
		prop("PrivateTmp", true),
		prop("ProtectSystem", "strict"),
		prop("TemporaryFileSystem", []tmpfsEntry{{s.Home, ""}, {s.RuntimeDir, ""}}),
		prop("BindPaths", b.Binds),
		prop("BindReadOnlyPaths", bindsOf([]string{s.MosaicBin, filepath.Join(s.RuntimeDir, "systemd", "notify")})),
		prop("NoNewPrivileges", true),
		prop("MemoryMax", b.MemoryMax),
		prop("TasksMax", b.TasksMax),
		// GOMAXPROCS keeps the Go runtime's threads within TasksMax on a
		// machine of many cores; GOMEMLIMIT makes it collect before the
		// cgroup's limit is reached.
		prop("Environment", []string{fmt.Sprintf("GOMAXPROCS=%d", b.Procs), fmt.Sprintf("GOMEMLIMIT=%d", b.MemoryMax*3/4)}),
		prop("StopWhenUnneeded", true),
		prop("CollectMode", "inactive-or-failed"),
		prop("TimeoutStopUSec", usec(5*time.Second)),
	}, journalIdentity(strings.TrimSuffix(b.Unit, UnitSuffix))...)
}

// publishedPorts are the session ports of s's --publish, each once.
func publishedPorts(s Spec) []int {
	var ports []int
	seen := map[int]bool{}
	for _, p := range s.Publish {
		if !seen[p.Port] {
			seen[p.Port] = true
			ports = append(ports, p.Port)
		}
	}
	return ports
}

// egressAlive is the file the egress proxy holds locked while it runs
// (network allow), which the ended stage looks at; "" for a session
// without one.
func (s Spec) egressAlive() string {
	if s.Network != sandbox.NetworkAllow {
		return ""
	}
	return filepath.Join(s.EgressDir, egress.AliveFile)
}
