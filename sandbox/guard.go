package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The fail-open guard. systemd silently runs a unit without PrivateTmp,
// ProtectSystem, ProtectHome and same-path binds when it cannot build a mount
// namespace, and a broken or replaced bwrap could run the command with no
// sandbox at all. So each layer is checked from inside before the command
// runs, against facts read outside it: the exec shim checks systemd's layer
// against the host, the init checks bwrap's layer against the unit's.

// Promise is what a session's layers must differ in from the outside they
// were made in. mosaic fills it from the host when it starts a session; the
// exec shim replaces the namespaces with the unit's before bwrap runs.
type Promise struct {
	NS         map[string]string `json:"ns"`      // "user", "mnt", "pid" -> the outside's namespace (readlink /proc/self/ns/X)
	Home       string            `json:"home"`    // the user's home path
	HomeID     string            `json:"home_id"` // its device:inode outside
	TmpID      string            `json:"tmp_id"`  // /tmp's device:inode outside
	RuntimeDir string            `json:"runtime"` // $XDG_RUNTIME_DIR
	PIDs       bool              `json:"pids"`    // the unit has a PID namespace of its own (PrivatePIDs)
	// Scope, for a session that is a scope, is the end of the cgroup path
	// the init must be in ("/mosaic.slice/mosaic-NAME.scope"): a scope has
	// no unit layer to check, only the cgroup systemd moved it into.
	Scope string `json:"scope,omitempty"`
	// Net says the session has a network namespace of its own (network
	// none or allow): a service's unit's (PrivateNetwork), which bwrap
	// shares, or a scope's bwrap's.
	Net bool `json:"net,omitempty"`
	// ShmID is the host's /dev/shm device:inode, which a --sandbox landlock
	// session must not see (systemd covers it).
	ShmID string `json:"shm_id,omitempty"`
	RunID string `json:"run_id,omitempty"` // and /run's, likewise
	// Binds are the workspace's and every --ro/--rw path's identity as
	// mosaic checked them: each layer must have mounted exactly these.
	Binds []BindID `json:"binds,omitempty"`
}

// PromiseEnv carries the promise from the exec shim to the init.
const PromiseEnv = "MOSAIC_PROMISE"

// HostPromise reads the facts of the host (the caller of mosaic start).
func HostPromise(home, runtimeDir string, privatePIDs bool) Promise {
	return Promise{NS: namespaces(), Home: home, HomeID: fileID(home), TmpID: fileID("/tmp"), RuntimeDir: runtimeDir, PIDs: privatePIDs, ShmID: fileID("/dev/shm"), RunID: fileID("/run")}
}

// Encode is the promise as one argument.
func (p Promise) Encode() string {
	b, _ := json.Marshal(p)
	return string(b)
}

// DecodePromise reads an encoded promise.
func DecodePromise(s string) (Promise, error) {
	var p Promise
	if err := json.Unmarshal([]byte(s), &p); err != nil || p.NS == nil {
		return p, fmt.Errorf("unreadable sandbox promise %q", s)
	}
	return p, nil
}

func namespaces() map[string]string {
	ns := map[string]string{}
	for _, n := range []string{"user", "mnt", "pid", "net"} {
		if v, err := os.Readlink("/proc/self/ns/" + n); err == nil {
			ns[n] = v
		}
	}
	return ns
}

// fileID is a path's device:inode, or "" where it does not exist.
func fileID(path string) string {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return ""
	}
	return fmt.Sprintf("%d:%d", st.Dev, st.Ino)
}

func noNewPrivs() bool {
	v, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	return err == nil && v == 1
}

// CheckUnit checks, in the exec shim, the layer systemd promised: new user
// and mount namespaces (and a PID namespace where PrivatePIDs was sent), the
// home and the runtime dir hidden, a private /tmp, no_new_privs, and every
// bind the object mosaic checked.
func CheckUnit(p Promise) error {
	if p.Scope != "" {
		return errors.New("a scope's promise reached an exec shim: a scope has none")
	}
	kinds := []string{"user", "mnt"}
	if p.PIDs {
		kinds = append(kinds, "pid")
	}
	if k, here := p.sharedNamespace(kinds...); k != "" {
		return fmt.Errorf("systemd did not give the unit a %s namespace of its own (%s)", k, here)
	}
	if id := fileID(p.Home); id != "" && id == p.HomeID {
		return fmt.Errorf("the real home %s is visible in the unit (TemporaryFileSystem failed open)", p.Home)
	}
	if id := fileID("/tmp"); id != "" && id == p.TmpID {
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
func (p Promise) sharedNamespace(kinds ...string) (kind, here string) {
	if p.Net && !weakened { // the weakened build's checks leave the network out
		kinds = append(kinds, "net")
	}
	ns := namespaces()
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

// Inner is the promise the init checks: the unit's namespaces replace the
// host's, since bwrap's must differ from the unit's; but for the network
// namespace, which bwrap makes none of for a service (the unit's, checked
// here against the host's, is the sandbox's): the init checks it is not
// the host's.
func (p Promise) Inner() Promise {
	host := p.NS["net"]
	p.NS = namespaces()
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
func CheckSandbox(p Promise) error {
	if p.Scope != "" {
		if err := checkCgroup(p.Scope); err != nil {
			return err
		}
	}
	if os.Getpid() != 1 {
		return fmt.Errorf("not PID 1 of a PID namespace of its own (pid %d)", os.Getpid())
	}
	if k, here := p.sharedNamespace("user", "mnt", "pid"); k != "" {
		return fmt.Errorf("bwrap did not make a %s namespace of its own (%s)", k, here)
	}
	if id := fileID(p.Home); id != "" && id == p.HomeID {
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
