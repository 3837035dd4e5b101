package units

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"mosaic/internal/errcode"
	"mosaic/sandbox"
)

// UnitFileSafe refuses a service whose paths systemd cannot carry across a
// daemon-reload. systemd writes a transient unit into a file and reads it
// back at every reload (and daemon-reexec); 252 writes BindPaths= and
// BindReadOnlyPaths= entries unquoted ("%s%s:%s:%s"), so a path with a space
// comes back split in two, and the unit's ExecStopPost, which sets up its
// namespace again, then fails: the session's end is never recorded. A quote
// or a backslash would be read back as quoting, a colon as a separator.
// l is the session's launch as far as the start has made it (its stdio and
// init arguments' file: what its command line and call carry).
func UnitFileSafe(s Spec, l Launch) error {
	if err := argvFits(s, l); err != nil { // a scope's shim is exec'd too
		return err
	}
	if err := carriable(s); err != nil {
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
	for _, p := range []string{s.Home, s.RuntimeDir, s.StateDir, s.MosaicBin, s.StageBin, s.NetBin, s.BwrapBin, s.Binary, s.BusDir, s.EgressDir, l.CredentialFile} {
		if err := check(p, errcode.StateDir, "mosaic's path"); err != nil {
			return err
		}
	}
	return nil
}

// carriable refuses what D-Bus cannot carry to systemd: its strings are
// UTF-8 only (godbus refuses to send any other, and systemd would too). A
// workspace or bind that is not UTF-8 is in the unit's properties and in
// mosaic's records (JSON, UTF-8 too), so it is refused; a command's
// arguments are not (the init reads them from Launch.InitArgsFile, a scope's
// bwrap is exec'd) and run as they are, but in --sandbox landlock, where
// they are in the unit's command line. (Description escapes what it shows.)
func carriable(s Spec) error {
	notUTF8 := func(what, p string) string {
		return what + " " + strconv.Quote(p) + " is not valid UTF-8, which systemd's D-Bus interface and mosaic's records cannot carry: rename it"
	}
	if !utf8.ValidString(s.Workspace) {
		return errcode.BadWorkspace.New("%s", notUTF8("the workspace", s.Workspace))
	}
	for _, p := range append(append([]string{}, s.ExtraRW...), s.ExtraRO...) {
		if !utf8.ValidString(p) {
			return errcode.BadBind.New("%s", notUTF8("the bind", p))
		}
	}
	for _, e := range s.Env {
		if !utf8.ValidString(e) {
			n, _, _ := strings.Cut(e, "=")
			return errcode.BadEnv.New("the value of %s is not valid UTF-8, which systemd's D-Bus interface cannot carry into the session's environment", strconv.Quote(n))
		}
	}
	if s.Landlock() && !s.Scope {
		for i, a := range s.Command {
			if !utf8.ValidString(a) {
				return errcode.BadCommand.New("argument %d of the command, %s, is not valid UTF-8, which systemd cannot carry in a --sandbox landlock session's command line: run it in the default sandbox (bwrap), where it is passed as it is", i, strconv.Quote(a))
			}
		}
	}
	return nil
}

// What a session's command line must fit in. The command's arguments go to
// its init in a file (Launch.InitArgsFile), so the unit's ExecStart
// holds only the shim's and bwrap's options; systemd writes that into its
// transient unit file, one line, quoted and escaped, and reads it back at a
// daemon-reload in lines of at most 1 MiB (LONG_LINE_MAX). bwrap takes at
// most 9,000 arguments. The init finally execs the command, whose
// arguments the kernel takes each of at most 128 KiB (MAX_ARG_STRLEN) and,
// with the environment, in all a quarter of the stack limit (2 MiB at the
// usual 8 MiB): mosaic leaves half of that to the environment. A run's
// StartTransientUnit carries its terminal's descriptors, and godbus sends
// such a message in one sendmsg, which a Unix socket takes whole only up to
// about half its buffer (212,992 bytes by default): it is kept below that.
const (
	maxExecLine  = 1<<20 - 64<<10
	maxArg       = 128<<10 - 1
	maxArgBytes  = 1 << 20
	maxWithFDs   = 96 << 10
	bwrapReserve = 8 // the init's own four, and a margin
)

// argvFits refuses, before anything starts, a session whose command line
// cannot reach its command whole.
func argvFits(s Spec, l Launch) error {
	total := 0
	for i, a := range InitArgs(s) {
		if len(a) > maxArg {
			return errcode.TooManyArguments.New("argument %d of the session's command line is %d bytes, more than the %d the kernel passes in one argument", i, len(a), maxArg)
		}
		total += len(a) + 1 + 8 // the string, its NUL, its pointer
	}
	if total > maxArgBytes {
		return errcode.TooManyArguments.New("the session's command line (%d arguments, %d variables passed by name) is %d bytes, more than the %d mosaic lets a command be given (the kernel's limit, with the environment, is a quarter of the stack limit): pass fewer or shorter arguments, e.g. through a file in the workspace", len(s.Command), len(s.Credentials)+len(s.Pass), total, maxArgBytes)
	}
	var argv []string
	if s.Scope {
		argv, _ = ScopeBwrap(s)
	} else {
		argv = ExecArgv(s, l)
	}
	line, message, bwrapArgs, inBwrap := 0, 4096, 0, false
	for _, a := range argv {
		line += 3 + escapedLen(a)
		message += len(a) + 8
		if a == s.BwrapBin {
			inBwrap = true
		}
		if inBwrap {
			bwrapArgs++
		}
	}
	if bwrapArgs+bwrapReserve > sandbox.BwrapMaxArgs {
		return errcode.TooManyArguments.New("the sandbox needs %d bwrap arguments for its binds, more than bwrap's %d: bind fewer paths", bwrapArgs, sandbox.BwrapMaxArgs)
	}
	if line > maxExecLine {
		return errcode.TooManyArguments.New("the sandbox's binds make a command line too long for systemd to keep in its unit file (at most 1 MiB written out): bind fewer paths")
	}
	for _, e := range s.Env {
		message += len(e) + 8
	}
	if l.Stdio != nil && message > maxWithFDs {
		return errcode.TooManyArguments.New("mosaic run passes the terminal to systemd in one message, which must stay under %d bytes; its binds and --env make %d: use mosaic start, or pass less", maxWithFDs, message)
	}
	return nil
}

// escapedLen is how long systemd may write a in a unit file: a printable
// ASCII byte as itself, a quote, backslash, % or $ doubled, any other byte
// as \xNN.
func escapedLen(a string) int {
	n := 0
	for i := 0; i < len(a); i++ {
		switch c := a[i]; {
		case c == '"' || c == '\\' || c == '%' || c == '$':
			n += 2
		case c < 0x20 || c >= 0x7f:
			n += 4
		default:
			n++
		}
	}
	return n
}
