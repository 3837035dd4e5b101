// Package statedir is a session's state directory on disk: made (Prepare:
// home, tmp, the record), locked by name, removed, and kept consistent under
// races and crashes; and what an error on that state means to the user.
//
//   - A session name is claimed by an flock on StateRoot/locks/NAME, held
//     from before the state directory is touched until the start job is over
//     (or, for run, until its state is gone). Two starts of one name: the
//     second is refused at once (session-exists); rm and gc take the same
//     lock, so they never remove what a start is preparing. The kernel drops
//     the lock when its holder dies, also by kill -9.
//   - A state directory is removed by renaming it aside first
//     (sessions/.removing-NAME-RANDOM), so that a removal cut short leaves
//     nothing that looks like a session; rm and gc finish such leftovers.
//   - A credential file that no running unit owns is removed by the next
//     mosaic command (the manager's sweepCredentials, at Connect).
package statedir

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"mosaic/internal/errcode"
	"mosaic/internal/regfile"
	"mosaic/internal/testhook"
	"mosaic/manager/records"
	"mosaic/manager/request"
	"mosaic/sandbox"
	"mosaic/sandbox/egress"
	"mosaic/units"
)

// Lock is a session name this process holds.
type Lock struct {
	f        *os.File
	path     string
	stateDir string
}

// LockPath is the lock file of the session whose state directory is
// stateDir (StateRoot/sessions/NAME): StateRoot/locks/NAME.
func LockPath(stateDir string) string {
	return filepath.Join(filepath.Dir(filepath.Dir(stateDir)), "locks", filepath.Base(stateDir))
}

// ErrBusy: another mosaic command holds the name.
var ErrBusy = errors.New("name busy")

// LockName takes the name of the session whose state directory is stateDir,
// without waiting: ErrBusy when another process holds it. The lock file
// is checked to be the one at its path once locked, since a releaser may
// unlink it in between.
func LockName(stateDir string) (*Lock, error) {
	path := LockPath(stateDir)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	for i := 0; i < 100; i++ {
		fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0o600)
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: path, Err: err}
		}
		if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
			unix.Close(fd)
			if err == unix.EWOULDBLOCK {
				return nil, ErrBusy
			}
			return nil, &os.PathError{Op: "flock", Path: path, Err: err}
		}
		var held, now unix.Stat_t
		if unix.Fstat(fd, &held) == nil && unix.Lstat(path, &now) == nil && held.Ino == now.Ino && held.Dev == now.Dev {
			return &Lock{f: os.NewFile(uintptr(fd), path), path: path, stateDir: stateDir}, nil
		}
		unix.Close(fd) // unlinked by its last holder: take the new one
	}
	return nil, fmt.Errorf("cannot lock %s: it keeps being replaced", path)
}

// Release lets the name go; the lock file goes too when the session has no
// state left, so that names that are gone leave no lock files behind.
func (l *Lock) Release() {
	if l == nil {
		return
	}
	if _, err := os.Lstat(l.stateDir); os.IsNotExist(err) {
		os.Remove(l.path)
	}
	l.f.Close()
}

// Hint says what to do about an error on mosaic's state: a full disk
// is not a permission problem. The error it returns reads as err with the
// advice after it, and unwraps to err, so that a caller above can still
// ask errors.Is of the cause (a full disk: unix.ENOSPC).
func Hint(err error, dir string) error {
	rt := os.Getenv("XDG_RUNTIME_DIR")
	inRuntime := rt != "" && (dir == rt || strings.HasPrefix(dir, rt+"/"))
	switch {
	case inRuntime && (errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT)):
		// mosaic keeps only sockets' directories there, and gc frees
		// nothing in it: what fills it is another program's.
		return fmt.Errorf("%w (the runtime directory %s, a small file system in memory, is full: see what fills it with `du -sh %s/* | sort -h` and remove it; `mosaic gc` frees nothing there)", err, rt, rt)
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT):
		return fmt.Errorf("%w (the file system of %s is full: free some space, e.g. with `mosaic gc`)", err, dir)
	case errors.Is(err, unix.EROFS):
		return fmt.Errorf("%w (%s is on a read-only file system)", err, dir)
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return fmt.Errorf("%w (check the permissions of %s)", err, dir)
	}
	return err
}

