package inside

import (
	"bytes"

	"golang.org/x/sys/unix"
)

// A save writes only what changed: a file of the tmpfs that is, byte for
// byte, the previous home's file of the same path, with the same mode and
// modification time, is hard-linked from the previous home into the new
// one (the two are directories of the same state directory) instead of
// being written again. So an unchanged home costs the save a read of both
// sides, from memory (the tmpfs, and the page cache the load filled), and
// no write to the disk; the old home's removal after the swap then drops
// links, not data. The bytes are compared, never trusted to the times: a
// write through a shared mapping leaves a tmpfs file's times as they were.
// (A home with no change at all is not saved anew: homesame.go.)
//
// The link shares the previous home's inode, which nobody writes any more
// (the session never sees the home on disk, and the save is the only
// writer of the state directory's homes); a crash before the swap leaves
// the previous home whole, a link count higher.

// descend moves the copy's view of the previous home into its directory
// name, as the copy goes into the tmpfs's; the function it returns moves
// it back. Where the previous home has no directory of that name, the copy
// below it has no previous home.
func (c *treeCopy) descend(name string) func() {
	up := c.prev
	if up < 0 {
		return func() {}
	}
	fd, err := openIn(up, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		fd = -1
	}
	c.prev = fd
	return func() {
		if fd >= 0 {
			unix.Close(fd)
		}
		c.prev = up
	}
}

// prevFile opens the previous home's file name (in prev) when it may hold
// what the tmpfs's file of stat st holds: a regular file of one link, of
// the same size, mode and modification time; its bytes are the caller's
// to compare. ok false leaves nothing open. The save's link of an
// unchanged file and the unchanged home's comparison (sameHome) judge by
// this one rule.
func prevFile(prev int, name string, st unix.Stat_t) (old int, ost unix.Stat_t, ok bool) {
	old, err := openIn(prev, name, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return -1, ost, false
	}
	if unix.Fstat(old, &ost) != nil || ost.Mode&unix.S_IFMT != unix.S_IFREG || ost.Size != st.Size ||
		ost.Mode&0o7777 != st.Mode&0o777 || ost.Mtim != st.Mtim || ost.Nlink != 1 {
		unix.Close(old)
		return -1, ost, false
	}
	return old, ost, true
}

// unchanged links the previous home's file name into dst when it equals
// the tmpfs's (from, whose stat is st) and reports whether it did; false
// leaves the copy to write the file. A file with several links in the
// tmpfs is copied (treeCopy.linked keeps those links as they are).
func (c *treeCopy) unchanged(from, dst, prev int, name string, st unix.Stat_t) bool {
	if prev < 0 || st.Nlink != 1 {
		return false
	}
	old, ost, ok := prevFile(prev, name, st)
	if !ok {
		return false
	}
	defer unix.Close(old)
	ino, known := c.same[st.Ino] // compared already (sameHome)
	known = known && ino == ost.Ino
	if !known && !sameBytes(from, old, st.Size, c.tick) || unix.Linkat(prev, name, dst, name, 0) != nil {
		return false
	}
	c.count(st.Size, true)
	return true
}

// sameBytes reports whether the files a and b, each of size bytes, hold
// the same bytes, read side by side in parts of 1 MiB, calling tick
// between the parts. (Mapping the two
// instead was measured slower: 110-260 ms against 30-60 ms for 150 MB,
// the page tables' setup costing more than the copy it saves.)
func sameBytes(a, b int, size int64, tick func()) bool {
	bx, by := cmpBufs.Get().(*[]byte), cmpBufs.Get().(*[]byte)
	defer cmpBufs.Put(bx)
	defer cmpBufs.Put(by)
	x, y := *bx, *by
	var off int64
	for off < size {
		tick()
		n := int(min(int64(len(x)), size-off))
		if !readFullAt(a, x[:n], off) || !readFullAt(b, y[:n], off) || !bytes.Equal(x[:n], y[:n]) {
			return false
		}
		off += int64(n)
	}
	// Neither can have grown since its stat: every process of the session
	// is gone, and the previous home is the init's alone.
	return true
}

// readFullAt fills buf from fd at off; false on an error or a short file.
func readFullAt(fd int, buf []byte, off int64) bool {
	for len(buf) > 0 {
		n, err := unix.Pread(fd, buf, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			return false
		}
		buf, off = buf[n:], off+int64(n)
	}
	return true
}
