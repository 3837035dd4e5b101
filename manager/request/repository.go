package request

import (
	"os"
	"path/filepath"
	"strings"

	"mosaic/internal/errcode"
	"mosaic/sandbox"
)

// repository is where a workspace's git repository is, as clone mode
// copies it: its top directory (the working tree's), its git directory
// (.git, or a linked worktree's own under the main one's worktrees/) and
// its common directory (the object store's: the main repository's .git).
// A plain directory, in no repository, has none.
type repository struct {
	top, gitDir, common string
}

// findRepository finds the repository ws is in, walking up from ws as git
// does (only the filesystem is read: no git runs here), and refuses, naming
// --direct, the kinds clone mode does not copy: a submodule's checkout,
// one that borrows objects (alternates).
func findRepository(ws string) (repository, error) {
	for d := ws; ; d = filepath.Dir(d) {
		dotGit := filepath.Join(d, ".git")
		fi, err := os.Lstat(dotGit)
		switch {
		case err == nil && fi.IsDir() && sandbox.EmptyDir(dotGit):
			// Not a repository: git goes on up past an empty .git, and
			// a direct session's floor leaves one in a plain directory
			// while it runs (sandbox/directfloor).
		case err == nil && fi.IsDir():
			return checkRepository(ws, repository{top: d, gitDir: dotGit, common: dotGit})
		case err == nil && fi.Mode().IsRegular():
			r, err := linkedWorktree(ws, d, dotGit)
			if err != nil {
				return r, err
			}
			return checkRepository(ws, r)
		case err == nil:
			return repository{}, refuseKind(ws, "%s is neither a directory nor a file", dotGit)
		case !os.IsNotExist(err):
			return repository{}, errcode.BadWorkspace.New("workspace %s: %w", ws, err)
		}
		if d == "/" || d == "." {
			return repository{}, nil
		}
	}
}

// linkedWorktree reads a .git file ("gitdir: DIR"): a linked worktree's
// (DIR has a commondir file naming the main repository's .git) is copied; a
// submodule's checkout (its git directory in the superproject's
// .git/modules) is refused: its superproject's copy has it (clone.Make).
func linkedWorktree(ws, top, dotGit string) (repository, error) {
	b, err := os.ReadFile(dotGit)
	if err != nil {
		return repository{}, errcode.BadWorkspace.New("workspace %s: %w", ws, err)
	}
	dir, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
	if !ok || dir == "" {
		return repository{}, refuseKind(ws, "%s does not name a git directory", dotGit)
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(top, dir)
	}
	c, err := os.ReadFile(filepath.Join(dir, "commondir"))
	if err != nil {
		return repository{}, refuseKind(ws, "%s is a submodule's checkout (its git directory %s is another repository's: give its superproject as the workspace, whose copy has it)", top, dir)
	}
	common := strings.TrimSpace(string(c))
	if !filepath.IsAbs(common) {
		common = filepath.Join(dir, common)
	}
	return repository{top: top, gitDir: filepath.Clean(dir), common: filepath.Clean(common)}, nil
}

// checkRepository refuses a repository whose copy would lack something:
// objects borrowed from another store (objects/info/alternates), which the
// session could not reach. Its submodules are copied too, or refused, by
// clone.Make, which runs git in it to find them.
func checkRepository(ws string, r repository) (repository, error) {
	objects := filepath.Join(r.common, "objects")
	if fi, err := os.Stat(objects); err != nil || !fi.IsDir() {
		return r, refuseKind(ws, "%s is not a git object directory", objects)
	}
	if b, err := os.ReadFile(filepath.Join(objects, "info", "alternates")); err == nil && strings.TrimSpace(string(b)) != "" {
		return r, refuseKind(ws, "repository %s borrows objects from another (objects/info/alternates), which the session's copy could not reach", r.top)
	}
	return r, nil
}

// refuseKind is the one line of a workspace clone mode cannot copy: it
// names --direct.
func refuseKind(ws, format string, a ...any) error {
	return errcode.BadWorkspace.New("clone mode, the default, cannot copy workspace %s: "+format+"; use --direct to let the session write it in place", append([]any{ws}, a...)...)
}
