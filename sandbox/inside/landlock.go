package inside

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"

	"mosaic/sandbox"
)

// Landlock, the kernel's unprivileged access control, is mosaic's third
// layer. The init never restricts itself: it restricts only the thread that
// starts the command (a locked thread that dies afterwards), so the command
// and everything it starts live in a Landlock domain while the init stays
// free to forward signals to it, reap it and relay its egress.
//
// Two rulesets:
//
//   - In every session (bwrap's layer), where the kernel has ABI 6: a ruleset
//     that handles no filesystem or network access and only scopes abstract
//     Unix sockets and signals to the session. Handling no filesystem access
//     keeps mount and pivot_root allowed, so the agents' own nested
//     sandboxes (bwrap inside a session) still work; the scoping closes the
//     host's abstract sockets even for --network host sessions.
//   - In --sandbox landlock (no bwrap): a ruleset that handles every
//     filesystem access the kernel knows, lets the command read and execute
//     only the system directories and its binds and write only its
//     workspace, its own home, /tmp and the --rw paths, connect over TCP only
//     to the egress relay (network allow) or nowhere (none), and scopes
//     abstract sockets and signals.

// initABI is the ABI the init builds its rulesets for.
func initABI() int {
	if os.Getenv(sandbox.LandlockFaultEnv) == "old-kernel" {
		return min(sandbox.LandlockABI(), sandbox.LandlockMinABI-1)
	}
	return sandbox.LandlockABI()
}

// rulesetAttr is struct landlock_ruleset_attr up to ABI 6 (scoped). Passing
// exactly this size keeps the call valid on every kernel from ABI 6 on.
type rulesetAttr struct{ handledFS, handledNet, scoped uint64 }

// pathBeneathAttr is the packed struct landlock_path_beneath_attr (12
// bytes: the kernel reads no padding).
type pathBeneathAttr struct {
	allowed uint64
	fd      int32
}

// netPortAttr is struct landlock_net_port_attr.
type netPortAttr struct{ allowed, port uint64 }

const (
	landlockRuleNetPort = 2 // LANDLOCK_RULE_NET_PORT (unix has LANDLOCK_RULE_PATH_BENEATH = 1)

	fsRead   = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	fsExec   = fsRead | unix.LANDLOCK_ACCESS_FS_EXECUTE
	fsDev    = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR | unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	fsFile   = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	scopeAll = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL
)

// fsHandled is every filesystem access right that ABI abi knows.
func fsHandled(abi int) uint64 {
	var r uint64 = 1<<13 - 1 // ABI 1: EXECUTE .. MAKE_SYM
	if abi >= 2 {
		r |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		r |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if abi >= 5 {
		r |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	return r
}

// LandlockRuleset is a ruleset ready to be applied (StartRestricted): its
// descriptor, and what it says (for the error of a failed restriction).
type LandlockRuleset struct {
	fd   int
	what string
}

func createRuleset(attr rulesetAttr) (int, error) {
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if errno != 0 {
		return -1, fmt.Errorf("landlock_create_ruleset: %w", errno)
	}
	unix.CloseOnExec(int(fd))
	return int(fd), nil
}

// ScopeRuleset is the ruleset of every session: abstract sockets and
// signals scoped, no access handled. It is nil (nothing to apply) where the
// kernel's ABI is older than LandlockMinABI.
func ScopeRuleset() (*LandlockRuleset, error) {
	if initABI() < sandbox.LandlockMinABI {
		return nil, nil
	}
	fd, err := createRuleset(rulesetAttr{scoped: scopeAll})
	if err != nil {
		return nil, err
	}
	return &LandlockRuleset{fd: fd, what: "abstract sockets and signals scoped"}, nil
}

// policyRuleset builds the ruleset of policy p at the kernel's ABI, which must be
// LandlockMinABI or newer: a session in this mode never runs with less.
func policyRuleset(p sandbox.LandlockPolicy) (*LandlockRuleset, error) {
	abi := initABI()
	if abi < sandbox.LandlockMinABI {
		return nil, fmt.Errorf("the kernel offers Landlock ABI %d, --sandbox landlock needs %d (Linux 6.12+)", abi, sandbox.LandlockMinABI)
	}
	handled := fsHandled(abi)
	attr := rulesetAttr{handledFS: handled, scoped: scopeAll}
	if p.Network != sandbox.NetworkHost {
		attr.handledNet = unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
	}
	fd, err := createRuleset(attr)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*LandlockRuleset, error) { unix.Close(fd); return nil, err }
	for _, set := range []struct {
		paths  []string
		access uint64
	}{{p.Exec, fsExec}, {p.Read, fsRead}, {p.Write, handled}, {p.Dev, fsDev}} {
		for _, path := range set.paths {
			if err := addPathRule(fd, path, set.access&handled); err != nil {
				return fail(err)
			}
		}
	}
	if p.Network == sandbox.NetworkAllow {
		rule := netPortAttr{allowed: unix.LANDLOCK_ACCESS_NET_CONNECT_TCP, port: sandbox.ProxyPort}
		if _, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(fd), landlockRuleNetPort, uintptr(unsafe.Pointer(&rule)), 0, 0, 0); errno != 0 {
			return fail(fmt.Errorf("landlock_add_rule (TCP port %d): %w", sandbox.ProxyPort, errno))
		}
	}
	return &LandlockRuleset{fd: fd, what: fmt.Sprintf("filesystem, TCP connect (network %s), abstract sockets and signals at ABI %d", p.Network, abi)}, nil
}

