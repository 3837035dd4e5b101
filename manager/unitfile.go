package manager

import (
	"strings"
	"unicode"

	"mosaic/units"
	"mosaic/units/errcode"
)

// unitFileSafe refuses a service whose paths systemd cannot carry across a
// daemon-reload. systemd writes a transient unit into a file and reads it
// back at every reload (and daemon-reexec); 252 writes BindPaths= and
// BindReadOnlyPaths= entries unquoted ("%s%s:%s:%s"), so a path with a space
// comes back split in two, and the unit's ExecStopPost, which sets up its
// namespace again, then fails: the session's end is never recorded. A quote
// or a backslash would be read back as quoting, a colon as a separator.
func unitFileSafe(s units.Spec) error {
	if s.Scope { // a scope has no binds of systemd's
		return nil
	}
	check := func(path string, code errcode.Code, what string) error {
		if i := strings.IndexFunc(path, func(r rune) bool { return unicode.IsSpace(r) || strings.ContainsRune(`"'\:`, r) }); i >= 0 {
			return code.New("%s %q has %q in it, which systemd cannot write into a unit file and read back (a daemon-reload would lose the session's binds and how it ends): rename it, or run the session with mosaic run --scope", what, path, path[i:i+1])
		}
		return nil
	}
	if err := check(s.Workspace, errcode.BadWorkspace, "the workspace"); err != nil {
		return err
	}
	for _, p := range append(append([]string{}, s.ExtraRW...), s.ExtraRO...) {
		if err := check(p, errcode.BadBind, "the bind"); err != nil {
			return err
		}
	}
	for _, p := range []string{s.Home, s.RuntimeDir, s.StateDir, s.MosaicBin, s.BwrapBin, s.Binary, s.BusDir, s.EgressDir, s.CredentialFile} {
		if err := check(p, errcode.StateDir, "mosaic's path"); err != nil {
			return err
		}
	}
	return nil
}
