package manager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"mosaic/internal/errcode"
	"mosaic/internal/journald"
	"mosaic/manager/clone"
	"mosaic/manager/clone/patchcheck"
	"mosaic/manager/records"
	"mosaic/manager/request"
	"mosaic/manager/statedir"
	"mosaic/units"
)

// Current is session name's change: a new snapshot (Finish) when the
// session runs, has ended since its last snapshot or never had one; else
// the last snapshot, read again as data.
func (m *Manager) Current(ctx context.Context, name string) (Change, error) {
	p, err := m.Paths()
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
	if !s.Running() && !s.ChangeUnknown() {
		return readChange(p, name, *s.Clone)
	}
	if !s.Running() && s.Clone.Applied != "" {
		return readChange(p, name, *s.Clone)
	}
	return m.Finish(ctx, name)
}

// shownKey names ch as diff shows it (patchcheck.ShownKey).
func shownKey(ch Change) string {
	return patchcheck.ShownKey(ch.Patch, ch.Clone.PatchBytes > 0, ch.Clone.Head)
}

// Shown records that diff showed ch, session name's change, so that
// apply writes that change or none (patchcheck.CheckShown). A change
// applied or discarded meanwhile is left as it is.
func (m *Manager) Shown(name string, ch Change) error {
	p, err := m.Paths()
	if err != nil {
		return err
	}
	cl, ok := records.ReadClone(p.SessionDir(name))
	if !ok || cl.Applied != "" || cl.Discarded || cl.Head != ch.Clone.Head {
		return nil
	}
	cl.Shown = shownKey(ch)
	if err := records.WriteClone(p.SessionDir(name), *cl); err != nil {
		return errcode.StateDir.New("cannot record which change of %s diff showed: %w", name, err)
	}
	return nil
}

// applyWhat is what Apply takes the session's lock to do.
const applyWhat = "apply the change of"

// Apply writes session name's change into its workspace: as unstaged
// changes (branch ""), or as a new branch holding the session's commits
// (clone.ApplyBranch). The session must have ended; the change is checked
// (patchcheck) before anything is written, and nothing is on a refusal.
func (m *Manager) Apply(ctx context.Context, name, branch string) (Change, error) {
	p, s, lock, err := m.lockedSession(ctx, name, applyWhat)
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
	if ch.Refused != nil && !(branch != "" && ch.Clone.PatchBytes > 0) {
		return ch, errcode.ChangeRefused.New("session %s's change is refused, nothing was changed: %w", name, ch.Refused)
	}
	if err := patchcheck.CheckShown(ch.Clone.Shown, shownKey(ch)); err != nil {
		return ch, errcode.ChangeRefused.New("session %s's change is refused, nothing was changed: %w (`mosaic diff %s` shows it now; then apply)", name, err, name)
	}
	if sub := InSubmodule(ch); branch != "" && sub != "" {
		return ch, errcode.BadClone.New("session %s's change reaches into submodule %s, which a branch of %s cannot hold (it would carry the submodule's commit, not its files): `mosaic apply %s` writes the files into your checkout", name, sub, s.Workspace, name)
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
				return ch, errcode.ChangeRefused.New("session %s's bundle cannot be read, nothing was changed: %w", name, err)
			}
		} else {
			return ch, errcode.NoChange.New("session %s made no commit and left no change: there is no branch to make", name)
		}
		shown := ch.Patch
		if ch.Clone.PatchBytes > 0 {
			shown = nil
		} else if shown == nil {
			shown = []byte{}
		}
		err = clone.ApplyBranch(ctx, name, s.Workspace, bundle, ch.Clone.Head, ch.Clone.Base, branch, scratch, shown)
		ch.Clone.Applied = "branch " + branch
	}
	if err != nil {
		return ch, err
	}
	now := time.Now()
	ch.Clone.DoneBy, ch.Clone.DoneAt = journald.Caller(), &now
	if err := records.WriteClone(p.SessionDir(name), ch.Clone); err != nil {
		return ch, unrecorded(p, name, s.Workspace, err)
	}
	if branch == "" {
		// The record says applied: the copies of what it replaced go.
		_ = clone.EndJournal(p.SessionDir(name))
	}
	_ = journald.Event(journald.ChangeApplied, name, "change-applied",
		fmt.Sprintf("session %s's change (%s) was applied to %s as %s by %s", name, ch.Summary.Line(), s.Workspace, ch.Clone.Applied, journald.Caller()),
		journald.Field{Key: "MOSAIC_FILES", Value: ch.Summary.Line()}, journald.Field{Key: "MOSAIC_WORKSPACE", Value: s.Workspace},
		journald.Field{Key: "MOSAIC_APPLIED", Value: ch.Clone.Applied}, journald.Field{Key: "MOSAIC_BY", Value: journald.Caller()})
	return ch, nil
}

