package request

import (
	"os"

	"mosaic/credentials"
	"path/filepath"
	"strings"

	"mosaic/units"
	"mosaic/units/errcode"
)

// The workspace's modes (Request.Mode, a profile's Workspace=, mosaic.conf's
// workspace =).
const (
	ModeDirect = "direct" // the session writes the workspace itself
	ModeClone  = "clone"  // the session writes its own copy (units.Clone)
)

// cloneMode decides whether a session is in clone mode: --base, the
// request's mode, the profile's, the user's mosaic.conf, else not.
func cloneMode(req Request, profile credentials.Profile, p Paths) (bool, error) {
	if req.Base != "" {
		if req.Mode == ModeDirect {
			return false, errcode.BadClone.New("--base is for clone mode: drop --clone=false or --base")
		}
		return true, nil
	}
	mode := req.Mode
	if mode == "" {
		mode = profile.Workspace
	}
	if mode == "" {
		cfg, err := ReadConfig(p)
		if err != nil {
			return false, err
		}
		mode = cfg.Workspace
	}
	switch mode {
	case "", ModeDirect:
		return false, nil
	case ModeClone:
		return true, nil
	}
	return false, errcode.BadClone.New("workspace mode %q: use clone or direct", mode)
}

// cloneOf checks that a clone-mode request can have its copy
// (units.Clone): a repository's top directory with a .git directory of its
// own, an object store that borrows from no other (the copy could not
// reach it), a service with bwrap (a scope's or --sandbox landlock's
// session would be given the workspace itself), a name that leaves room for
// its finish step's. Only the filesystem is read: the copy is made once the
// name is claimed (manager/clone).
func cloneOf(req Request, spec units.Spec) (*units.Clone, error) {
	fail := func(format string, a ...any) (*units.Clone, error) {
		return nil, errcode.BadClone.New(format, a...)
	}
	switch {
	case req.Scope:
		return fail("--clone is for a service, not --scope: drop one of them")
	case spec.Landlock():
		return fail("--clone needs bwrap's layer, not --sandbox landlock: drop one of them")
	case spec.NameGiven && len(spec.Name) > units.MaxCloneName:
		return fail("session name %q is too long for --clone: at most %d characters (its finish step is %s)", spec.Name, units.MaxCloneName, units.FinishName(spec.Name))
	case strings.HasPrefix(req.Base, "-") || strings.ContainsAny(req.Base, "\x00\n"):
		return fail("--base %q is not a commit: give a branch, tag or commit id", req.Base)
	}
	ws := spec.Workspace
	gitDir := filepath.Join(ws, ".git")
	fi, err := os.Lstat(gitDir)
	switch {
	case os.IsNotExist(err):
		return fail("workspace %s is not the top directory of a git repository, which --clone copies: run it in the repository's top directory (or `git init` one), or drop --clone", ws)
	case err != nil:
		return fail("workspace %s: %v", ws, err)
	case !fi.IsDir():
		return fail("workspace %s has a .git file (a linked worktree or a submodule's checkout), not a repository of its own: use --clone in the main checkout, or drop --clone", ws)
	}
	objects := filepath.Join(gitDir, "objects")
	if fi, err := os.Lstat(objects); err != nil || !fi.IsDir() {
		return fail("%s is not a git object directory: is %s a git repository?", objects, ws)
	}
	if b, err := os.ReadFile(filepath.Join(objects, "info", "alternates")); err == nil && strings.TrimSpace(string(b)) != "" {
		return fail("repository %s borrows objects from another (objects/info/alternates), which its session's copy could not reach: use --clone in the repository it borrows from, or drop --clone", ws)
	}
	return &units.Clone{Dir: filepath.Join(spec.StateDir, units.CloneDirName), Objects: objects, Ref: req.Base}, nil
}
