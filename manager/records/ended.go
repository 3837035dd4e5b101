package records

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"mosaic/credentials/sessionfile"
	"mosaic/sandbox"
	"mosaic/units/termsafe"
)

// The session-ended stage is a service's ExecStopPost (its command line is
// units.EndedArgv):
//
//	mosaic-stage session-ended --state DIR [--egress SOCKET] [--drop FILE]
//
// It records how the session ended (end.json from the variables systemd
// gives ExecStopPost), moves aside the host-executed entries the session
// created in its workspace (sandbox.MoveAsideCreated), removes the mount
// points bwrap left in its kept home (TidyHome), and deletes the session's credential file if it is
// still there (a unit that died before its exec shim ran). It runs inside
// the ended session's unit, so it is quick and never fails the unit.

// EndedMain runs the stage with the arguments after its name; it reports
// problems on stderr (the unit's journal) and never fails. (--drop FILE is
// for the units a mosaic before issue 31 started, whose credential file was
// on disk.)
func EndedMain(args []string, getenv func(string) string) {
	var state, egressSocket string
	for len(args) >= 2 {
		var err error
		switch args[0] {
		case "--state":
			state = args[1]
		case "--egress":
			egressSocket = args[1]
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
		if err := RecordEnd(state, getenv, egressSocket); err != nil {
			fmt.Fprintf(os.Stderr, "mosaic: %v\n", err)
		}
	}
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

// MoveAside moves aside the host-executed entries r's session created in
// its workspace (sandbox.MoveAsideCreated), and the links of the submodules
// whose config it changed and of the repositories it planted or changed
// anywhere in the workspace (sandbox.MoveAsideRepos); both, where the
// workspace has a .git, into it, where git status does not list them.
func MoveAside(r Record) []sandbox.MovedAside {
	if r.Workspace == "" || r.HostExecWritable || r.WorkspaceCopied {
		return nil // the session could write what the host runs there, or never touched it
	}
	if r.OwnGitDir != "" {
		sandbox.RemoveGitPlaceholder(r.Workspace)
	}
	moved := sandbox.OutOfStatus(r.Workspace, sandbox.MoveAsideCreated(r.Workspace, r.Name, r.HostExecMissing))
	if !r.Started.IsZero() {
		moved = append(moved, sandbox.OutOfStatus(r.Workspace, sandbox.MoveAsideRepos(r.Workspace, r.Name, r.Started))...)
	}
	return moved
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

// MovedAsideLine says what happened to one created entry, in one line.
func MovedAsideLine(ws string, m sandbox.MovedAside) string {
	if m.Error != "" {
		return fmt.Sprintf("%s, which your tools run (%s), was created or changed while the session ran, and it %s: check it before you use the workspace on the host", filepath.Join(ws, m.Path), m.Why(), m.Error)
	}
	disarmed := ""
	if len(m.Disarmed) > 0 {
		disarmed = fmt.Sprintf(", and git takes nothing in it for a repository (%d entries renamed *%s: %s)", len(m.Disarmed), ".mosaic-moved", strings.Join(m.Disarmed[:min(len(m.Disarmed), 5)], ", "))
		if len(m.Disarmed) > 5 {
			disarmed = strings.TrimSuffix(disarmed, ")") + ", ...)"
		}
	}
	return fmt.Sprintf("%s, which your tools run (%s), was created or changed while the session ran: moved aside to %s, unread%s; look at it before you rename it back", filepath.Join(ws, m.Path), m.Why(), filepath.Join(ws, m.To), disarmed)
}

// RecordEnd writes end.json into a session's state directory from the
// variables systemd gives ExecStopPost.
func RecordEnd(stateDir string, getenv func(string) string, egressSocket string) error {
	e := End{
		Result:     getenv("SERVICE_RESULT"),
		ExitCode:   getenv("EXIT_CODE"),
		ExitStatus: getenv("EXIT_STATUS"),
		Ended:      time.Now(),
		EgressDied: egressSocket != "" && proxyDead(egressSocket),
	}
	if _, err := os.Stat(stateDir + "/" + recordFile); err != nil {
		return err // not a session's state directory (or already removed)
	}
	if r, err := ReadChecked(stateDir); err == nil {
		TidyHome(stateDir, r)
		// How it ended is written first: the walk of the workspace
		// (sandbox.MoveAsideRepos) takes time, and systemd kills an
		// ExecStopPost that passes the stop timeout.
		if err := WriteEnd(stateDir, e); err != nil {
			return err
		}
		e.MovedAside = MoveAside(r)
		// Into the unit's journal, escaped: a path is the session's to
		// choose (a submodule's). This stderr is the session's, which for
		// mosaic run is the user's terminal: run says them itself.
		for _, m := range e.MovedAside {
			if r.Output != "terminal" {
				fmt.Fprintln(os.Stderr, "mosaic: "+termsafe.Escape(MovedAsideLine(r.Workspace, m), false))
			}
		}
	}
	return WriteEnd(stateDir, e)
}
