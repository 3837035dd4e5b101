package sandbox

import (
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// RemoveMountPoints removes from a session's kept home (hostHome, its path
// on the host) what bwrap made there as mount points for the binds below
// the session's HOME (home, the path it has inside): an empty directory for
// a workspace or --ro/--rw path under the user's home and each directory on
// the way, an empty file for a command's binary there. Kept, they pile up
// session after session and show the next session of the name where the
// earlier ones worked. Only what is empty goes, and no symlink is followed
// (the session chose everything in its home). Run once the session is over.
func RemoveMountPoints(hostHome, home string, binds []Bind) {
	for _, b := range binds {
		if b.Dst == home || !Within(b.Dst, home) {
			continue
		}
		for rel := strings.TrimPrefix(b.Dst, home+"/"); rel != "." && rel != "/"; rel = filepath.Dir(rel) {
			removeEmpty(hostHome, rel)
		}
	}
}

// removeEmpty removes rel inside root when it is an empty directory or an
// empty regular file.
func removeEmpty(root, rel string) {
	dir, base, err := openBeneath(root, rel)
	if err != nil {
		return
	}
	defer unix.Close(dir)
	var st unix.Stat_t
	if unix.Fstatat(dir, base, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		_ = unix.Unlinkat(dir, base, unix.AT_REMOVEDIR) // fails unless empty
	case unix.S_IFREG:
		if st.Size == 0 {
			_ = unix.Unlinkat(dir, base, 0)
		}
	}
}
