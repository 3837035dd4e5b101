package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"mosaic/units/regfile"
)

// Submodules' git directories. git keeps a submodule's repository in
// .git/modules/NAME, which the session can write, and `git submodule
// update` on the host reuses it for a submodule that is not checked out
// ("reactivating"): a directory a session plants there for a submodule
// .gitmodules names but the user never initialized, or the hooks or config
// it writes into an existing one, then run on the host (post-checkout at
// the update, pre-commit at a commit in the submodule), whether or not its
// link was moved aside. So in each git directory under .git/modules, what
// says what git runs (config, config.worktree, commondir, the hooks) is
// moved aside when it changed while the session ran.

const (
	maxModuleDirs  = 10000 // directories looked at under .git/modules
	maxModuleDepth = 16
	maxHooks       = 1000 // entries of one hooks directory looked at
)

// gitDirReason is why a git directory's entry is moved aside.
const gitDirReason = "git on the host runs what it says in a submodule (git submodule update reuses this git directory)"

// moveAsideGitDirs moves aside the changed entries of the git
// directories under modules (.git/modules, or a nested repository's) of ws.
func moveAsideGitDirs(ws, name, modules string, since time.Time) []MovedAside {
	var moved []MovedAside
	queue := []string{modules}
	seen := 0
	for len(queue) > 0 {
		rel := queue[0]
		queue = queue[1:]
		if seen++; seen > maxModuleDirs {
			return append(moved, MovedAside{Path: modules, Reason: gitDirReason, Error: fmt.Sprintf("holds over %d directories: not all were checked", maxModuleDirs)})
		}
		entries, err := readDirBeneath(ws, rel, 4096)
		if err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			// .git/modules made a symlink: git follows it.
			if link := firstSymlink(ws, rel); link != "" {
				moved = append(moved, moveAsideLink(ws, name, link, since)...)
				continue
			}
			moved = append(moved, MovedAside{Path: rel, Reason: gitDirReason, Error: "cannot be checked: " + err.Error()})
			continue
		}
		for _, e := range entries {
			// .git/modules/NAME a symlink to a git directory elsewhere.
			if e.Type()&os.ModeSymlink != 0 {
				moved = append(moved, moveAsideLink(ws, name, filepath.Join(rel, e.Name()), since)...)
			}
		}
		gitdir := false
		for _, e := range entries {
			if e.Name() == "HEAD" || e.Name() == "config" || e.Name() == "hooks" {
				gitdir = true
			}
		}
		if gitdir {
			for _, p := range changedGitDir(ws, rel, since) {
				for _, m := range MoveAsideCreated(ws, name, []string{p}) {
					m.Reason = gitDirReason
					moved = append(moved, m)
				}
			}
		}
		if strings.Count(rel, "/") > maxModuleDepth {
			continue
		}
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			// In a git directory only modules holds more of them (a
			// submodule's own submodules); elsewhere a name may have
			// slashes (.git/modules/a/b).
			if !gitdir || e.Name() == "modules" {
				queue = append(queue, filepath.Join(rel, e.Name()))
			}
		}
	}
	return moved
}

// moveAsideLink moves aside the symlink link (its path in ws) when the
// session made it (ctime since).
func moveAsideLink(ws, name, link string, since time.Time) []MovedAside {
	if c, _ := changedEntry(ws, link, since); !c {
		return nil
	}
	var moved []MovedAside
	for _, m := range MoveAsideCreated(ws, name, []string{link}) {
		m.Reason = gitDirReason
		moved = append(moved, m)
	}
	return moved
}

