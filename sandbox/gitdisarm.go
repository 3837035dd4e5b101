package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// A git directory moved aside whole (a nested repository's .git, a
// submodule's or a linked worktree's git directory) is still one: HEAD,
// objects and refs make git take the directory for a repository, so a user
// who goes to look at it (`cd` there, a shell prompt that runs git) has
// git read its config (core.worktree, core.fsmonitor: shown to run) and
// hooks. So what is moved aside is disarmed: in every directory of it
// that holds a HEAD, the entries that make a repository and say what git
// runs are renamed NAME.mosaic-moved. git then finds no repository there;
// putting one back takes a rename of its config or hooks, whose change
// time the next session's end sees (changedEntry).

// disarmedEntries are renamed in each git directory of what is moved
// aside: HEAD (without it git finds no repository), and what says what
// git runs.
var disarmedEntries = []string{"HEAD", "config", "config.worktree", "commondir", "hooks"}

// disarmSuffix ends the name of a disarmed entry.
const disarmSuffix = ".mosaic-moved"

// maxDisarmDirs bounds the directories looked through below what is moved
// aside, and disarmEntriesBudget the entries listed in each; past either,
// or where a directory cannot be looked through or an entry renamed, the
// whole of it is made unreadable (mode 0) instead: what the disarm does
// not see, it cannot vouch for.
const maxDisarmDirs = 10000

// disarmEntriesBudget is HomeLinksBudget; a unit test lowers it.
var disarmEntriesBudget = HomeLinksBudget

// disarmGitDirs renames, in each directory at or below parent/name that
// holds a HEAD, the disarmedEntries, following no symlink, and returns
// their paths relative to name (the user is told). A tree it cannot
// disarm whole has its top made mode 0, and says so.
func disarmGitDirs(parent int, name string) []string {
	out, why := disarmTree(parent, name)
	if why == "" {
		return out
	}
	fd, err := unix.Openat(parent, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == nil {
		err = unix.Chmod(procFd(fd), 0)
		unix.Close(fd)
	}
	if err != nil {
		return append(out, ". ("+why+"; cannot make it unreadable either: "+err.Error()+")")
	}
	return append(out, ". ("+why+": made unreadable, mode 0)")
}

// disarmTree is disarmGitDirs but for a tree it cannot disarm whole: why
// is then what stopped it.
func disarmTree(parent int, name string) (out []string, why string) {
	top, err := openOwnDir(parent, name)
	if err != nil {
		return nil, "cannot look through it: " + err.Error()
	}
	type dir struct {
		fd  int
		rel string
	}
	queue := []dir{{top, "."}}
	defer func() {
		for _, q := range queue {
			unix.Close(q.fd)
		}
	}()
	for seen := 1; len(queue) > 0; seen++ {
		d := queue[0]
		if seen > maxDisarmDirs {
			return out, "over " + strconv.Itoa(maxDisarmDirs) + " directories to look through"
		}
		renamed, err := disarmOne(d.fd, d.rel)
		out = append(out, renamed...)
		subs, ok := subdirs(d.fd)
		if err == nil && !ok {
			err = errors.New("over " + strconv.Itoa(disarmEntriesBudget) + " entries in " + d.rel)
		}
		for _, sub := range subs {
			fd, serr := openOwnDir(d.fd, sub)
			if serr != nil {
				err = fmt.Errorf("cannot look through %s: %v", filepath.Join(d.rel, sub), serr)
				break
			}
			queue = append(queue, dir{fd, filepath.Join(d.rel, sub)})
		}
		unix.Close(d.fd)
		queue = queue[1:]
		if err != nil {
			return out, err.Error()
		}
	}
	return out, ""
}

// openOwnDir opens the directory name in dir for listing, following no
// symlink, after giving its owner (the user: the session ran as them)
// read, write and search on it: a session that left a git directory 0555
// (no rename in it) or 0311 (no listing, but git opens HEAD and config by
// name) would otherwise keep it armed.
func openOwnDir(dir int, name string) (int, error) {
	p, err := unix.Openat(dir, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(p)
	var st unix.Stat_t
	if err := unix.Fstat(p, &st); err != nil {
		return -1, err
	}
	if st.Mode&0o700 != 0o700 {
		if err := unix.Chmod(procFd(p), st.Mode&0o7777|0o700); err != nil {
			return -1, err
		}
	}
	return unix.Openat(p, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
}

// procFd is the path of the open file fd (for a call that has no form
// taking an O_PATH descriptor).
func procFd(fd int) string {
	return "/proc/self/fd/" + strconv.Itoa(fd)
}

// disarmOne renames the disarmedEntries of the directory fd (at rel) when
// it holds a HEAD; err is the first rename of one that is there that
// failed.
func disarmOne(fd int, rel string) (out []string, err error) {
	var st unix.Stat_t
	if unix.Fstatat(fd, "HEAD", &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return nil, nil
	}
	for _, e := range disarmedEntries {
		to := e + disarmSuffix
		rerr := unix.Renameat2(fd, e, fd, to, unix.RENAME_NOREPLACE)
		if rerr == unix.EEXIST {
			var r [4]byte
			_, _ = rand.Read(r[:])
			to = e + disarmSuffix + "-" + hex.EncodeToString(r[:])
			rerr = unix.Renameat2(fd, e, fd, to, unix.RENAME_NOREPLACE)
		}
		switch {
		case rerr == nil:
			out = append(out, filepath.Join(rel, to))
		case rerr != unix.ENOENT && err == nil:
			err = fmt.Errorf("cannot rename %s: %v", filepath.Join(rel, e), rerr)
		}
	}
	return out, err
}

// subdirs lists the directories (not symlinks) in the directory fd; ok is
// false when it holds more entries than disarmEntriesBudget (or cannot be
// read), so that some went unlisted.
func subdirs(fd int) (out []string, ok bool) {
	dup, err := unix.Dup(fd)
	if err != nil {
		return nil, false
	}
	f := os.NewFile(uintptr(dup), "")
	defer f.Close()
	entries, err := f.ReadDir(disarmEntriesBudget)
	if err != nil && err != io.EOF {
		return nil, false
	}
	if len(entries) == disarmEntriesBudget {
		if more, _ := f.ReadDir(1); len(more) > 0 {
			return nil, false
		}
	}
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out, true
}

// testKeepMovedArmed, set only by a unit test, moves aside without
// disarming: the weakened move-aside the test first shows the attack on.
var testKeepMovedArmed = false
