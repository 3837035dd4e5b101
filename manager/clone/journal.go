package clone

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"mosaic/internal/testhook"
	"mosaic/manager/clone/patchcheck"
)

// JournalName is the directory, in a session's state directory, that
// holds a copy of every file of the checkout an apply changes, taken
// before git apply writes: while it has a manifest, the checkout may be
// half written and the copy is the truth (see Recover).
const JournalName = ".apply-journal"

// manifestName is the journal's list of what it holds. It is written
// last, fsynced and renamed into place: a journal without it was made by
// an apply killed before git ran, so the checkout is untouched.
const manifestName = "manifest.json"

// saved is one path of the checkout as it was before the apply: absent
// (Existed false), a symlink to Target, or a file with Mode whose bytes
// are the journal's file Copy.
type saved struct {
	Path    string      `json:"path"`
	Existed bool        `json:"existed"`
	Mode    fs.FileMode `json:"mode,omitempty"`
	Target  string      `json:"target,omitempty"`
	Copy    string      `json:"copy,omitempty"`
}

// changedPaths are the paths, relative to the checkout, that a change
// writes or removes, each once.
func changedPaths(s patchcheck.Summary) []string {
	seen := map[string]bool{}
	var ps []string
	for _, f := range s.Files {
		for _, p := range []string{f.Path, f.OldPath} {
			if p != "" && !seen[p] {
				seen[p] = true
				ps = append(ps, p)
			}
		}
	}
	return ps
}

// writeJournal copies every path s changes in the checkout ws into the
// journal dir (made afresh), then fsyncs the copies, then writes the
// manifest.
func writeJournal(dir, ws string, s patchcheck.Summary) error {
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	var list []saved
	var copies []string
	for i, p := range changedPaths(s) {
		e, err := savePath(dir, ws, p, strconv.Itoa(i))
		if err != nil {
			return fmt.Errorf("cannot keep a copy of %s: %w", p, err)
		}
		list = append(list, e)
		if e.Copy != "" {
			copies = append(copies, filepath.Join(dir, e.Copy))
		}
	}
	if err := syncAll(copies); err != nil {
		return err
	}
	testhook.Call("clone.apply", "copied")
	b, err := json.Marshal(list)
	if err != nil {
		return err
	}
	if err := writeSynced(filepath.Join(dir, manifestName+".tmp"), b, 0o600); err != nil {
		return err
	}
	if err := os.Rename(filepath.Join(dir, manifestName+".tmp"), filepath.Join(dir, manifestName)); err != nil {
		return err
	}
	return syncDir(dir)
}

// savePath records path p of ws as it is now, copying a regular file's
// bytes into dir/copy.
func savePath(dir, ws, p, copy string) (saved, error) {
	e := saved{Path: p}
	full := filepath.Join(ws, p)
	fi, err := os.Lstat(full)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) { // below a file the change replaces
		return e, nil
	}
	if err != nil {
		return e, err
	}
	e.Existed, e.Mode = true, fi.Mode()
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		e.Target, err = os.Readlink(full)
		return e, err
	case !fi.Mode().IsRegular():
		return e, fmt.Errorf("it is not a regular file")
	}
	b, err := os.ReadFile(full)
	if err != nil {
		return e, err
	}
	e.Copy = copy
	return e, writeFile(filepath.Join(dir, copy), b, 0o600, false)
}

// syncWorkers is how many fsyncs syncAll has in flight: the filesystem's
// journal commits those that wait at once together (ext4: 100 files of a
// change, one after the other, 250 ms; side by side, a few commits).
const syncWorkers = 16

// syncAll fsyncs the files at names, syncWorkers at a time, and returns
// the first error.
func syncAll(names []string) error {
	errs := make(chan error, len(names))
	work := make(chan string)
	for range min(syncWorkers, len(names)) {
		go func() {
			for name := range work {
				errs <- syncFile(name)
			}
		}()
	}
	for _, name := range names {
		work <- name
	}
	close(work)
	var first error
	for range names {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// syncFile fsyncs the file at name.
func syncFile(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// writeSynced writes b to a new file at name and fsyncs it.
func writeSynced(name string, b []byte, mode fs.FileMode) error {
	return writeFile(name, b, mode, true)
}

// writeFile writes b to a new file at name, fsynced when sync is set.
func writeFile(name string, b []byte, mode fs.FileMode, sync bool) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if sync {
		if serr := f.Sync(); err == nil {
			err = serr
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncDir fsyncs directory dir, so that a rename in it is durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Recover finishes what an interrupted apply left in the checkout ws,
// from the journal in dir: when applied (the record says the change was
// applied) the journal is only removed; else, with a complete manifest,
// every path it lists is put back as it was before the apply and
// Recover reports true; a journal without a manifest (git never ran) is
// removed. The journal is removed only once the checkout is restored.
func Recover(dir, ws string, applied bool) (bool, error) {
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	b, err := os.ReadFile(filepath.Join(dir, manifestName))
	if applied || errors.Is(err, fs.ErrNotExist) {
		return false, os.RemoveAll(dir)
	}
	if err != nil {
		return false, err
	}
	var list []saved
	if err := json.Unmarshal(b, &list); err != nil {
		return false, fmt.Errorf("the journal of an interrupted apply in %s cannot be read: %w", dir, err)
	}
	if err := restore(dir, ws, list); err != nil {
		return false, err
	}
	return true, os.RemoveAll(dir)
}

// restore puts each path of list back in ws as the journal dir holds it:
// the paths that did not exist go first, so that a file the change made
// a directory (x replaced by x/y) can take its place again.
func restore(dir, ws string, list []saved) error {
	for _, existed := range []bool{false, true} {
		for _, e := range list {
			if e.Existed != existed {
				continue
			}
			if err := restoreOne(dir, ws, e); err != nil {
				return fmt.Errorf("cannot put %s back (its copy is kept in %s): %w", e.Path, dir, err)
			}
		}
	}
	return nil
}

// restoreOne puts path e back in ws: removed when it did not exist, else
// made beside it (a temporary name) and renamed over whatever is there.
func restoreOne(dir, ws string, e saved) error {
	full := filepath.Join(ws, e.Path)
	if !e.Existed {
		if err := os.Remove(full); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		return err
	}
	if fi, err := os.Lstat(full); err == nil && fi.IsDir() {
		os.Remove(full) // the change made it a directory: empty now, or the rename says why not
	}
	tmp := filepath.Join(filepath.Dir(full), ".mosaic-restore-"+filepath.Base(full))
	os.Remove(tmp)
	if e.Mode&fs.ModeSymlink != 0 {
		if err := os.Symlink(e.Target, tmp); err != nil {
			return err
		}
		return os.Rename(tmp, full)
	}
	b, err := os.ReadFile(filepath.Join(dir, e.Copy))
	if err != nil {
		return err
	}
	if err := writeSynced(tmp, b, e.Mode.Perm()); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Chmod(tmp, e.Mode.Perm()); err != nil { // past the umask
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, full)
}
