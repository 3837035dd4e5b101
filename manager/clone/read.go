package clone

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"mosaic/manager/clone/patchcheck"
)

// ReadOutput reads a file the finish step wrote, of at most max bytes:
// through no symlink on the way (the finish step controls the directory),
// only a regular file, without blocking. One over max is a refusal.
func ReadOutput(path string, max int64) ([]byte, error) {
	fd, err := unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS,
	})
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if fi.Size() > max {
		return nil, &patchcheck.Refusal{Why: fmt.Sprintf("%s is %d bytes, over the bound of %d", fi.Name(), fi.Size(), max)}
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(b)) > max {
		return nil, &patchcheck.Refusal{Why: fmt.Sprintf("%s grew over the bound of %d", fi.Name(), max)}
	}
	return b, err
}
