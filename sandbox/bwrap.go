// Package sandbox is the host's side of mosaic's inner confinement layer,
// and what the host and the code inside a session (package sandbox/inside)
// both read. On the host, in mosaic when it builds a session: the
// bubblewrap command line that runs inside a session's systemd unit (every
// bind with the reason it exists: bwrap.go), the probe that proves bwrap
// can build that sandbox on this host before anything is started
// (probe.go), the facts a session's layers are promised to differ from
// (promise.go, outside.go), a scope's bwrap held until systemd has moved it
// (exec.go), --sandbox landlock's policy (landlockpolicy.go), the home's
// links and report (homelinks.go, homereport.go), the ssh configuration's
// copy (sshconfig.go). Shared, written here and read inside: the stages'
// command lines (shim.go, initargv.go, argvfd.go, stages.go), the
// environment's allowlist (initenv.go), the syscall filter's rows
// (syscallrules.go), the network modes and the paths inside (network.go).
// Nothing here builds or checks a sandbox from inside it: the exec shim,
// the init, the guard, Landlock's and seccomp's application and the home's
// load and save are package sandbox/inside, which imports this one; direct
// mode's floor, host side only, is sandbox/directfloor.
//
// systemd's unit properties are the outer layer; they can fail open (systemd
// silently drops PrivateTmp, ProtectSystem and same-path binds when it cannot
// build a mount namespace), bwrap cannot: it either builds the sandbox or exits.
package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"mosaic/sandbox/agentfilter"
	"mosaic/sandbox/publish"
)

// InitPath is where the stage binary (the init) appears inside the sandbox. It is bound
// read-only at a fixed path so the init's location never depends on where the
// user installed mosaic (often under the home, which the session cannot see).
const InitPath = "/run/mosaic/init"

// Inside a session started with --may-launch, the bus's directory appears at
// BusDirInside, its socket at BusSocketInside (also in $MOSAIC_BUS), and the
// mosaic binary at BinInside (on the command's PATH) for `mosaic bus`.
const (
	BusDirInside    = "/run/mosaic/bus"
	BusSocketName   = "bus.sock"
	BusSocketInside = BusDirInside + "/" + BusSocketName
	BinInside       = "/run/mosaic/bin/mosaic"
	BusEnv          = "MOSAIC_BUS"
)

// CABundleInside is where a --ca-file session's bundle of the system's
// roots and its CA appears (Options.CABundle).
const CABundleInside = "/run/mosaic/ca-bundle.pem"

// Mount kinds, as bwrap spells the option without its dashes.
const (
	KindRO      = "ro-bind"
	KindRW      = "bind"
	KindDev     = "dev"
	KindProc    = "proc"
	KindSymlink = "symlink"
	KindTmpfs   = "tmpfs"
)

// Bind is one mount of the sandbox's filesystem, in the order bwrap makes it.
type Bind struct {
	Kind   string `json:"kind"`
	Src    string `json:"src,omitempty"`
	Dst    string `json:"dst"`
	Reason string `json:"reason"`
	Size   uint64 `json:"size,omitempty"` // a tmpfs's bound in bytes (bwrap --size)
}

// Options are the paths one session's sandbox is made of. All paths are
// absolute and already resolved (no symlinks), as bwrap binds what it is given.
type Options struct {
	Workspace string // read-write at its own path; the working directory
	// WorkspaceSrc is what is bound at Workspace when it is not the
	// workspace itself: a clone-mode scope's copy (a service's copy is
	// at the workspace's path already, in systemd's layer).
	WorkspaceSrc string
	Home         string   // the path HOME has inside (the user's home path)
	SessionHome  string   // the session's own home on disk, loaded into the tmpfs at Home (HomeStore)
	HomeSize     uint64   // the bound of that tmpfs; 0 or ^0 for the kernel's default
	TmpSize      uint64   // the bound of the session's own /tmp, a tmpfs; 0 or ^0 for the kernel's default
	MosaicBin    string   // mosaic, bound at BinInside for --may-launch
	StageBin     string   // the stage binary, bound at InitPath
	Binary       string   // the command's binary when outside the system dirs, bound read-only
	ExtraRO      []string // --ro PATH
	ExtraRW      []string // --rw PATH
	Toolchains   []string // those of ExtraRO that are the user's toolchains, for the session's PATH
	BusDir       string   // the bus's socket directory, for a session that may launch others; "" for none
	EgressDir    string   // the egress proxy's socket directory (network allow); "" for none
	TUN          bool     // the session has the network device (network allow): its own /etc/hosts, and NetBin
	NetBin       string   // mosaic-net, bound at NetPath for a session with the device
	PublishDir   string   // the publish forwarder's socket directory (--publish); "" for none
	SSHAgentDir  string   // the ssh agent filter's socket directory (--lend-ssh-key, --lend-ssh-sign); "" for none
	CABundle     string   // --ca-file's bundle with the system's roots, bound at CABundleInside; "" for none
	SSHConfig    string   // the user's copy of SSHConfigDirHost (SSHConfigCopy), bound over it; "" for none
	BwrapBin     string   // bwrap, pinned read-only at its own path when a writable bind holds it
	ToolCache    string   // the workspace's tool caches (ToolCaches), bound into the home; "" for none
	Protect      []Bind   // the workspace's host-executed entries (directfloor.Protect), after every other bind
}

