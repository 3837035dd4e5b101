package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Repositories a session plants or changes anywhere in its workspace.
// git on the host looks for a repository from the directory it runs in
// upwards (setup.c): in each directory, a .git directory, a .git file
// ("gitdir: PATH") or symlink, or the directory itself when it holds HEAD
// and objects and refs, or HEAD and a commondir (a bare repository, which
// git also takes with core.bare=false and core.worktree set). A shell
// prompt runs git in every directory the user enters. So a session that
// runs `git init src` and sets core.fsmonitor in src/.git/config has the
// host run it at the user's next `git status` in src; one that changes a
// linked worktree's .git/worktrees/NAME/commondir has the host read the
// config it names in that worktree (outside the workspace).
//
// When the session ends the whole workspace is walked (every depth, up to
// maxRepoWalk directories and maxRepoWalkTime, PATH_MAX deep: git cannot run deeper, its
// getcwd fails), following no symlink, and for each repository found what
// says what git runs (gitDirChanges) is checked against the session's
// start (ctime, which no process can set back). A nested repository with
// such a change has its .git moved aside whole: the host's git then sees
// a plain directory of the repository above. Where there is no .git to
// move (the workspace's own git directory, a bare one, a linked
// worktree's administrative directory), the changed entries themselves
// are moved aside.

// maxRepoWalk and maxRepoEntries bound the directories and entries
// walked: a session could make millions to slow its own end.
// maxRepoWalkTime too: the walk runs in the ended unit's ExecStopPost,
// which systemd kills after the stop timeout (10 s by default); some 30 µs
// a directory here, warm.
const (
	maxRepoWalk     = 100000
	maxRepoEntries  = 1000000
	maxRepoWalkTime = 3 * time.Second
)

// repoWalkDirs is maxRepoWalk, smaller in a test.
var repoWalkDirs = maxRepoWalk

// Reasons of the entries moved aside.
const (
	nestedRepoReason = "git on the host, in that directory, runs what this repository's config and hooks say (core.fsmonitor at every git status)"
	bareRepoReason   = "git on the host, in this directory, takes it for a repository's and runs what it says"
	worktreeReason   = "git on the host, in a linked worktree of this repository, reads config and hooks from what this says"
)

// moveAsideRepos walks ws and moves aside what the session changed of the
// repositories in it (its own .git's modules aside: moveAsideGitDirs).
func moveAsideRepos(ws, name string, since time.Time) []MovedAside {
	var moved []MovedAside
	queue := []string{"."}
	walked, left := 0, maxRepoEntries
	begin := time.Now()
	for len(queue) > 0 {
		rel := queue[0]
		queue = queue[1:]
		entries, err := readDirBeneath(ws, rel, left)
		if walked++; walked > repoWalkDirs || err != nil && strings.Contains(err.Error(), "entries") || time.Since(begin) > maxRepoWalkTime {
			return append(moved, MovedAside{Path: ".", Reason: nestedRepoReason,
				Error: fmt.Sprintf("holds over %d directories or %d entries, or took over %v to look through: the repositories and tools' files past them were not checked (find %s -name .git -o -name HEAD lists them)", maxRepoWalk, maxRepoEntries, maxRepoWalkTime, ws)})
		}
		if errors.Is(err, unix.EACCES) && rel != "." {
			// A directory the user can enter (x) but not list (r): git
			// runs in what lies below it all the same.
			moved = append(moved, MovedAside{Path: rel, Reason: nestedRepoReason,
				Error: "cannot be listed (its mode leaves no read access), so the repositories and tools' files in it were not checked: look inside before you run git or other tools there"})
			continue
		}
		if err != nil {
			continue // gone, or made a symlink: nothing of it is walked
		}
		left -= len(entries)
		has := map[string]os.FileMode{}
		for _, e := range entries {
			has[e.Name()] = e.Type()
		}
		_, head := has["HEAD"]
		_, objects := has["objects"]
		_, refs := has["refs"]
		if _, common := has["commondir"]; head && (objects && refs || common) {
			moved = append(moved, moveAsideInGitDir(ws, name, rel, bareRepoReason, since)...)
		}
		moved = append(moved, moveAsideNestedExec(ws, name, rel, has, since)...)
		if t, ok := has[".envrc"]; ok && t.IsRegular() {
			moved = append(moved, moveAsideEnvrc(ws, name, rel, since)...)
		}
		if _, ok := has["pyvenv.cfg"]; ok {
			moved = append(moved, moveAsideVenvConfig(ws, name, rel, since)...)
		}
		for _, e := range entries {
			if isOptionLike(e.Name(), e.Type()) {
				moved = append(moved, moveAsideOptionName(ws, name, filepath.Join(rel, e.Name()), since)...)
			}
		}
		if t, ok := has[".git"]; ok {
			if rel == "." {
				if t.IsDir() {
					moved = append(moved, moveAsideInGitDir(ws, name, ".git", "", since)...)
				}
			} else {
				moved = append(moved, moveAsideNested(ws, name, filepath.Join(rel, ".git"), t, since)...)
			}
		}
		if len(ws)+len(rel)+2 > unix.PathMax {
			continue
		}
		for _, e := range entries {
			if e.IsDir() && e.Name() != ".git" {
				queue = append(queue, filepath.Join(rel, e.Name()))
			}
		}
	}
	return moved
}

