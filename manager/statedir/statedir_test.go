package statedir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestStateHint: a full disk is said to be full, not a permission problem.
func TestStateHint(t *testing.T) {
	full := Hint(fmt.Errorf("write x: %w", unix.ENOSPC), "/s").Error()
	if !strings.Contains(full, "full") || strings.Contains(full, "permission") {
		t.Errorf("ENOSPC: %q", full)
	}
	if err := Hint(fmt.Errorf("write x: %w", unix.ENOSPC), "/s"); !errors.Is(err, unix.ENOSPC) {
		t.Errorf("ENOSPC: %v does not keep its cause", err)
	}
	if denied := Hint(&os.PathError{Op: "mkdir", Path: "/s/x", Err: unix.EACCES}, "/s").Error(); !strings.Contains(denied, "permissions") {
		t.Errorf("EACCES: %q", denied)
	}
}

// TestNameLock: a held name is busy for a second taker; released, it is
// free again, and its lock file goes with a state that is gone.
func TestNameLock(t *testing.T) {
	root := t.TempDir()
	state := filepath.Join(root, "sessions", "n")
	a, err := LockName(state)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LockName(state); err != ErrBusy {
		t.Errorf("second lock: %v, want busy", err)
	}
	a.Release()
	if _, err := os.Stat(LockPath(state)); !os.IsNotExist(err) {
		t.Errorf("the lock file of a name without state stayed (%v)", err)
	}
	b, err := LockName(state)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	b.Release()
}

// TestRemoveTreeOpensUp: a tree with directories locked (chmod 000) is
// removed; a symlink in it to a locked directory outside is not followed.
func TestRemoveTreeOpensUp(t *testing.T) {
	root := t.TempDir()
	outside := filepath.Join(root, "outside")
	os.Mkdir(outside, 0o500)
	defer os.Chmod(outside, 0o700)
	tree := filepath.Join(root, "tree")
	os.MkdirAll(filepath.Join(tree, "x", "y", "z"), 0o700)
	os.Symlink(outside, filepath.Join(tree, "x", "link"))
	os.Chmod(filepath.Join(tree, "x", "y"), 0)
	os.Chmod(filepath.Join(tree, "x"), 0)
	var err error
	withoutDAC(t, func() { err = RemoveTree(tree) })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(tree); !os.IsNotExist(err) {
		t.Errorf("the tree is still there (%v)", err)
	}
	if fi, _ := os.Stat(outside); fi.Mode().Perm() != 0o500 {
		t.Errorf("the directory outside changed to %v", fi.Mode())
	}
}