// ToolCaches are the tool caches a workspace's sessions share (each a
// directory of the workspace's cache, bound at its default place in the
// home): the second go test of a repository is warm without --name, and a
// kept home does not carry (load and save) them. Only caches: nothing a
// tool reads as configuration or credentials (cargo's config.toml and
// credentials are in ~/.cargo, not in its registry cache). The sessions of
// another workspace never see them.
var ToolCaches = []struct{ Name, InHome, What string }{
	{"go-build", ".cache/go-build", "Go's build cache"},
	{"go-mod", "go/pkg/mod", "Go's module cache"},
	{"npm", ".npm/_cacache", "npm's cache"},
	{"pip", ".cache/pip", "pip's cache"},
	{"cargo-registry", ".cargo/registry", "cargo's registry cache"},
}

// systemDirs are the host directories every program needs, read-only. /etc
// holds the resolver, certificates and passwd that tools expect; nothing in it
// is readable by the user that the user could not already read.
var systemDirs = []struct{ path, reason string }{
	{"/usr", "system programs and libraries, read-only"},
	{"/etc", "system configuration (resolver, CA certificates, passwd), read-only"},
}

// mergedUsrLinks are the top-level directories that merged-/usr systems make
// symlinks into /usr; on older layouts they are real directories.
var mergedUsrLinks = []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// Binds returns the sandbox's mounts in order, each with its reason. lstat
// inspects the host (os.Lstat in production, a table in tests) to tell a
// merged-/usr symlink from a real directory.
func Binds(o Options, lstat func(string) (os.FileInfo, error), readlink func(string) (string, error)) []Bind {
	b := systemBinds(lstat, readlink)
	if o.SSHConfig != "" {
		b = append(b, Bind{Kind: KindRO, Src: o.SSHConfig, Dst: SSHConfigDirHost, Reason: "the system's ssh client snippets, copied as yours: root's files are nobody's in the session's user namespace, which ssh refuses (SSHConfigCopy)"})
	}
	b = append(b,
		Bind{Kind: KindRO, Src: o.StageBin, Dst: InitPath, Reason: "mosaic's init (the stage binary), PID 1 of the session, read-only"},
		homeBind(o.SessionHome, o.Home, o.HomeSize),
		tmpBind(o.TmpSize),
		workspaceBind(o),
	)
	if o.EgressDir != "" {
		b = append(b, Bind{Kind: KindRO, Src: o.EgressDir, Dst: EgressDirInside, Reason: "the egress proxy's socket (network allow): the only way out of the session's network namespace, to allowed hosts"})
	}
	if o.TUN && o.EgressDir != "" {
		b = append(b, Bind{Kind: KindRO, Src: o.NetBin, Dst: NetPath, Reason: "mosaic-net, which serves the session's network device (every connection to the egress proxy), read-only"})
		b = append(b, Bind{Kind: KindRO, Src: filepath.Join(o.EgressDir, HostsName), Dst: "/etc/hosts", Reason: "the session's own names only: every other name resolves by its allowlist, through the session's DNS"})
	}
	if o.PublishDir != "" {
		b = append(b, Bind{Kind: KindRO, Src: o.PublishDir, Dst: publish.DirInside, Reason: "the publish forwarder's socket (--publish): the host's connections to the published ports come in through it; the session reaches nothing of the host by it"})
	}
	if o.SSHAgentDir != "" {
		b = append(b, Bind{Kind: KindRO, Src: o.SSHAgentDir, Dst: agentfilter.DirInside, Reason: "the ssh agent filter's socket (--lend-ssh-key, --lend-ssh-sign): the lent keys only, for what they are lent; the user's own agent is not in the session"})
	}
	if o.CABundle != "" {
		b = append(b, Bind{Kind: KindRO, Src: o.CABundle, Dst: CABundleInside, Reason: "--ca-file's certificates after the system's roots, for the clients that read one file in place of the system's (SSL_CERT_FILE, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE, GIT_SSL_CAINFO, PIP_CERT)"})
	}
	if o.BusDir != "" {
		b = append(b,
			Bind{Kind: KindRO, Src: o.BusDir, Dst: BusDirInside, Reason: "the mosaic bus's socket (--may-launch): this session may ask it to launch others, under its policy"},
			Bind{Kind: KindRO, Src: o.MosaicBin, Dst: BinInside, Reason: "mosaic itself, for `mosaic bus launch` (--may-launch), read-only"},
		)
	}
	if o.Binary != "" {
		b = append(b, Bind{Kind: KindRO, Src: o.Binary, Dst: o.Binary, Reason: "the command's binary, found on your PATH outside the system directories, read-only"})
	}
	for _, p := range o.ExtraRO {
		reason := "asked for with --ro, or by the profile"
		if slices.Contains(o.Toolchains, p) {
			reason = "a toolchain on your PATH, read-only where it is installed"
		}
		b = append(b, Bind{Kind: KindRO, Src: p, Dst: p, Reason: reason})
	}
	for _, p := range o.ExtraRW {
		b = append(b, Bind{Kind: KindRW, Src: p, Dst: p, Reason: "asked for with --rw"})
	}
	if o.ToolCache != "" {
		for _, c := range ToolCaches {
			b = append(b, Bind{Kind: KindRW, Src: filepath.Join(o.ToolCache, c.Name), Dst: filepath.Join(o.Home, c.InHome),
				Reason: c.What + ", kept for the sessions of this workspace only (mosaic gc removes it once the workspace is gone)"})
		}
	}
	b = append(b, o.Protect...)
	writable := append([]string{o.Workspace}, o.ExtraRW...)
	return append(b, pinBinaries(writable,
		pin{o.MosaicBin, "the mosaic binary the user and the bus run next"},
		pin{o.StageBin, "the stage binary every later session runs"},
		pin{o.NetBin, "the network device's binary every later session runs"},
		pin{o.BwrapBin, "the bwrap every later session runs"})...)
}

