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
// spare stage) to make a repository's spare copy: a background unit
// (backgroundProperties), so that the session that asked for it starts
// first.
func SpareProperties(argv []string) []sd.Property {
	return backgroundProperties("mosaic: a spare copy of a repository, for its next session", argv, SpareTimeout)
}

// RemoveUnitName is the unit that removes a forgotten session's state
// directory (manager/statedir's RemoveMain), id telling one removal from
// another. Its name has a dot, as the spare's: no session's name has one.
func RemoveUnitName(id string) string { return UnitPrefix + "remove." + id + UnitSuffix }

// RemoveTimeout bounds the removal of a state directory.
const RemoveTimeout = time.Hour

// RemoveProperties are the properties of the unit that runs argv (mosaic's
// remove stage) to remove a state directory set aside: a background unit
// (backgroundProperties), so that the command that forgot the session
// (rm, gc, the end of an unnamed run) returns without waiting for its
// files (ten thousand files of a clone's copy took seconds on a busy disk).
func RemoveProperties(argv []string) []sd.Property {
	return backgroundProperties("mosaic: removing the state of a forgotten session", argv, RemoveTimeout)
}

// backgroundProperties are the properties of a unit that does mosaic's
// work in the background with argv: a plain service of the user's, run at
// the lowest CPU and I/O priority, stopped after max, gone from systemd
// once it has ended.
func backgroundProperties(description string, argv []string, max time.Duration) []sd.Property {
	return []sd.Property{
		prop("Description", description),
		prop("ExecStartEx", []execEx{{Path: argv[0], Argv: argv, Flags: []string{"no-env-expand"}}}),
		prop("Slice", Slice),
		prop("Nice", int32(19)),
		prop("IOSchedulingClass", int32(3)), // idle
		prop("RuntimeMaxUSec", usec(max)),
		prop("CollectMode", "inactive-or-failed"),
	}
}
