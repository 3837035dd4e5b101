package clone

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// A cold copy used to be git's checkout of the base: every blob inflated
// from the object store and written, about half of it zlib. Most of what
// the base holds is already on the disk, byte for byte: the user's own
// files, which the snapshot just hashed. So the copy takes them from
// there (no inflating: read, hashed, written), writes the index itself
// (index.go), and git checks out only what the user's files cannot give.
// The whole of Make on a journaled ext4, just after the previous copy
// was removed (median of 3, alternated with the checkout): 10,000 files
// of 195 MB 0.48 -> 0.27 s (user CPU 0.56 -> 0.17 s), 100,000 files of
// 195 MB 1.81 -> 1.53 s (1.1 -> 0.46 s; there most of it is the file
// system's creation of each file).
//
// On an ext4 without a journal (this project's test machines) creating
// files within a minute of deleting many is slow whatever makes them:
// the inode allocator skips each recently deleted inode one by one
// (fs/ext4/ialloc.c, recently_deleted, only without a journal), and both
// ways then take 1-2 s of system time. The workers make a directory each
// (byDirectory): side by side in one directory they spun on its lock.
//
// A file is taken from the user's checkout only when the bytes copied
// are the blob the base holds: the copy is hashed as git hashes a blob
// (SHA-NI: about 0.1 s of CPU for 195 MB, shared by the workers) and
// must be the entry's object id. Nothing is trusted by its stat, so a
// file the user writes meanwhile, a file git filters (LFS, eol, ident,
// a filter of the user's config, which the copy does not have) or whose
// entry is racily clean is simply not taken: git checks it out from the
// base's blob (checkout-index), as it did every file before, and so the
// copy is byte for byte what git's checkout made. A file git's checkout
// converts is not taken even when the user's bytes are the blob's (their
// checkout predates the .gitattributes or the setting that converts it:
// git does not write a file again for either): convertedOnCheckout asks
// the copy's git which these are (a git config and a check-attr: 20-35
// ms for 10k files on a busy 2-core machine, beside setHead's gits).
// Only regular files are taken, reached by no symlink and on no other
// mount (openat2), opened for reading only once known to be one (no
// FIFO, no device).

// copyHook is called once a file is known to be a regular file, before
// it is copied: a unit test changes the user's file there.
var copyHook = func(path string) {}

// copyWorkers copy directories side by side.
func copyWorkers() int { return max(2, runtime.NumCPU()) }

// copyWorkTree writes the working tree of the copy at dir (a clone with
// no checkout) from the user's checkout ws for the entries of the
// snapshot's index at index (what the base commit holds), writes the
// copy's index, and has git check out what it could not take from ws.
// oidLen is the object id's length in bytes. errIndexUnusual
// means nothing was written: the caller checks out with git.
func copyWorkTree(ctx context.Context, ws, dir, index string, oidLen int) error {
	entries, err := readIndex(index, oidLen)
	if err != nil {
		return errIndexUnusual
	}
	for _, e := range entries {
		if e.Mode != modeFile && e.Mode != modeExec && e.Mode != modeSymlink && e.Mode != modeGitlink || !plainPath(e.Path) {
			return errIndexUnusual
		}
		// The copy's files are named from its directory's path, git's
		// relative to it: a path git writes may be too long joined.
		if len(dir)+1+len(e.Path) >= unix.PathMax {
			return errIndexUnusual
		}
	}
	converted, err := convertedOnCheckout(ctx, dir, index, entries)
	if errors.Is(err, ErrInterrupted) { // a Ctrl-C: not a checkout by git instead
		return err
	}
	if err != nil {
		return errIndexUnusual
	}
	root, err := unix.Open(ws, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(root)
	if err := makeDirs(dir, entries); err != nil {
		return err
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	work := make(chan []int, 64)
	for range copyWorkers() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 256<<10)
			for group := range work {
				for _, i := range group {
					if err := copyEntry(root, dir, &entries[i], !converted[i], buf); err != nil {
						mu.Lock()
						if firstErr == nil {
							firstErr = err
						}
						mu.Unlock()
					}
				}
			}
		}()
	}
	for _, group := range byDirectory(entries) {
		if ctx.Err() != nil {
			break
		}
		work <- group
	}
	close(work)
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil { // a Ctrl-C: as when it reaches a git (ErrInterrupted)
		firstErr = &gitError{msg: "the copy was interrupted", interrupted: true}
	}
	if firstErr != nil {
		return firstErr
	}
	return finishIndex(ctx, dir, entries, oidLen)
}

