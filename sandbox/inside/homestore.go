package inside

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"mosaic/sandbox"
)

// The session's home is a tmpfs of its own (homeBind), bounded. Its home
// on disk (StateDir/home, kept across sessions of a name) is never
// mounted: the exec shim (or, for a scope, mosaic) opens the state
// directory and hands it to the init as an inherited descriptor
// (HomeFDEnv); the init, undumpable, loads the home into the tmpfs before
// the command starts and marks the descriptor close-on-exec, so the
// command never holds it. When the command has ended, the init kills
// every process left, and for a kept home saves the tmpfs to a new
// directory beside the old one (HomeSaving), syncs it, and swaps the two
// with one rename (RENAME_EXCHANGE): a crash or a SIGKILL at any point
// before leaves the previous home whole. It says what it did in
// HomeReportName, which the session's end record takes up.

// passHomeStore opens the state directory for the init the shim is about
// to become bwrap of: inherited (no close-on-exec), named in env.
func passHomeStore(stateDir string, env []string) ([]string, error) {
	f, err := sandbox.OpenHomeStore(stateDir)
	if err != nil {
		return nil, err
	}
	fd := int(f.Fd())
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0); err != nil {
		return nil, err
	}
	// f must outlive the exec: kept from its finalizer, which would close
	// the descriptor at the next garbage collection (a start with 10,000
	// variables collected before the exec, and the init found no home).
	keep = append(keep, f)
	os.Setenv(sandbox.HomeFDEnv, strconv.Itoa(fd)) // for the weakened build, which hands bwrap the whole environment
	return append(env, sandbox.HomeFDEnv+"="+strconv.Itoa(fd)), nil
}

// takeHomeStore is the init's descriptor of the state directory, marked
// close-on-exec; -1 for none (a --sandbox landlock session: no tmpfs).
func takeHomeStore() int {
	v := os.Getenv(sandbox.HomeFDEnv)
	os.Unsetenv(sandbox.HomeFDEnv)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return -1
	}
	unix.CloseOnExec(fd)
	return fd
}

// homeStore is the init's hold on the session's home: the state
// directory on disk, and the tmpfs.
type homeStore struct {
	state, root int
	size        uint64
	keep        bool
	loadTook    time.Duration
	notify      int // systemd's notification socket (a service's), for the save's time; -1 for none
	// hidden are the kept home's entries the load met a bind over, for
	// the save to carry (carryHidden) wherever the session moved the bind.
	hidden []string
	// watch sees whether the session wrote the tmpfs (homewatch.go), for
	// a kept home; loaded is what the load copied into it.
	watch  *homeWatch
	loaded sandbox.CopyStats
}

// keepNotify keeps the init's descriptor on systemd's notification socket
// for a save (h.notify), or closes it when there is no home to save.
func (h *homeStore) keepNotify(fd int) {
	if h == nil || !h.keep {
		unix.Close(fd)
		return
	}
	h.notify = fd
}

// askForTime asks systemd (EXTEND_TIMEOUT_USEC) for the time a save of
// used bytes may take beyond the stop timeout: 10 s and one more for each
// 50 MiB, a slow disk's pace.
func (h *homeStore) askForTime(used uint64) {
	if h.notify < 0 {
		return
	}
	extra := 10*time.Second + time.Duration(used/(50<<20))*time.Second
	notifyStatus(h.notify, "EXTEND_TIMEOUT_USEC="+strconv.FormatInt(extra.Microseconds(), 10))
}

// askForMore asks systemd for 10 s more, from now: the save calls it as
// it goes (copyHome's progress), since no estimate from the home's size
// holds for a home of many entries (empty files, directories: no bytes of
// the tmpfs, a syscall or five each).
func (h *homeStore) askForMore() {
	if h.notify >= 0 {
		notifyStatus(h.notify, "EXTEND_TIMEOUT_USEC="+strconv.FormatInt((10*time.Second).Microseconds(), 10))
	}
}

