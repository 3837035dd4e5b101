// Package credentials gets an agent its credentials and nothing else of the
// user's: it writes the files that hold them (mode 0600, atomically, so no
// reader ever sees half a file) for systemd to read through EnvironmentFile=.
package credentials

import (
	"fmt"
	"os"
	"path/filepath"
)

// WriteFileAtomic writes data to path with mode 0600 through a temporary file
// in the same directory, fsynced and then renamed over path: a reader sees the
// old file or the new one, never part of one, and the data is never readable
// by anyone else, not even for a moment.
func WriteFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	// CreateTemp makes the file 0600 already; say so in case umask or a
	// future Go changes that.
	if err := f.Chmod(0o600); err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename into %s: %w", path, err)
	}
	ok = true
	return nil
}
