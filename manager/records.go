package manager

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"mosaic/manager/records"
	"mosaic/manager/request"
	"mosaic/manager/session"
	"mosaic/manager/statedir"
	"mosaic/sandbox"
	"mosaic/units"
	"mosaic/units/errcode"
)

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
		Network: s.Network, AllowHosts: s.Allow, Output: outputOf(s), SeccompAllow: s.SeccompAllow, Injected: injected(s), HostExecWritable: s.AllowWriteHostExec,
		HostExecMissing: s.HostExecMissing, Environment: s.Env}
}

// injected maps each credential the egress proxy injects to its hosts.
func injected(s units.Spec) map[string][]string {
	if len(s.Inject) == 0 {
		return nil
	}
	m := map[string][]string{}
	for _, r := range s.Inject {
		m[r.Var] = r.Hosts
	}
	return m
}

// prepareState makes the session's state directory: home/ kept across runs of
// the same name (an agent's login and settings), tmp/ emptied each time,
// and the record. It returns a function that undoes what it created, for a
// start that fails.
func prepareState(s units.Spec) (undo func(), err error) {
	fresh := false
	undo = func() {
		if fresh {
			statedir.Remove(s.StateDir)
		}
	}
	fail := func(err error) (func(), error) {
		undo()
		return nil, errcode.StateDir.New("cannot prepare the session's state directory %s: %v", s.StateDir, statedir.Hint(err, filepath.Dir(s.StateDir)))
	}
	if err := os.MkdirAll(filepath.Dir(s.StateDir), 0o700); err != nil {
		return fail(err)
	}
	switch err := os.Mkdir(s.StateDir, 0o700); {
	case err == nil:
		fresh = true
	case !os.IsExist(err):
		return fail(err)
	case !s.NameGiven: // a made-up name that another session has
		return nil, errNameTaken
	}
	if err := statedir.RemoveTree(s.SessionTmp()); err != nil {
		return fail(err)
	}
	for _, d := range []string{s.SessionHome(), s.SessionTmp()} {
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
	if s.InitArgsFile != "" {
		// Read by the exec shim; the state directory is not the sandbox's.
		if err := os.WriteFile(s.InitArgsFile, sandbox.EncodeInitArgs(units.InitArgs(s)[1:]), 0o600); err != nil {
			return fail(err)
		}
	}
	return undo, nil
}

// ListAll is List plus the ended sessions whose units systemd has collected.
func (m *Manager) ListAll(ctx context.Context) ([]Session, error) {
	p, err := request.UserPaths()
	if err != nil {
		return nil, err
	}
	live, err := m.List(ctx)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, s := range live {
		seen[s.Name] = true
	}
	for _, name := range records.Names(p.StateRoot) {
		if seen[name] || units.ValidateName(name) != nil {
			continue
		}
		if s, ok := session.FromRecords(name, p.SessionDir(name)); ok {
			live = append(live, s)
		}
	}
	sort.Slice(live, func(i, j int) bool { return live[i].Name < live[j].Name })
	return live, nil
}

// Remove forgets an ended session: its failed unit, if systemd still has
// one, and its state directory (home, /tmp, records). A running session is
// a refusal, and so is one another mosaic command is starting or removing.
func (m *Manager) Remove(ctx context.Context, name string) error {
	// Never a path relative to the current directory: without a home,
	// there is no state to remove.
	p, err := request.UserPaths()
	if err != nil {
		return err
	}
	lock, err := statedir.LockName(p.SessionDir(name))
	if err == statedir.ErrBusy {
		return busyName(name)
	}
	if err != nil {
		return errcode.StateDir.New("cannot remove session %s: %v", name, statedir.Hint(err, p.StateRoot))
	}
	defer lock.Release()
	s, err := m.Status(ctx, name)
	if err != nil {
		return err
	}
	if s.Running() {
		return errcode.SessionRunning.New("session %s is %s: stop it first with `mosaic stop %s`", name, s.State, name)
	}
	m.forget(ctx, s.Unit)
	os.RemoveAll(p.EgressDir(name)) // its proxy's socket directory
	if err := statedir.Remove(p.SessionDir(name)); err != nil {
		return errcode.StateDir.New("cannot remove the state of session %s: %v", name, statedir.Hint(err, p.SessionDir(name)))
	}
	if err := statedir.RemoveLeftovers(p.StateRoot); err != nil {
		return errcode.StateDir.New("session %s is removed, but an earlier removal's leftovers are not: %v", name, err)
	}
	return nil
}

// GC removes every ended session, as Remove does, and returns their names.
// With keepHomes, an ended session whose home holds anything (an agent's
// sign-in or settings, kept for the next session of that name) is kept
// and named in kept instead. One session that cannot be removed does not
// stop the others: the error names each that failed.
func (m *Manager) GC(ctx context.Context, keepHomes bool) (removed, kept []string, err error) {
	p, err := request.UserPaths()
	if err != nil {
		return nil, nil, err
	}
	all, err := m.ListAll(ctx)
	if err != nil {
		return nil, nil, err
	}
	var failed []string
	for _, s := range all {
		if s.Running() {
			continue
		}
		if keepHomes && s.Problem == "" && hasEntries(filepath.Join(p.SessionDir(s.Name), "home")) {
			kept = append(kept, s.Name)
			continue
		}
		if err := m.Remove(ctx, s.Name); err != nil {
			if errcode.Of(err).Code != errcode.SessionExists.Name {
				failed = append(failed, err.Error()) // a name another command holds is not ended yet
			}
			continue
		}
		removed = append(removed, s.Name)
	}
	if err := statedir.RemoveLeftovers(p.StateRoot); err != nil {
		failed = append(failed, err.Error())
	}
	if len(failed) > 0 {
		return removed, kept, errcode.StateDir.New("gc removed %d sessions but not everything: %s", len(removed), strings.Join(failed, "; "))
	}
	return removed, kept, nil
}

// hasEntries reports whether dir holds anything but empty directories (a
// home where only bind mount points were ever made holds nothing of worth).
func hasEntries(dir string) bool {
	found := false
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || found {
			return filepath.SkipAll
		}
		if !d.IsDir() {
			found = true
			return filepath.SkipAll
		}
		return nil
	})
	return found
}
