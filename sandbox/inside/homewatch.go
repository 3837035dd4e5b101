package inside

import (
	"encoding/binary"
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
// file still open then (a descriptor in flight, a mapping of a process
// outside the session) shows as an open without its close: that too
// counts as a change. Anything the watch cannot see whole (too many
// directories, a watch refused, the queue overflowed) is a change, and
// the save compares as before.

// homeWatchMask is what the watch asks of each directory: every change,
// and opens and read-only closes, to see that every open was closed.
const homeWatchMask = unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE | unix.IN_CLOSE_NOWRITE | unix.IN_OPEN |
	unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_CREATE | unix.IN_DELETE | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR

// homeWatchDirs bounds the directories watched: each costs a watch (the
// user's inotify limit) and an open at the load.
const homeWatchDirs = 20000

// homeWatch is the watch of one home's tmpfs.
type homeWatch struct {
	fd      int           // the inotify descriptor
	stop    [2]int        // a pipe: quiet writes to it, which ends run's poll
	done    chan struct{} // run has ended: the descriptors can be closed
	mu      sync.Mutex    // changed, opens, buf: run's and quiet's reads
	buf     []byte
	changed bool
	opens   map[string]int // by watch and name: opens less read-only closes
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
	w := &homeWatch{fd: fd, stop: [2]int{-1, -1}, done: make(chan struct{}), buf: make([]byte, 64<<10), opens: map[string]int{}}
	dirs := 0
	if unix.Pipe2(w.stop[:], unix.O_CLOEXEC) != nil || !w.add(root, st.Dev, &dirs, 0) || !w.discard() {
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

// discard reads away the events the watch's own walk made (its opens and
// closes of the directories): no process of the session runs yet.
func (w *homeWatch) discard() bool {
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Read(w.fd, buf)
		switch {
		case err == unix.EINTR:
		case err == unix.EAGAIN:
			return true
		case err != nil || n <= 0:
			return false
		}
	}
}

// add watches the directory dir and those below it on dev; dirs counts
// them.
func (w *homeWatch) add(dir int, dev uint64, dirs *int, depth int) bool {
	if *dirs++; *dirs > homeWatchDirs || depth > maxCopyDepth {
		return false
	}
	if _, err := unix.InotifyAddWatch(w.fd, "/proc/self/fd/"+strconv.Itoa(dir), homeWatchMask); err != nil {
		return false
	}
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
		ok := w.add(sub, dev, dirs, depth+1)
		unix.Close(sub)
		if !ok {
			return false
		}
	}
	return true
}

// subdirNames lists the entries of the directory fd that may be
// directories (their type in the entry, or none given), "." and ".."
// left out: the files of a home of 100,000 are not stat'ed one by one.
func subdirNames(fd int) ([]string, error) {
	var names []string
	buf := make([]byte, 32<<10)
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return names, nil
		}
		for b := buf[:n]; len(b) >= 19; {
			reclen := int(binary.NativeEndian.Uint16(b[16:]))
			if reclen < 19 || reclen > len(b) {
				return nil, unix.EINVAL
			}
			typ, name := b[18], string(trimNUL(b[19:reclen]))
			if (typ == unix.DT_DIR || typ == unix.DT_UNKNOWN) && name != "." && name != ".." {
				names = append(names, name)
			}
			b = b[reclen:]
		}
	}
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
		key := strconv.Itoa(int(wd)) + "/" + name
		switch {
		case mask&^unix.IN_ISDIR == unix.IN_OPEN:
			w.opens[key]++
		case mask&^unix.IN_ISDIR == unix.IN_CLOSE_NOWRITE:
			w.opens[key]--
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
// says whether the tmpfs is as the load left it: no change seen, every
// open closed. A nil watch is never quiet.
func (w *homeWatch) quiet() bool {
	if w == nil {
		return false
	}
	// What the session's last closes queued is read here, to the end;
	// then run is told to end, and the watch closed once it has.
	w.mu.Lock()
	defer w.mu.Unlock()
	w.drain()
	if _, err := unix.Write(w.stop[1], []byte{0}); err != nil {
		w.changed = true
	}
	go func() { <-w.done; w.close() }()
	if w.changed {
		return false
	}
	for _, n := range w.opens {
		if n != 0 {
			return false
		}
	}
	return true
}
