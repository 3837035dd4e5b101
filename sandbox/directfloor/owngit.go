package directfloor

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"mosaic/sandbox"
)

// A session's own repository. A workspace without a repository of its own
// gets an empty read-only .git placeholder (Protect), so that the
// session cannot make a repository whose config and hooks the user's git
// would run; `git init` inside then failed. Instead the placeholder is
// covered by a directory in the session's state, read-write: `git init` and
// `git commit` work inside, the repository is the session's (kept with its
// state, across its runs), and the user's git never sees it in the tree.
// When the session ends the empty placeholder is removed from the host
// (RemoveGitPlaceholder), so that nothing empty is left behind.

// OwnGitReason is the reason of the bind of a session's own repository.
const OwnGitReason = "the session's own repository (git init inside), kept in its state, never in your tree: your git does not see it"

// OwnGitDir replaces, in the workspace ws's host-exec binds, the
// placeholder of a missing .git with a read-write bind of own (a
// directory of the session's state). It changes nothing when ws has a
// repository: a .git holding anything but an empty hooks/ placeholder, or
// a .git file. ids lose the placeholders' identities (own is the
// session's, which no session can swap on the host).
func OwnGitDir(ws, own string, binds []sandbox.Bind, ids []sandbox.BindID) ([]sandbox.Bind, []sandbox.BindID, bool) {
	gitDir := filepath.Join(ws, ".git")
	if !placeholderOnly(gitDir) {
		return binds, ids, false
	}
	var out []sandbox.Bind
	for _, b := range binds {
		if !sandbox.Within(b.Dst, gitDir) {
			out = append(out, b)
		}
	}
	var outIDs []sandbox.BindID
	for _, id := range ids {
		if !sandbox.Within(id.Path, gitDir) {
			outIDs = append(outIDs, id)
		}
	}
	return append(out, sandbox.Bind{Kind: sandbox.KindRW, Src: own, Dst: gitDir, Reason: OwnGitReason}), outIDs, true
}

// placeholderOnly reports whether gitDir is a real directory that holds
// nothing, or only an empty hooks/ directory: mosaic's placeholders.
func placeholderOnly(gitDir string) bool {
	st, err := sandbox.StatNoFollow(gitDir)
	if err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return false
	}
	entries, err := os.ReadDir(gitDir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if e.Name() != "hooks" || e.Type() != os.ModeDir {
			return false
		}
		if sub, err := os.ReadDir(filepath.Join(gitDir, "hooks")); err != nil || len(sub) > 0 {
			return false
		}
	}
	return true
}

// RemoveGitPlaceholder removes the empty .git placeholder (and its empty
// hooks/) of the ended session's workspace ws. rmdir removes only an
// empty directory, and the directories are reached without following a
// symlink: nothing else is ever removed.
func RemoveGitPlaceholder(ws string) {
	root, err := unix.Open(ws, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(root)
	git, err := unix.Openat(root, ".git", unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	_ = unix.Unlinkat(git, "hooks", unix.AT_REMOVEDIR)
	unix.Close(git)
	_ = unix.Unlinkat(root, ".git", unix.AT_REMOVEDIR)
}