// convertedOnCheckout says, for each of entries (the index at index),
// whether git's checkout in the copy at dir may write other bytes than
// its blob's: a filter, ident or working-tree-encoding attribute, or an
// end of line made CRLF (an eol=crlf attribute, core.autocrlf, or core.eol
// for a text file). Such a file is git's to write even when the user's
// bytes are the blob's: the user's checkout may predate the attribute or
// the setting (git does not write a file again when either changes). The
// attributes are the copy's own as its checkout reads them (the index's
// .gitattributes, core.attributesFile, the system's; not the user's
// .git/info/attributes), and so is the config (global and system). When
// unsure, a file is converted: git writes it, as it wrote every file before.
func convertedOnCheckout(ctx context.Context, dir, index string, entries []indexEntry) ([]bool, error) {
	converted := make([]bool, len(entries))
	var paths strings.Builder
	var asked []int // the entries asked about, in order
	for i, e := range entries {
		if e.Mode == modeFile || e.Mode == modeExec {
			paths.WriteString(e.Path)
			paths.WriteByte(0)
			asked = append(asked, i)
		}
	}
	if len(asked) == 0 {
		return converted, nil
	}
	// Exit status 1 is no such setting; the last of a key's values counts.
	settings, _ := git(ctx, dir, nil, "config", "-z", "--get-regexp", `^core\.(autocrlf|eol)$`)
	crlf, coreEOL := false, ""
	for _, kv := range strings.Split(settings, "\x00") {
		k, v, valued := strings.Cut(kv, "\n")
		switch k {
		case "core.autocrlf":
			v = strings.ToLower(v)
			crlf = v == "true" || v == "yes" || v == "on" || v == "1" || !valued // no value: true
		case "core.eol":
			coreEOL = v
		}
	}
	out, err := gitWith(ctx, dir, []string{"GIT_INDEX_FILE=" + index}, paths.String(),
		"check-attr", "--cached", "-z", "--stdin", "filter", "ident", "working-tree-encoding", "text", "eol")
	if err != nil {
		return nil, err
	}
	// -z: path, attribute, value, each ended by a NUL; the paths in the
	// order asked, each with the 5 attributes. By position, not by path:
	// git's output is trimmed, and so is a first path's leading blank.
	f := strings.Split(out, "\x00")
	if len(f) != 15*len(asked)+1 {
		return nil, fmt.Errorf("git check-attr gave %d fields for %d paths", len(f), len(asked))
	}
	for k := 0; k+2 < len(f); k += 3 {
		i := asked[k/15]
		if k > 0 && f[k] != entries[i].Path {
			return nil, fmt.Errorf("git check-attr named %q, not %q", f[k], entries[i].Path)
		}
		name, value := f[k+1], f[k+2]
		switch {
		case value == "unspecified" || value == "unset":
			if name == "text" && value == "unspecified" && crlf {
				converted[i] = true
			}
		case name == "text":
			if crlf || strings.EqualFold(coreEOL, "crlf") {
				converted[i] = true
			}
		case name == "eol":
			if value != "lf" || crlf {
				converted[i] = true
			}
		default: // filter, ident, working-tree-encoding
			converted[i] = true
		}
	}
	return converted, nil
}

// plainPath says whether p, an index entry's, names a place below the
// working tree's top that is not in a .git: no empty, ".", ".." or .git
// component, not absolute. Git refuses the others itself (verify_path);
// an index holding one is left to it.
func plainPath(p string) bool {
	if p == "" || strings.HasPrefix(p, "/") {
		return false
	}
	for _, c := range strings.Split(p, "/") {
		if c == "" || c == "." || c == ".." || strings.EqualFold(c, ".git") {
			return false
		}
	}
	return true
}

// byDirectory groups the entries' indexes by the directory they are in:
// a worker makes a directory's files alone, since the workers of one
// directory would wait on its lock (ext4: one creation at a time).
func byDirectory(entries []indexEntry) [][]int {
	at := map[string]int{}
	var groups [][]int
	for i, e := range entries {
		d := filepath.Dir(e.Path)
		k, ok := at[d]
		if !ok {
			k = len(groups)
			at[d] = k
			groups = append(groups, nil)
		}
		groups[k] = append(groups[k], i)
	}
	return groups
}

// makeDirs makes the directories the entries' files are in, as git's
// checkout does (0777 less the umask).
func makeDirs(dir string, entries []indexEntry) error {
	made := map[string]bool{}
	for _, e := range entries {
		d := filepath.Dir(e.Path)
		if e.Mode == modeGitlink {
			d = e.Path // a submodule's place is an empty directory until makeSubs fills it
		}
		if d == "." || made[d] {
			continue
		}
		if err := os.MkdirAll(filepath.Join(dir, d), 0o777); err != nil {
			return err
		}
		made[d] = true
	}
	return nil
}

