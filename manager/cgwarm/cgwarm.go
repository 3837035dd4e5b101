// Package cgwarm takes the kernel's cost of moving a process into a cgroup
// off a session start's path. Every start has systemd move a process (a run
// into its tie scope, a scope's init into the scope, on 252 a service's
// forked child into the service), and the first such move after a quiet
// moment waits for an RCU grace period, ~6 ms here: the kernel's
// cgroup_threadgroup_rwsem, a percpu rwsem, goes back to its fast mode one
// or two grace periods after its last writer, and its next writer waits one
// out. Warm makes mosaic that writer, in the background, while it does
// other work; systemd's move a moment later finds the window open and
// costs ~0.1 ms.
//
// The write moves nothing: it is this thread's own ID into its own
// cgroup's cgroup.threads. The kernel takes the rwsem once it has found
// the thread and before it checks the move (which is the point: a PID
// that names no process fails first, and warms nothing), and then either
// moves the thread into the cgroup it is already in (nothing), or, when
// the process was moved meanwhile (say into its tie scope), refuses: a
// thread moves between two domain cgroups only with its whole process,
// through cgroup.procs (EOPNOTSUPP). (Only a move within one threaded
// subtree, which neither mosaic nor systemd makes, could be undone.) A
// cgroup.threads this user cannot write (a login session's scope is
// root's) just means no warm-up. A session reaches none of it: the path
// is this process's own, from /proc, and a session sees no cgroup tree.
package cgwarm

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Warm starts one warm-up write in the background and returns at once;
// every error is ignored (a write refused is a warm-up missed, never a
// failure of the start).
func Warm() {
	go func() { _ = warm() }()
}

// warm writes this thread's ID into its own cgroup's cgroup.threads.
func warm() error {
	// The thread whose ID is written is the one that reads its cgroup and
	// writes: a goroutine may change threads between any two steps.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	dir, err := ownCgroup()
	if err != nil {
		return err
	}
	return writeTID(dir)
}

// writeTID writes this thread's ID into dir's cgroup.threads: the move of
// this thread into dir, which takes the kernel's rwsem even when it moves
// nothing (dir is its cgroup) or is refused (dir is a domain cgroup it is
// not in: EOPNOTSUPP). The caller has locked its OS thread.
func writeTID(dir string) error {
	f, err := os.OpenFile(filepath.Join(dir, "cgroup.threads"), os.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString(strconv.Itoa(unix.Gettid()))
	return err
}

// errNoCgroup2: no unified hierarchy is mounted, or this thread's place in
// it cannot be told.
var errNoCgroup2 = errors.New("no cgroup2 hierarchy to warm")

// ownCgroup is the directory of this thread's cgroup in the unified
// hierarchy: its "0::" line in /proc/thread-self/cgroup under the first
// cgroup2 mount of /proc/self/mountinfo (/sys/fs/cgroup, or
// /sys/fs/cgroup/unified on a hybrid host).
func ownCgroup() (string, error) {
	cg, err := os.ReadFile("/proc/thread-self/cgroup")
	if err != nil {
		return "", err
	}
	mi, err := mountinfo()
	if err != nil {
		return "", err
	}
	return cgroupDir(cg, mi)
}

// mountinfo is /proc/self/mountinfo, read once per process (a start warms
// twice): where the cgroup2 hierarchy is mounted does not change under a
// command, and if it did a warm-up would be missed, nothing worse.
var mountinfo = sync.OnceValues(func() ([]byte, error) { return os.ReadFile("/proc/self/mountinfo") })

// cgroupDir finds the directory of the cgroup named by cg (the contents of
// /proc/PID/cgroup) under the cgroup2 mount named in mi (of
// /proc/PID/mountinfo). A mount of a subtree (its root field not "/")
// holds only the cgroups under that root.
func cgroupDir(cg, mi []byte) (string, error) {
	var path string
	for _, line := range strings.Split(string(cg), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			path = p
			break
		}
	}
	if !strings.HasPrefix(path, "/") || filepath.Clean(path) != path {
		return "", errNoCgroup2
	}
	s := bufio.NewScanner(bytes.NewReader(mi))
	for s.Scan() {
		// ID parent major:minor root mountpoint options [optional...] - type source superoptions
		before, after, ok := strings.Cut(s.Text(), " - ")
		if !ok || !strings.HasPrefix(after, "cgroup2 ") {
			continue
		}
		f := strings.Fields(before)
		if len(f) < 5 {
			continue
		}
		root, mnt := unescape(f[3]), unescape(f[4])
		rel, ok := strings.CutPrefix(path, strings.TrimSuffix(root, "/"))
		if !ok || (rel != "" && !strings.HasPrefix(rel, "/")) {
			continue
		}
		return filepath.Join(mnt, rel), nil
	}
	return "", errNoCgroup2
}

// unescape undoes mountinfo's octal escapes (\040 for a space, \011, \012,
// \134).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