// addPathRule allows access beneath path; a file takes only the rights that
// apply to files. A path that does not exist is skipped: it grants nothing.
func addPathRule(ruleset int, path string, access uint64) error {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot open %s for its Landlock rule: %w", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("cannot stat %s for its Landlock rule: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		access &= fsFile
	}
	rule := pathBeneathAttr{allowed: access, fd: int32(fd)}
	if _, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&rule)), 0, 0, 0); errno != 0 {
		return fmt.Errorf("landlock_add_rule (%s): %w", path, errno)
	}
	return nil
}

// StartRestricted starts the command, as os.StartProcess does, in the
// Landlock domain of ruleset r (nil: unrestricted).
//
// landlock_restrict_self applies to the calling thread only. So the start
// runs on a goroutine locked to its own thread, which sets no_new_privs (as
// Landlock requires of an unprivileged caller), restricts itself and forks
// the command, which inherits the thread's domain; the goroutine then ends
// still locked, which makes the Go runtime end the thread: no other code of
// the init ever runs restricted. Nor does a thread cloned from it: the
// runtime never makes a new thread from a locked one (it asks its template
// thread, started by the first LockOSThread, before the restriction), so
// the domain cannot leak into the threads that run the init's goroutines.
// A failed restriction starts nothing.
func StartRestricted(r *LandlockRuleset, path string, argv []string, attr *os.ProcAttr) (*os.Process, error) {
	if r == nil {
		return os.StartProcess(path, argv, attr)
	}
	defer unix.Close(r.fd)
	type result struct {
		p   *os.Process
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			done <- result{err: &LandlockError{What: r.what, Err: fmt.Errorf("no_new_privs: %w", err)}}
			return
		}
		if _, _, errno := unix.RawSyscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(r.fd), 0, 0); errno != 0 {
			done <- result{err: &LandlockError{What: r.what, Err: fmt.Errorf("landlock_restrict_self: %w", errno)}}
			return
		}
		p, err := os.StartProcess(path, argv, attr)
		done <- result{p, err}
	}()
	res := <-done
	return res.p, res.err
}

// LandlockError is a restriction that could not be applied: the command
// did not start.
type LandlockError struct {
	What string
	Err  error
}

func (e *LandlockError) Error() string {
	return fmt.Sprintf("cannot apply the Landlock ruleset (%s): %v", e.What, e.Err)
}

// CheckLandlockSession checks, in the init of a --sandbox landlock session,
// what systemd's layer promised in place of bwrap's (the exec shim checked
// its namespaces against the host's already): the real home, the user bus
// and systemd's socket hidden, /run, /sys (with the cgroup tree) and the
// host's /dev/shm covered, no_new_privs set. Landlock itself is checked when it is applied.
func CheckLandlockSession(p sandbox.Promise) error {
	if id := sandbox.FileID(p.Home); id != "" && id == p.HomeID {
		return fmt.Errorf("the real home %s is visible in the session", p.Home)
	}
	for _, s := range []string{"bus", "systemd/private"} {
		if _, err := os.Stat(p.RuntimeDir + "/" + s); p.RuntimeDir != "" && err == nil {
			return fmt.Errorf("%s/%s is reachable from the session", p.RuntimeDir, s)
		}
	}
	if p.ShmID != "" && sandbox.FileID("/dev/shm") == p.ShmID {
		return errors.New("the host's /dev/shm is visible in the session")
	}
	if p.RunID != "" && sandbox.FileID("/run") == p.RunID {
		return errors.New("the host's /run (the system bus) is visible in the session")
	}
	if cgroupTreeVisible() {
		return errors.New("/sys/fs/cgroup is visible in the session")
	}
	if !noNewPrivs() {
		return errors.New("no_new_privs is not set in the session")
	}
	return nil
}

// cgroupTreeVisible reports whether a cgroup hierarchy can be reached at
// /sys/fs/cgroup. An empty directory that is no cgroup mount is not one (a
// fresh sysfs has the empty mount point), nor one that cannot be searched:
// systemd 257 mounts a sysfs of its own, cgroup tree included, over the
// unit's empty /sys, and InaccessiblePaths= puts a mode-000 directory over
// the tree's mount point.
func cgroupTreeVisible() bool {
	var st unix.Statfs_t
	if err := unix.Statfs("/sys/fs/cgroup", &st); err != nil {
		return false
	}
	if st.Type == unix.CGROUP2_SUPER_MAGIC || st.Type == unix.CGROUP_SUPER_MAGIC {
		return true
	}
	if unix.Access("/sys/fs/cgroup", unix.X_OK) == unix.EACCES {
		return false // systemd's inaccessible directory: nothing under it can be reached
	}
	entries, err := os.ReadDir("/sys/fs/cgroup")
	return err != nil || len(entries) > 0
}

// confineCommand checks the layers the init was promised (bwrap's, or in
// --sandbox landlock, policy non-empty, systemd's) and returns the ruleset
// the command is to start in: the scoping where the kernel has it, or the
// mode's whole policy, which must apply.
func confineCommand(p sandbox.Promise, policy string) (*LandlockRuleset, error) {
	if policy == "" {
		if err := CheckSandbox(p); err != nil {
			return nil, err
		}
		if weakened {
			return nil, nil // a test build: the attacks it shows must not meet the scoping
		}
		return ScopeRuleset()
	}
	pol, err := sandbox.DecodeLandlockPolicy(policy)
	if err != nil {
		return nil, err
	}
	if err := CheckLandlockSession(p); err != nil {
		return nil, err
	}
	// Not PID 1 here: orphans of the command come back to the init to be
	// reaped, not to the user manager.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("cannot become the session's subreaper: %w", err)
	}
	return policyRuleset(pol)
}
