package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Lookups beneath a directory mosaic does not trust (a kept home, a
// workspace): every path inside it is resolved by the kernel following no
// symlink and never leaving it (openat2 RESOLVE_BENEATH), since whoever
// writes that directory chose every component on the way.

// openBeneath opens the directory holding rel inside root, following no
// symlink and never leaving root, and returns it with rel's last component.
func openBeneath(root, rel string) (int, string, error) {
	r := openRoot(root)
	defer r.close()
	return r.dirOf(rel)
}

// openatBeneath opens root/rel with flags, following no symlink and never
// leaving root.
func openatBeneath(root, rel string, flags int) (int, error) {
	r := openRoot(root)
	defer r.close()
	return r.openat(rel, flags)
}

// ReadDirBeneath lists the directory root/rel, following no symlink on the
// way; more than max entries is an error.
func ReadDirBeneath(root, rel string, max int) ([]os.DirEntry, error) {
	fd, err := openatBeneath(root, rel, unix.O_RDONLY|unix.O_DIRECTORY)
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

// A wsRoot is a directory opened once for the lookups of several paths
// inside it, each of them following no symlink and never leaving it; err
// is why it could not be opened, which each lookup then returns.
type wsRoot struct {
	fd  int
	err error
}

// openRoot opens dir, itself no symlink, for lookups beneath it; the
// caller closes it.
func openRoot(dir string) wsRoot {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	return wsRoot{fd: fd, err: err}
}

// close closes the directory, if it was opened.
func (b wsRoot) close() {
	if b.err == nil {
		unix.Close(b.fd)
	}
}

// dirOf opens the directory holding rel, and returns it with rel's last
// component.
func (b wsRoot) dirOf(rel string) (int, string, error) {
	if filepath.IsAbs(rel) || strings.Contains("/"+rel+"/", "/../") {
		return -1, "", fmt.Errorf("%s is not a path inside the workspace", rel)
	}
	dir, err := b.openat(filepath.Dir(rel), unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return -1, "", err
	}
	return dir, filepath.Base(rel), nil
}

// openat opens rel with flags.
func (b wsRoot) openat(rel string, flags int) (int, error) {
	if b.err != nil {
		return -1, b.err
	}
	return unix.Openat2(b.fd, rel, &unix.OpenHow{
		Flags:   uint64(flags | unix.O_NOFOLLOW | unix.O_CLOEXEC),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
}