// workspaceBind is the workspace, read-write at its own path: the
// directory itself, or the copy bound there (WorkspaceSrc).
func workspaceBind(o Options) Bind {
	if o.WorkspaceSrc != "" {
		return Bind{Kind: KindRW, Src: o.WorkspaceSrc, Dst: o.Workspace, Reason: "clone mode: the session's own copy of the workspace, read-write at the workspace's path (your checkout is not mounted)"}
	}
	return Bind{Kind: KindRW, Src: o.Workspace, Dst: o.Workspace, Reason: "the workspace, read-write at its own path"}
}

// tmpBind is the session's /tmp: a tmpfs of its own, in memory (charged
// to the session's memory limit), bounded so that a session that fills it
// gets ENOSPC there and fills nothing of the user's.
func tmpBind(size uint64) Bind {
	b := Bind{Kind: KindTmpfs, Dst: "/tmp", Reason: "the session's own /tmp, a tmpfs in memory: private, not the host's, emptied at each start"}
	if size > 0 && size != ^uint64(0) {
		b.Size = size
		b.Reason += fmt.Sprintf(", at most %d MiB (--tmp-size)", size>>20)
	}
	return b
}

// homeBind is the session's HOME: a tmpfs of its own, bounded as /tmp is,
// that mosaic's init fills from the session's home on disk (src, shown as
// the bind's source) before the command starts and, for a kept home, saves
// back to it once the command is gone (HomeStore). The home on disk is
// never mounted: the command reaches none of it, and a session that fills
// its home fills only the tmpfs.
func homeBind(src, home string, size uint64) Bind {
	b := Bind{Kind: KindTmpfs, Src: src, Dst: home, Reason: "the session's own HOME, a tmpfs in memory loaded from its home on disk (saved back at the end when the home is kept): the user's real home (~/.ssh, ~/.aws, agents' state) is never mounted"}
	if size > 0 && size != ^uint64(0) {
		b.Size = size
		b.Reason += fmt.Sprintf(", at most %d MiB (--home-size)", size>>20)
	}
	return b
}

// A pin is a binary the host runs next, and what it is, for pinBinaries.
type pin struct{ bin, what string }

