package manager

import (
	"context"
	"os"
	"path/filepath"

	"mosaic/manager/clone"
	"mosaic/manager/records"
	"mosaic/manager/statedir"
	"mosaic/sandbox"
	"mosaic/units"
	"mosaic/units/errcode"
)

// makeClone makes a clone-mode session's copy once its name is claimed
// (clone.Make), pins the copy and the user's objects by identity for the
// sandbox's layers, and records where it started (clone.json). A copy an
// earlier session of the name left with a change never applied nor
// discarded is a refusal: a new copy would lose it.
func (m *Manager) makeClone(ctx context.Context, spec *units.Spec) error {
	if c, ok := records.ReadClone(spec.StateDir); ok && c.Pending() {
		if _, err := os.Lstat(spec.Clone.Dir); err == nil {
			return errcode.UnappliedChanges.New("session %s has a change that was never applied nor discarded (%s): `mosaic diff %s`, then `mosaic apply %s` or `mosaic discard %s`, before it starts again", spec.Name, c.Line(), spec.Name, spec.Name, spec.Name)
		}
	}
	removeClone(*spec)
	c, err := clone.Make(ctx, spec.Workspace, *spec.Clone)
	if err != nil {
		return err
	}
	spec.Clone = &c
	if err := cloneIDs(spec); err != nil {
		removeClone(*spec)
		return errcode.CloneFailed.New("the session's copy %s: %v", c.Dir, err)
	}
	if !testSkipBindIdentity() {
		spec.Promise.Binds = spec.BindIDs
	}
	if err := records.WriteClone(spec.StateDir, records.Clone{Base: c.Base, Parent: c.Parent, Ref: c.Ref, Kind: c.Kind}); err != nil {
		removeClone(*spec)
		return errcode.StateDir.New("cannot write the session's clone.json: %v", statedir.Hint(err, spec.StateDir))
	}
	return nil
}

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