// unrecorded undoes an apply whose record could not be written (err), so
// that the record ("not applied") stays true: its journal puts the
// checkout ws back.
func unrecorded(p request.Paths, name, ws string, err error) error {
	journal := filepath.Join(p.SessionDir(name), clone.JournalName)
	if _, rerr := clone.Recover(journal, ws, false); rerr != nil {
		return errcode.StateDir.New("the change of %s is applied, but not recorded as such (%w), and undoing it failed: %w", name, err, rerr)
	}
	return errcode.StateDir.New("cannot record the change of %s as applied, so it was undone, nothing was changed: %w", name, err)
}

// recoverApply finishes an apply of session s (name) that was
// interrupted (killed, the machine's power): with the record saying not
// applied, the checkout is put back as it was before it from the
// apply's journal (clone.Recover) and one line to say says so (again
// says what the command does next). It runs under the session's lock.
func recoverApply(p request.Paths, name string, s Session, again string, say func(string)) error {
	journal := filepath.Join(p.SessionDir(name), clone.JournalName)
	applied := s.Clone != nil && s.Clone.Applied != ""
	back, err := clone.Recover(journal, s.Workspace, applied)
	if err != nil {
		return errcode.StateDir.New("session %s's apply was interrupted and your checkout could not be put back as it was: %w (run mosaic apply %s again to retry)", name, err, name)
	}
	if back && say != nil {
		say(fmt.Sprintf("mosaic: session %s's apply was interrupted; your checkout is as it was before it: %s", name, again))
	}
	return nil
}

// KnowChange reads the change of a session that has ended since it was
// last read (ChangeUnknown) into s.Clone, so that list and status show it
// without a diff first, however the session ended (its command exited,
// stop, --runtime-max, a crash). An error leaves s as it was.
func (m *Manager) KnowChange(ctx context.Context, s *Session) error {
	if !s.ChangeUnknown() {
		return nil
	}
	ch, err := m.Finish(ctx, s.Name)
	if err != nil {
		return err
	}
	s.Clone = &ch.Clone
	return nil
}

// Settle finishes an interrupted apply of session name (recoverApply)
// before a command that only reads the session (status, diff) shows it,
// so that no command shows a half-written checkout as the session's
// state. It does nothing when no apply journal is left, and leaves the
// journal to its owner when another mosaic holds the session's lock.
func (m *Manager) Settle(ctx context.Context, name string) error {
	if units.ValidateName(name) != nil {
		return nil
	}
	p, err := m.Paths()
	if err != nil {
		return nil
	}
	if _, err := os.Lstat(filepath.Join(p.SessionDir(name), clone.JournalName)); err != nil {
		return nil
	}
	_, _, lock, err := m.lockedSession(ctx, name, "settle the apply of")
	if err == nil {
		lock.Release()
	}
	if errors.Is(err, errcode.StateDir.Target()) {
		return err
	}
	return nil
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
	now := time.Now()
	c.Discarded, c.DoneBy, c.DoneAt = true, journald.Caller(), &now
	if err := records.WriteClone(p.SessionDir(name), c); err != nil {
		return errcode.StateDir.New("cannot discard the change of %s: %w", name, err)
	}
	statedir.RemoveTree(filepath.Join(p.SessionDir(name), units.CloneDirName))
	removeFinishState(p, name)
	_ = journald.Event(journald.ChangeDiscarded, name, "change-discarded", "session "+name+"'s change was discarded by "+journald.Caller(),
		journald.Field{Key: "MOSAIC_BY", Value: journald.Caller()})
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
	p, err := m.Paths()
	if err != nil {
		return p, Session{}, nil, err
	}
	lock, err := statedir.LockName(p.SessionDir(name))
	if err == statedir.ErrBusy {
		return p, Session{}, nil, busyName(name)
	}
	if err != nil {
		return p, Session{}, nil, errcode.StateDir.New("cannot %s session %s: %w", what, name, statedir.Hint(err, p.StateRoot))
	}
	s, err := m.Status(ctx, name)
	if err == nil && s.Clone != nil {
		again := "run mosaic apply " + name + " again"
		if what == applyWhat {
			again = "applying it again"
		}
		err = recoverApply(p, name, s, again, m.opts.Say)
	}
	if err != nil {
		lock.Release()
		return p, Session{}, nil, err
	}
	return p, s, lock, nil
}
