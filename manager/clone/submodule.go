package clone

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"mosaic/internal/errcode"
	"mosaic/units"
)

// refuseKind is the one line of a workspace clone mode cannot copy,
// naming --direct (request's own, for what only git in the user's
// checkout finds out).
func refuseKind(ws, format string, a ...any) error {
	return errcode.BadWorkspace.New("clone mode, the default, cannot copy workspace %s: "+format+"; use --direct to let the session write it in place", append([]any{ws}, a...)...)
}

// makeSubs makes, in the copy c.Dir (checked out at c.Base), the copy of
// each submodule the user initialised (makeSub): the gitlinks of the
// base's tree whose directory in ws has a .git. A
// submodule not initialised stays the empty directory git checked out, as
// it is for the user. A repository without .gitmodules has none.
func makeSubs(ctx context.Context, ws string, c units.Clone) ([]units.CloneSub, error) {
	if _, err := os.Lstat(filepath.Join(ws, ".gitmodules")); err != nil {
		return nil, nil
	}
	out, err := git(ctx, c.Dir, nil, "ls-tree", "-r", "-z", "--full-tree", c.Base)
	if err != nil {
		return nil, err
	}
	var subs []units.CloneSub
	for _, e := range rawEntries(out, false) {
		if e.mode != "160000" {
			continue
		}
		sub, ok, err := makeSub(ctx, ws, c, e.path, e.id)
		if err != nil {
			return nil, err
		}
		if ok {
			subs = append(subs, sub)
		}
	}
	return subs, nil
}

// makeSub makes the copy of the submodule at path p (gitlink its commit
// in the base) when the user initialised it: a `git clone --shared` of
// it whose git directory is the copy's .git/modules/NAME (the user's
// name, found from its git directory under the user's .git/modules),
// borrowing the user's objects (mounted read-only at
// units.SubObjectsInside), checked out at its HEAD plus its uncommitted
// changes as the superproject's is (snapshot), on its branch or detached
// as the user's is. With --base, at the base's gitlink. What it cannot
// copy safely is refused naming --direct: a path git would quote, a git
// directory outside .git/modules or a worktree's, objects borrowed from
// elsewhere, a submodule without a commit, or one with submodules of its
// own.
func makeSub(ctx context.Context, ws string, c units.Clone, p, gitlink string) (units.CloneSub, bool, error) {
	if strings.ContainsAny(p, "\":\\") || strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return units.CloneSub{}, false, refuseKind(ws, "submodule %q has a path with a quote, a colon, a backslash or a control character", p)
	}
	user := filepath.Join(ws, filepath.FromSlash(p))
	for d := user; d != ws && d != filepath.Dir(d); d = filepath.Dir(d) {
		fi, err := os.Lstat(d)
		if err != nil || !fi.IsDir() {
			return units.CloneSub{}, false, nil // not there as a directory: nothing of the user's to copy
		}
	}
	if _, err := os.Lstat(filepath.Join(user, ".git")); err != nil {
		return units.CloneSub{}, false, nil // not initialised
	}
	gitDir, err := git(ctx, user, nil, "rev-parse", "--absolute-git-dir")
	if err != nil {
		return units.CloneSub{}, false, err
	}
	modules, err := filepath.EvalSymlinks(filepath.Dir(c.Objects))
	if err != nil {
		return units.CloneSub{}, false, err
	}
	module, err := filepath.Rel(filepath.Join(modules, "modules"), gitDir)
	if err != nil || !filepath.IsLocal(module) || module == "." {
		return units.CloneSub{}, false, refuseKind(ws, "submodule %s's git directory %s is not in %s/modules (`git submodule absorbgitdirs` moves it there)", p, gitDir, modules)
	}
	objects := filepath.Join(gitDir, "objects")
	if _, err := os.Lstat(filepath.Join(gitDir, "commondir")); err == nil {
		return units.CloneSub{}, false, refuseKind(ws, "submodule %s is a linked worktree", p)
	}
	if b, err := os.ReadFile(filepath.Join(objects, "info", "alternates")); err == nil && strings.TrimSpace(string(b)) != "" {
		return units.CloneSub{}, false, refuseKind(ws, "submodule %s borrows objects from another repository (objects/info/alternates), which the session's copy could not reach", p)
	}
	if _, err := os.Lstat(filepath.Join(user, ".gitmodules")); err == nil {
		return units.CloneSub{}, false, refuseKind(ws, "submodule %s has submodules of its own (nested submodules are not copied)", p)
	}
	sub := units.CloneSub{Path: p, Module: filepath.ToSlash(module), Objects: objects, Base: gitlink}
	index, head := "", gitlink
	if c.Ref == "" {
		if index, head = headOf(ctx, user, "HEAD"); head == "" {
			return sub, false, refuseKind(ws, "submodule %s has no commit", p)
		}
	}
	copyDir, modDir := filepath.Join(c.Dir, filepath.FromSlash(p)), filepath.Join(c.Dir, ".git", "modules", module)
	if err := os.MkdirAll(filepath.Dir(modDir), 0o700); err != nil {
		return sub, false, err
	}
	if _, err := git(ctx, user, nil, "clone", "-q", "--shared", "--no-checkout", "--separate-git-dir="+modDir, ".", copyDir); err != nil {
		return sub, false, err
	}
	if c.Ref == "" {
		snapIndex := filepath.Join(modDir, "mosaic-snapshot-index")
		defer os.Remove(snapIndex)
		if sub.Base, err = snapshot(ctx, user, modDir, snapIndex, index, head, objects); err != nil {
			return sub, false, err
		}
	}
	branch, _ := git(ctx, user, nil, "symbolic-ref", "-q", "--short", "HEAD")
	checkout := []string{"-c", parallelCheckout, "checkout", "-q", "--no-recurse-submodules", "--no-track", "-B", branch, sub.Base}
	if c.Ref != "" || branch == "" {
		checkout = []string{"-c", parallelCheckout, "checkout", "-q", "--no-recurse-submodules", "--detach", sub.Base}
	}
	if _, err := git(ctx, copyDir, nil, checkout...); err != nil {
		return sub, false, err
	}
	return sub, true, linkSub(copyDir, modDir)
}

