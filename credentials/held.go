package credentials

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"mosaic/internal/credvar"
	"mosaic/internal/sessionfile"
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
// do not hide the path.
//
// The unit keeps its EnvironmentFiles= path for its whole life and reads it
// again for every later command (its ExecStopPost, a restart). A
// /proc/PID/fd/N path there would outlive the holder and come back with
// the PID: any process of the user's (another session's included) that gets
// that PID and opens a FIFO as fd N hangs the whole user manager at the
// session's end (252 reads it in the manager), or feeds the unit an
// environment of its choosing. The PID space is small (pid_max 32768 on
// Debian 12: the rig cycled it in 9 s). So the unit names a symbolic link
// in the runtime directory, which only the user can write and no session
// sees (sessionfile.Path), to the /proc path, missing allowed. The unit's first
// process removes the link as soon as systemd has read it (the exec shim's
// and the egress proxy's --drop, its directory bound into the unit alone),
// and so does Close: after the start the unit's path names nothing, and a
// later command finds nothing, as it should, also after mosaic was killed
// during the start. A start killed before systemd took the unit leaves a
// dangling link that no unit names; the next start of the name replaces
// it, and the next mosaic command removes it.
type Held struct {
	f *os.File
	// Path is the file's name for EnvironmentFiles=.
	Path string
	link string
}

// Hold puts vars, in EnvironmentFile syntax (Encode), into a sealed memfd
// named for the session, linked from the session's file under runtimeDir
// (sessionfile.Path). The vars must have been validated. byProc, only for the
// weakened build, names the /proc path itself, as before.
func Hold(runtimeDir, session string, vars []credvar.Var, byProc bool) (*Held, error) {
	// Not close-on-exec would hand it to what mosaic runs; the manager
	// opens it by path, which close-on-exec does not affect.
	fd, err := unix.MemfdCreate("mosaic-credentials-"+session, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("cannot make an in-memory file for the credentials: %w", err)
	}
	f := os.NewFile(uintptr(fd), "memfd:mosaic-credentials-"+session)
	if _, err := f.Write(Encode(vars)); err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot write the credentials to memory: %w", err)
	}
	// Sealed: nothing with access to the path can change what the unit reads.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SEAL|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE); err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot seal the credentials' in-memory file: %w", err)
	}
	proc := fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), fd)
	if byProc {
		return &Held{f: f, Path: proc}, nil
	}
	link := sessionfile.Path(runtimeDir, session)
	if err := os.MkdirAll(filepath.Dir(link), 0o700); err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot make the directory of the credentials' link: %w", err)
	}
	os.Remove(link) // a crashed start's, dangling
	if err := os.Symlink(proc, link); err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot link the credentials' in-memory file: %w", err)
	}
	return &Held{f: f, Path: link, link: link}, nil
}

// Close lets the file go and removes its link: once systemd has spawned the
// unit's commands, nothing needs it. Close on nil does nothing.
func (h *Held) Close() {
	if h != nil {
		if h.link != "" {
			_ = sessionfile.Remove(h.link)
		}
		h.f.Close()
	}
}
