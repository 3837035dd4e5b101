// Package cgcount reads a session's resource counters from the cgroup
// filesystem: memory.current, pids.current and cpu.stat's usage_usec in the
// unit's cgroup, the files systemd answers MemoryCurrent, TasksCurrent and
// CPUUsageNSec from. mosaic list and status read them here instead of asking
// systemd for three properties a session: at 200 sessions those were 600 of
// the list's Gets, each a round trip systemd answers in turn, and half of
// its time.
//
// Only the unified hierarchy (cgroup2 mounted at /sys/fs/cgroup) is read.
// Where it is not (a hybrid or legacy host), a user manager's units have no
// counters (systemd answers none: the v1 controllers are not delegated to
// it), and neither does Read.
package cgcount

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Counters are a unit's counters, each nil where there is none: no such
// cgroup (the unit has ended), or a controller not enabled for it.
type Counters struct {
	MemoryBytes *uint64
	Tasks       *uint64
	CPUNSec     *uint64
}

// Mount is where the cgroup filesystem is mounted.
const Mount = "/sys/fs/cgroup"

// Unified reports whether Mount is the unified hierarchy (cgroup2), the
// only one Read reads.
func Unified() bool {
	var st unix.Statfs_t
	return unix.Statfs(Mount, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC
}

// Read reads the counters of the unit in slice under the manager's cgroup
// (its ControlGroup property: "/user.slice/user-1000.slice/user@1000.service"),
// in the unified hierarchy mounted at root. A path that is not absolute and
// clean, or names that are not one path element each, read nothing.
func Read(root, managerCgroup, slice, unit string) Counters {
	if !filepath.IsAbs(managerCgroup) || filepath.Clean(managerCgroup) != managerCgroup || !element(slice) || !element(unit) {
		return Counters{}
	}
	dir := filepath.Join(root, managerCgroup, slice, unit)
	var c Counters
	c.MemoryBytes = number(readSmall(filepath.Join(dir, "memory.current")))
	c.Tasks = number(readSmall(filepath.Join(dir, "pids.current")))
	if usec := statField(readSmall(filepath.Join(dir, "cpu.stat")), "usage_usec"); usec != nil {
		ns := *usec * 1000
		c.CPUNSec = &ns
	}
	return c
}

func element(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsRune(name, '/')
}

// maxFile bounds what is read of one counter file (cpu.stat is a few
// hundred bytes).
const maxFile = 4 << 10

// readSmall reads at most maxFile bytes of path, nil when it cannot be
// read: the cgroup is gone, or the controller's file does not exist.
func readSmall(path string) []byte {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFile))
	if err != nil {
		return nil
	}
	return b
}

// number parses a file holding one unsigned decimal ("max" and anything
// else: none).
func number(b []byte) *uint64 {
	n, err := strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 64)
	if b == nil || err != nil {
		return nil
	}
	return &n
}

// statField is the value of key in a flat-keyed file ("key value" lines).
func statField(b []byte, key string) *uint64 {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == key {
			return number([]byte(v))
		}
	}
	return nil
}
