package units

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	sd "github.com/coreos/go-systemd/v22/dbus"

	"mosaic/sandbox/publish"
)

// PublishUnit is the unit of session s's publish forwarder (--publish).
func (s Spec) PublishUnit() string { return PublishUnitName(s.Name) }

// PublishUnitName is the publish forwarder unit of session name.
func PublishUnitName(name string) string { return UnitPrefix + name + "-publish" + UnitSuffix }

// PublishDir is the directory of session name's publish forwarder socket,
// in the user's runtime directory (which no session sees but its own, bound
// read-only at publish.DirInside).
func PublishDir(runtimeDir, name string) string {
	return filepath.Join(runtimeDir, "mosaic", "publish", name)
}

// The forwarder's own bounds: publish.MaxConns relays of two 32 KiB
// buffers each.
const (
	PublishMemoryMax uint64 = 64 << 20
	PublishTasksMax  uint64 = 64
)

// PublishProperties are the properties of session s's publish forwarder:
// the mosaic binary listening on each published host address (in the
// host's network) and on its socket, confined as the egress proxy is (no
// home, no runtime dir but its socket's directory), stopped once the
// session no longer needs it.
func PublishProperties(s Spec) []sd.Property {
	dir := PublishDir(s.RuntimeDir, s.Name)
	argv := publish.Argv(s.MosaicBin, s.Name, filepath.Join(dir, publish.SocketName), s.Publish)
	return []sd.Property{
		prop("Description", "mosaic publish forwarder of session "+s.Name),
		prop("Slice", Slice),
		prop("ExecStartEx", []execEx{{Path: argv[0], Argv: argv, Flags: []string{"no-env-expand"}}}),
		// notify: the session starts once every port is listened on (a
		// port in use fails the start, and nothing is left).
		prop("Type", "notify"),
		prop("NotifyAccess", "main"),
		prop("PrivateUsers", true),
		prop("PrivateTmp", true),
		prop("ProtectSystem", "strict"),
		prop("TemporaryFileSystem", []tmpfsEntry{{s.Home, ""}, {s.RuntimeDir, ""}}),
		prop("BindPaths", bindsOf([]string{dir})),
		prop("BindReadOnlyPaths", bindsOf([]string{s.MosaicBin, filepath.Join(s.RuntimeDir, "systemd", "notify")})),
		prop("NoNewPrivileges", true),
		prop("MemoryMax", PublishMemoryMax),
		prop("TasksMax", PublishTasksMax),
		prop("Environment", []string{"GOMAXPROCS=2", fmt.Sprintf("GOMEMLIMIT=%d", PublishMemoryMax/2)}),
		prop("StopWhenUnneeded", true),
		prop("CollectMode", "inactive-or-failed"),
		prop("TimeoutStopUSec", usec(5*time.Second)),
		prop("SyslogIdentifier", strings.TrimSuffix(s.PublishUnit(), UnitSuffix)),
	}
}