// Remove removes a session's state directory: renamed aside first
// (SetAside), so that a removal cut short leaves no half session under its
// name, then removed (RemoveAside).
func Remove(stateDir string) error {
	aside, err := SetAside(stateDir)
	if aside == "" {
		return err
	}
	return RemoveAside(aside)
}

// asidePrefix starts the name of a state directory set aside.
const asidePrefix = ".removing-"

// SetAside renames a session's state directory aside, out of its name's
// way in one step, and returns where it went; "" when there was none.
// What is set aside is no session any more: RemoveAside removes it, or
// the next RemoveLeftovers.
func SetAside(stateDir string) (string, error) {
	var r [6]byte
	_, _ = rand.Read(r[:])
	aside := filepath.Join(filepath.Dir(stateDir), asidePrefix+filepath.Base(stateDir)+"-"+hex.EncodeToString(r[:]))
	if err := os.Rename(stateDir, aside); err != nil {
		if os.IsNotExist(err) {
			return "", nil
		}
		return "", err
	}
	testhook.Pause("renamed-aside")
	return aside, nil
}

// RemoveAside removes a state directory set aside (SetAside) under a lock
// on it: one another removal holds (the background unit's, or another
// command's RemoveLeftovers) is left to it.
func RemoveAside(aside string) error { return removeAside(aside, func() {}) }

// removeAside is RemoveAside, calling locked once it holds the lock.
func removeAside(aside string, locked func()) error {
	f, err := os.OpenFile(aside, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if os.IsNotExist(err) {
		return nil
	}
	if err == nil {
		defer f.Close()
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == unix.EWOULDBLOCK {
			return nil
		}
	}
	locked()
	return RemoveTree(aside)
}

// RemoveStage is the stage name of the unit that removes a state
// directory set aside in the background (units.RemoveProperties): mosaic
// RemoveStage DIR.
const RemoveStage = "remove-state"

// RemoveMain is that unit's program: DIR must be a state directory set
// aside (SESSIONS/.removing-NAME-RANDOM, absolute); it says on stderr (the
// unit's journal) why it could not remove it.
func RemoveMain(args []string) int {
	if len(args) != 1 || !filepath.IsAbs(args[0]) || filepath.Clean(args[0]) != args[0] ||
		!strings.HasPrefix(filepath.Base(args[0]), asidePrefix) || filepath.Base(filepath.Dir(args[0])) != "sessions" {
		fmt.Fprintln(os.Stderr, "usage: mosaic "+RemoveStage+" STATE_ROOT/sessions/"+asidePrefix+"NAME-RANDOM")
		return 2
	}
	if err := removeAside(args[0], func() { testhook.Pause(RemoveStage) }); err != nil {
		fmt.Fprintf(os.Stderr, "mosaic: cannot remove %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

// RemoveLeftovers finishes the removals that were cut short, removes
// the lock files of names with no state that nobody holds (a run killed
// after its state went: its lock file is released only by its holder),
// and the finish steps' output files left behind (removeFinishLogs).
func RemoveLeftovers(stateRoot string) error {
	removeFinishLogs(stateRoot, time.Now())
	entries, _ := os.ReadDir(filepath.Join(stateRoot, "sessions"))
	var errs []error
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), asidePrefix) {
			if err := RemoveAside(filepath.Join(stateRoot, "sessions", e.Name())); err != nil {
				errs = append(errs, err)
			}
		}
	}
	locks, _ := os.ReadDir(filepath.Join(stateRoot, "locks"))
	for _, e := range locks {
		dir := filepath.Join(stateRoot, "sessions", e.Name())
		if _, err := os.Lstat(dir); !os.IsNotExist(err) || !e.Type().IsRegular() {
			continue
		}
		if l, err := LockName(dir); err == nil {
			l.Release() // no state: the file goes
		}
	}
	return errors.Join(errs...)
}

// RemoveTree removes dir and everything below it. A session may have left
// directories it cannot be removed from (chmod 000), nested past PATH_MAX,
// or deeper than a process may hold descriptors (os.RemoveAll holds one a
// level): where os.RemoveAll fails, removeDeep goes on. A symlink is never
// followed, so nothing outside dir is touched.
func RemoveTree(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	return removeDeep(dir)
}

// deepFrame is a directory removeDeep is in or above: its name in its
// parent, its identity, and its subdirectories still to remove.
type deepFrame struct {
	name     string
	dev, ino uint64
	pending  []string
}

// removeDeep removes dir and everything below it holding two descriptors
// at most, whatever its depth: it goes down by name, opening each
// directory up for its owner (enterDir), and back up by "..", checked to
// be the directory it came from (nothing of the session runs: a tree
// moved meanwhile is an error, never a removal outside dir).
func removeDeep(dir string) error {
	cur, st, err := enterDir(unix.AT_FDCWD, dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	stack := []deepFrame{{name: dir, dev: st.Dev, ino: st.Ino}}
	if stack[0].pending, err = emptyOfFiles(cur); err != nil {
		unix.Close(cur)
		return err
	}
	for len(stack) > 1 || len(stack[0].pending) > 0 {
		top := &stack[len(stack)-1]
		if n := len(top.pending); n > 0 {
			name := top.pending[n-1]
			top.pending = top.pending[:n-1]
			next, nst, err := enterDir(cur, name)
			if err != nil {
				unix.Close(cur)
				return err
			}
			unix.Close(cur)
			cur = next
			f := deepFrame{name: name, dev: nst.Dev, ino: nst.Ino}
			if f.pending, err = emptyOfFiles(cur); err != nil {
				unix.Close(cur)
				return err
			}
			stack = append(stack, f)
			continue
		}
		up, err := unix.Openat(cur, "..", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(cur)
		if err != nil {
			return err
		}
		cur = up
		parent := stack[len(stack)-2]
		var ust unix.Stat_t
		if err := unix.Fstat(up, &ust); err != nil || ust.Dev != parent.dev || ust.Ino != parent.ino {
			unix.Close(up)
			return fmt.Errorf("cannot remove %s: it changed while it was removed", dir)
		}
		if err := unix.Unlinkat(up, top.name, unix.AT_REMOVEDIR); err != nil && err != unix.ENOENT {
			unix.Close(up)
			return &os.PathError{Op: "rmdir", Path: top.name, Err: err}
		}
		stack = stack[:len(stack)-1]
	}
	unix.Close(cur)
	return os.Remove(dir)
}

// enterDir opens the directory name in parent for reading, first giving
// its owner rwx on it: opened with O_PATH|O_NOFOLLOW, checked to be a
// directory on that descriptor, and changed through /proc/self/fd, so a
// symlink is never followed.
func enterDir(parent int, name string) (int, unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := unix.Openat(parent, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, st, &os.PathError{Op: "open", Path: name, Err: err}
	}
	defer unix.Close(fd)
	if err := unix.Fstat(fd, &st); err != nil {
		return -1, st, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return -1, st, &os.PathError{Op: "open", Path: name, Err: unix.ENOTDIR}
	}
	if st.Mode&0o700 != 0o700 {
		_ = unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), (st.Mode&0o7777)|0o700)
	}
	d, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, st, &os.PathError{Op: "open", Path: name, Err: err}
	}
	return d, st, nil
}

