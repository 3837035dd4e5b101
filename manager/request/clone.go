package request

import (
	"path/filepath"
	"strings"

	"mosaic/credentials"
	"mosaic/internal/errcode"
	"mosaic/sandbox"
	"mosaic/units"
)

// The workspace's modes (Request.Mode, a profile's Workspace=, mosaic.conf's
// workspace =).
const (
	ModeDirect = "direct" // the session writes the workspace itself
	ModeClone  = "clone"  // the session writes its own copy (units.Clone)
)

// cloneMode decides whether a session is in clone mode: --base, the
// request's mode, the profile's, the user's mosaic.conf, else clone (the
// default). mosaic's own sessions (the doctor's probe) are direct: they
// write nothing of the user's.
func cloneMode(req Request, profile credentials.Profile, p Paths) (bool, error) {
	if req.Base != "" {
		if req.Mode == ModeDirect {
			return false, errcode.BadClone.New("--base is for clone mode: drop --direct or --base")
		}
		return true, nil
	}
	if req.Own && req.Mode == "" {
		return false, nil
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
	case ModeDirect:
		return false, nil
	case "", ModeClone:
		return true, nil
	}
	return false, errcode.BadClone.New("workspace mode %q: use clone or direct", mode)
}

// DirectWarning is the one line mosaic says on stderr, and status shows,
// of a session in direct mode.
const DirectWarning = "direct mode: the session writes your checkout in place; your host's tools will run what it writes (use clone mode, the default, to review with mosaic diff)"

// cloneOf checks that a clone-mode request can have its copy
// (units.Clone) and finds the workspace's kind (repository, below): a
// service or a scope of bwrap's or Landlock's, a name that leaves room for
// its finish step's, a workspace it can copy. Only the filesystem is read:
// the copy is made once the name is claimed (manager/clone).
func cloneOf(req Request, spec *units.Spec, p Paths) (*units.Clone, error) {
	fail := func(format string, a ...any) (*units.Clone, error) {
		return nil, errcode.BadClone.New(format, a...)
	}
	switch {
	case spec.NameGiven && len(spec.Name) > units.MaxCloneName:
		return fail("session name %q is too long for clone mode: at most %d characters (its finish step is %s), or --direct", spec.Name, units.MaxCloneName, units.FinishName(spec.Name))
	case strings.HasPrefix(req.Base, "-") || strings.ContainsAny(req.Base, "\x00\n"):
		return fail("--base %q is not a commit: give a branch, tag or commit id", req.Base)
	}
	repo, err := findRepository(spec.Workspace)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(spec.StateDir, units.CloneDirName)
	if repo.top == "" { // a plain directory: a private snapshot of it
		if req.Base != "" {
			return fail("--base needs a git repository, and %s is in none: drop --base", spec.Workspace)
		}
		return &units.Clone{Dir: dir, Kind: units.ClonePlain}, nil
	}
	if repo.top != spec.Workspace {
		if err := belowRepository(spec, repo.top, p); err != nil {
			return nil, err
		}
	}
	return &units.Clone{Dir: dir, Objects: filepath.Join(repo.common, "objects"), Ref: req.Base}, nil
}

// belowRepository makes a workspace below its repository's top directory
// the session's working directory, and the top its workspace: the copy is
// of the whole repository. The top must pass the workspace's own checks
// (a repository at the home's top is refused, naming --direct).
func belowRepository(spec *units.Spec, top string, p Paths) error {
	deny, err := DenyList(p)
	if err != nil {
		return err
	}
	c, err := checkWorkspace(top, deny)
	if err != nil {
		return errcode.BadWorkspace.New("workspace %s is in the repository %s, whose copy clone mode would make and which a session must not see (%w): use --direct, or a workspace in another repository", spec.Workspace, top, err)
	}
	ids := []sandbox.BindID{{Path: top, ID: c.id}} // the copy is made of it (manager's pinWorkspace)
	for _, b := range spec.BindIDs {
		if b.Path != spec.Workspace {
			ids = append(ids, b)
		}
	}
	spec.BindIDs, spec.WorkDir, spec.Workspace = ids, spec.Workspace, top
	return nil
}

// bindsBesideCopy refuses, in clone mode, a --ro or --rw path (or a
// profile's ReadOnly=) at or below the repository's top, which would be
// bound over the copy there: the session would see your checkout instead
// of its copy, and with --rw write it and its .git (whose config names
// what git runs on the host, at the next start of a session too). It
// refuses too a --rw path that holds the top (the session could move your
// repository away and put one of its own at its path) or is, or holds,
// your git directory (a linked worktree's is elsewhere). Bad input: it is
// wrong whatever the host holds.
func bindsBesideCopy(spec units.Spec, asked Asked) error {
	top := spec.Workspace
	gitDir := ""
	if spec.Clone.Objects != "" {
		gitDir = filepath.Dir(spec.Clone.Objects)
	}
	refuse := func(flag, p, what string) error {
		return errcode.BadBind.New("%s %s %s, which clone mode keeps from the session (it works on a copy of %s): drop it, or use --direct", flag, p, what, top)
	}
	for _, p := range asked.RO {
		if sandbox.Within(p, top) {
			return refuse("--ro", p, "is in your checkout")
		}
	}
	for _, p := range asked.RW {
		switch {
		case sandbox.Within(p, top):
			return refuse("--rw", p, "is in your checkout")
		case sandbox.Within(top, p):
			return refuse("--rw", p, "holds your checkout")
		case gitDir != "" && (sandbox.Within(p, gitDir) || sandbox.Within(gitDir, p)):
			return refuse("--rw", p, "is or holds your repository's git directory "+gitDir)
		}
	}
	return nil
}
