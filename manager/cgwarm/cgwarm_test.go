package cgwarm

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCgroupDir: the cgroup2 mount is found on a unified and a hybrid host,
// a subtree's mount holds only its own cgroups, escapes are undone, and a
// host without cgroup2 (or a path that is not clean) warms nothing.
func TestCgroupDir(t *testing.T) {
	const v1 = "30 23 0:26 / /sys/fs/cgroup/systemd rw,nosuid - cgroup cgroup rw,name=systemd\n"
	cases := []struct {
		name, cg, mi, want string
	}{
		{"unified", "0::/user.slice/user-1000.slice/user@1000.service/app.slice/x.scope\n",
			"24 23 0:22 / /sys/fs/cgroup rw,nosuid,nodev,noexec shared:4 - cgroup2 cgroup2 rw,nsdelegate\n",
			"/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice/x.scope"},
		{"hybrid", "1:name=systemd:/user.slice\n0::/user.slice/user-1053.slice/user@1053.service/init.scope\n",
			v1 + "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n",
			"/sys/fs/cgroup/unified/user.slice/user-1053.slice/user@1053.service/init.scope"},
		{"root cgroup", "0::/\n", "41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n", "/sys/fs/cgroup/unified"},
		{"subtree mount", "0::/user.slice/a/b\n", "41 31 0:38 /user.slice /mnt/cg rw - cgroup2 cgroup2 rw\n", "/mnt/cg/a/b"},
		{"subtree mount elsewhere", "0::/system.slice/a\n", "41 31 0:38 /user.slice /mnt/cg rw - cgroup2 cgroup2 rw\n", ""},
		{"subtree prefix only", "0::/user.slicex/a\n", "41 31 0:38 /user.slice /mnt/cg rw - cgroup2 cgroup2 rw\n", ""},
		{"escaped mountpoint", "0::/a\n", `41 31 0:38 / /mnt/my\040cg rw - cgroup2 cgroup2 rw` + "\n", "/mnt/my cg/a"},
		{"no cgroup2", "0::/a\n", v1, ""},
		{"no unified line", "1:name=systemd:/a\n", "41 31 0:38 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", ""},
		{"not clean", "0::/a/../b\n", "41 31 0:38 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", ""},
	}
	for _, c := range cases {
		got, err := cgroupDir([]byte(c.cg), []byte(c.mi))
		if c.want == "" {
			if err == nil {
				t.Errorf("%s: got %q, want no directory", c.name, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: got %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}

// ownOrSkip is this thread's cgroup directory, if this user may write its
// cgroup.threads (a delegated cgroup: the rig's, a desktop's); under CI,
// which runs in the rig, it must be.
func ownOrSkip(t *testing.T) string {
	t.Helper()
	dir, err := ownCgroup()
	if err == nil {
		err = unix.Access(filepath.Join(dir, "cgroup.threads"), unix.W_OK)
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI runs in the rig, whose cgroup is this user's: %v", err)
		}
		t.Skipf("this process's cgroup is not this user's to write (run as root, or under contrib/with-user-manager.sh): %v", err)
	}
	return dir
}

// current is this thread's "0::" line, as /proc has it now.
func current(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/thread-self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			return p
		}
	}
	t.Fatalf("no unified line in %q", b)
	return ""
}

// TestWarmMovesNothing: the warm-up goes through (the kernel took the move's
// lock: the write passed its checks) and leaves the process where it was.
func TestWarmMovesNothing(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ownOrSkip(t)
	before := current(t)
	if err := warm(); err != nil {
		t.Fatalf("the warm-up write failed in this process's own cgroup: %v", err)
	}
	if after := current(t); after != before {
		t.Fatalf("the warm-up moved this process from %s to %s", before, after)
	}
}

// TestWarmAfterAMoveMovesNothing: a process moved between reading its
// cgroup and the write (a run that systemd has just put into its tie scope)
// writes into a cgroup it is no longer in; the kernel refuses the move
// (EOPNOTSUPP: a thread leaves its domain cgroup only with its process), so
// the write moves nothing back. A write of the PID to cgroup.procs would
// have moved it: this test catches that.
func TestWarmAfterAMoveMovesNothing(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	own := ownOrSkip(t)
	before := current(t)
	other := filepath.Join(own, "mosaic-cgwarm-test-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(other, 0o755); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skipf("cannot make a cgroup beside this one: %v", err)
	}
	defer func() {
		if current(t) != before { // put a moved process back before the cgroup goes
			_ = os.WriteFile(filepath.Join(own, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0)
		}
		if err := os.Remove(other); err != nil {
			t.Error(err)
		}
	}()
	err := writeTID(other)
	if after := current(t); after != before {
		t.Fatalf("a warm-up write into a cgroup the process is not in moved it from %s to %s", before, after)
	}
	if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.EBUSY) {
		t.Fatalf("a warm-up write into another domain cgroup: %v, want EOPNOTSUPP (or EBUSY)", err)
	}
}
