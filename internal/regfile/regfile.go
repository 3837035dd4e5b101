// Package regfile opens the files mosaic reads (session records, env-files,
// profiles) only when they are regular files, and never blocks doing so
// (WriteAtomic is its writing half, for files that hold no secret): a
// FIFO or a device put in place of one would otherwise hang every mosaic
// command that reads it. The file is opened with O_NONBLOCK (which makes
// opening a FIFO return at once) and then checked with fstat, on the
// descriptor itself, so nothing can be swapped in between.
package regfile

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Open opens path for reading if it is a regular file. With noFollow a
// symlink in the last component is refused (ELOOP) rather than followed.
func Open(path string, noFollow bool) (*os.File, os.FileInfo, error) {
	flags := unix.O_RDONLY | unix.O_NONBLOCK | unix.O_CLOEXEC
	if noFollow {
		flags |= unix.O_NOFOLLOW
	}
	fd, err := unix.Open(path, flags, 0)
	if err != nil {
		return nil, nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, nil, &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, nil, fmt.Errorf("%s is not a regular file (it is a %s)", path, kind(st.Mode))
	}
	// Reads of a regular file never block; clear the flag before Go sees
	// the descriptor, so that it is handled as the ordinary file it is.
	_ = unix.SetNonblock(fd, false)
	f := os.NewFile(uintptr(fd), path)
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// Read reads a regular file of at most max bytes, as os.ReadFile would.
func Read(path string, noFollow bool, max int64) ([]byte, error) {
	f, fi, err := Open(path, noFollow)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi.Size() > max {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d it may be", path, fi.Size(), max)
	}
	return io.ReadAll(io.LimitReader(f, max+1))
}

func kind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return "FIFO"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR, unix.S_IFBLK:
		return "device"
	case unix.S_IFDIR:
		return "directory"
	}
	return "special file"
}

// WriteAtomic writes data to path, mode 0600, through a temporary file of
// a name of its own (made with O_EXCL: never one a session put there) and
// a rename, so that a reader sees the whole file or none, two writers
// never share a temporary file, and whatever was at path (a symlink
// included) is replaced, never followed. It is for what holds no secret
// and is written again at each start (a record, a session's ~/.gitconfig, a cache),
// so it is not fsynced (that is for credentials: credentials.WriteFileAtomic):
// an fsync on the state directory's disk costs a start ~0.6 ms.
func WriteAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*") // 0600
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// StateKey is a cache's key for a file as fi describes it: its device,
// inode, size, mtime, ctime (in nanoseconds) and mode. A change to the file
// changes it: replaced, another inode; rewritten in place, another mtime
// and ctime, which no process can set back. "" when fi has no stat, or
// (with a non-zero settled) when it changed at or after settled: a file
// system's clock is coarse, and a second change within one tick could look
// like none.
func StateKey(fi os.FileInfo, settled time.Time) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	mtime, ctime := time.Unix(st.Mtim.Unix()), time.Unix(st.Ctim.Unix())
	if !settled.IsZero() && (!mtime.Before(settled) || !ctime.Before(settled)) {
		return ""
	}
	return fmt.Sprintf("%d:%d:%d:%d:%d:%o", st.Dev, st.Ino, st.Size, mtime.UnixNano(), ctime.UnixNano(), st.Mode)
}
