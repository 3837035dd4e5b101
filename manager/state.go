package manager

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	"mosaic/internal/errcode"
	"mosaic/internal/testhook"
	"mosaic/manager/records"
	"mosaic/manager/statedir"
	"mosaic/units"
)

// busyName is the refusal for a name another mosaic command holds.
func busyName(name string) error {
	return errcode.SessionExists.New("session %s is being started or removed by another mosaic command right now: pick another --name, or try again", name)
}

// claim takes the session's name and prepares its state directory; free
// says whether systemd has the name free (claimName; a scope run that
// made its name up need not ask). A name mosaic made up is taken only if
// no state directory has it yet: on a clash another is made up (spec is
// changed), so a session never reuses another's home. release lets the
// name go; undo removes what this call made, for a start that fails; call
// undo before release. rec is the session's record as written.
func claim(ctx context.Context, spec *units.Spec, free func(context.Context, units.Spec) error) (release, undo func(), rec records.Record, err error) {
	if !spec.Scope { // a scope's init gets them from mosaic directly (units.ScopeBwrap)
		spec.InitArgsFile = filepath.Join(spec.StateDir, statedir.InitArgsName)
	}
	if err := units.UnitFileSafe(*spec); err != nil {
		return nil, nil, rec, err
	}
	for try := 0; ; try++ {
		lock, err := statedir.LockName(spec.StateDir)
		if err == statedir.ErrBusy {
			if !spec.NameGiven && try < 5 {
				rename(spec)
				continue
			}
			return nil, nil, rec, busyName(spec.Name)
		}
		if err != nil {
			return nil, nil, rec, errcode.StateDir.New("cannot claim the name %s: %w", spec.Name, statedir.Hint(err, filepath.Dir(statedir.LockPath(spec.StateDir))))
		}
		testhook.Pause("claimed")
		if err := free(ctx, *spec); err != nil {
			lock.Release()
			return nil, nil, rec, err
		}
		rec, undo, err := statedir.Prepare(*spec)
		if err == statedir.ErrNameTaken && try < 5 {
			lock.Release()
			rename(spec)
			continue
		}
		if err != nil {
			lock.Release()
			return nil, nil, rec, err
		}
		return lock.Release, undo, rec, nil
	}
}

// rename gives a spec whose name mosaic made up another one, with every
// path that holds the name, and the scope its promise names.
func rename(spec *units.Spec) {
	name := units.GenerateName(spec.Command)
	spec.Name = name
	spec.StateDir = filepath.Join(filepath.Dir(spec.StateDir), name)
	if spec.InitArgsFile != "" {
		spec.InitArgsFile = filepath.Join(spec.StateDir, statedir.InitArgsName)
	}
	if spec.Clone != nil {
		c := *spec.Clone
		c.Dir = filepath.Join(spec.StateDir, units.CloneDirName)
		spec.Clone = &c
	}
	if spec.EgressDir != "" {
		spec.EgressDir = filepath.Join(filepath.Dir(spec.EgressDir), name)
	}
	if spec.Promise.Scope != "" {
		spec.Promise.Scope = scopeCgroup(*spec)
	}
}

// sweepCredentials removes every session credential file, and its directory,
// that no running unit owns and no mosaic command is starting: what a start
// of a mosaic before issue 31, killed between writing the file and starting
// its unit, left behind (mosaic holds them in memory now, credentials.Hold),
// and every link to a held file that no start holds any more.
// An egress proxy's (NAME-egress) belongs to session NAME. Normally the
// directory does not exist and this is one ReadDir.
func (m *Manager) sweepCredentials(ctx context.Context) {
	p, err := m.Paths()
	if err != nil {
		return
	}
	root := filepath.Join(p.RuntimeDir, "mosaic", "credentials")
	entries, _ := os.ReadDir(root)
	if len(entries) == 0 { // as at nearly every start
		return
	}
	for _, e := range entries {
		name := strings.TrimSuffix(e.Name(), egressSuffix)
		if units.ValidateName(name) != nil || !e.IsDir() {
			continue
		}
		lock, err := statedir.LockName(p.SessionDir(name))
		if err != nil {
			continue // a start holds it (or the lock cannot be had): not ours to judge
		}
		// A link (credentials.Hold's) is needed only while a start holds
		// the name: left by a crashed start, it would come back to life
		// with its dead holder's PID, so it goes even under a running unit.
		fi, err := os.Lstat(filepath.Join(root, e.Name(), "env"))
		if err == nil && fi.Mode()&os.ModeSymlink != 0 || !m.unitRunning(ctx, units.UnitName(name)) {
			os.Remove(filepath.Join(root, e.Name(), "env"))
			os.Remove(filepath.Join(root, e.Name()))
		}
		lock.Release()
	}
}

// egressSuffix ends the name of an egress proxy's credential directory;
// no session name ends so (units.ValidateName).
const egressSuffix = "-egress"

// unitRunning reports whether systemd has unit up or on its way up or down;
// when systemd cannot be asked, it says yes, which keeps what it guards.
func (m *Manager) unitRunning(ctx context.Context, unit string) bool {
	switch m.unitState(ctx, unit) {
	case "active", "activating", "deactivating", "reloading", "?":
		return true
	}
	return false
}
