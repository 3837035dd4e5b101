package statedir

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestStateHint: a full disk is said to be full, not a permission problem.
func TestStateHint(t *testing.T) {
	full := Hint(fmt.Errorf("write x: %w", unix.ENOSPC), "/s")
	if !strings.Contains(full, "full") || strings.Contains(full, "permission") {
		t.Errorf("ENOSPC: %q", full)
	}
	if denied := Hint(&os.PathError{Op: "mkdir", Path: "/s/x", Err: unix.EACCES}, "/s"); !strings.Contains(denied, "permissions") {
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
	if err := RemoveTree(tree); err != nil {
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
// its leftovers. Root enters a directory of mode 0 anyway, so the locked
// directory's mode after openUp is checked too. Seen to fail with the
// path-based openUp, as root (the mode) and as nobody (setpriv
// --reuid=65534 on the test binary: the removal).
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
	openUp(tree)
	var st unix.Stat_t
	if err := unix.Fstatat(fd, "locked", &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&0o700 != 0o700 {
		t.Errorf("the deep locked directory was not opened up: mode %o (%v)", st.Mode&0o7777, err)
	}
	_ = unix.Fchmodat(fd, "locked", 0, 0)
	if err := RemoveTree(tree); err != nil {
		t.Fatalf("RemoveTree: %.200v", err)
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