// copyEntry writes e's file in the copy at dir from the checkout root when
// it may (take: git's checkout writes the blob's bytes as they are) and is
// the base's blob there, and sets e's stat to the new file's; it leaves
// e's stat zero, for git to write (finishIndex), when it is not.
// An error is the copy's own (its disk). buf is the worker's.
func copyEntry(root int, dir string, e *indexEntry, take bool, buf []byte) error {
	taken := false
	if take && (e.Mode == modeFile || e.Mode == modeExec) {
		var err error
		if taken, err = copyFile(root, dir, e, buf); err != nil {
			return err
		}
	}
	if !taken { // also a gitlink: a submodule's stat is its HEAD, not a file's
		*e = indexEntry{Mode: e.Mode, OID: e.OID, Path: e.Path}
	}
	return nil
}

// copyFile copies e's file from the checkout root into the copy at dir,
// and reports whether the copy is e's blob; if so, e's stat is set to
// the copy's. The bytes are hashed as they go through buf (one pass, no
// file read twice); raw descriptors, since an os.File's setup (its poller
// registration, refused for a regular file) cost more than the copy of a
// small file.
func copyFile(root int, dir string, e *indexEntry, buf []byte) (bool, error) {
	// O_PATH first: nothing is opened for reading (a FIFO, a device) until
	// it is known to be a regular file; no symlink is followed on the
	// way, and nothing outside the checkout is reached.
	pfd, err := unix.Openat2(root, e.Path, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
	if err != nil {
		return false, nil
	}
	var st unix.Stat_t
	if unix.Fstat(pfd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(pfd)
		return false, nil
	}
	// The O_PATH descriptor opened for reading: the same inode, whatever
	// its path names now.
	src, err := unix.Open("/proc/self/fd/"+strconv.Itoa(pfd), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	unix.Close(pfd)
	if err != nil {
		return false, nil
	}
	defer unix.Close(src)
	perm := uint32(0o666)
	if e.Mode == modeExec {
		perm = 0o777
	}
	dst, err := unix.Open(filepath.Join(dir, e.Path), unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, perm)
	if err != nil {
		return false, &os.PathError{Op: "create", Path: filepath.Join(dir, e.Path), Err: err}
	}
	defer unix.Close(dst)
	copyHook(e.Path)
	h := objectHash(len(e.OID))
	fmt.Fprintf(h, "blob %d\x00", st.Size)
	var n int64
	for n <= st.Size { // one byte past the size says the file grew: not taken, and a file that keeps growing is not read for ever
		k, err := unix.Read(src, buf[:min(int64(len(buf)), st.Size+1-n)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return false, nil // git writes it
		}
		if k == 0 {
			break
		}
		h.Write(buf[:k])
		if err := writeAll(dst, buf[:k]); err != nil {
			return false, nil // git writes it, or says why it cannot (a full disk)
		}
		n += int64(k)
	}
	var copied unix.Stat_t
	if err := unix.Fstat(dst, &copied); err != nil {
		return false, err
	}
	if n != st.Size || copied.Size != n || !bytes.Equal(h.Sum(nil), e.OID) {
		return false, nil
	}
	setStat(e, &copied)
	return true, nil
}

// writeAll writes b to fd whole.
func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		k, err := unix.Write(fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		b = b[k:]
	}
	return nil
}

// setStat records st in e, as git does.
func setStat(e *indexEntry, st *unix.Stat_t) {
	e.CtimeSec, e.CtimeNsec = uint32(st.Ctim.Sec), uint32(st.Ctim.Nsec)
	e.MtimeSec, e.MtimeNsec = uint32(st.Mtim.Sec), uint32(st.Mtim.Nsec)
	e.Dev, e.Ino, e.UID, e.GID, e.Size = uint32(st.Dev), uint32(st.Ino), st.Uid, st.Gid, uint32(st.Size)
}

// finishIndex writes the copy's index (git's lock protocol: index.lock,
// renamed), then has git write the files the user's checkout did not give
// (their entries' stat is zero) from the base's blobs, updating their
// entries.
func finishIndex(ctx context.Context, dir string, entries []indexEntry, oidLen int) error {
	gitDir := filepath.Join(dir, ".git")
	lock := filepath.Join(gitDir, "index.lock")
	if err := os.WriteFile(lock, encodeIndex(entries, oidLen), 0o666); err != nil {
		os.Remove(lock)
		return err
	}
	if err := os.Rename(lock, filepath.Join(gitDir, "index")); err != nil {
		os.Remove(lock)
		return err
	}
	var left strings.Builder
	for _, e := range entries {
		if e.Mode != modeGitlink && e.CtimeSec == 0 && e.MtimeSec == 0 && e.Ino == 0 {
			left.WriteString(e.Path)
			left.WriteByte(0)
		}
	}
	if left.Len() == 0 {
		return nil
	}
	_, err := gitIn(ctx, dir, left.String(), "-c", parallelCheckout, "checkout-index", "-f", "-u", "-z", "--stdin")
	return err
}

// oidLength is the length in bytes of the object id id names in hex.
func oidLength(id string) int {
	if _, err := hex.DecodeString(id); err != nil {
		return 0
	}
	return len(id) / 2
}
