package manager

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"mosaic/internal/errcode"
	"mosaic/manager/clone"
	"mosaic/manager/records"
	"mosaic/manager/statedir"
	"mosaic/sandbox"
	"mosaic/units"
)

// makeClone makes a clone-mode session's copy once its name is claimed
// (clone.Make), pins the copy and the user's objects by identity for the
// sandbox's layers, and records where it started (clone.json). A copy an
// earlier session of the name left with a change never applied nor
// discarded is a refusal: a new copy would lose it. It returns a copy of
// the plan with the copy's facts (its commits, its identities in the
// promise): known only once it is made, after the name is claimed.
func makeClone(ctx context.Context, spec units.Spec) (units.Spec, error) {
	if c, ok := records.ReadClone(spec.StateDir); ok && c.Pending() {
		if _, err := os.Lstat(spec.Clone.Dir); err == nil {
			return spec, errcode.UnappliedChanges.New("session %s has a change that was never applied nor discarded (%s): `mosaic diff %s`, then `mosaic apply %s` or `mosaic discard %s`, before it starts again", spec.Name, c.Line(), spec.Name, spec.Name, spec.Name)
		}
	}
	removeClone(spec)
	ws, id, err := pinWorkspace(spec)
	if err != nil {
		return spec, err
	}
	root := stateRoot(spec)
	spare := spec.Clone.Kind != units.ClonePlain && clone.TakeSpare(root, spec.Workspace, id, spec.Clone.Objects, spec.Clone.Dir)
	c, err := clone.Make(ctx, clone.Pinned(int(ws.Fd())), *spec.Clone, spare)
	if err != nil && spare && !errors.Is(err, clone.ErrInterrupted) {
		// A spare that cannot be brought to the base (its commit's objects
		// gone: a repository made anew at the same path, on a reused
		// inode) is thrown away (Make removed it): a copy made afresh.
		statedir.RemoveTree(spec.Clone.Dir)
		c, err = clone.Make(ctx, clone.Pinned(int(ws.Fd())), *spec.Clone, false)
	}
	ws.Close()
	if errors.Is(err, clone.ErrInterrupted) { // a Ctrl-C in the terminal reached git: the start is given up, not retried
		return spec, interruptedBeforeRun(spec.Name)
	}
	if err != nil {
		if e := errcode.Of(err); e.Code != errcode.Unexpected.Name {
			e.Message = strings.ReplaceAll(e.Message, clone.Pinned(int(ws.Fd())), spec.Workspace)
		}
		return spec, err
	}
	spec.Clone = &c
	// Make named the user's objects by the pinned path: the session's is the workspace's.
	if err := clone.NameObjects(c, spec.Workspace); err != nil {
		removeClone(spec)
		return spec, errcode.CloneFailed.New("the session's copy %s: %w", c.Dir, err)
	}
	if err := workDirIn(spec); err != nil {
		removeClone(spec)
		return spec, err
	}
	if err := cloneIDs(&spec); err != nil {
		removeClone(spec)
		return spec, errcode.CloneFailed.New("the session's copy %s: %w", c.Dir, err)
	}
	if !testSkipBindIdentity() {
		spec.Promise.Binds = spec.BindIDs
	}
	if err := records.WriteClone(spec.StateDir, records.Clone{Base: c.Base, Parent: c.Parent, Ref: c.Ref, Kind: c.Kind, Subs: submodules(c.Subs)}); err != nil {
		removeClone(spec)
		return spec, errcode.StateDir.New("cannot write the session's clone.json: %w", statedir.Hint(err, spec.StateDir))
	}
	return spec, nil
}