// changedGitDir lists what changed since in the git directory gitdir (its
// path in ws) among what says what git runs: config, config.worktree,
// commondir, an in-progress rebase's todo (rebaseTodo), what git's prompt
// prints when it holds control bytes (promptRead), a file inside ws that their includes name (gitconfig.go), the
// hooks directory (when it changed itself, or is too big to look through)
// or each hook in it.
func changedGitDir(ws, gitdir string, since time.Time) []string {
	var out []string
	for _, p := range []string{"config", "config.worktree", "commondir", rebaseTodo} {
		if c, _ := changedEntry(ws, filepath.Join(gitdir, p), since); c {
			out = append(out, filepath.Join(gitdir, p))
		}
	}
	for _, p := range promptRead {
		if p = filepath.Join(gitdir, p); controlBytesIn(ws, p, since) {
			out = append(out, p)
		}
	}
	for _, p := range includedIn(ws, gitdir) {
		if c, _ := changedEntry(ws, p, since); c {
			out = append(out, p)
		}
	}
	hooks := filepath.Join(gitdir, "hooks")
	c, exists := changedEntry(ws, hooks, since)
	if !exists {
		return out
	}
	entries, err := readDirBeneath(ws, hooks, maxHooks)
	if c || err != nil {
		return append(out, hooks) // new, swapped, or too big
	}
	for _, e := range entries {
		if c, _ := changedEntry(ws, filepath.Join(hooks, e.Name()), since); c {
			out = append(out, filepath.Join(hooks, e.Name()))
		}
	}
	return out
}

// promptRead are the files of a git directory that git's shell prompt
// (git-sh-prompt's __git_ps1, which many users' PS1 runs) reads with the
// shell's read and prints raw at every prompt in the repository: the
// branch, a rebase's branch and step. A session that writes an escape
// sequence into .git/HEAD ("ref: refs/heads/ma\e]0;...\ain") has it act on
// the user's terminal (its title, OSC 52's clipboard) as soon as the
// user's shell enters the directory. No ref name git makes holds a control
// byte (check-ref-format), so one that does is moved aside.
var promptRead = []string{"HEAD", "rebase-merge/head-name", "rebase-merge/msgnum", "rebase-merge/end", "rebase-apply/next", "rebase-apply/last", "rebase-apply/head-name"}

// controlBytesIn reports whether ws/rel changed since and holds, in its
// first 4 KiB, a control byte (C0 but for a newline at the end, DEL, C1)
// or invalid UTF-8: what a terminal may act on. Read following no symlink,
// only a regular file.
func controlBytesIn(ws, rel string, since time.Time) bool {
	if c, _ := changedEntry(ws, rel, since); !c {
		return false
	}
	fd, err := openatBeneath(ws, rel, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return false
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return false
	}
	b := make([]byte, 4096)
	n, _ := io.ReadFull(f, b)
	text := strings.TrimSuffix(string(b[:n]), "\n")
	if !utf8.ValidString(text) && n < len(b) {
		return true
	}
	for _, r := range text {
		if r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 {
			return true
		}
	}
	return false
}

// includedIn lists the files inside ws (their paths in it) that the
// config and config.worktree of the git directory gitdir include, directly.
func includedIn(ws, gitdir string) []string {
	home, _ := os.UserHomeDir()
	var out []string
	for _, f := range []string{"config", "config.worktree"} {
		path := filepath.Join(ws, gitdir, f)
		b, err := regfile.Read(path, true, 1<<20)
		if err != nil {
			continue
		}
		for _, e := range parseGitConfig(b) {
			if e.key != "path" || !(e.section == "include" && e.sub == "" || e.section == "includeif") {
				continue
			}
			if p := includePath(e.value, path, home); p != ws && Within(p, ws) && len(out) < 100 {
				out = append(out, strings.TrimPrefix(p, ws+"/"))
			}
		}
	}
	return out
}

// changedEntry reports whether ws/rel changed (ctime) since, and whether
// it exists; a symlink on the way, which git would follow, counts as a
// change.
func changedEntry(ws, rel string, since time.Time) (changed, exists bool) {
	dir, base, err := openBeneath(ws, rel)
	if err != nil {
		return !errors.Is(err, unix.ENOENT), !errors.Is(err, unix.ENOENT)
	}
	defer unix.Close(dir)
	var st unix.Stat_t
	if unix.Fstatat(dir, base, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return false, false
	}
	return !time.Unix(st.Ctim.Unix()).Before(since), true
}

// readDirBeneath lists the directory ws/rel, following no symlink on the
// way; more than max entries is an error.
func readDirBeneath(ws, rel string, max int) ([]os.DirEntry, error) {
	fd, err := openatBeneath(ws, rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	entries, err := f.ReadDir(max + 1)
	if err != nil && len(entries) == 0 && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if len(entries) > max {
		return nil, fmt.Errorf("it has over %d entries", max)
	}
	return entries, nil
}
