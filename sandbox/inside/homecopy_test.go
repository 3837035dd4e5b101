package inside

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"mosaic/sandbox"
)

// The save of a kept home (issue 31, the size bound): the tmpfs it copies
// is the session's, so each trick below is a test that first does harm
// against the weakened build's copy (go test -tags mosaic_weakened: a
// cp -rL that follows links, opens FIFOs and writes every byte) and is
// then refused by the copy mosaic runs.

// copyDirs opens src and a new empty dst for copyHome.
func copyDirs(t *testing.T) (src, dst string, srcFD, dstFD int) {
	t.Helper()
	src, dst = t.TempDir(), t.TempDir()
	var err error
	if srcFD, err = unix.Open(src, unix.O_RDONLY|unix.O_DIRECTORY, 0); err != nil {
		t.Fatal(err)
	}
	if dstFD, err = unix.Open(dst, unix.O_RDONLY|unix.O_DIRECTORY, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(srcFD); unix.Close(dstFD) })
	return src, dst, srcFD, dstFD
}

// diskUse is the bytes dir's files take on disk, below it, each inode
// once.
func diskUse(t *testing.T, dir string) int64 {
	var n int64
	seen := map[uint64]bool{}
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err != nil || fi == nil {
			return nil
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && !seen[st.Ino] {
			seen[st.Ino] = true
			n += st.Blocks * 512
		}
		return nil
	})
	return n
}

// TestHomeSaveNoFollow: a symlink the session made to a directory outside
// its home (a stand-in for /home/USER/.ssh, or /proc/self/fd/N, the state
// directory the init holds) is saved as a link, never followed.
func TestHomeSaveNoFollow(t *testing.T) {
	src, dst, s, d := copyDirs(t)
	secret := t.TempDir()
	writeTestFile(t, filepath.Join(secret, "id_ed25519"), "PRIVATE KEY")
	if err := os.Symlink(secret, filepath.Join(src, ".ssh-link")); err != nil {
		t.Fatal(err)
	}
	if _, err := copyHome(s, d, -1, 64<<20, 64<<20, nil); err != nil {
		t.Fatal(err)
	}
	fi, lerr := os.Lstat(filepath.Join(dst, ".ssh-link"))
	copied := lerr == nil && fi.Mode().IsDir()
	if weakened {
		if !copied {
			t.Fatal("the weakened copy did not follow the link: the check below could not fail")
		}
		return
	}
	if copied || lerr != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link was not saved as a link (%v, %v)", fi, lerr)
	}
	if target, _ := os.Readlink(filepath.Join(dst, ".ssh-link")); target != secret {
		t.Errorf("the link saved reads %q, want %q", target, secret)
	}
}

