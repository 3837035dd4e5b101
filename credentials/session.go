package credentials

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// SessionFile is where a session's credentials are written for systemd's
// EnvironmentFile=: a 0600 file in a 0700 directory of its own in the user's
// runtime directory, which no sandbox can see (the user bus and systemd's
// socket live there too). The session's unit binds that one directory, so
// that its exec shim can delete the file the moment systemd has read it.
func SessionFile(runtimeDir, session string) string {
	return filepath.Join(runtimeDir, "mosaic", "credentials", session, "env")
}

// WriteSessionFile writes vars to path (from SessionFile), making its
// directories 0700 and refusing one that others could enter.
func WriteSessionFile(path string, vars []Var) error {
	dir := filepath.Dir(path)
	for _, d := range []string{filepath.Dir(filepath.Dir(dir)), filepath.Dir(dir), dir} {
		if err := os.Mkdir(d, 0o700); err != nil && !os.IsExist(err) {
			return fmt.Errorf("cannot make %s: %v", d, err)
		}
		fi, err := os.Lstat(d)
		if err != nil {
			return err
		}
		st, _ := fi.Sys().(*syscall.Stat_t)
		if !fi.IsDir() || fi.Mode().Perm()&0o077 != 0 || st == nil || int(st.Uid) != os.Getuid() {
			return fmt.Errorf("%s must be a directory of yours with mode 0700 (it holds credentials): fix it with chmod 700 %s", d, d)
		}
	}
	return WriteFileAtomic(path, Encode(vars))
}

// RemoveSessionFile removes a session's credential file, and its directory
// where that is not a mount point. It refuses any path but such a file, since
// it also runs from the unit (the exec shim, ExecStopPost) with a path from
// the unit's command line.
func RemoveSessionFile(path string) error {
	dir := filepath.Dir(path)
	if filepath.Base(path) != "env" || filepath.Base(filepath.Dir(dir)) != "credentials" ||
		filepath.Base(filepath.Dir(filepath.Dir(dir))) != "mosaic" || !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return fmt.Errorf("%s is not a session credential file", path)
	}
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return err
	}
	os.Remove(dir) // fails, harmlessly, inside the unit, where it is bound
	return nil
}
