package units

import (
	"path/filepath"

	"mosaic/sandbox"
)

// landlockExecArgv is the command line of a --sandbox landlock session: the
// exec shim checks systemd's layer and becomes mosaic's init directly (no
// bwrap), which applies the session's Landlock policy to the command.
func landlockExecArgv(s session) []string {
	o := sandbox.InitOptions{Session: s.Name, Home: s.SessionHome(), TTY: s.TTY,
		Egress: s.Network == sandbox.NetworkAllow, Pass: s.Pass, Credentials: s.Credentials,
		Landlock: s.LandlockPolicy().Encode(), EgressSocket: filepath.Join(s.EgressDir, sandbox.EgressSocketName),
		SeccompAllow: s.SeccompAllow}
	// The shim becomes mosaic's init in place of bwrap.
	shim := sandbox.Shim{Promise: s.Promise.Encode(), Drop: heldLink(s.Spec, s.CredentialFile), Bwrap: s.StageBin, Args: sandbox.InitArgv(o, s.Command)}
	return shim.Argv(s.StageBin)
}

// notifyAccess is who in the unit systemd takes notifications from. With
// bwrap the init is bwrap's child, so "all"; the command never sees the
// socket there. In --sandbox landlock the init is the main process itself
// (the shim execs it), and the socket's path is visible to the command
// (Landlock up to ABI 7 does not govern connecting to a path socket), so
// only the main process is heard.
func notifyAccess(s Spec) string {
	if s.Landlock() {
		return "main"
	}
	return "all"
}

// tmpfsOf are the unit's empty mounts: over the home and the runtime dir,
// and in --sandbox landlock, where no bwrap builds a root of its own, over
// /run (the system bus and every other socket there: Landlock up to ABI 7
// does not govern connecting to a path socket), /sys (as bwrap's sandbox
// has none: no cgroup tree) and the host's /dev/shm too. systemd insists on
// a TemporaryFileSystem (it never fails open on one), and the init checks
// them again.
func tmpfsOf(s Spec) []tmpfsEntry {
	t := []tmpfsEntry{{s.Home, ""}, {s.RuntimeDir, ""}}
	if s.Landlock() {
		t = append(t, tmpfsEntry{"/run", ""}, tmpfsEntry{"/sys", ""}, tmpfsEntry{"/dev/shm", ""})
	}
	return t
}
