package credentials

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Held is a session's environment file that exists only in this process's
// memory (a sealed memfd) and only as long as this process holds it: systemd
// reads it through its /proc/PID/fd path (Path) when it spawns the unit's
// command, and it dies with its holder however that ends, kill -9 included.
// No secret of a session is ever on a disk, not even for the moment between
// a crash and the next mosaic command.
//
// The user manager reads EnvironmentFiles= as the user, from the host's
// /proc, when it spawns each command of the unit (checked on systemd 252,
// where the manager reads it, and 257, where its executor does, with
// PrivateUsers, PrivatePIDs and ProtectSystem set): the unit's namespaces
// do not hide the path. The unit keeps the path after the holder is gone;
// it names "-" (missing allowed), so a later command of the unit (its
// ExecStopPost) finds nothing, as it should.
type Held struct {
	f *os.File
	// Path is the file's name for EnvironmentFiles=.
	Path string
}

// Hold puts vars, in EnvironmentFile syntax (Encode), into a sealed memfd
// named for the session. The vars must have been validated.
func Hold(session string, vars []Var) (*Held, error) {
	// Not close-on-exec would hand it to what mosaic runs; the manager
	// opens it by path, which close-on-exec does not affect.
	fd, err := unix.MemfdCreate("mosaic-credentials-"+session, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("cannot make an in-memory file for the credentials: %v", err)
	}
	f := os.NewFile(uintptr(fd), "memfd:mosaic-credentials-"+session)
	if _, err := f.Write(Encode(vars)); err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot write the credentials to memory: %v", err)
	}
	// Sealed: nothing with access to the path can change what the unit reads.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SEAL|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE); err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot seal the credentials' in-memory file: %v", err)
	}
	return &Held{f: f, Path: fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), fd)}, nil
}

// Close lets the file go: once systemd has spawned the unit's commands,
// nothing needs it. Close on nil does nothing.
func (h *Held) Close() {
	if h != nil {
		h.f.Close()
	}
}