// workDirIn makes, in the copy, the directory the session starts in when
// the copy has none (git keeps no empty directory, nor an ignored one): a
// symlink on its way in the copy is refused.
func workDirIn(spec units.Spec) error {
	if spec.WorkDir == "" {
		return nil
	}
	rel, err := filepath.Rel(spec.Workspace, spec.WorkDir)
	if err != nil || !filepath.IsLocal(rel) {
		return errcode.BadWorkspace.New("workspace %s is not below its repository %s", spec.WorkDir, spec.Workspace)
	}
	d := spec.Clone.Dir
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		d = filepath.Join(d, part)
		fi, err := os.Lstat(d)
		switch {
		case os.IsNotExist(err):
			if err := os.Mkdir(d, 0o755); err != nil {
				return errcode.CloneFailed.New("the session's copy: %w", err)
			}
		case err != nil:
			return errcode.CloneFailed.New("the session's copy: %w", err)
		case !fi.IsDir():
			return errcode.BadWorkspace.New("workspace %s is, in its repository's commit, not a directory (a symlink?): use --direct, or the repository's top", spec.WorkDir)
		}
	}
	return nil
}

// pinWorkspace opens the workspace the copy is made of, and checks it is
// the directory mosaic checked (its identity in spec.BindIDs): a session
// that can rename a directory on its path (the workspace is in its own)
// could otherwise have the copy made of another, a symlink to the user's
// home, say. git is then started in the descriptor (clone.Pinned), never
// given the path.
// It returns the directory's identity (sandbox.StatID) too.
func pinWorkspace(spec units.Spec) (*os.File, string, error) {
	f, err := os.OpenFile(spec.Workspace, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, "", errcode.BadWorkspace.New("workspace %s: %w", spec.Workspace, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, "", errcode.BadWorkspace.New("workspace %s: %w", spec.Workspace, err)
	}
	id := sandbox.StatID(st)
	for _, b := range spec.BindIDs {
		if b.Path == spec.Workspace && b.ID != id && !testSkipBindIdentity() {
			f.Close()
			return nil, "", errcode.BadWorkspace.New("workspace %s is another directory (%s) than mosaic checked (%s): was it replaced, e.g. by a symlink, after mosaic checked it? Nothing was copied", spec.Workspace, id, b.ID)
		}
	}
	return f, id, nil
}

// stateRoot is the state root a session's state directory is in
// (STATE_ROOT/sessions/NAME).
func stateRoot(spec units.Spec) string { return filepath.Dir(filepath.Dir(spec.StateDir)) }

// cloneIDs makes the workspace's identity the copy's (mounted at its path)
// and adds the user's objects', as mounted inside the copy.
func cloneIDs(spec *units.Spec) error {
	var ids []sandbox.BindID
	for _, b := range spec.BindIDs {
		if b.Path != spec.Workspace {
			ids = append(ids, b)
		}
	}
	binds := [][2]string{{spec.Workspace, spec.Clone.Dir}}
	if spec.Clone.Objects != "" { // a plain directory's copy borrows nothing
		binds = append(binds, [2]string{units.ObjectsInside(spec.Workspace), spec.Clone.Objects})
	}
	for _, s := range spec.Clone.Subs {
		binds = append(binds, [2]string{units.SubObjectsInside(spec.Workspace, s.Module), s.Objects})
	}
	for _, b := range binds {
		st, err := sandbox.StatNoFollow(b[1])
		if err != nil {
			return err
		}
		ids = append(ids, sandbox.BindID{Path: b[0], ID: sandbox.StatID(st)})
	}
	spec.BindIDs = ids
	return nil
}

// removeClone removes a copy and its clone.json.
func removeClone(spec units.Spec) {
	if spec.Clone == nil {
		return
	}
	statedir.RemoveTree(spec.Clone.Dir)
	os.Remove(filepath.Join(spec.StateDir, records.CloneFile))
}

// submodules are a copy's submodules as its record keeps them, and
// cloneSubs the same read back (the finish step's spec).
func submodules(subs []units.CloneSub) []records.Submodule {
	var out []records.Submodule
	for _, s := range subs {
		out = append(out, records.Submodule(s))
	}
	return out
}

func cloneSubs(subs []records.Submodule) []units.CloneSub {
	var out []units.CloneSub
	for _, s := range subs {
		out = append(out, units.CloneSub(s))
	}
	return out
}
