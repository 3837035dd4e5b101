package manager

import (
	"context"
	"os"
	"path/filepath"

	"mosaic/manager/clone"
	"mosaic/manager/clone/patchcheck"
	"mosaic/manager/records"
	"mosaic/manager/request"
	"mosaic/manager/statedir"
	"mosaic/units"
	"mosaic/units/errcode"
)

// Current is session name's change: a new snapshot (Finish) when the
// session runs, has ended since its last snapshot or never had one; else
// the last snapshot, read again as data.
func (m *Manager) Current(ctx context.Context, name string) (Change, error) {
	p, err := request.UserPaths()
	if err != nil {
		return Change{}, err
	}
	s, err := m.Status(ctx, name)
	if err != nil {
		return Change{}, err
	}
	if s.Clone == nil {
		return Change{}, errcode.NoChange.New("session %s is not in clone mode: it wrote %s itself", name, s.Workspace)
	}
	if s.Clone.Discarded {
		return Change{}, errcode.NoChange.New("session %s's change was discarded", name)
	}
	if !s.Running() && s.Clone.Snapshot != nil && (s.Ended == nil || s.Clone.Snapshot.After(*s.Ended)) {
		return readChange(p, name, *s.Clone)
	}
	if !s.Running() && s.Clone.Applied != "" {
		return readChange(p, name, *s.Clone)
	}
	return m.Finish(ctx, name)
}

// Apply writes session name's change into its workspace: as unstaged
// changes (branch ""), or as a new branch holding the session's commits
// (clone.ApplyBranch). The session must have ended; the change is checked
// (patchcheck) before anything is written, and nothing is on a refusal.
func (m *Manager) Apply(ctx context.Context, name, branch string) (Change, error) {
	p, s, lock, err := m.lockedSession(ctx, name, "apply the change of")
	if err != nil {
		return Change{}, err
	}
	defer lock.Release()
	if s.Running() {
		return Change{}, errcode.SessionRunning.New("session %s is %s: stop it first (`mosaic stop %s`), then apply what it left; `mosaic diff %s` shows it meanwhile", name, s.State, name, name)
	}
	if s.Clone != nil && s.Clone.Applied != "" {
		return Change{}, errcode.NoChange.New("session %s's change was applied already (%s)", name, s.Clone.Applied)
	}
	if s.Clone != nil && s.Clone.Kind == units.ClonePlain && branch != "" {
		return Change{}, errcode.BadClone.New("session %s's workspace %s is a plain directory, in no repository to make a branch in: `mosaic apply %s` writes the change into it", name, s.Workspace, name)
	}
	ch, err := m.Current(ctx, name)
	if err != nil {
		return Change{}, err
	}
	if ch.Refused != nil {
		return ch, errcode.ChangeRefused.New("session %s's change is refused, nothing was changed: %v", name, ch.Refused)
	}
	scratch := filepath.Join(p.SessionDir(name), "apply")
	if branch == "" {
		err = clone.Apply(ctx, name, s.Workspace, ch.Patch, ch.Summary, p.SessionDir(name))
		ch.Clone.Applied = "worktree"
	} else {
		var bundle []byte
		if len(ch.Summary.Files) > 0 || ch.Clone.Head != ch.Clone.Parent {
			bundle, err = clone.ReadOutput(filepath.Join(ch.Dir, "bundle"), patchcheck.MaxBundleBytes)
			if err != nil {
				return ch, errcode.ChangeRefused.New("session %s's bundle cannot be read, nothing was changed: %v", name, err)
			}
		} else {
			return ch, errcode.NoChange.New("session %s made no commit and left no change: there is no branch to make", name)
		}
		err = clone.ApplyBranch(ctx, name, s.Workspace, bundle, ch.Clone.Head, ch.Clone.Base, branch, scratch)
		ch.Clone.Applied = "branch " + branch
	}
	if err != nil {
		return ch, err
	}
	if err := records.WriteClone(p.SessionDir(name), ch.Clone); err != nil {
		return ch, errcode.StateDir.New("the change of %s is applied, but not recorded as such: %v", name, err)
	}
	return ch, nil
}

// Discard throws session name's change away: its copy and its finish
// step's output go, and clone.json says so (rm then needs no --force).
func (m *Manager) Discard(ctx context.Context, name string) error {
	p, s, lock, err := m.lockedSession(ctx, name, "discard the change of")
	if err != nil {
		return err
	}
	defer lock.Release()
	if s.Clone == nil {
		return errcode.NoChange.New("session %s is not in clone mode: there is no copy to discard", name)
	}
	if s.Running() {
		return errcode.SessionRunning.New("session %s is %s: stop it first with `mosaic stop %s`", name, s.State, name)
	}
	c := *s.Clone
	c.Discarded = true
	if err := records.WriteClone(p.SessionDir(name), c); err != nil {
		return errcode.StateDir.New("cannot discard the change of %s: %v", name, err)
	}
	statedir.RemoveTree(filepath.Join(p.SessionDir(name), units.CloneDirName))
	removeFinishState(p, name)
	return nil
}

// removeFinishState removes session name's finish step's state directory.
func removeFinishState(p request.Paths, name string) {
	dir := p.SessionDir(units.FinishName(name))
	if _, err := os.Lstat(dir); err == nil {
		statedir.Remove(dir)
	}
}

// lockedSession takes session name's lock for a command that changes its
// state (what says which, for the error) and reads the session under it:
// the user's paths (never relative to the current directory: without a
// home there is no state), the session, and the lock to release.
func (m *Manager) lockedSession(ctx context.Context, name, what string) (request.Paths, Session, *statedir.Lock, error) {
	p, err := request.UserPaths()
	if err != nil {
		return p, Session{}, nil, err
	}
	lock, err := statedir.LockName(p.SessionDir(name))
	if err == statedir.ErrBusy {
		return p, Session{}, nil, busyName(name)
	}
	if err != nil {
		return p, Session{}, nil, errcode.StateDir.New("cannot %s session %s: %v", what, name, statedir.Hint(err, p.StateRoot))
	}
	s, err := m.Status(ctx, name)
	if err != nil {
		lock.Release()
		return p, Session{}, nil, err
	}
	return p, s, lock, nil
}
