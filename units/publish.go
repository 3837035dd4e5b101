package units

import (
	"path/filepath"

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

// publishProperties are the properties of session s's publish forwarder:
// a broker (brokerProperties) listening on each published host address, in
// the host's network, and on its socket, the one directory it may write.
func publishProperties(s Spec) []sd.Property {
	dir := PublishDir(s.RuntimeDir, s.Name)
	argv := publish.Argv(s.MosaicBin, s.Name, filepath.Join(dir, publish.SocketName), s.Publish)
	return brokerProperties(s, broker{Description: "mosaic publish forwarder of session " + s.Name, Unit: s.PublishUnit(),
		Argv: argv, Binds: bindsOf([]string{dir}), MemoryMax: PublishMemoryMax, TasksMax: PublishTasksMax, Procs: 2})
}
