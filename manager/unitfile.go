package manager

import (
	"strings"
	"unicode"

	"mosaic/sandbox"
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
	if err := argvFits(s); err != nil { // a scope's shim is exec'd too
		return err
	}
	if s.Scope { // a scope has no unit file of systemd's
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

// What a session's command line must fit in. systemd writes the unit's
// ExecStart into its transient unit file, one line, quoted and escaped (a
// byte may take 4), and reads it back at a daemon-reload in lines of at most
// 1 MiB (LONG_LINE_MAX); it then execs the exec shim, whose arguments the
// kernel takes each of at most 128 KiB (MAX_ARG_STRLEN) and, with the
// environment, in all a quarter of the stack limit (2 MiB by default).
// bwrap's own options count against its 9,000 (the init's arguments go
// around it, see sandbox.InitArgvFD).
const (
	maxExecLine = 1<<20 - 64<<10 // the unit file's line, with room for the key and the flags
	maxArg      = 128<<10 - 1
)

// argvFits refuses, before anything starts, a session whose command line
// cannot reach its command whole.
func argvFits(s units.Spec) error {
	argv := units.ExecArgv(s)
	line, bwrapArgs, inBwrap := 0, 0, false
	for i, a := range argv {
		if len(a) > maxArg {
			return errcode.TooManyArguments.New("argument %d of the session's command line is %d bytes, more than the %d the kernel passes in one argument", i, len(a), maxArg)
		}
		line += 3 + 4*len(a) // quotes, a space, and every byte at its worst escaped
		if a == s.BwrapBin {
			inBwrap = true
		}
		if inBwrap {
			bwrapArgs++
		}
		if inBwrap && a == sandbox.InitPath {
			inBwrap = false
		}
	}
	if line > maxExecLine {
		return errcode.TooManyArguments.New("the session's command line (%d arguments, %d variables passed by name) is too long for systemd to keep in its unit file (at most about 1 MiB written out): pass fewer or shorter arguments, e.g. through a file in the workspace", len(s.Command), len(s.Credentials)+len(s.Pass))
	}
	if bwrapArgs+3 > sandbox.BwrapMaxArgs {
		return errcode.TooManyArguments.New("the sandbox needs %d bwrap arguments for its binds, more than bwrap's %d: bind fewer paths", bwrapArgs, sandbox.BwrapMaxArgs)
	}
	return nil
}
