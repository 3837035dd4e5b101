package inside

import (
	"encoding/binary"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// An unchanged kept home's save compared the tmpfs with the kept home
// byte for byte (sameHome): 150 MB read twice, 60-120 ms, at every end of
// a session that changed nothing in it. The init now watches the tmpfs
// (inotify, every directory, from the end of the load until the save)
// and skips the comparison when nothing was written: no entry made,
// removed, renamed, its data or metadata changed, and no file opened for
// writing. A write through a shared mapping moves no time of a tmpfs
// file and makes no IN_MODIFY, but the mapping needs a file opened for
// writing, whose last close (the mapping's end included) is an
// IN_CLOSE_WRITE; the save comes after every process of the session was
// killed and reaped (killTheRest), when every file it had is closed. A
// file still open for writing then (a descriptor in flight on a unix
// socket, a mapping of a process outside the session: the kernel may
// close it only after the reaping) counts as a change too: the watch
// keeps the names of the files opened, and quiet asks the kernel of each
// whether a writer holds it (a read lease is refused while one does).
// Counting opens less read-only closes would not do: inotify merges an
// event with the identical one queued last, so the IN_OPEN of a read just
// after a write's open is lost, and the read's close balanced the count
// with the write still open (TestHomeWatchSeesAFileStillOpenForWriting).
// Anything the watch cannot see whole (too many directories, a watch
// refused, the queue overflowed) is a change, and the save compares as
// before.

// homeWatchMask is what the watch asks of each directory: every change,
// and opens, to know the files to ask about at the end.
const homeWatchMask = unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE | unix.IN_OPEN |
	unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_CREATE | unix.IN_DELETE | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR

// homeWatchDirs bounds the directories watched: each costs an open at
// the load and, for the session's life, one of the user's inotify
// watches, which a user namespace's count against the host user's limit
// too (8,192 by default before Linux 5.11): a session must not take the
// editor's and the desktop's. A home of more is compared at the save.
const homeWatchDirs = 4096

// homeWatch is the watch of one home's tmpfs.
type homeWatch struct {
	fd      int           // the inotify descriptor
	stop    [2]int        // a pipe: quiet writes to it, which ends run's poll
	done    chan struct{} // run has ended: the descriptors can be closed
	root    int           // the tmpfs (the home store's: not closed here)
	mu      sync.Mutex    // changed, opened, buf: run's and quiet's reads
	buf     []byte
	changed bool
	dirs    map[int32]string       // by watch: the directory's path below root, as loaded
	opened  map[watchName]struct{} // the files opened, each once
}

// watchName is an entry of a watched directory: its watch and its name.
type watchName struct {
	wd   int32
	name string
}

// watchHome watches the tmpfs at root, every directory of it on its
// file system; nil when it cannot watch all of it.
func watchHome(root int) *homeWatch {
	var st unix.Stat_t
	if unix.Fstat(root, &st) != nil {
		return nil
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil
	}
	w := &homeWatch{fd: fd, root: root, stop: [2]int{-1, -1}, done: make(chan struct{}), buf: make([]byte, 64<<10),
		dirs: map[int32]string{}, opened: map[watchName]struct{}{}}
	dirs := 0
	if unix.Pipe2(w.stop[:], unix.O_CLOEXEC) != nil || !w.add(root, ".", st.Dev, &dirs, 0) {
		w.close()
		return nil
	}
	go w.run()
	return w
}

// close closes the watch's descriptors.
func (w *homeWatch) close() {
	for _, fd := range []int{w.fd, w.stop[0], w.stop[1]} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

// add watches the directory dir (path below the root) and those below it
// on dev; dirs counts them. Its own opens of the directories are events
// the watch takes for no change (IN_OPEN|IN_ISDIR; closes are not asked
// for): the walk needs no events read away after it.
func (w *homeWatch) add(dir int, path string, dev uint64, dirs *int, depth int) bool {
	if *dirs++; *dirs > homeWatchDirs || depth > maxCopyDepth {
		return false
	}
	wd, err := unix.InotifyAddWatch(w.fd, "/proc/self/fd/"+strconv.Itoa(dir), homeWatchMask)
	if err != nil {
		return false
	}
	w.dirs[int32(wd)] = path
	names, err := subdirNames(dir)
	if err != nil {
		return false
	}
	for _, name := range names {
		var st unix.Stat_t
		if unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			return false
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Dev != dev {
			continue // a bind below the home (the workspace): not saved
		}
		sub, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return false
		}
		ok := w.add(sub, filepath.Join(path, name), dev, dirs, depth+1)
		unix.Close(sub)
		if !ok {
			return false
		}
	}
	return true
}

// subdirNames lists the entries of the directory fd that may be
// directories (their type in the entry, or none given): the files of a
// home of 100,000 are not stat'ed one by one.
func subdirNames(fd int) ([]string, error) {
	var names []string
	err := eachEntry(fd, func(name string, typ byte) {
		if typ == unix.DT_DIR || typ == unix.DT_UNKNOWN {
			names = append(names, name)
		}
	})
	return names, err
}

// run reads the events as they come, so that a session that opens many
// files does not overflow the queue, until quiet stops it. It reads under
// the lock: quiet, which reads what is left itself, so finds no batch
// read and not yet counted. (Waiting for run to end before the save went
// on cost 5-16 ms: a goroutine woken from a syscall.)
func (w *homeWatch) run() {
	defer close(w.done)
	fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}, {Fd: int32(w.stop[0]), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(fds, -1); err != nil && err != unix.EINTR {
			w.mu.Lock()
			w.changed = true // what it did not read is unknown
			w.mu.Unlock()
			return
		}
		if fds[1].Revents != 0 {
			return
		}
		if fds[0].Revents != 0 {
			w.mu.Lock()
			w.drain()
			w.mu.Unlock()
		}
	}
}

