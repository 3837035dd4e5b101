package manager

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"mosaic/manager/records"
	"mosaic/sandbox"
	"mosaic/units"
	"mosaic/units/errcode"
)

// describe fills in what a session's record knows of s.
func describe(r records.Record, s *Session) {
	s.Command, s.Workspace, s.WorkspaceGivenAs, s.Binds = r.Command, r.Workspace, r.GivenAs, r.Binds
	s.Profile, s.Credentials = r.Profile, r.Credentials
	s.Kind = kindOf(r)
	s.MayLaunch = r.MayLaunch
	s.Network, s.AllowHosts = r.Network, r.AllowHosts
	s.Output = r.Output
	s.SeccompAllow = r.SeccompAllow
	s.Sandbox = r.Sandbox
	if s.Sandbox == "" {
		s.Sandbox = sandbox.ModeBwrap
	}
	if s.Network == "" {
		s.Network = sandbox.NetworkHost // recorded before sessions had a network of their own
	}
}

// kindOf is the record's kind: service (the default, for records written
// before scopes existed) or scope.
func kindOf(r records.Record) string {
	if r.Kind == "" {
		return units.KindService
	}
	return r.Kind
}

// outputOf is where a session's output goes: the journal for a
// background service, the caller's terminal or pipes for mosaic run.
func outputOf(s units.Spec) string {
	if s.Stdio != nil || s.Scope {
		return "terminal"
	}
	return "journal"
}

// recordOf is the record of a spec about to start.
func recordOf(s units.Spec) records.Record {
	binds := s.Binds()
	if s.Landlock() {
		binds = nil // no bwrap: the record says the mode, status its rows
	}
	return records.Record{Name: s.Name, Command: s.Command, Workspace: s.Workspace, GivenAs: s.GivenAs, Binds: binds, Sandbox: s.Sandbox,
		Started: time.Now(), Profile: s.Profile, Credentials: s.Credentials, Kind: s.Kind(), MayLaunch: s.MayLaunch,
		Network: s.Network, AllowHosts: s.Allow, Output: outputOf(s), SeccompAllow: s.SeccompAllow}
}

// prepareState makes the session's state directory: home/ kept across runs of
// the same name (an agent's login and settings), tmp/ emptied each time,
// and the record. It returns a function that undoes what it created, for a
// start that fails.
func prepareState(s units.Spec) (undo func(), err error) {
	_, statErr := os.Stat(s.StateDir)
	fresh := os.IsNotExist(statErr)
	undo = func() {
		if fresh {
			os.RemoveAll(s.StateDir)
		}
	}
	fail := func(err error) (func(), error) {
		undo()
		return nil, errcode.StateDir.New("cannot prepare the session's state directory %s: %v (check the permissions of %s)", s.StateDir, err, filepath.Dir(s.StateDir))
	}
	if err := os.MkdirAll(filepath.Dir(s.StateDir), 0o700); err != nil {
		return fail(err)
	}
	if err := os.RemoveAll(s.SessionTmp()); err != nil {
		return fail(err)
	}
	for _, d := range []string{s.StateDir, s.SessionHome(), s.SessionTmp()} {
		if err := os.Mkdir(d, 0o700); err != nil && !os.IsExist(err) {
			return fail(err)
		}
	}
	if s.MayLaunch { // bound into the session whether the bus runs yet or not
		if err := os.MkdirAll(s.BusDir, 0o700); err != nil {
			return fail(err)
		}
	}
	if s.Network == sandbox.NetworkAllow { // the egress proxy's socket goes here
		if err := os.MkdirAll(s.EgressDir, 0o700); err != nil {
			return fail(err)
		}
	}
	if err := records.Write(s.StateDir, recordOf(s)); err != nil {
		return fail(err)
	}
	return undo, nil
}

// exitOf turns how the main process (bwrap) ended into the session's exit
// status and signal. bwrap, and mosaic's init, report a command killed by
// signal n as exit status 128+n: the signal is given back.
func exitOf(kind string, status int) (exit *int, signal string) {
	switch kind {
	case "exited":
		e := status
		if status > 128 && status <= 128+64 {
			signal = unix.SignalName(unix.Signal(status - 128))
		}
		return &e, signal
	case "killed", "dumped":
		e := 128 + status
		return &e, unix.SignalName(unix.Signal(status))
	}
	return nil, ""
}

// FromRecords is a session whose unit systemd no longer has, from what its
// state directory recorded.
func FromRecords(name, dir string) (Session, bool) {
	rec, ok := records.Read(dir)
	if !ok {
		return Session{}, false
	}
	s := Session{Name: name, Unit: units.UnitOf(name, kindOf(rec)), State: "inactive", SubState: "dead"}
	describe(rec, &s)
	if !rec.Started.IsZero() {
		t := rec.Started
		s.Since = &t
	}
	if end, ok := records.ReadEnd(dir); ok {
		s.Result = end.Result
		if s.Result != "" && s.Result != "success" {
			s.State, s.SubState = "failed", "failed"
		}
		status, err := strconv.Atoi(end.ExitStatus)
		if err != nil { // systemd names the signal of a killed process
			status = int(unix.SignalNum("SIG" + strings.TrimPrefix(end.ExitStatus, "SIG")))
		}
		s.ExitStatus, s.Signal = exitOf(end.ExitCode, status)
		t := end.Ended
		s.Ended = &t
	}
	return s, true
}

// ListAll is List plus the ended sessions whose units systemd has collected.
func (m *Manager) ListAll(ctx context.Context) ([]Session, error) {
	live, err := m.List(ctx)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, s := range live {
		seen[s.Name] = true
	}
	p := mustPaths()
	for _, name := range records.Names(p.StateRoot) {
		if seen[name] || units.ValidateName(name) != nil {
			continue
		}
		if s, ok := FromRecords(name, p.SessionDir(name)); ok {
			live = append(live, s)
		}
	}
	sort.Slice(live, func(i, j int) bool { return live[i].Name < live[j].Name })
	return live, nil
}

// Remove forgets an ended session: its failed unit, if systemd still has
// one, and its state directory (home, /tmp, records). A running session is
// a refusal.
func (m *Manager) Remove(ctx context.Context, name string) error {
	s, err := m.Status(ctx, name)
	if err != nil {
		return err
	}
	if s.Running() {
		return errcode.SessionRunning.New("session %s is %s: stop it first with `mosaic stop %s`", name, s.State, name)
	}
	m.forget(ctx, s.Unit)
	p := mustPaths()
	os.RemoveAll(p.EgressDir(name)) // its proxy's socket directory
	if err := os.RemoveAll(p.SessionDir(name)); err != nil {
		return errcode.StateDir.New("cannot remove the state of session %s: %v", name, err)
	}
	return nil
}

// GC removes every ended session, as Remove does, and returns their names.
func (m *Manager) GC(ctx context.Context) ([]string, error) {
	all, err := m.ListAll(ctx)
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, s := range all {
		if s.Running() {
			continue
		}
		if err := m.Remove(ctx, s.Name); err != nil {
			return removed, err
		}
		removed = append(removed, s.Name)
	}
	return removed, nil
}
