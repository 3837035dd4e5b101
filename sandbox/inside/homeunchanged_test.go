package inside

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"mosaic/sandbox"
)

// TestHomeSaveWritesOnlyWhatChanged (issue 40): a save links the files
// the session left as they were loaded from the previous home, and writes
// the rest: a file rewritten with bytes of the same length and its time
// put back (what a write through a shared mapping leaves: times
// unchanged) is written, as is one whose mode changed and a new one. The
// bytes decide, never the times: with sameBytes answering yes from the
// size and time alone, changed.txt kept its old bytes (checked by hand).
func TestHomeSaveWritesOnlyWhatChanged(t *testing.T) {
	state, tmpfs := t.TempDir(), smallFSDir(t)
	old := filepath.Join(state, sandbox.HomeDirName)
	big := make([]byte, 3<<20+17) // more than one of sameBytes' parts
	rand.Read(big)
	writeTestFile(t, filepath.Join(old, "same.txt"), "unchanged")
	writeTestFile(t, filepath.Join(old, "sub", "deep.bin"), string(big))
	writeTestFile(t, filepath.Join(old, "changed.txt"), "aaaa")
	writeTestFile(t, filepath.Join(old, "mode.txt"), "mode")
	inode := func(path string) uint64 {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Ino
	}
	sameIno, deepIno, changedIno := inode(filepath.Join(old, "same.txt")), inode(filepath.Join(old, "sub", "deep.bin")), inode(filepath.Join(old, "changed.txt"))
	sfd, _ := unix.Open(state, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	defer unix.Close(sfd)
	var h *homeStore
	if fs := new(unix.Statfs_t); unix.Statfs(tmpfs, fs) == nil && fs.Type == unix.TMPFS_MAGIC {
		var err error
		if h, err = loadHome(sfd, tmpfs, true); err != nil {
			t.Fatal(err)
		}
	} else { // no tmpfs to load into: the copy the load makes, by hand
		rfd, _ := unix.Open(tmpfs, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		src, _ := unix.Open(old, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if _, err := copyHome(src, rfd, -1, 64<<20, 64<<20, nil); err != nil {
			t.Fatal(err)
		}
		unix.Close(src)
		h = &homeStore{state: sfd, root: rfd, size: 64 << 20, keep: true, notify: -1}
	}
	defer unix.Close(h.root)
	changed := filepath.Join(tmpfs, "changed.txt")
	fi, _ := os.Stat(changed)
	os.WriteFile(changed, []byte("bbbb"), 0o600)
	os.Chtimes(changed, fi.ModTime(), fi.ModTime())
	os.Chmod(filepath.Join(tmpfs, "mode.txt"), 0o640)
	writeTestFile(t, filepath.Join(tmpfs, "new.txt"), "new")

	h.end()
	r, ok := sandbox.ReadHomeReport(state)
	if !ok || r.State != sandbox.HomeSaved {
		t.Fatalf("the save's report: %+v %v", r, ok)
	}
	if r.Saved.Unchanged != 2 || r.Saved.Files != 5 {
		t.Errorf("saved %d files, %d of them unchanged: want 5 and 2 (same.txt, sub/deep.bin)", r.Saved.Files, r.Saved.Unchanged)
	}
	if inode(filepath.Join(old, "same.txt")) != sameIno || inode(filepath.Join(old, "sub", "deep.bin")) != deepIno {
		t.Error("an unchanged file was written again, not linked")
	}
	if b, _ := os.ReadFile(filepath.Join(old, "changed.txt")); string(b) != "bbbb" || inode(filepath.Join(old, "changed.txt")) == changedIno {
		t.Errorf("the file rewritten with its time put back was saved as %q (a link of the old one): the times were trusted", b)
	}
	if b, _ := os.ReadFile(filepath.Join(old, "sub", "deep.bin")); !bytes.Equal(b, big) {
		t.Error("the unchanged large file's bytes differ")
	}
	if fi, err := os.Stat(filepath.Join(old, "mode.txt")); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("mode.txt saved as %v (%v), want 0640", fi.Mode(), err)
	}
	if b, _ := os.ReadFile(filepath.Join(old, "new.txt")); string(b) != "new" {
		t.Errorf("new.txt saved as %q", b)
	}
	if fi, _ := os.Stat(filepath.Join(old, "same.txt")); fi.Sys().(*syscall.Stat_t).Nlink != 1 {
		t.Error("the previous home's link of an unchanged file is left (the old home not removed)")
	}
}

// TestHomeSaveCutShortKeepsPrevious: a save that links unchanged files and
// is cut short before its swap leaves the previous home's files as they
// were, bytes and modes.
func TestHomeSaveCutShortKeepsPrevious(t *testing.T) {
	state, tmpfs := t.TempDir(), smallFSDir(t)
	writeTestFile(t, filepath.Join(state, sandbox.HomeDirName, "same.txt"), "unchanged")
	sfd, _ := unix.Open(state, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	rfd, _ := unix.Open(tmpfs, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	defer unix.Close(sfd)
	defer unix.Close(rfd)
	src, _ := unix.Open(filepath.Join(state, sandbox.HomeDirName), unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if _, err := copyHome(src, rfd, -1, 8<<20, 8<<20, nil); err != nil {
		t.Fatal(err)
	}
	unix.Close(src)
	h := &homeStore{state: sfd, root: rfd, size: 8 << 20, keep: true, notify: -1}
	saveHook = func() { panic("killed") }
	func() {
		defer func() { _ = recover() }()
		_, _ = h.save()
	}()
	saveHook = func() {}
	fi, err := os.Stat(filepath.Join(state, sandbox.HomeDirName, "same.txt"))
	if b, _ := os.ReadFile(filepath.Join(state, sandbox.HomeDirName, "same.txt")); err != nil || string(b) != "unchanged" || fi.Mode().Perm() != 0o600 {
		t.Fatalf("a save cut short changed the previous home's file: %q %v", b, err)
	}
}

// TestHomeCopyLargeFilesBesideTheWalk: the large files copied on the
// pool's goroutines land in directories whose modes (one without write)
// and times are those of the source, set once the pool is done; a file
// made there after the time was set would have moved it, and one in the
// directory without write would have failed.
func TestHomeCopyLargeFilesBesideTheWalk(t *testing.T) {
	src, dst, s, d := copyDirs(t)
	big := make([]byte, 2<<20)
	rand.Read(big)
	for i := range 6 {
		writeTestFile(t, filepath.Join(src, "ro", "sub", "f"+string(rune('a'+i))), string(big))
	}
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, dir := range []string{filepath.Join(src, "ro", "sub"), filepath.Join(src, "ro")} {
		os.Chtimes(dir, old, old)
	}
	os.Chmod(filepath.Join(src, "ro"), 0o500)
	defer os.Chmod(filepath.Join(src, "ro"), 0o700)
	stats, err := copyHome(s, d, -1, 64<<20, 64<<20, nil)
	defer os.Chmod(filepath.Join(dst, "ro"), 0o700)
	if err != nil || stats.Files != 6 {
		t.Fatalf("copy: %+v %v", stats, err)
	}
	for _, dir := range []string{filepath.Join(dst, "ro", "sub"), filepath.Join(dst, "ro")} {
		if fi, err := os.Stat(dir); err != nil || !fi.ModTime().Equal(old) {
			t.Errorf("%s: time %v (%v), want %v", dir, fi.ModTime(), err, old)
		}
	}
	if fi, _ := os.Stat(filepath.Join(dst, "ro")); fi.Mode().Perm() != 0o500 {
		t.Errorf("ro's mode %v, want 0500", fi.Mode().Perm())
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "ro", "sub", "fc")); !bytes.Equal(b, big) {
		t.Error("a large file's bytes differ")
	}
}

// TestHomeCopyDeepDirectoryModes: a directory deeper than PATH_MAX below
// the home (20 names of 240 bytes) keeps its mode and time in the copy.
// Once the pool came, those are set after the walk by the directory's path
// from the copy's root, which the kernel refuses past PATH_MAX: the
// directory stayed 0700 with the copy's time (checked against that
// build: "mode 700, want 500").
func TestHomeCopyDeepDirectoryModes(t *testing.T) {
	_, _, s, d := copyDirs(t)
	name := string(bytes.Repeat([]byte("d"), 240))
	walk := func(root int, make bool) int {
		fd, _ := unix.Dup(root)
		for range 20 {
			if make {
				if err := unix.Mkdirat(fd, name, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
			unix.Close(fd)
			if err != nil {
				t.Fatal(err)
			}
			fd = next
		}
		return fd
	}
	deep := walk(s, true)
	f, _ := unix.Openat(deep, "f", unix.O_WRONLY|unix.O_CREAT, 0o600)
	unix.Write(f, []byte("deep"))
	unix.Close(f)
	old := unix.NsecToTimespec(time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano())
	unix.Fchmod(deep, 0o500)
	futimens(deep, old, old)
	defer unix.Close(deep)
	defer unix.Fchmod(deep, 0o700) // else a user without CAP_DAC_OVERRIDE (the rig's) cannot remove the test's files
	if _, err := copyHome(s, d, -1, 64<<20, 64<<20, nil); err != nil {
		t.Fatal(err)
	}
	got := walk(d, false)
	defer unix.Close(got)
	defer unix.Fchmod(got, 0o700)
	var st unix.Stat_t
	unix.Fstat(got, &st)
	if st.Mode&0o777 != 0o500 || st.Mtim != old {
		t.Errorf("the deep directory's copy: mode %o, want 500; time %v, want %v", st.Mode&0o777, st.Mtim, old)
	}
}

// TestHomeCopyCountsBesideThePool: the files the pool copies and the
// symlinks the walk makes meanwhile are all counted. The walk counted a
// symlink without the lock the pool's goroutines count under: a race
// (go test -race saw it) that could lose a count of either.
func TestHomeCopyCountsBesideThePool(t *testing.T) {
	src, _, s, d := copyDirs(t)
	for i := range 400 {
		name := filepath.Join(src, "f"+strconv.Itoa(i))
		writeTestFile(t, name, "x")
		os.Symlink("f"+strconv.Itoa(i), name+".link")
	}
	stats, err := copyHome(s, d, -1, 64<<20, 64<<20, nil)
	if err != nil || stats.Files != 800 {
		t.Fatalf("copy: %d files counted of 800, %v", stats.Files, err)
	}
}