// linkSub makes a submodule's copy name its git directory as git's own
// submodules do, by relative paths (the copy is mounted elsewhere in the
// session): its .git file, and core.worktree (the paths have no quote nor
// backslash: makeSub); gc.auto 0 as in the superproject's copy; and the
// directory its user's objects are mounted on.
func linkSub(copyDir, modDir string) error {
	toGit, err := filepath.Rel(copyDir, modDir)
	if err != nil {
		return err
	}
	toWork, err := filepath.Rel(modDir, copyDir)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(copyDir, ".git"), []byte("gitdir: "+toGit+"\n"), 0o644); err != nil {
		return err
	}
	if err := appendFile(filepath.Join(modDir, "config"), "[core]\n\tworktree = \""+toWork+"\"\n[gc]\n\tauto = 0\n"); err != nil {
		return err
	}
	if err := os.Mkdir(filepath.Join(modDir, units.ObjectsMount), 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return nil
}

// NameObjects writes the alternates of the copy c (made by Make) and of
// its submodules' copies: the user's objects where a session whose
// workspace is ws sees them.
func NameObjects(c units.Clone, ws string) error {
	if c.Objects == "" {
		return nil
	}
	alt := filepath.Join(c.Dir, ".git", "objects", "info", "alternates")
	if err := os.WriteFile(alt, []byte(units.ObjectsInside(ws)+"\n"), 0o600); err != nil {
		return err
	}
	for _, s := range c.Subs {
		alt := filepath.Join(c.Dir, ".git", "modules", filepath.FromSlash(s.Module), "objects", "info", "alternates")
		if err := os.WriteFile(alt, []byte(units.SubObjectsInside(ws, s.Module)+"\n"), 0o600); err != nil {
			return err
		}
	}
	return nil
}