// moveAsideNested moves aside the .git link (its path in ws, of type t)
// of a nested repository when it, or what says what git runs in the git
// directory it is or names inside ws, changed since; else the changed
// entries of that git directory's modules.
func moveAsideNested(ws, name, link string, t os.FileMode, since time.Time) []MovedAside {
	var changed bool
	gitdir := ""
	switch {
	case t.IsDir():
		gitdir = link
		changed = len(gitDirChanges(ws, link, since)) > 0
	case t&os.ModeSymlink != 0:
		if c, _ := changedEntry(ws, link, since); c {
			changed = true
			break
		}
		target, err := os.Readlink(filepath.Join(ws, link))
		if err != nil {
			return nil
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(ws, filepath.Dir(link), target)
		}
		if target = filepath.Clean(target); target == ws || !Within(target, ws) {
			return nil // not the session's to change
		}
		gitdir = strings.TrimPrefix(target, ws+"/")
		changed = len(gitDirChanges(ws, gitdir, since)) > 0
	default:
		changed = changedSince(ws, link, since)
	}
	if !changed {
		if gitdir == "" {
			return nil
		}
		return moveAsideGitDirs(ws, name, filepath.Join(gitdir, "modules"), since)
	}
	var moved []MovedAside
	for _, m := range MoveAsideCreated(ws, name, []string{link}) {
		m.Reason = nestedRepoReason
		moved = append(moved, m)
	}
	return moved
}

// moveAsideInGitDir moves aside the changed entries of the git directory
// gitdir (its path in ws) and of its linked worktrees' administrative
// directories; the modules of .git are moveAsideGitDirs's.
func moveAsideInGitDir(ws, name, gitdir, reason string, since time.Time) []MovedAside {
	var moved []MovedAside
	for _, p := range gitDirChanges(ws, gitdir, since) {
		if gitdir == ".git" && (p == ".git/config" || p == ".git/hooks" || strings.HasPrefix(p, ".git/hooks/")) {
			// Bound read-only in the session: a change is the user's (a
			// git init just before the start, within the second of margin).
			continue
		}
		for _, m := range MoveAsideCreated(ws, name, []string{p}) {
			if m.Reason = reason; strings.HasPrefix(p, filepath.Join(gitdir, "worktrees")+"/") {
				m.Reason = worktreeReason
			}
			moved = append(moved, m)
		}
	}
	if gitdir != ".git" {
		moved = append(moved, moveAsideGitDirs(ws, name, filepath.Join(gitdir, "modules"), since)...)
	}
	return moved
}

// gitDirChanges lists what changed since of what says what git runs in the
// git directory gitdir (changedGitDir), and in each of its linked
// worktrees' administrative directories (worktrees/NAME: its commondir,
// gitdir, config.worktree, besides what changedGitDir looks at).
func gitDirChanges(ws, gitdir string, since time.Time) []string {
	out := changedGitDir(ws, gitdir, since)
	wt := filepath.Join(gitdir, "worktrees")
	if c, exists := changedEntry(ws, wt, since); !exists {
		return out
	} else if e, err := readDirBeneath(ws, wt, maxModuleDirs); err != nil {
		if c {
			out = append(out, wt) // a symlink, or too big to look through
		}
		return out
	} else {
		for _, d := range e {
			admin := filepath.Join(wt, d.Name())
			if d.Type()&os.ModeSymlink != 0 {
				if c, _ := changedEntry(ws, admin, since); c {
					out = append(out, admin)
				}
				continue
			}
			out = append(out, changedGitDir(ws, admin, since)...)
			if c, _ := changedEntry(ws, filepath.Join(admin, "gitdir"), since); c {
				out = append(out, filepath.Join(admin, "gitdir"))
			}
		}
	}
	return slices.Compact(out)
}