// emptyOfFiles removes every entry of the directory fd that is not a
// directory and returns the names of those that are. It reads the
// directory again until a reading removes nothing: one that removes as it
// reads may miss an entry.
func emptyOfFiles(fd int) ([]string, error) {
	for {
		dirs, removed, err := readAndUnlink(fd)
		if err != nil || removed == 0 {
			return dirs, err
		}
	}
}

// readAndUnlink is one reading of emptyOfFiles, from the directory's start.
func readAndUnlink(fd int) (dirs []string, removed int, _ error) {
	if _, err := unix.Seek(fd, 0, io.SeekStart); err != nil {
		return nil, 0, err
	}
	d, err := unix.Dup(fd)
	if err != nil {
		return nil, 0, err
	}
	f := os.NewFile(uintptr(d), ".")
	defer f.Close()
	for {
		entries, err := f.ReadDir(1024)
		for _, e := range entries {
			if e.IsDir() {
				dirs = append(dirs, e.Name())
				continue
			}
			switch uerr := unix.Unlinkat(fd, e.Name(), 0); uerr {
			case nil:
				removed++
			case unix.EISDIR:
				dirs = append(dirs, e.Name())
			case unix.ENOENT:
			default:
				return nil, 0, &os.PathError{Op: "unlink", Path: e.Name(), Err: uerr}
			}
		}
		if err == io.EOF || (err == nil && len(entries) == 0) {
			return dirs, removed, nil
		}
		if err != nil {
			return nil, 0, err
		}
	}
}