// loadHome loads the home on disk (in the state directory state) into
// the tmpfs at home, before the command starts. keep says the home is
// saved back at the end. A home that does not fit its bound is a refusal.
func loadHome(state int, home string, keep bool) (*homeStore, error) {
	root, err := unix.Open(home, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("cannot open the session's home %s: %w", home, err)
	}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(root, &fs); err != nil || fs.Type != unix.TMPFS_MAGIC {
		unix.Close(root)
		return nil, fmt.Errorf("the session's home %s is not the tmpfs mosaic asked bwrap for", home)
	}
	began := time.Now()
	h := &homeStore{state: state, root: root, size: fs.Blocks * uint64(fs.Bsize), keep: keep, notify: -1}
	src, err := openIn(state, sandbox.HomeDirName, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err == nil {
		var stats copyStats
		bound := int64(min(h.size, 1<<62))
		stats, err = copyHome(src, root, -1, bound, bound, nil)
		unix.Close(src)
		h.hidden, h.loaded = stats.hidden, stats.CopyStats
		if stats.Skipped["too-large"]+stats.Skipped["too-many"]+stats.Skipped["too-deep"] > 0 {
			err = unix.ENOSPC // left out now, it would be lost at the save
		}
		if errors.Is(err, unix.ENOSPC) {
			return nil, fmt.Errorf("its kept home does not fit its bound (--home-size %s): raise it, or make the home smaller ($(mosaic home NAME))", sandbox.SizeText(h.size))
		}
	}
	if err != nil && err != unix.ENOENT {
		return nil, fmt.Errorf("cannot load the session's home: %w", err)
	}
	if keep {
		h.watch = watchHome(root) // before the command: it sees every write
	}
	h.loadTook = time.Since(began)
	h.report(sandbox.HomeReport{State: sandbox.HomeRunning})
	return h, nil
}

// report writes r into the state directory, atomically.
func (h *homeStore) report(r sandbox.HomeReport) {
	// In UTC: a local time would have the init read and parse the time
	// zone (/etc/localtime) before the command starts.
	r.Size, r.At = h.size, time.Now().UTC()
	r.Load = h.loadTook.Seconds()
	b, _ := json.Marshal(r)
	tmp := sandbox.HomeReportName + ".tmp"
	_ = unix.Unlinkat(h.state, tmp, 0)
	fd, err := openIn(h.state, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o600)
	if err != nil {
		return
	}
	_, werr := unix.Write(fd, b)
	unix.Close(fd)
	if werr == nil {
		_ = unix.Renameat(h.state, tmp, h.state, sandbox.HomeReportName)
	}
}

// end is the init's last step, once the command has exited: every
// process left is killed and reaped (nothing may change the home while it
// is saved), and the home is saved when it is kept. It prints a line on
// the session's stderr when the home or /tmp was full.
func (h *homeStore) end() {
	killTheRest()
	r := sandbox.HomeReport{State: sandbox.HomeDiscarded, Full: isFull(h.root), TmpFull: isFullPath("/tmp")}
	if r.Full {
		fmt.Fprintf(os.Stderr, "mosaic init: the session's home reached its bound (--home-size %s): writes there failed with \"No space left on device\"\n", sandbox.SizeText(h.size))
	}
	if r.TmpFull {
		fmt.Fprintln(os.Stderr, "mosaic init: the session's /tmp reached its bound (--tmp-size): writes there failed with \"No space left on device\"")
	}
	if h.keep {
		began := time.Now()
		saved, err := h.save()
		r.Saved, r.Save = saved.CopyStats, time.Since(began).Seconds()
		if err != nil {
			r.State, r.Error = sandbox.HomeNotSaved, err.Error()
			fmt.Fprintf(os.Stderr, "mosaic init: the session's home was not saved (%v); its kept home is as it was when the session started\n", err)
		} else {
			r.State = sandbox.HomeSaved
		}
	}
	h.report(r)
	if r.State == sandbox.HomeSaved {
		// The old home, after the report: a stop timeout's SIGKILL here
		// leaves it for the next save, and status does not say the home
		// was not saved when it was.
		h.askForMore()
		_ = removeTree(h.state, sandbox.HomeSaving)
	}
}

// endWith ends the home (end) and returns code, the command's; a nil
// store (no home to load or save) only returns it.
func (h *homeStore) endWith(code int) int {
	if h != nil {
		h.end()
	}
	return code
}

// saveHook is run by the save just
// before it swaps the new home in: a unit test cuts the save short there.
var saveHook = func() {}

// save copies the tmpfs to HomeSaving, syncs it, and swaps it with the
// kept home; the old one is then removed. A tmpfs the session did not
// write (homeWatch) or the same as the kept home (sameHome) is not
// copied: the kept home stays.
func (h *homeStore) save() (copyStats, error) {
	quiet := h.watch.quiet() // before the save's own chmod below
	var fs unix.Statfs_t
	if err := unix.Fstatfs(h.root, &fs); err != nil {
		return copyStats{}, err
	}
	_ = unix.Fchmod(h.root, 0o700) // a chmod 000 of the home must not keep the save out
	used := (fs.Blocks - fs.Bfree) * uint64(fs.Bsize)
	bound := int64(min(h.size, 1<<62))
	h.askForTime(used)
	h.report(sandbox.HomeReport{State: sandbox.HomeInSave}) // a stop waits for it (manager's Stop)
	prev, err := openIn(h.state, sandbox.HomeDirName, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		prev = -1 // the first save: everything is written
	} else {
		defer unix.Close(prev)
	}
	var same sameFiles
	if prev >= 0 && quiet { // nothing written since the load: the kept home is the session's home
		return copyStats{CopyStats: sandbox.CopyStats{Files: h.loaded.Files, Bytes: h.loaded.Bytes, Unchanged: h.loaded.Files}}, nil
	}
	if prev >= 0 {
		stats, found, ok := sameHome(h.root, prev, bound, h.askForMore)
		if ok {
			return stats, nil // the kept home is the session's home already: nothing to write
		}
		same = found
	}
	meta, diskShort, err := h.diskRoom(used, bound)
	if err != nil {
		return copyStats{}, err
	}
	if err := removeTree(h.state, sandbox.HomeSaving); err != nil {
		return copyStats{}, fmt.Errorf("cannot remove an earlier save's %s: %w", sandbox.HomeSaving, err)
	}
	if err := unix.Mkdirat(h.state, sandbox.HomeSaving, 0o700); err != nil {
		return copyStats{}, err
	}
	dst, err := openIn(h.state, sandbox.HomeSaving, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return copyStats{}, err
	}
	defer unix.Close(dst)
	stats, err := copyHomeKnowing(h.root, dst, prev, bound, meta, h.askForMore, same)
	if err == nil && diskShort && stats.metaFull {
		err = fmt.Errorf("your disk has too little room left for the home's %d files and their directories (%s to spare)", stats.Files, sandbox.SizeText(saveMargin))
	}
	if err == nil {
		err = unix.Syncfs(dst) // the new home is on disk before it is named the home
	}
	if err != nil {
		_ = removeTree(h.state, sandbox.HomeSaving)
		return stats, err
	}
	carryHidden(h.state, append(stats.mounts, h.hidden...))
	saveHook()
	err = unix.Renameat2(h.state, sandbox.HomeSaving, h.state, sandbox.HomeDirName, unix.RENAME_EXCHANGE)
	if err == unix.ENOENT {
		err = unix.Renameat2(h.state, sandbox.HomeSaving, h.state, sandbox.HomeDirName, unix.RENAME_NOREPLACE)
	}
	if err != nil {
		_ = removeTree(h.state, sandbox.HomeSaving)
		return stats, fmt.Errorf("cannot swap the saved home in: %w", err)
	}
	return stats, nil // HomeSaving is the old home now: end removes it once it said the home is saved
}

// diskRoom checks that the state directory's disk has room for a save of
// used bytes and saveMargin, and returns the room for the directories and
// names (copyHome's meta: the bound, or less when the disk is short).
func (h *homeStore) diskRoom(used uint64, bound int64) (meta int64, short bool, err error) {
	var disk unix.Statfs_t
	if unix.Fstatfs(h.state, &disk) != nil {
		return bound, false, nil
	}
	free := disk.Bavail * uint64(disk.Bsize)
	if free < used+saveMargin {
		return 0, false, fmt.Errorf("your disk has %s free, and the home needs %s and %s to spare", sandbox.SizeText(free), sandbox.SizeText(used), sandbox.SizeText(saveMargin))
	}
	if room := int64(min(free-used-saveMargin, 1<<62)); room < bound {
		return room, true, nil
	}
	return bound, false, nil
}

// carryHidden moves into the new home (HomeSaving) what the kept home
// holds where the session had a bind (a workspace below the home): the
// bind hid it from the session, which neither loaded nor saved it, and it
// stays the user's. mounts are where the save met the binds and where the
// load did: a session can move the directory above a bind (rename moves
// the mount with it) and make another of that name, and the user's entry
// must not go with the old home. The directories above it are made where
// the new home has none; where the new home has an entry of its name (the
// session's), it is carried beside it as NAME.hidden (or, where the
// session made that too, NAME.hidden-RANDOM); where it made a file of a
// directory's name on the way, into .hidden-RANDOM at the top. No symlink is
// followed on either side.
func carryHidden(state int, mounts []string) {
	for _, rel := range mounts {
		dir, base := filepath.Split(rel)
		from, err := openIn(state, filepath.Join(sandbox.HomeDirName, dir), unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Fstatat(from, base, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && !carryTo(state, filepath.Join(sandbox.HomeSaving, dir), from, base) {
			// The session made a file or a link of a directory's name on
			// the way: kept in a directory of its own at the top.
			name := ".hidden-" + randomHex()
			if unix.Mkdirat(state, filepath.Join(sandbox.HomeSaving, name), 0o700) == nil {
				carryTo(state, filepath.Join(sandbox.HomeSaving, name), from, base)
			}
		}
		unix.Close(from)
	}
}

// carryTo moves base in from into the directory dir below state (made as
// needed): as base, or beside the session's entry of that name as
// base.hidden, or as base.hidden-RANDOM, a name the session cannot guess;
// false when it could not.
func carryTo(state int, dir string, from int, base string) bool {
	to, err := makeDirsIn(state, dir)
	if err != nil {
		return false
	}
	defer unix.Close(to)
	for _, name := range []string{base, base + ".hidden", base + ".hidden-" + randomHex()} {
		if err := unix.Renameat2(from, base, to, name, unix.RENAME_NOREPLACE); err != unix.EEXIST {
			return err == nil
		}
	}
	return false
}

// randomHex is 8 random bytes in hex.
func randomHex() string {
	var r [8]byte
	_, _ = rand.Read(r[:])
	return hex.EncodeToString(r[:])
}

// makeDirsIn opens the directory rel below dir (O_PATH), making those of
// its directories that are missing (0700), following no symlink.
func makeDirsIn(dir int, rel string) (int, error) {
	fd, err := unix.Dup(dir)
	if err != nil {
		return -1, err
	}
	for _, name := range strings.Split(filepath.Clean(rel), "/") {
		if err := unix.Mkdirat(fd, name, 0o700); err != nil && err != unix.EEXIST {
			unix.Close(fd)
			return -1, err
		}
		next, err := openIn(fd, name, unix.O_PATH|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

// saveMargin is the room a save leaves on the user's disk.
const saveMargin = 64 << 20

// killTheRest kills every process of the session but the init (PID 1 of
// its namespace) and reaps them all.
func killTheRest() {
	if os.Getpid() == 1 {
		_ = unix.Kill(-1, unix.SIGKILL)
	}
	for {
		var ws unix.WaitStatus
		_, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil { // ECHILD: none left
			return
		}
	}
}

// isFull reports whether the file system of fd has less than a block's
// worth, or one in a thousand of its blocks, left.
func isFull(fd int) bool {
	var fs unix.Statfs_t
	if unix.Fstatfs(fd, &fs) != nil || fs.Blocks == 0 {
		return false
	}
	return fs.Bavail <= 1 || fs.Bavail <= fs.Blocks/1000
}

func isFullPath(path string) bool {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	return isFull(fd)
}
