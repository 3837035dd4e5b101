package units

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	sd "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"

	"mosaic/sandbox/ptyhold"
)

// PTYUnit is the unit that holds the terminal of session s (start --pty).
func (s Spec) PTYUnit() string { return PTYUnitName(s.Name) }

// PTYUnitName is the unit that holds the terminal of session name.
func PTYUnitName(name string) string { return UnitPrefix + name + "-pty" + UnitSuffix }

// AttachDir is the directory of the attach sockets, in the user's runtime
// directory: no session sees it (TemporaryFileSystem over the runtime
// directory, bwrap's empty root), whatever its network.
func AttachDir(runtimeDir string) string { return filepath.Join(runtimeDir, "mosaic", "attach") }

// AttachSocket is where the holder of session name's terminal listens.
func AttachSocket(runtimeDir, name string) string { return filepath.Join(AttachDir(runtimeDir), name) }

// The holder's own bounds: it keeps a 64 KiB ring and serves one client.
const (
	PTYMemoryMax uint64 = 64 << 20
	PTYTasksMax  uint64 = 32
)

// PTYProperties are the properties of the unit holding session s's
// terminal: the mosaic binary as the holder, with the terminal's master side
// (s.Attach) as its stdin, no network, confined as the egress proxy is (no
// home, no runtime dir but the attach sockets' directory), stopped once the
// session no longer needs it (StopWhenUnneeded), however the session ended.
func PTYProperties(s Spec) []sd.Property {
	argv := ptyhold.Argv(s.MosaicBin, s.Name, AttachSocket(s.RuntimeDir, s.Name))
	return []sd.Property{
		prop("Description", "mosaic terminal of session "+s.Name),
		prop("Slice", Slice),
		prop("ExecStartEx", []execEx{{Path: argv[0], Argv: argv, Flags: []string{"no-env-expand"}}}),
		// notify: the session starts once the socket is there, so that an
		// attach right after mosaic start finds it.
		prop("Type", "notify"),
		prop("NotifyAccess", "main"),
		prop("StandardInputFileDescriptor", dbus.UnixFD(*s.Attach)),
		prop("StandardOutput", "journal"),
		prop("StandardError", "journal"),
		prop("PrivateUsers", true),
		prop("PrivateTmp", true),
		prop("PrivateNetwork", true),
		prop("ProtectSystem", "strict"),
		prop("TemporaryFileSystem", []tmpfsEntry{{s.Home, ""}, {s.RuntimeDir, ""}}),
		prop("BindPaths", bindsOf([]string{AttachDir(s.RuntimeDir)})),
		prop("BindReadOnlyPaths", bindsOf([]string{s.MosaicBin, filepath.Join(s.RuntimeDir, "systemd", "notify")})),
		prop("NoNewPrivileges", true),
		prop("MemoryMax", PTYMemoryMax),
		prop("TasksMax", PTYTasksMax),
		prop("Environment", []string{"GOMAXPROCS=1", fmt.Sprintf("GOMEMLIMIT=%d", PTYMemoryMax/2)}),
		prop("StopWhenUnneeded", true),
		prop("CollectMode", "inactive-or-failed"),
		prop("TimeoutStopUSec", usec(5*time.Second)),
		prop("SyslogIdentifier", strings.TrimSuffix(s.PTYUnit(), UnitSuffix)),
	}
}