// TestRemoveTreeOpensUpDeep: a locked directory nested past PATH_MAX (a
// session nests its workspace copy's, or its home's, directories as deep as
// it likes) is opened up and removed too: by paths, openUp could not name
// it, and the state directory stayed, with every later rm and gc failing on
// its leftovers. Run without the capabilities that pass a mode
// (withoutDAC), as root's would hide the fault. Seen to fail with the
// path-based openUp.
func TestRemoveTreeOpensUpDeep(t *testing.T) {
	tree := filepath.Join(t.TempDir(), "tree")
	os.Mkdir(tree, 0o700)
	fd, err := unix.Open(tree, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.Repeat("d", 200)
	for range 30 { // 30 * 201 bytes: past PATH_MAX (4096)
		if err := unix.Mkdirat(fd, name, 0o700); err != nil {
			t.Fatal(err)
		}
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		unix.Close(fd)
		fd = next
	}
	defer unix.Close(fd)
	if err := unix.Mkdirat(fd, "locked", 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := unix.Openat(fd, "locked/f", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(f)
	if err := unix.Fchmodat(fd, "locked", 0, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Fchmodat(fd, "locked", 0o700, 0) })
	withoutDAC(t, func() { err = RemoveTree(tree) })
	if err != nil {
		t.Fatalf("RemoveTree: %.200v", err)
	}
	if _, err := os.Lstat(tree); !os.IsNotExist(err) {
		t.Errorf("the tree is still there (%v)", err)
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

// TestRemoveTreeDeeperThanDescriptors: a tree nested deeper than the
// process may open descriptors (a session nests its workspace copy's
// directories as deep as it likes: half a million takes seconds) is
// removed: a removal that holds a descriptor a level, as os.RemoveAll
// does, failed on it every time, and every later rm and gc with it.
// Here the limit is lowered to 64 and the tree is 300 deep, with a locked
// directory at the bottom. Seen to fail with os.RemoveAll and the
// recursive openUp (too many open files).
func TestRemoveTreeDeeperThanDescriptors(t *testing.T) {
	tree := filepath.Join(t.TempDir(), "tree")
	os.Mkdir(tree, 0o700)
	fd, err := unix.Open(tree, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		if err := unix.Mkdirat(fd, "d", 0o700); err != nil {
			t.Fatal(err)
		}
		if i%7 == 0 {
			f, err := unix.Openat(fd, "f", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			unix.Close(f)
		}
		next, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		unix.Close(fd)
		fd = next
	}
	if err := unix.Mkdirat(fd, "locked", 0); err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	var was unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &was); err != nil {
		t.Fatal(err)
	}
	low := was
	low.Cur = 64
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	err = RemoveTree(tree)
	if e := unix.Setrlimit(unix.RLIMIT_NOFILE, &was); e != nil {
		t.Fatal(e)
	}
	if err != nil {
		t.Fatalf("RemoveTree: %.300v", err)
	}
	if _, err := os.Lstat(tree); !os.IsNotExist(err) {
		t.Errorf("the tree is still there (%v)", err)
	}
}

// TestRemoveOrphanCaches: gc removes the tool caches of a workspace that
// is gone, read-only directories (Go's module cache) included, and keeps
// those of a workspace that is there.
func TestRemoveOrphanCaches(t *testing.T) {
	root, ws := t.TempDir(), t.TempDir()
	gone := filepath.Join(t.TempDir(), "gone")
	for name, w := range map[string]string{"a": ws, "b": gone} {
		c := filepath.Join(root, "caches", name)
		ro := filepath.Join(c, "go-mod", "m@v1")
		os.MkdirAll(ro, 0o700)
		os.WriteFile(filepath.Join(ro, "f.go"), nil, 0o444)
		os.Chmod(ro, 0o555)
		os.WriteFile(filepath.Join(c, ToolCacheWorkspace), []byte(w+"\n"), 0o600)
	}
	if err := RemoveOrphanCaches(root); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "caches", "a")); err != nil {
		t.Errorf("the cache of a workspace that is there was removed: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(root, "caches", "b")); err == nil {
		t.Error("the cache of a gone workspace is kept")
	}
	RemoveTree(filepath.Join(root, "caches")) // its read-only directories, for TempDir's cleanup
}

// TestRemoveLeftoversFinishLogs (issue 40): a finish step's output file
// left in the state root by a killed diff, apply or run is swept once
// stale; one made just now (a finish step about to unname it) and anything
// not a regular file are left.
func TestRemoveLeftoversFinishLogs(t *testing.T) {
	root := t.TempDir()
	old, fresh, dir := filepath.Join(root, ".finish-a-1"), filepath.Join(root, ".finish-a-2"), filepath.Join(root, ".finish-b-3")
	for _, f := range []string{old, fresh} {
		if err := os.WriteFile(f, []byte("out"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	long := time.Now().Add(-2 * FinishLogStale)
	for _, f := range []string{old, dir} {
		if err := os.Chtimes(f, long, long); err != nil {
			t.Fatal(err)
		}
	}
	if err := RemoveLeftovers(root); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(old); !os.IsNotExist(err) {
		t.Errorf("the stale finish file is still there: %v", err)
	}
	for _, f := range []string{fresh, dir} {
		if _, err := os.Lstat(f); err != nil {
			t.Errorf("%s was removed: %v", f, err)
		}
	}
}

// TestFinishLog (issue 40): the finish step's output file has no name in
// the state root, on a filesystem that makes one without (O_TMPFILE); the
// fallback's file (named a moment, locked) is swept by the next FinishLog
// of its session once its maker let go of its lock, never while it holds
// it; a file of another session is not this sweep's.
func TestFinishLog(t *testing.T) {
	root := t.TempDir()
	f, err := FinishLog(root, "s")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("out"); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(root); len(entries) != 0 {
		t.Errorf("the finish log is named in the state root: %v", entries)
	}
	made := func(name string) (string, *os.File) {
		path := filepath.Join(root, name)
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
			t.Fatal(err)
		}
		return path, f
	}
	live, held := made(".finish-s-1" + finishLockedSuffix)
	dead, gone := made(".finish-s-2" + finishLockedSuffix)
	gone.Close()
	other, otherF := made(".finish-t-3" + finishLockedSuffix)
	otherF.Close()
	unlocked := filepath.Join(root, ".finish-s-4")
	os.WriteFile(unlocked, nil, 0o600)
	g, err := FinishLog(root, "s")
	if err != nil {
		t.Fatal(err)
	}
	g.Close()
	if _, err := os.Lstat(dead); !os.IsNotExist(err) {
		t.Errorf("the file of a maker that is gone is left: %v", err)
	}
	for _, p := range []string{live, other, unlocked} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s was swept: %v", p, err)
		}
	}
	held.Close()
}

// TestRemoveAside: a state directory set aside goes with RemoveAside,
// unless another removal holds its lock (the background unit's), which
// RemoveLeftovers then leaves to it; the remove stage takes only a
// directory set aside below a sessions directory.
func TestRemoveAside(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "sessions", "s1")
	if err := os.MkdirAll(filepath.Join(dir, "home", "d"), 0o700); err != nil {
		t.Fatal(err)
	}
	aside, err := SetAside(dir)
	if err != nil || !strings.HasPrefix(filepath.Base(aside), ".removing-s1-") {
		t.Fatalf("SetAside: %q %v", aside, err)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Errorf("the name still has its state (%v)", err)
	}
	held, err := os.Open(aside)
	if err != nil {
		t.Fatal(err)
	}
	unix.Flock(int(held.Fd()), unix.LOCK_EX)
	if err := RemoveLeftovers(root); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(aside); err != nil {
		t.Errorf("RemoveLeftovers took a directory another removal holds (%v)", err)
	}
	held.Close()
	for _, bad := range [][]string{{}, {"relative/.removing-x"}, {filepath.Join(root, "sessions", "s2")}, {filepath.Join(root, "other", ".removing-x")}, {aside + "/../.removing-y"}} {
		if code := RemoveMain(bad); code != 2 {
			t.Errorf("RemoveMain(%q) = %d, want 2", bad, code)
		}
	}
	if code := RemoveMain([]string{aside}); code != 0 {
		t.Fatalf("RemoveMain: %d", code)
	}
	if _, err := os.Lstat(aside); !os.IsNotExist(err) {
		t.Errorf("the directory set aside is still there (%v)", err)
	}
	if _, err := SetAside(dir); err != nil {
		t.Errorf("SetAside of nothing: %v", err)
	}
}

// TestFinishLogLockWaits: the named finish log's maker waits for a lock
// another command's sweep holds a moment while it looks, where a lock that
// failed at once refused the maker's finish step (red team, by reading).
func TestFinishLogLockWaits(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".finish-x-1"+finishLockedSuffix)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sweep, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(sweep.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	go func() { time.Sleep(50 * time.Millisecond); sweep.Close() }()
	if err := flockRetry(int(f.Fd())); err != nil {
		t.Fatalf("the maker's lock while a sweep held it a moment: %v", err)
	}
}
