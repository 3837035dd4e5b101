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

// claimed is a plan whose name a start holds, its state directory made.
type claimed struct {
	// spec is the plan as claimed: the one given, or a renamed copy of it
	// (renamed) when mosaic made its name up and another had it.
	spec units.Spec
	// launch is the one given, with the file of the init's arguments in
	// the state directory (a service's).
	launch units.Launch
	rec    records.Record // the session's record as written
	// release lets the name go; undo removes what the claim made, for a
	// start that fails: call undo before release.
	release, undo func()
}

// claim takes the session's name and prepares its state directory; free
// says whether systemd has the name free (claimName; a scope run that
// made its name up need not ask). A name mosaic made up is taken only if
// no state directory has it yet: on a clash the claim goes on with a copy
// of the plan under another name (renamed), so a session never reuses
// another's home; the plan given is never changed. The name is not settled
// when the plan is made: only the lock taken here keeps it, and a plan
// (the bench's, the bus's) may wait between being made and started.
func claim(ctx context.Context, spec units.Spec, launch units.Launch, free func(context.Context, units.Spec) error) (c claimed, err error) {
	launch.InitArgsFile = initArgsFile(spec)
	if err := units.UnitFileSafe(spec, launch); err != nil {
		return c, err
	}
	for try := 0; ; try++ {
		lock, err := statedir.LockName(spec.StateDir)
		if err == statedir.ErrBusy {
			if !spec.NameGiven && try < 5 {
				spec = renamed(spec)
				launch.InitArgsFile = initArgsFile(spec)
				continue
			}
			return c, busyName(spec.Name)
		}
		if err != nil {
			return c, errcode.StateDir.New("cannot claim the name %s: %w", spec.Name, statedir.Hint(err, filepath.Dir(statedir.LockPath(spec.StateDir))))
		}
		testhook.Pause("claimed")
		if err := free(ctx, spec); err != nil {
			lock.Release()
			return c, err
		}
		rec, undo, err := statedir.Prepare(spec, launch)
		if err == statedir.ErrNameTaken && try < 5 {
			lock.Release()
			spec = renamed(spec)
			launch.InitArgsFile = initArgsFile(spec)
			continue
		}
		if err != nil {
			lock.Release()
			return c, err
		}
		return claimed{spec: spec, launch: launch, rec: rec, release: lock.Release, undo: undo}, nil
	}
}

// initArgsFile is where a service's init's arguments are written
// (Launch.InitArgsFile); a scope's init gets them from mosaic directly
// (units.ScopeBwrap).
func initArgsFile(spec units.Spec) string {
	if spec.Scope {
		return ""
	}
	return filepath.Join(spec.StateDir, statedir.InitArgsName)
}

// renamed is a copy of a plan whose name mosaic made up under another
// one, with every path that holds the name, and the scope its promise
// names.
func renamed(spec units.Spec) units.Spec {
	name := units.GenerateName(spec.Command)
	spec.Name = name
	spec.StateDir = filepath.Join(filepath.Dir(spec.StateDir), name)
	if spec.Clone != nil {
		c := *spec.Clone
		c.Dir = filepath.Join(spec.StateDir, units.CloneDirName)
		spec.Clone = &c
	}
	if spec.EgressDir != "" {
		spec.EgressDir = filepath.Join(filepath.Dir(spec.EgressDir), name)
	}
	if spec.Promise.Scope != "" {
		spec.Promise.Scope = scopeCgroup(spec)
	}
	return spec
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
