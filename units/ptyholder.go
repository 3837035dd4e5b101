package units

import (
	"path/filepath"

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

// ptyProperties are the properties of the unit holding session s's
// terminal: a broker (brokerProperties) with the terminal's master side
// (s.Attach) as its stdin, its output to the journal (systemd would
// otherwise have it inherit the master: into the session's terminal), no
// network, and the attach sockets' directory the one it may write.
func ptyProperties(s session) []sd.Property {
	argv := ptyhold.Argv(s.MosaicBin, s.Name, AttachSocket(s.RuntimeDir, s.Name))
	return append(brokerProperties(s.Spec, broker{Description: "mosaic terminal of session " + s.Name, Unit: s.PTYUnit(),
		Argv: argv, Binds: bindsOf([]string{AttachDir(s.RuntimeDir)}), MemoryMax: PTYMemoryMax, TasksMax: PTYTasksMax, Procs: 1}),
		prop("StandardInputFileDescriptor", dbus.UnixFD(*s.Attach)),
		prop("StandardOutput", "journal"),
		prop("StandardError", "journal"),
		prop("PrivateNetwork", true),
	)
}