// TestHomeSaveHardLinks: one file of 1 MiB linked 64 times is 1 MiB in
// the tmpfs; saved as 64 copies it would be 64 MiB of the user's disk, and
// with more links any amount. It is saved once, the others linked to it.
func TestHomeSaveHardLinks(t *testing.T) {
	src, dst, s, d := copyDirs(t)
	writeTestFile(t, filepath.Join(src, "blob"), string(make([]byte, 1<<20)))
	for i := 0; i < 63; i++ {
		if err := os.Link(filepath.Join(src, "blob"), filepath.Join(src, "link"+string(rune('A'+i)))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := copyHome(s, d, -1, 8<<20, 8<<20, nil); err != nil {
		t.Fatal(err)
	}
	use := diskUse(t, dst)
	if weakened {
		if use < 32<<20 {
			t.Fatalf("the weakened copy wrote %d bytes: the check below could not fail", use)
		}
		return
	}
	if use > 2<<20 {
		t.Errorf("64 links of 1 MiB took %d bytes of disk", use)
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(dst, "linkZ"), &st); err != nil || st.Nlink != 64 {
		t.Errorf("the links were not kept as links: nlink %d (%v)", st.Nlink, err)
	}
}

// TestHomeSaveSparse: a sparse file of 1 TB takes no room in the tmpfs;
// copied byte by byte it would fill the user's disk. Its apparent size is
// charged to the bound: it is left out, and counted. (The weakened copy
// is shown 64 MiB of it, which it writes in full: enough to show the
// harm without filling this machine's disk.)
func TestHomeSaveSparse(t *testing.T) {
	src, dst, s, d := copyDirs(t)
	size := int64(1 << 40)
	if weakened {
		size = 64 << 20
	}
	if err := os.WriteFile(filepath.Join(src, "sparse"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(src, "sparse"), size); err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(src, "small"), "kept")
	stats, err := copyHome(s, d, -1, 8<<20, 8<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	use := diskUse(t, dst)
	if weakened {
		if use < 32<<20 {
			t.Fatalf("the weakened copy wrote %d bytes: the check below could not fail", use)
		}
		return
	}
	if use > 1<<20 || stats.Skipped["too-large"] != 1 {
		t.Errorf("a 1 TB sparse file: %d bytes of disk, skipped %v", use, stats.Skipped)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "small")); err != nil || string(b) != "kept" {
		t.Errorf("the rest of the home was not saved: %q %v", b, err)
	}
}

// TestHomeSaveFIFO: a FIFO no one writes hangs a save that opens it (until
// systemd's SIGKILL, and the home is lost). It is skipped and counted.
func TestHomeSaveFIFO(t *testing.T) {
	src, _, s, d := copyDirs(t)
	fifo := filepath.Join(src, "pipe")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan copyStats, 1)
	go func() {
		stats, _ := copyHome(s, d, -1, 8<<20, 8<<20, nil)
		done <- stats
	}()
	select {
	case stats := <-done:
		if weakened {
			t.Fatal("the weakened copy did not hang on the FIFO: the check below could not fail")
		}
		if stats.Skipped["fifo"] != 1 {
			t.Errorf("the FIFO was not counted as skipped: %v", stats.Skipped)
		}
	case <-time.After(2 * time.Second):
		// Let the hung copy go: a writer that opens and closes.
		if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
		<-done
		if !weakened {
			t.Fatal("the save hung on a FIFO")
		}
	}
}

// TestHomeSaveSwap: the save writes a new home beside the old one and
// swaps them by one rename; a save cut short before the swap (here a
// panic in its hook, as a SIGKILL would) leaves the old home whole, and
// the next save takes what it left.
func TestHomeSaveSwap(t *testing.T) {
	state, tmpfs := t.TempDir(), smallFSDir(t)
	writeTestFile(t, filepath.Join(state, sandbox.HomeDirName, "old"), "previous")
	writeTestFile(t, filepath.Join(tmpfs, "new"), "this session's")
	sfd, _ := unix.Open(state, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	rfd, _ := unix.Open(tmpfs, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	defer unix.Close(sfd)
	defer unix.Close(rfd)
	h := &homeStore{state: sfd, root: rfd, size: 8 << 20, keep: true, notify: -1}
	saveHook = func() { panic("killed") }
	func() {
		defer func() { _ = recover() }()
		_, _ = h.save()
	}()
	saveHook = func() {}
	if b, err := os.ReadFile(filepath.Join(state, sandbox.HomeDirName, "old")); err != nil || string(b) != "previous" {
		t.Fatalf("a save cut short damaged the previous home: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(state, sandbox.HomeDirName, "new")); err == nil {
		t.Fatal("a save cut short changed the previous home")
	}
	h.end() // the save, its report, then the old home's removal
	if r, ok := sandbox.ReadHomeReport(state); !ok || r.State != sandbox.HomeSaved {
		t.Fatalf("the save's report: %+v %v", r, ok)
	}
	if b, err := os.ReadFile(filepath.Join(state, sandbox.HomeDirName, "new")); err != nil || string(b) != "this session's" {
		t.Fatalf("the save did not swap the new home in: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(state, sandbox.HomeDirName, "old")); err == nil {
		t.Error("the saved home still holds the old one's file")
	}
	if _, err := os.Lstat(filepath.Join(state, sandbox.HomeSaving)); err == nil {
		t.Errorf("%s is left behind", sandbox.HomeSaving)
	}
}

func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestHomeSaveUnreadable: a directory and a file the session made mode
// 000 are saved (the copy runs without a capability to read them
// anyway), with their modes.
func TestHomeSaveUnreadable(t *testing.T) {
	src, dst, s, d := copyDirs(t)
	writeTestFile(t, filepath.Join(src, "x", "y", "z"), "deep")
	writeTestFile(t, filepath.Join(src, "secretfile"), "kept")
	os.Chmod(filepath.Join(src, "secretfile"), 0)
	os.Chmod(filepath.Join(src, "x"), 0)
	t.Cleanup(func() { os.Chmod(filepath.Join(src, "x"), 0o700); os.Chmod(filepath.Join(dst, "x"), 0o700) })
	if _, err := copyHome(s, d, -1, 8<<20, 8<<20, nil); err != nil {
		t.Fatal(err)
	}
	if weakened {
		return
	}
	if fi, err := os.Stat(filepath.Join(dst, "secretfile")); err != nil || fi.Mode().Perm() != 0 {
		t.Errorf("the mode 000 file: %v %v", fi, err)
	}
	os.Chmod(filepath.Join(dst, "x"), 0o700)
	if b, err := os.ReadFile(filepath.Join(dst, "x", "y", "z")); err != nil || string(b) != "deep" {
		t.Errorf("below a mode 000 directory: %q %v", b, err)
	}
}

// TestHomeSaveLockedDirectory: a directory the session locked (chmod 000)
// is saved with its mode, so the next save's removal of the home it
// replaced meets it locked: it must open it up, or that home stays as
// HomeSaving and every later save of the name is refused (cannot remove an
// earlier save's). The saves run without a capability to pass a mode
// (withoutDAC): the rig's inits have CAP_DAC_OVERRIDE in their user
// namespace, which hides the fault there (a rig test of three runs passed
// before the fix too), so this guards an init without it. Seen to fail
// before removeBelow opened locked directories up: the third save was
// not-saved.
func TestHomeSaveLockedDirectory(t *testing.T) {
	state, tmpfs := t.TempDir(), smallFSDir(t)
	writeTestFile(t, filepath.Join(tmpfs, "x", "y"), "below a locked directory")
	t.Cleanup(func() {
		for _, d := range []string{filepath.Join(tmpfs, "x"), filepath.Join(state, sandbox.HomeDirName, "x"), filepath.Join(state, sandbox.HomeSaving, "x")} {
			os.Chmod(d, 0o700)
		}
	})
	sfd, _ := unix.Open(state, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	rfd, _ := unix.Open(tmpfs, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	defer unix.Close(sfd)
	defer unix.Close(rfd)
	for i := range 3 {
		os.Chmod(filepath.Join(tmpfs, "x"), 0)
		writeTestFile(t, filepath.Join(tmpfs, "n"), strconv.Itoa(i))
		withoutDAC(t, func() {
			(&homeStore{state: sfd, root: rfd, size: 8 << 20, keep: true, notify: -1}).end()
		})
		if r, ok := sandbox.ReadHomeReport(state); !ok || r.State != sandbox.HomeSaved {
			t.Fatalf("save %d: %+v", i, r)
		}
		if b, err := os.ReadFile(filepath.Join(state, sandbox.HomeDirName, "n")); err != nil || string(b) != strconv.Itoa(i) {
			t.Fatalf("save %d: the kept home holds %q (%v)", i, b, err)
		}
		if _, err := os.Lstat(filepath.Join(state, sandbox.HomeSaving)); err == nil {
			t.Errorf("save %d: the replaced home is left as %s", i, sandbox.HomeSaving)
		}
	}
}

// withoutDAC runs fn on a thread of its own without the capabilities that
// pass a file's mode (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH); the thread
// ends with fn.
func withoutDAC(t *testing.T, fn func()) {
	t.Helper()
	done := make(chan error)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread goes with the goroutine
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			done <- err
			return
		}
		data[0].Effective &^= 1<<unix.CAP_DAC_OVERRIDE | 1<<unix.CAP_DAC_READ_SEARCH
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			done <- err
			return
		}
		fn()
		done <- nil
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestHomeSaveCarriesHidden: what the kept home holds where the session
// had a bind (a workspace below the home) was hidden from it, neither
// loaded nor saved: the save carries it into the new home. A symlink on
// the way is not followed.
func TestHomeSaveCarriesHidden(t *testing.T) {
	state := t.TempDir()
	writeTestFile(t, filepath.Join(state, sandbox.HomeDirName, "src", "app", "notes"), "the user's")
	os.MkdirAll(filepath.Join(state, sandbox.HomeSaving, "src"), 0o700)
	outside := t.TempDir()
	writeTestFile(t, filepath.Join(outside, "x", "secret"), "outside")
	os.Symlink(outside, filepath.Join(state, sandbox.HomeDirName, "link"))
	os.MkdirAll(filepath.Join(state, sandbox.HomeSaving, "link"), 0o700)
	sfd, _ := unix.Open(state, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	defer unix.Close(sfd)
	carryHidden(sfd, []string{"src/app", "link/x"})
	if b, err := os.ReadFile(filepath.Join(state, sandbox.HomeSaving, "src", "app", "notes")); err != nil || string(b) != "the user's" {
		t.Errorf("the hidden entry was not carried: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(outside, "x", "secret")); err != nil {
		t.Errorf("a link on the way was followed: %v", err)
	}
}

// TestHomeStoreOutlivesCollection: the descriptor passHomeStore hands bwrap
// survives a garbage collection before the exec (its *os.File's finalizer
// closed it, and a start with 10,000 variables failed "cannot load the
// session's home: bad file descriptor").
func TestHomeStoreOutlivesCollection(t *testing.T) {
	env, err := passHomeStore(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := strconv.Atoi(strings.TrimPrefix(env[len(env)-1], sandbox.HomeFDEnv+"="))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	for range 3 {
		runtime.GC()
		time.Sleep(10 * time.Millisecond) // finalizers run on their own goroutine
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
		t.Fatalf("the home store's descriptor %d is gone after a collection: %v", fd, err)
	}
}

// TestHomeSaveDirectories: a directory, a long symlink and a long name
// take nothing of the tmpfs's bound (the kernel keeps them outside it), but
// a block or more of the user's disk each: a session bounded to 4 MiB made
// a million empty directories (and symlinks of 100 bytes, and names of 255)
// and its save wrote gigabytes. They are charged a budget of their own, as
// large as the bound: the save writes at most twice the bound.
func TestHomeSaveDirectories(t *testing.T) {
	src, dst, s, d := copyDirs(t)
	long := strings.Repeat("n", 200)
	for i := 0; i < 1500; i++ {
		if err := os.Mkdir(filepath.Join(src, fmt.Sprintf("%s%04d", long, i)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(strings.Repeat("t", 100), filepath.Join(src, fmt.Sprintf("l%04d", i))); err != nil {
			t.Fatal(err)
		}
	}
	const bound = 1 << 20
	stats, err := copyHome(s, d, -1, bound, bound, nil)
	if err != nil {
		t.Fatal(err)
	}
	use := diskUse(t, dst)
	if weakened {
		if use < 4*bound {
			t.Fatalf("the weakened copy wrote %d bytes: the check below could not fail", use)
		}
		return
	}
	if use > 2*bound+diskBlock || stats.Skipped["too-large"] == 0 {
		t.Errorf("3,000 directories and symlinks in a home of 1 MiB took %d bytes of disk (left out: %v)", use, stats.Skipped)
	}
}

// smallFSDir is a directory standing for the session's tmpfs home: the
// save counts the home's file system's used blocks, so a directory on the
// disk (t.TempDir) would count the whole disk, and the save refuses once
// the disk is half full. /dev/shm is a tmpfs of its own where there is one.
func smallFSDir(t *testing.T) string {
	var fs unix.Statfs_t
	if unix.Statfs("/dev/shm", &fs) == nil && fs.Type == unix.TMPFS_MAGIC && unix.Access("/dev/shm", unix.W_OK) == nil {
		d, err := os.MkdirTemp("/dev/shm", "mosaic-test-home-")
		if err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}