// InitArgsName is the file in a state directory that holds the init's
// arguments for the exec shim (units.Launch.InitArgsFile).
const InitArgsName = "init-args"

// ErrNameTaken: a made-up name has a state directory already.
var ErrNameTaken = errors.New("generated name taken")

// Prepare makes the session's state directory: home/ kept across runs of
// the same name (an agent's login and settings), tmp/ emptied each time,
// and the record. It returns the record as written (a start's status
// describes the session from it rather than read it back) and a function
// that undoes what it created, for a start that fails. l is the session's
// launch as the start has made it so far: its stdio, its terminal, the file
// of its init's arguments, written here.
func Prepare(s units.Spec, l units.Launch) (rec records.Record, undo func(), err error) {
	fresh := false
	var made []string // the socket directories this start made
	undo = func() {
		if fresh {
			Remove(s.StateDir)
		}
		for _, d := range made {
			os.Remove(d)
		}
	}
	fail := func(err error) (records.Record, func(), error) {
		undo()
		var pe *os.PathError
		dir := filepath.Dir(s.StateDir)
		if errors.As(err, &pe) {
			dir = filepath.Dir(pe.Path)
		}
		return records.Record{}, nil, errcode.StateDir.New("cannot prepare the session's state directory %s: %w", s.StateDir, Hint(err, dir))
	}
	// mkdir makes a socket directory in the runtime directory, which undo
	// removes again if this start made it.
	mkdir := func(d string) error {
		if _, err := os.Lstat(d); err == nil {
			return nil
		}
		if err := testMkdirError(d); err != nil {
			return err
		}
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
		made = append(made, d)
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(s.StateDir), 0o700); err != nil {
		return fail(err)
	}
	switch err := os.Mkdir(s.StateDir, 0o700); {
	case err == nil:
		fresh = true
	case !os.IsExist(err):
		return fail(err)
	case !s.NameGiven: // a made-up name that another session has
		return records.Record{}, nil, ErrNameTaken
	}
	if err := RemoveTree(s.SessionTmp()); err != nil {
		return fail(err)
	}
	// What an earlier run's init said of the home is not this run's.
	if err := os.Remove(filepath.Join(s.StateDir, sandbox.HomeReportName)); err != nil && !os.IsNotExist(err) {
		return fail(err)
	}
	if err := os.Mkdir(s.SessionHome(), 0o700); err != nil && !os.IsExist(err) {
		return fail(err)
	}
	if err := makeSocketDirs(s, mkdir); err != nil {
		return fail(err)
	}
	writeGitConfig(s)
	if err := makeToolCache(s); err != nil {
		return fail(err)
	}
	if s.OwnGitDir != "" {
		if err := os.MkdirAll(s.OwnGitDir, 0o700); err != nil {
			return fail(err)
		}
	}
	if err := records.MarkStarting(s.StateDir); err != nil {
		return fail(err)
	}
	// The room kept for end.json, by a session whose end is written
	// (a one-shot run's is not: writing and removing it cost ~0.2 ms each).
	if units.EndRecorded(s, l) {
		if err := records.ReserveEnd(s.StateDir); err != nil {
			return fail(err)
		}
	}
	rec = RecordOf(s, l)
	if err := records.Write(s.StateDir, rec); err != nil {
		return fail(err)
	}
	if l.InitArgsFile != "" {
		// Read by the exec shim; the state directory is not the sandbox's.
		if err := os.WriteFile(l.InitArgsFile, sandbox.EncodeInitArgs(units.InitArgs(s)[1:]), 0o600); err != nil {
			return fail(err)
		}
	}
	return rec, undo, nil
}

// makeToolCache makes the workspace's tool caches' directories
// (sandbox.ToolCaches) and names the workspace in it, for gc.
func makeToolCache(s units.Spec) error {
	if s.ToolCache == "" {
		return nil
	}
	// The workspace is named first: gc removes a cache that names none.
	if err := os.MkdirAll(s.ToolCache, 0o700); err != nil {
		return err
	}
	ws := filepath.Join(s.ToolCache, ToolCacheWorkspace)
	if b, err := os.ReadFile(ws); err != nil || string(b) != s.Workspace+"\n" {
		if err := os.WriteFile(ws, []byte(s.Workspace+"\n"), 0o600); err != nil {
			return err
		}
	}
	for _, c := range sandbox.ToolCaches {
		if err := os.MkdirAll(filepath.Join(s.ToolCache, c.Name), 0o700); err != nil {
			return err
		}
	}
	return nil
}

