package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A session's kept home is mounted at the user's own home path, so an
// absolute symlink a session leaves there (.claude -> /home/u/.claude)
// means its own file inside, but the user's real one on the host: a user
// who writes an agent's configuration into the kept home from the host (as
// `mosaic home` suggests) writes through it into the real home. Reading a
// link's text is not enough to tell: .x -> /proc/self/root/home/u/.x is a
// magic link the kernel follows to the real home, and .y -> a/b/c/d stays
// inside until d, deeper, climbs out. So each symlink is resolved by the
// kernel on the host, as a write through it would be, confined beneath the
// kept home (openat2 RESOLVE_BENEATH, no magic links): one whose
// resolution leaves it, or crosses a magic link, is named.

// HomeLinksBudget is how many entries HomeLinks looks at, at most: a
// session can fill its home with entries to make mosaic home crawl.
const HomeLinksBudget = 100000

// homeLinksBudget is HomeLinksBudget, smaller in a test.
var homeLinksBudget = HomeLinksBudget

// LookHome lists the symlinks of a kept home (hostHome), at every depth,
// that lead out of it on the host: each "PATH -> TARGET"; and the git
// repositories in it (gitDirs). Only
// HomeLinksBudget entries are looked at, and only directories whose path
// the kernel can name (PATH_MAX): complete says whether every entry was
// (a directory it cannot read, or one deeper, makes it false). Nothing is
// opened but as O_PATH or a directory: a FIFO never blocks the look, and a
// symlink loop is named (the kernel's ELOOP). A session that runs
// meanwhile can change them after the look.
//
// Hard links need no look: a session cannot make one to a file outside
// its home, since link(2) works only within one mount, and its home is a
// mount of its own (its workspace and every host path it sees are others:
// EXDEV, TestHomeHardLinkOut).
func LookHome(hostHome string) (links, repos []string, complete bool) {
	root, err := unix.Open(hostHome, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, true
	}
	defer unix.Close(root)
	left := homeLinksBudget
	complete = true
	unread := false
	queue := []string{"."}
	for len(queue) > 0 && complete {
		rel := queue[0]
		queue = queue[1:]
		entries, err := ReadDirBeneath(hostHome, rel, left)
		if err != nil {
			if strings.Contains(err.Error(), "entries") {
				complete = false
			} else if !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENOTDIR) && !errors.Is(err, unix.ELOOP) {
				// Unreadable (mode 0), or too deep to name: what is
				// below was not looked at.
				unread = true
			}
			continue
		}
		left -= len(entries)
		if isGitDir(entries) {
			repos = append(repos, filepath.Join(hostHome, rel))
		}
		for _, e := range entries {
			r := filepath.Join(rel, e.Name())
			if e.Name() == ".git" {
				repos = append(repos, filepath.Join(hostHome, r))
				if e.IsDir() {
					continue // named: what is below it is git's
				}
			}
			switch {
			case e.Type()&os.ModeSymlink != 0:
				if leaves(root, r) {
					p := filepath.Join(hostHome, r)
					t, _ := os.Readlink(p)
					l := p + " -> " + t
					if at := landing(p); at != "" && at != t {
						l += " (on the host: " + at + ")"
					}
					links = append(links, l)
				}
			case e.IsDir():
				queue = append(queue, r)
			}
		}
	}
	return links, repos, complete && !unread
}

// A git repository a session left in its kept home runs on the host: its
// config names commands (core.fsmonitor, core.sshCommand, a filter) that
// a git started in or below it runs, as an editor's git integration or a
// shell prompt does when the user opens an agent's settings there (what
// `mosaic home` is for); the directory is the user's, so git's
// safe.directory does not stop it. A .git (directory or gitfile) is one;
// so is a directory that looks like a git directory itself (HEAD, objects
// and refs: git takes a bare repository found on the way up, and
// core.worktree gives it a work tree). LookHome names each, so the user
// removes them first.

// isGitDir reports whether a directory whose entries are entries looks
// like a git directory to git's discovery: a HEAD, and objects and refs
// (git follows a symlink to either) or a commondir naming where they are.
func isGitDir(entries []os.DirEntry) bool {
	var head, objects, refs, common bool
	dirOrLink := func(e os.DirEntry) bool { return e.IsDir() || e.Type()&os.ModeSymlink != 0 }
	for _, e := range entries {
		switch e.Name() {
		case "HEAD":
			head = !e.IsDir()
		case "objects":
			objects = dirOrLink(e)
		case "refs":
			refs = dirOrLink(e)
		case "commondir":
			common = !e.IsDir()
		}
	}
	return head && (objects && refs || common)
}

// landing is where the kernel resolves path on the host, "" when it
// cannot (a missing target).
func landing(path string) string {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return ""
	}
	defer unix.Close(fd)
	at, _ := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	return at
}

// leaves reports whether the symlink rel, resolved beneath root as the
// kernel resolves it (every link on the way, to the end), leaves root or
// crosses a magic link. A link whose target is missing inside is not: a
// write through it makes a file inside, or fails.
func leaves(root int, rel string) bool {
	fd, err := unix.Openat2(root, rel, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err == nil {
		unix.Close(fd)
		return false
	}
	// EXDEV: it climbs out or is absolute; ELOOP: a magic link (or a loop,
	// named too: better said than missed); ENAMETOOLONG: too deep to
	// resolve from the home, so not known to stay in it.
	return errors.Is(err, unix.EXDEV) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENAMETOOLONG)
}
