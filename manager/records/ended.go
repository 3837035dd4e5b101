package records

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"mosaic/internal/acceptloop"
	"mosaic/internal/sessionfile"
	"mosaic/sandbox"
	"mosaic/sandbox/directfloor"
)

// The session-ended stage is a service's ExecStopPost (its command line is
// units.EndedArgv):
//
//	mosaic-stage session-ended --state DIR [--egress-alive FILE] [--egress SOCKET] [--drop FILE]
//
// It records how the session ended (end.json from the variables systemd
// gives ExecStopPost), removes the empty .git placeholder it left in its
// workspace (TidyWorkspace) and the mount points bwrap left in its kept
// home (TidyHome), and deletes the session's credential file if it is
// still there (a unit that died before its exec shim ran). It runs inside
// the ended session's unit, so it is quick and never fails the unit.

// EndedMain runs the stage with the arguments after its name; it reports
// problems on stderr (the unit's journal) and never fails. (--drop FILE is
// for the units a mosaic before issue 31 started, whose credential file was
// on disk, and --egress SOCKET for those before socket activation, whose
// proxy a dial tells alive or dead.)
func EndedMain(args []string, getenv func(string) string) {
	var state string
	died := false
	for len(args) >= 2 {
		var err error
		switch args[0] {
		case "--state":
			state = args[1]
		case "--egress-alive":
			died = proxyDied(args[1])
		case "--egress":
			died = proxyDead(args[1])
		case "--drop":
			err = sessionfile.Remove(args[1])
		default:
			err = fmt.Errorf("%s: unknown option %q", sandbox.EndedStage, args[0])
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "mosaic: %v\n", err)
		}
		args = args[2:]
	}
	if state != "" {
		if err := RecordEnd(state, getenv, died); err != nil {
			fmt.Fprintf(os.Stderr, "mosaic: %v\n", err)
		}
	}
}

// proxyDied reports whether the egress proxy that marks alive
// (acceptloop.HoldAlive) started and no longer runs. The session's
// ExecStopPost runs before its proxy is stopped (the proxy's socket unit,
// or the proxy, is stopped once the session no longer needs it), so a
// proxy that no longer runs then died first, and took the session with it
// (BindsTo=, PropagatesStopTo=). One that never started (socket
// activation: the session made no connection) did not die.
func proxyDied(alive string) bool {
	started, running := acceptloop.Alive(alive)
	return started && !running
}

// proxyDead reports whether the egress proxy at socket no longer answers.
// The session's ExecStopPost runs before its proxy is stopped (the session
// is ordered after it), so a proxy that does not answer then died first,
// and took the session with it (BindsTo=).
func proxyDead(socket string) bool {
	c, err := net.DialTimeout("unix", socket, time.Second)
	if err != nil {
		return true
	}
	c.Close()
	return false
}

// TidyWorkspace removes the empty .git placeholder that r's session's own
// repository was mounted over (directfloor.OwnGitDir) from its workspace, so
// that nothing empty is left behind. Nothing else of a direct session's
// workspace is looked at when it ends: what it wrote there is the user's
// to review (issue 38: direct mode protects at the start only).
func TidyWorkspace(r Record) {
	if r.Workspace != "" && r.OwnGitDir != "" && !r.HostExecWritable && !r.WorkspaceCopied {
		directfloor.RemoveGitPlaceholder(r.Workspace)
	}
}

// TidyHome removes from the ended session's kept home the mount points
// bwrap made there (sandbox.RemoveMountPoints).
func TidyHome(stateDir string, r Record) {
	hostHome := filepath.Join(stateDir, "home")
	for _, b := range r.Binds {
		if b.Src == hostHome {
			sandbox.RemoveMountPoints(hostHome, b.Dst, r.Binds)
			return
		}
	}
}

// RecordEnd writes end.json into a session's state directory from the
// variables systemd gives ExecStopPost.
func RecordEnd(stateDir string, getenv func(string) string, egressDied bool) error {
	e := End{
		Result:     getenv("SERVICE_RESULT"),
		ExitCode:   getenv("EXIT_CODE"),
		ExitStatus: getenv("EXIT_STATUS"),
		Ended:      time.Now(),
		EgressDied: egressDied,
	}
	if _, err := os.Stat(stateDir + "/" + recordFile); err != nil {
		return err // not a session's state directory (or already removed)
	}
	if r, err := ReadChecked(stateDir); err == nil {
		TidyHome(stateDir, r)
		TidyWorkspace(r)
	}
	return WriteEnd(stateDir, e)
}
