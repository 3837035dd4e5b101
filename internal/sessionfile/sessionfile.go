// Package sessionfile is where mosaic up to issue 31 wrote a session's
// credentials, and their removal: small and of nothing else, since the exec
// shim (in the stage binary, which links no more than it needs) removes the
// file a unit of such a mosaic names.
package sessionfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// Path is where mosaic up to issue 31 wrote a session's credentials
// for systemd's EnvironmentFile= (a 0600 file in a 0700 directory of its own
// in the user's runtime directory); they are held in memory now (credentials.Hold). The
// path is kept for the sweep of such files that an older mosaic's crashed
// start left, and for the units it started, whose commands still name it.
func Path(runtimeDir, session string) string {
	return filepath.Join(runtimeDir, "mosaic", "credentials", session, "env")
}

// Remove removes a session's credential file (Path), and
// its directory where that is not a mount point. It refuses any path but such
// a file, since it also runs from the unit (the exec shim, ExecStopPost of a
// unit an older mosaic started) with a path from the unit's command line.
func Remove(path string) error {
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
