package inside

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"mosaic/sandbox"
)

// The fail-open guard. systemd silently runs a unit without PrivateTmp,
// ProtectSystem, ProtectHome and same-path binds when it cannot build a mount
// namespace, and a broken or replaced bwrap could run the command with no
// sandbox at all. So each layer is checked from inside before the command
// runs, against facts read outside it: the exec shim checks systemd's layer
// against the host, the init checks bwrap's layer against the unit's.

func noNewPrivs() bool {
	v, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	return err == nil && v == 1
}

// CheckUnit checks, in the exec shim, the layer systemd promised: new user
// and mount namespaces (and a PID namespace where PrivatePIDs was sent), the
// home and the runtime dir hidden, a private /tmp, no_new_privs, and every
// bind the object mosaic checked.
func CheckUnit(p sandbox.Promise) error {
	if p.Scope != "" {
		return errors.New("a scope's promise reached an exec shim: a scope has none")
	}
	kinds := []string{"user", "mnt"}
	if p.PIDs {
		kinds = append(kinds, "pid")
	}
	if k, here := sharedNamespace(p, kinds...); k != "" {
		return fmt.Errorf("systemd did not give the unit a %s namespace of its own (%s)", k, here)
	}
	if id := sandbox.FileID(p.Home); id != "" && id == p.HomeID {
		return fmt.Errorf("the real home %s is visible in the unit (TemporaryFileSystem failed open)", p.Home)
	}
	if id := sandbox.FileID("/tmp"); id != "" && id == p.TmpID {
		return errors.New("the host's /tmp is visible in the unit (PrivateTmp failed open)")
	}
	if _, err := os.Stat(filepath.Join(p.RuntimeDir, "bus")); err == nil {
		return fmt.Errorf("the user bus in %s is reachable from the unit", p.RuntimeDir)
	}
	if !noNewPrivs() {
		return errors.New("no_new_privs is not set in the unit (NoNewPrivileges failed open)")
	}
	return checkBindIDs(p.Binds, "systemd")
}

// sharedNamespace returns the first of kinds (and "net" where the promise
// has a network namespace of its own) that this process does not have a
// namespace of its own in, against the outside's, with its namespace here;
// "" when every one is its own.
func sharedNamespace(p sandbox.Promise, kinds ...string) (kind, here string) {
	if p.Net && !weakened { // the weakened build's checks leave the network out
		kinds = append(kinds, "net")
	}
	ns := sandbox.Namespaces()
	for _, k := range kinds {
		if ns[k] == "" || ns[k] == p.NS[k] {
			return k, ns[k]
		}
	}
	return "", ""
}

// checkCgroup checks that this process is in a cgroup whose path ends with
// suffix, in the unified hierarchy or systemd's named one.
func checkCgroup(suffix string) error {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && (parts[1] == "" || parts[1] == "name=systemd") && strings.HasSuffix(parts[2], suffix) {
			return nil
		}
	}
	return fmt.Errorf("the session is not in its scope %s (cgroups: %s)", strings.TrimPrefix(suffix, "/"), strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", " "))
}

// inner is the promise the init checks: the unit's namespaces replace the
// host's, since bwrap's must differ from the unit's; but for the network
// namespace, which bwrap makes none of for a service (the unit's, checked
// here against the host's, is the sandbox's): the init checks it is not
// the host's.
func inner(p sandbox.Promise) sandbox.Promise {
	host := p.NS["net"]
	p.NS = sandbox.Namespaces()
	if host != "" {
		p.NS["net"] = host
	}
	return p
}

// CheckSandbox checks, in the init, the layer bwrap promised: new user,
// mount and PID namespaces (PID 1 of the latter), the real home and the
// runtime dir absent, no cgroup tree, no_new_privs, a /proc of its own PID
// namespace, and every bind the object mosaic checked; and a scope's init,
// first, that systemd has put it into its scope.
func CheckSandbox(p sandbox.Promise) error {
	if p.Scope != "" {
		if err := checkCgroup(p.Scope); err != nil {
			return err
		}
	}
	if os.Getpid() != 1 {
		return fmt.Errorf("not PID 1 of a PID namespace of its own (pid %d)", os.Getpid())
	}
	if k, here := sharedNamespace(p, "user", "mnt", "pid"); k != "" {
		return fmt.Errorf("bwrap did not make a %s namespace of its own (%s)", k, here)
	}
	if id := sandbox.FileID(p.Home); id != "" && id == p.HomeID {
		return fmt.Errorf("the real home %s is visible in the sandbox", p.Home)
	}
	if _, err := os.Stat(p.RuntimeDir); p.RuntimeDir != "" && err == nil {
		return fmt.Errorf("the runtime directory %s is visible in the sandbox", p.RuntimeDir)
	}
	if _, err := os.Stat("/sys/fs/cgroup"); err == nil {
		return errors.New("/sys/fs/cgroup is visible in the sandbox")
	}
	if !noNewPrivs() {
		return errors.New("no_new_privs is not set in the sandbox")
	}
	if err := checkOwnProc(); err != nil {
		return err
	}
	return checkBindIDs(p.Binds, "bwrap")
}

// checkOwnProc checks, in the init (PID 1), that /proc is a procfs of the
// sandbox's own PID namespace: a host /proc bound in (a workspace or bind
// under /proc, or a broken bwrap) would show the host's processes. In its
// own namespace's procfs /proc/self names this process as 1.
func checkOwnProc() error {
	var fs unix.Statfs_t
	if err := unix.Statfs("/proc", &fs); err != nil || fs.Type != unix.PROC_SUPER_MAGIC {
		return errors.New("/proc is not a procfs in the sandbox")
	}
	if self, err := os.Readlink("/proc/self"); err != nil || self != strconv.Itoa(os.Getpid()) {
		return fmt.Errorf("/proc is not the sandbox's own PID namespace's (/proc/self is %q, not %d)", self, os.Getpid())
	}
	return nil
}

// checkBindIDs compares what is mounted at each bound path with what mosaic
// checked there; layer names the layer that mounted it, for the reason.
func checkBindIDs(binds []sandbox.BindID, layer string) error {
	for _, b := range binds {
		st, err := sandbox.StatNoFollow(b.Path)
		if err != nil {
			return fmt.Errorf("%s did not mount the checked %s (%w): was it replaced, e.g. by a symlink, after mosaic checked it?", layer, b.Path, err)
		}
		if id := sandbox.StatID(st); id != b.ID {
			return fmt.Errorf("%s mounted another object at %s (%s, mosaic checked %s): was it replaced after mosaic checked it?", layer, b.Path, id, b.ID)
		}
	}
	return nil
}
