package sandbox

import (
	"crypto/rand"
	"encoding/hex"
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
// aside; past it the whole of it is made unreadable (mode 0) instead.
const maxDisarmDirs = 10000

// disarmGitDirs renames, in each directory at or below parent/name that
// holds a HEAD, the disarmedEntries, following no symlink, and returns
// their paths relative to name (the user is told). A tree too large to
// look through has its top made mode 0, and says so.
func disarmGitDirs(parent int, name string) []string {
	top, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	var out []string
	type dir struct {
		fd  int
		rel string
	}
	queue := []dir{{top, "."}}
	seen := 0
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		if seen++; seen > maxDisarmDirs {
			unix.Close(d.fd)
			for _, q := range queue {
				unix.Close(q.fd)
			}
			if f, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err == nil {
				_ = unix.Fchmod(f, 0)
				unix.Close(f)
			}
			return append(out, ". (over "+strconv.Itoa(maxDisarmDirs)+" directories to look through: made unreadable, mode 0)")
		}
		out = append(out, disarmOne(d.fd, d.rel)...)
		for _, sub := range subdirs(d.fd) {
			if fd, err := unix.Openat(d.fd, sub, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err == nil {
				queue = append(queue, dir{fd, filepath.Join(d.rel, sub)})
			}
		}
		unix.Close(d.fd)
	}
	return out
}

// disarmOne renames the disarmedEntries of the directory fd (at rel) when
// it holds a HEAD.
func disarmOne(fd int, rel string) []string {
	var st unix.Stat_t
	if unix.Fstatat(fd, "HEAD", &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return nil
	}
	var out []string
	for _, e := range disarmedEntries {
		to := e + disarmSuffix
		err := unix.Renameat2(fd, e, fd, to, unix.RENAME_NOREPLACE)
		if err == unix.EEXIST {
			var r [4]byte
			_, _ = rand.Read(r[:])
			to = e + disarmSuffix + "-" + hex.EncodeToString(r[:])
			err = unix.Renameat2(fd, e, fd, to, unix.RENAME_NOREPLACE)
		}
		if err == nil {
			out = append(out, filepath.Join(rel, to))
		}
	}
	return out
}

// subdirs lists the directories (not symlinks) in the directory fd.
func subdirs(fd int) []string {
	dup, err := unix.Dup(fd)
	if err != nil {
		return nil
	}
	f := os.NewFile(uintptr(dup), "")
	defer f.Close()
	entries, _ := f.ReadDir(HomeLinksBudget)
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

// testKeepMovedArmed, set only by a unit test, moves aside without
// disarming: the weakened move-aside the test first shows the attack on.
var testKeepMovedArmed = false