// pinBinaries binds each pin's binary read-only at its own path, last,
// when a writable bind holds it (a workspace that is a checkout of mosaic,
// or of a tool's bin directory), so that the session cannot replace what
// the host runs next: the directories between the bind and the binary are
// bound onto themselves first, since a mount point cannot be renamed (mv
// bin bin.old; mkdir bin) nor removed. Each directory is bound once, and
// every directory before any binary (a directory bound later would cover
// a binary bound under it).
func pinBinaries(writable []string, pins ...pin) []Bind {
	var dirs, bins []Bind
	seen := map[string]bool{}
	for _, p := range pins {
		root := holder(p.bin, writable)
		if root == "" {
			continue
		}
		var chain []string
		for d := filepath.Dir(p.bin); d != root && Within(d, root); d = filepath.Dir(d) {
			chain = append([]string{d}, chain...)
		}
		for _, d := range chain {
			if !seen[d] {
				seen[d] = true
				dirs = append(dirs, Bind{Kind: KindRW, Src: d, Dst: d, Reason: "pinned (a mount point cannot be renamed): holds " + p.what})
			}
		}
		bins = append(bins, Bind{Kind: KindRO, Src: p.bin, Dst: p.bin, Reason: p.what + ", read-only: a session must not replace it"})
	}
	// A parent before its children, whichever binary named it first.
	sort.SliceStable(dirs, func(i, j int) bool {
		return strings.Count(dirs[i].Dst, "/") < strings.Count(dirs[j].Dst, "/")
	})
	return append(dirs, bins...)
}

// holder is the first of writable that holds bin below it, or "".
func holder(bin string, writable []string) string {
	if bin == "" {
		return ""
	}
	for _, root := range writable {
		if root != "" && root != bin && Within(bin, root) {
			return root
		}
	}
	return ""
}

// systemBinds are the mounts every sandbox has, whatever the session: the
// system directories read-only and a private /dev and /proc.
func systemBinds(lstat func(string) (os.FileInfo, error), readlink func(string) (string, error)) []Bind {
	var b []Bind
	for _, d := range systemDirs {
		b = append(b, Bind{Kind: KindRO, Src: d.path, Dst: d.path, Reason: d.reason})
	}
	for _, p := range mergedUsrLinks {
		fi, err := lstat(p)
		if err != nil {
			continue
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			if target, err := readlink(p); err == nil {
				b = append(b, Bind{Kind: KindSymlink, Src: target, Dst: p, Reason: "merged-/usr link, as on the host"})
			}
		} else if fi.IsDir() {
			b = append(b, Bind{Kind: KindRO, Src: p, Dst: p, Reason: "system directory outside /usr on this host, read-only"})
		}
	}
	b = append(b,
		Bind{Kind: KindDev, Dst: "/dev", Reason: "a private /dev with only the basic nodes (null, zero, random, tty, pts): no host devices, no host /dev/shm"},
		Bind{Kind: KindProc, Dst: "/proc", Reason: "a /proc of the session's own PID namespace: no host process is visible"},
	)
	return b
}

// HostBinds is Binds against the real host.
func HostBinds(o Options) []Bind { return Binds(o, os.Lstat, os.Readlink) }

// namespaceArgs are the isolation flags the session and the probe share, so
// that the probe fails exactly when a session would.
var namespaceArgs = []string{
	"--unshare-user", // a user namespace of its own, with no capabilities outside it
	"--unshare-pid",  // no host process visible or signalable
	"--unshare-ipc",  // no host SysV IPC or POSIX message queues (systemd's PrivateIPC fails in a 252 user manager)
	"--unshare-uts",  // a hostname of its own (HostnameArgs): a prompt inside shows the session, not the host
	"--die-with-parent",
	"--new-session", // no TIOCSTI injection into the caller's terminal
	"--cap-drop", "ALL",
	"--as-pid-1", // mosaic's init is PID 1: it reaps, forwards signals and reports the exit status
}

// HostnameArgs are bwrap's options naming the sandbox's host after the
// session (its UTS namespace is its own, namespaceArgs), so that a shell
// prompt inside says where the user is typing. A session name is a valid
// host name: 1 to 63 lowercase letters, digits or '-'.
func HostnameArgs(session string) []string { return []string{"--hostname", session} }

// Argv is bwrap's command line (without the bwrap path itself) for the binds,
// with the working directory and the command to run as PID 1; extra are
// options of bwrap's own (--info-fd N).
func Argv(binds []Bind, workdir string, command []string, extra ...string) []string {
	args := append(append([]string{}, namespaceArgs...), extra...)
	for _, b := range binds {
		switch b.Kind {
		case KindTmpfs:
			if b.Size > 0 {
				args = append(args, "--size", strconv.FormatUint(b.Size, 10))
			}
			args = append(args, "--"+b.Kind, b.Dst)
		case KindDev, KindProc:
			args = append(args, "--"+b.Kind, b.Dst)
		default:
			args = append(args, "--"+b.Kind, b.Src, b.Dst)
		}
	}
	args = append(args, "--chdir", workdir, "--")
	return append(args, command...)
}

// Within reports whether path is dir or lies below it (both cleaned, absolute).
func Within(path, dir string) bool {
	if dir == "/" {
		return true
	}
	return path == dir || strings.HasPrefix(path, dir+string(filepath.Separator))
}
