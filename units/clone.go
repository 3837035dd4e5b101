package units

import (
	"path/filepath"
	"strings"

	"mosaic/sandbox"
)

// Clone is a clone-mode session's own copy of the user's repository
// (mosaic start --clone): a `git clone --shared` made in the session's state
// directory and mounted at the workspace's own path, so that the agent's
// paths and messages stay the user's while the user's checkout is never
// there. The user's object store is mounted read-only inside the copy
// (ObjectsInside), which borrows from it (objects/info/alternates): the
// copy costs a checkout, not a copy of the history.
type Clone struct {
	Dir     string `json:"dir"`     // the copy, on the host: StateDir/clone
	Objects string `json:"objects"` // the user's .git/objects, resolved
	// Base is the commit the copy starts from (empty until the copy is
	// made): the user's HEAD plus the
	// working tree's uncommitted changes (tracked and untracked, not
	// ignored) as one commit on top, or the --base commit. The change the
	// agent made is Base..(what it left).
	Base string `json:"base"`
	// Parent is the user's own commit Base is on (Base itself when the
	// tree was clean, or --base): the branch `mosaic apply --branch` makes
	// starts there.
	Parent string `json:"parent"`
	// Ref is the --base the user asked for ("" for HEAD and the working tree).
	Ref string `json:"ref,omitempty"`
	// Kind is ClonePlain for a plain directory's copy (no Objects: a
	// repository of its own, whose first commit is the directory's files),
	// "" for a repository's.
	Kind string `json:"kind,omitempty"`
	// Subs are the repository's initialised submodules, each a
	// repository of its own in the copy, as the user has it.
	Subs []CloneSub `json:"subs,omitempty"`
}

// CloneSub is one submodule in a copy: its path in the repository, its
// git directory's name under the copy's .git/modules (Module, as the
// user's), the user's object store it borrows (Objects, read-only at
// SubObjectsInside) and the commit its copy starts from (Base: its HEAD
// and its uncommitted changes, as the superproject's).
type CloneSub struct {
	Path    string `json:"path"`
	Module  string `json:"module"`
	Objects string `json:"objects"`
	Base    string `json:"base"`
}

// SubObjectsInside is where a submodule's user objects are seen in a
// session whose workspace is ws.
func SubObjectsInside(ws, module string) string {
	return filepath.Join(ws, ".git", "modules", module, ObjectsMount)
}

// ClonePlain is the Kind of a copy of a plain directory, in no git
// repository.
const ClonePlain = "plain"

// CloneDirName is the copy's directory in a session's state directory.
const CloneDirName = "clone"

// ObjectsMount is where, in the copy's .git, the user's object store is
// mounted read-only; the copy's objects/info/alternates names it.
const ObjectsMount = "mosaic-base-objects"

// FinishSuffix ends the name of a clone-mode session's finish step (its own
// unit, mosaic-NAME-finish.service, and state directory): reserved, like
// "-egress", for mosaic's own units.
const FinishSuffix = "-finish"

// MaxCloneName is the longest name of a clone-mode session: its finish
// step's name adds FinishSuffix and must still be a valid name.
const MaxCloneName = 63 - len(FinishSuffix)

// ObjectsInside is where the user's objects are seen in a session whose
// workspace is ws.
func ObjectsInside(ws string) string { return filepath.Join(ws, ".git", ObjectsMount) }

// FinishName is the name of session name's finish step.
func FinishName(name string) string { return name + FinishSuffix }

// IsFinishName reports whether name is a finish step's, not a session's.
func IsFinishName(name string) bool { return strings.HasSuffix(name, FinishSuffix) }

// workspaceSource is what is mounted at the workspace's path: the
// workspace itself, or a clone-mode session's copy.
func (s Spec) workspaceSource() string {
	if s.Clone != nil {
		return s.Clone.Dir
	}
	return s.Workspace
}

// cloneBinds are the bwrap layer's binds of a clone-mode session besides
// the workspace's: the user's objects, read-only inside the copy. (In
// systemd's layer they are already at that path: cloneReadOnly.)
func (s Spec) cloneBinds() []sandbox.Bind {
	if s.Clone == nil || s.Clone.Objects == "" {
		return nil
	}
	var binds []sandbox.Bind
	for _, b := range cloneReadOnly(s) {
		src := b.Dst
		if s.Scope { // no systemd layer: bwrap binds them from where they are
			src = b.Src
		}
		binds = append(binds, sandbox.Bind{Kind: sandbox.KindRO, Src: src, Dst: b.Dst,
			Reason: "clone mode: your repository's objects, read-only, which the session's own copy borrows (its checkout and .git are never mounted)"})
	}
	return binds
}

// scopeCopy is what a clone-mode scope's bwrap binds at the workspace's
// path: its copy ("" for a service, whose systemd layer put the copy
// there, and for direct mode).
func (s Spec) scopeCopy() string {
	if s.Scope && s.Clone != nil {
		return s.Clone.Dir
	}
	return ""
}

// cloneReadOnly is systemd's layer's read-only bind of the user's objects
// into the copy.
func cloneReadOnly(s Spec) []bindEntry {
	if s.Clone == nil || s.Clone.Objects == "" {
		return nil
	}
	binds := []bindEntry{{Src: s.Clone.Objects, Dst: ObjectsInside(s.Workspace)}}
	for _, sub := range s.Clone.Subs {
		binds = append(binds, bindEntry{Src: sub.Objects, Dst: SubObjectsInside(s.Workspace, sub.Module)})
	}
	return binds
}
