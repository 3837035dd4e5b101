package clone

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"mosaic/internal/errcode"
	"mosaic/sandbox"
	"mosaic/units"
)

// The bounds of a plain directory's copy (clone mode's private snapshot of
// a workspace in no repository): beyond them the workspace is refused,
// naming --direct. A repository's copy borrows its history; a plain
// directory's stores every file once more.
const (
	MaxPlainFiles = 100_000
	MaxPlainBytes = 2 << 30
)

// PinnedPrefix begins the name of a workspace pinned by a descriptor
// (Pinned): mosaic checked its identity, and git is started in it (never
// given its path, which a session could change meanwhile).
const PinnedPrefix = "/proc/self/fd/"

// Pinned is the name, in mosaic and in the git it starts (which starts in
// it), of directory descriptor fd.
func Pinned(fd int) string { return PinnedPrefix + strconv.Itoa(fd) }

// makePlain makes the copy of a plain directory, in no repository: a
// repository of mosaic's own in c.Dir whose one commit (authored by
// mosaic, "the files of DIR at the session's start") holds the
// directory's files as git add -A sees them (not what a .gitignore in it
// ignores), checked out. The change is then what the session did to those
// files, read and applied back as a repository's is (git apply works
// outside a repository). A special file (a FIFO, a device, a socket), a
// repository nested in the directory, or more than MaxPlainFiles files or
// MaxPlainBytes bytes is refused, naming --direct.
func makePlain(ctx context.Context, ws string, c units.Clone) (units.Clone, error) {
	if err := checkPlain(ws); err != nil {
		return c, err
	}
	fail := func(err error) (units.Clone, error) {
		os.RemoveAll(c.Dir)
		return c, errcode.CloneFailed.New("cannot make the session's copy of %s: %w", ws, err)
	}
	if _, err := git(ctx, filepath.Dir(c.Dir), nil, "init", "-q", "--template=", "-b", "main", c.Dir); err != nil {
		return fail(err)
	}
	gitDir := filepath.Join(c.Dir, ".git")
	index := filepath.Join(gitDir, "mosaic-snapshot-index")
	defer os.Remove(index)
	env := []string{"GIT_DIR=" + gitDir, "GIT_WORK_TREE=.", "GIT_INDEX_FILE=" + index}
	if _, err := git(ctx, ws, env, "add", "-A"); err != nil {
		return fail(err)
	}
	tree, err := git(ctx, ws, env, "write-tree")
	if err != nil {
		return fail(err)
	}
	base, err := git(ctx, ws, append(env, identity...), "commit-tree", tree, "-m", "mosaic: the files of the directory at the session's start")
	if err != nil {
		return fail(err)
	}
	c.Base, c.Parent = base, base
	if _, err := git(ctx, c.Dir, nil, "-c", parallelCheckout, "checkout", "-q", "-B", "main", base); err != nil {
		return fail(err)
	}
	if _, err := git(ctx, c.Dir, nil, "config", "gc.auto", "0"); err != nil {
		return fail(err)
	}
	return c, nil
}

// checkPlain walks a plain directory before its copy: it refuses what the
// copy could not hold (special files, nested repositories) and a directory
// over the bounds.
func checkPlain(ws string) error {
	refuse := func(format string, a ...any) error {
		return errcode.BadWorkspace.New("clone mode, the default, cannot copy workspace %s: "+format+"; use --direct to let the session write it in place", append([]any{ws}, a...)...)
	}
	files, bytes := 0, int64(0)
	root := ws + "/" // a Pinned workspace is a link to follow
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		t := d.Type()
		switch {
		case d.IsDir():
			if p != root && d.Name() == ".git" {
				if sandbox.EmptyDir(p) {
					return fs.SkipDir // no repository, as for git: a direct session's placeholder
				}
				return refuse("%s is a repository nested in it, which its copy would not hold", filepath.Dir(p))
			}
			return nil
		case t&fs.ModeSymlink != 0:
		case !t.IsRegular():
			if d.Name() == ".git" {
				return refuse("%s is a repository nested in it, which its copy would not hold", filepath.Dir(p))
			}
			return refuse("%s is a special file (%s), which a copy cannot hold", p, t.Type())
		default:
			if d.Name() == ".git" {
				return refuse("%s is a repository nested in it, which its copy would not hold", filepath.Dir(p))
			}
			if fi, err := d.Info(); err == nil {
				bytes += fi.Size()
			}
		}
		files++
		if files > MaxPlainFiles || bytes > MaxPlainBytes {
			return refuse("it holds more than %d files or %d bytes, the bounds of a plain directory's copy", MaxPlainFiles, MaxPlainBytes)
		}
		return nil
	})
	var e *errcode.Error
	if err != nil && !errors.As(err, &e) {
		return errcode.BadWorkspace.New("clone mode cannot read workspace %s: %w; use --direct to let the session write it in place", ws, err)
	}
	return err
}
