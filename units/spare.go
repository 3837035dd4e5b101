package units

import (
	"time"

	sd "github.com/coreos/go-systemd/v22/dbus"
)

// SpareUnitName is the unit that makes the spare copy of a repository
// (manager/clone's MakeSpare), key naming the repository. Its name has a
// dot, which no session's name has, so that it is never taken for one.
func SpareUnitName(key string) string { return UnitPrefix + "spare." + key + UnitSuffix }

// SpareTimeout bounds the making of a spare.
const SpareTimeout = 10 * time.Minute

// SpareProperties are the properties of the unit that runs argv (mosaic's
// spare stage) to make a repository's spare copy: a plain service of the
// user's, run at the lowest CPU and I/O priority so that the session that
// asked for it starts first, gone from systemd once it has ended.
func SpareProperties(argv []string) []sd.Property {
	return []sd.Property{
		prop("Description", "mosaic: a spare copy of a repository, for its next session"),
		prop("ExecStartEx", []execEx{{Path: argv[0], Argv: argv, Flags: []string{"no-env-expand"}}}),
		prop("Slice", Slice),
		prop("Nice", int32(19)),
		prop("IOSchedulingClass", int32(3)), // idle
		prop("RuntimeMaxUSec", usec(SpareTimeout)),
		prop("CollectMode", "inactive-or-failed"),
	}
}