// RemoveOrphanCaches removes, from the state root's caches/, the tool
// caches of workspaces that are gone (mosaic gc): a cache whose workspace
// file is missing or names a directory that no longer exists.
func RemoveOrphanCaches(stateRoot string) error {
	dir := filepath.Join(stateRoot, "caches")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var failed []string
	for _, e := range entries {
		c := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(filepath.Join(c, ToolCacheWorkspace))
		if err == nil {
			if fi, err := os.Stat(strings.TrimSuffix(string(b), "\n")); err == nil && fi.IsDir() {
				continue
			}
		}
		if err := RemoveTree(c); err != nil {
			failed = append(failed, err.Error())
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("cannot remove the tool caches of gone workspaces: %s", strings.Join(failed, "; "))
	}
	return nil
}

// ToolCacheWorkspace is the file of a tool cache that names its workspace.
const ToolCacheWorkspace = "workspace"

// makeSocketDirs makes, with mkdir, the runtime directory's socket
// directories the session's units bind: the bus's, the egress proxy's (with
// its control directory, emptied), the publish forwarder's; and, emptied,
// the egress proxy's record directory in the state directory.
func makeSocketDirs(s units.Spec, mkdir func(string) error) error {
	if s.MayLaunch { // bound into the session whether the bus runs yet or not
		if err := mkdir(s.BusDir); err != nil {
			return err
		}
	}
	// The egress record is this run's: an earlier one's refusals go.
	if err := removeRecord(egress.RecordDir(s.StateDir)); err != nil {
		return err
	}
	if s.Network == sandbox.NetworkAllow { // the egress proxy's socket goes here
		if err := mkdir(s.EgressDir); err != nil {
			return err
		}
		// A new session of a kept name starts with no grants: a grant
		// outlives a restart of its proxy, never its session.
		control := egress.ControlDir(s.EgressDir)
		if err := os.RemoveAll(control); err != nil {
			return err
		}
		if err := os.MkdirAll(control, 0o700); err != nil {
			return err
		}
		if err := os.MkdirAll(egress.RecordDir(s.StateDir), 0o700); err != nil {
			return err
		}
		if s.TUN {
			if err := regfile.WriteAtomic(filepath.Join(s.EgressDir, sandbox.HostsName), []byte(sandbox.HostsFile(s.Name))); err != nil {
				return err
			}
		}
		if err := trustPlaceholders(s); err != nil {
			return err
		}
	}
	if len(s.Publish) > 0 { // the publish forwarder's socket goes here
		if err := mkdir(units.PublishDir(s.RuntimeDir, s.Name)); err != nil {
			return err
		}
	}
	if s.SSHAgent != nil { // the ssh agent filter's socket goes here
		if err := mkdir(units.SSHAgentDir(s.RuntimeDir, s.Name)); err != nil {
			return err
		}
	}
	return nil
}

// removeRecord removes an earlier session's egress record directory. Its
// proxy may still be writing its last record there as it stops (a start of
// the name right after an interrupted one: its proxy's unit stops beside
// this start), which makes RemoveAll fail with ENOTEMPTY: it is tried again
// for a second.
func removeRecord(dir string) error {
	var err error
	for i := 0; i < 20; i++ {
		if err = os.RemoveAll(dir); !errors.Is(err, unix.ENOTEMPTY) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
	return err
}

// writeGitConfig writes the session's ~/.gitconfig (units.Spec.GitConfig)
// into its home, atomically: renamed over whatever the session left at
// that name, a symlink included, never followed. A home where it cannot be
// written (a directory of that name) gets none; the start goes on. With no
// git identity (--no-git-identity), one an earlier start wrote is removed.
func writeGitConfig(s units.Spec) {
	path := filepath.Join(s.SessionHome(), ".gitconfig")
	if s.GitConfig != "" {
		_ = regfile.WriteAtomic(path, []byte(s.GitConfig))
		return
	}
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return
	}
	head := make([]byte, len(request.GitConfigHeader))
	n, _ := io.ReadFull(f, head)
	fi, serr := f.Stat()
	f.Close()
	if serr == nil && fi.Mode().IsRegular() && string(head[:n]) == request.GitConfigHeader {
		os.Remove(path)
	}
}

// FinishLogStale is how old a .finish-NAME-* file in the state root must be
// to be swept when nothing tells whether its maker is alive: a mosaic
// before issue 40 kept the file named while the step ran, and took no lock
// on it (a diff, apply or run killed meanwhile left it for good).
const FinishLogStale = time.Minute

// finishLockedSuffix ends the name of a finish step's output file that its
// maker holds an exclusive flock on for as long as it lives (FinishLog's
// fallback): one whose lock is free was left by a maker that is gone.
const finishLockedSuffix = ".locked"

// FinishLog makes the file session name's finish step writes its output
// to, which its caller reads back through the descriptor. It has no name
// (O_TMPFILE), so a diff, apply or run killed at any point leaves nothing
// in the state root. Where the filesystem cannot make one (NFS, an old
// kernel) it is named a moment, locked (flock) before it is unnamed, so
// that the next command tells a file its maker left (killed in between)
// from one in use. Either way it first sweeps what such makers left.
func FinishLog(stateRoot, name string) (*os.File, error) {
	sweepFinishLogs(stateRoot, ".finish-"+name+"-", time.Now())
	path := filepath.Join(stateRoot, ".finish-"+name)
	if !testhook.Flag("MOSAIC_TEST_FINISH_NAMED") {
		fd, err := unix.Open(stateRoot, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
		if err == nil {
			testhook.Pause("finish-log-made")
			return os.NewFile(uintptr(fd), path), nil
		}
		if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EINVAL) {
			return nil, err
		}
	}
	f, err := os.CreateTemp(stateRoot, ".finish-"+name+"-*"+finishLockedSuffix)
	if err != nil {
		return nil, err
	}
	// A sweep between the file's making and its lock may remove it: the
	// step writes through the descriptor, which stays good. The lock
	// waits: another command's sweep holds it a moment while it looks
	// (a lock that failed at once refused this command's finish step).
	if err := flockRetry(int(f.Fd())); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	testhook.Pause("finish-log-made")
	os.Remove(f.Name())
	return f, nil
}

// flockRetry takes an exclusive flock on fd, waiting for it (a signal's
// interruption retried).
func flockRetry(fd int) error {
	for {
		if err := unix.Flock(fd, unix.LOCK_EX); err != unix.EINTR {
			return err
		}
	}
}

// removeFinishLogs removes the finish steps' output files of stateRoot
// that their makers left (sweepFinishLogs), whatever the session.
func removeFinishLogs(stateRoot string, now time.Time) {
	sweepFinishLogs(stateRoot, ".finish-", now)
}

// sweepFinishLogs removes the regular files of stateRoot named with prefix
// that no live command uses: one whose name ends finishLockedSuffix once
// its lock is free (its maker is gone), any other once older than
// FinishLogStale at now. A directory, a link or a FIFO of that name is
// left.
func sweepFinishLogs(stateRoot, prefix string, now time.Time) {
	entries, _ := os.ReadDir(stateRoot)
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) || !e.Type().IsRegular() {
			continue
		}
		path := filepath.Join(stateRoot, e.Name())
		if strings.HasSuffix(e.Name(), finishLockedSuffix) {
			f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
			if err != nil {
				continue
			}
			if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
				os.Remove(path)
			}
			f.Close()
			continue
		}
		if fi, err := e.Info(); err == nil && now.Sub(fi.ModTime()) > FinishLogStale {
			os.Remove(path)
		}
	}
}

// trustPlaceholders makes the files the session's trust variables name
// until its proxy writes its CA over them (egress.WritePlaceholders): the
// --ca-file's certificates, or none, and the bundle the session would
// trust without the proxy, as the session sees it.
func trustPlaceholders(s units.Spec) error {
	var caPEM []byte
	bundle := egress.SystemBundle()
	if s.CAFile != "" {
		var err error
		if caPEM, err = os.ReadFile(s.CAFile); err != nil {
			return err
		}
		bundle = s.CABundle
		if !s.Landlock() {
			bundle = sandbox.CABundleInside
		}
	}
	return egress.WritePlaceholders(s.EgressDir, caPEM, bundle)
}