// drain reads the events queued until none is left; w.mu is held.
func (w *homeWatch) drain() {
	for {
		n, err := unix.Read(w.fd, w.buf)
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN {
			return
		}
		if err != nil || n <= 0 {
			w.changed = true
			return
		}
		w.events(w.buf[:n])
	}
}

// events takes a read's events in; w.mu is held.
func (w *homeWatch) events(b []byte) {
	for len(b) >= unix.SizeofInotifyEvent {
		wd := int32(binary.NativeEndian.Uint32(b[0:]))
		mask := binary.NativeEndian.Uint32(b[4:])
		n := int(binary.NativeEndian.Uint32(b[12:]))
		if unix.SizeofInotifyEvent+n > len(b) {
			w.changed = true
			break
		}
		name := string(trimNUL(b[unix.SizeofInotifyEvent : unix.SizeofInotifyEvent+n]))
		b = b[unix.SizeofInotifyEvent+n:]
		switch {
		case mask == unix.IN_OPEN: // a file's (a directory's is IN_OPEN|IN_ISDIR)
			w.opened[watchName{wd, name}] = struct{}{}
		case mask == unix.IN_OPEN|unix.IN_ISDIR: // a directory is written only by calls that make events
		default: // every other event, IN_Q_OVERFLOW and IN_IGNORED too
			w.changed = true
		}
	}
}

// trimNUL cuts an event's name at its padding.
func trimNUL(b []byte) []byte {
	for i, c := range b {
		if c == 0 {
			return b[:i]
		}
	}
	return b
}

// quiet ends the watch, once every process of the session is gone, and
// says whether the tmpfs is as the load left it: no change seen, and no
// file the session opened still open for writing. A nil watch is never
// quiet.
func (w *homeWatch) quiet() bool {
	if w == nil {
		return false
	}
	// What the session's last closes queued is read here, to the end;
	// then run is told to end, and the watch closed once it has.
	w.mu.Lock()
	defer w.mu.Unlock()
	w.drain()
	quiet := !w.changed && w.noWriter()
	if quiet {
		// A writer that went away during noWriter made its IN_CLOSE_WRITE
		// first (__fput notifies, then gives up the write access).
		w.drain()
		quiet = !w.changed
	}
	if _, err := unix.Write(w.stop[1], []byte{0}); err != nil {
		quiet = false
	}
	go func() { <-w.done; w.close() }()
	return quiet
}

// noWriter says whether no file the session opened is open for writing
// (by anyone: a descriptor in flight, a mapping outside the session):
// the kernel refuses a read lease on a file open for writing. It costs
// three calls a file (20,000 files read: 45-49 ms). Anything else it refuses (not a regular file, a lease not
// allowed) is a writer too. The open does not wait for a lease another
// holds (O_NONBLOCK): quiet never blocks.
func (w *homeWatch) noWriter() bool {
	for f := range w.opened {
		dir, ok := w.dirs[f.wd]
		if !ok {
			return false
		}
		fd, err := unix.Openat(w.root, filepath.Join(dir, f.name), unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		if err != nil {
			return false
		}
		_, err = unix.FcntlInt(uintptr(fd), unix.F_SETLEASE, unix.F_RDLCK)
		unix.Close(fd) // the lease goes with its descriptor
		if err != nil {
			return false
		}
	}
	return true
}
