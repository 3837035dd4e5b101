package sandbox

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Bind identity. mosaic checks a workspace or a --ro/--rw path on the host,
// then systemd (BindPaths) and bwrap (--bind) each resolve the path again
// when they mount it. Whoever controls a directory on that path (a running
// session whose workspace holds it) can swap it for a symlink in between
// (renameat2 RENAME_EXCHANGE in a loop) and have something else mounted,
// the user's home say, under the checked name. So mosaic records what it
// checked by identity (device and inode, read without following any symlink)
// and each layer compares what is mounted at the path with it, from inside,
// before anything of the session runs.
//
// Inside a user namespace a bind mount reports the source's st_dev and
// st_ino, so the identity read on the host is the one read inside.

// BindID is one bound path and the identity of the object mosaic checked at
// it. Binds are made at their own path, so Path is both source and
// destination.
type BindID struct {
	Path string `json:"path"`
	ID   string `json:"id"` // device:inode
}

// StatNoFollow stats what path names without following any symlink on the
// way: a path that holds a symlink anywhere, the last component included,
// is an error. path is absolute and clean.
func StatNoFollow(path string) (unix.Stat_t, error) {
	var st unix.Stat_t
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return st, fmt.Errorf("%s is not an absolute, clean path", path)
	}
	// One openat2 that refuses every symlink on the way; a kernel before
	// 5.6 walks the path one component at a time to the same effect.
	fd, err := unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS,
	})
	if err == unix.ENOSYS {
		fd, err = openWalking(path)
	}
	if err != nil {
		return st, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	if err := unix.Fstat(fd, &st); err != nil {
		return st, err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return st, fmt.Errorf("%s is a symlink", path)
	}
	return st, nil
}

// openWalking opens path O_PATH one component at a time, following no
// symlink: one on the way fails with ENOTDIR, the last one is opened itself.
func openWalking(path string) (int, error) {
	fd, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	var parts []string
	if path != "/" {
		parts = strings.Split(path[1:], "/")
	}
	for i, part := range parts {
		flags := unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if i < len(parts)-1 {
			flags |= unix.O_DIRECTORY // a symlink here fails with ENOTDIR
		}
		next, err := unix.Openat(fd, part, flags, 0)
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

// StatID is the identity, device:inode, in a stat.
func StatID(st unix.Stat_t) string { return fmt.Sprintf("%d:%d", st.Dev, st.Ino) }

// MkdirNoFollow makes the directory path, following no symlink on the way.
func MkdirNoFollow(path string, mode uint32) error {
	dir, err := unix.Openat2(unix.AT_FDCWD, filepath.Dir(path), &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS,
	})
	if err == unix.ENOSYS {
		dir, err = openWalking(filepath.Dir(path))
	}
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	return unix.Mkdirat(dir, filepath.Base(path), mode)
}

// EmptyDir reports whether dir is a directory with nothing in it: an
// empty .git is no repository (git goes on past it, and a direct session's
// floor leaves one while it runs), for the search for a workspace's
// repository (manager/request) and the check of a plain one (manager/clone).
func EmptyDir(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	return len(names) == 0 && err == io.EOF // a file's is ENOTDIR
}
